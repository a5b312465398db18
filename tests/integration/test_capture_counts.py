"""An append to a conversation costs its own messages: the conversation's counts (messages, first and last times,
first snippet) move by the new messages alone, whatever the conversation's length — and end up exactly what a
recount of all its messages gives."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from ghostmem import GhostMem, HashEmbedder
from ghostmem.capture import append_messages, load_messages, save_messages, sync_messages
from ghostmem.records import ConversationRecord, MessageRecord
from ghostmem.store import save_conversation
from psycopg import Connection
from support.copies import word_counts
from support.databases import fresh_database


def _msg(role: str, text: str, ts: datetime | None = None) -> MessageRecord:
    return MessageRecord(native_id="", role=role, text=text, ts=ts)  # type: ignore[arg-type]


def _turn(n: int) -> list[MessageRecord]:
    return [_msg("user", f"question {n} about the deploy"), _msg("assistant", f"answer {n}: run it twice")]


def _rows_read(conn: Connection[Any]) -> int:
    """The rows of ghostmem.messages this transaction has read so far (sequential scans and index fetches)."""
    row = conn.execute(
        "SELECT seq_tup_read + COALESCE(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables"
        " WHERE relid = 'ghostmem.messages'::regclass"
    ).fetchone()
    return int(row[0]) if row else 0


def _appending_reads(gm: GhostMem, conv_id: str) -> int:
    """How many message rows appending one turn to ``conv_id`` reads."""
    with gm.connection() as conn:
        before = _rows_read(conn)
        append_messages(conn, gm.owner, conv_id, "langchain", _turn(-1), embedder=gm.embedder)
        return _rows_read(conn) - before


def test_an_append_reads_as_many_rows_for_a_long_conversation_as_for_a_short_one(gm: GhostMem) -> None:
    gm.capture_append("short", [m for n in range(2) for m in _turn(n)], platform="langchain")
    gm.capture_append("long", [m for n in range(400) for m in _turn(n)], platform="langchain")
    short, long = _appending_reads(gm, "short"), _appending_reads(gm, "long")
    # a recount would read all 800 messages of the long one on every append (it did)
    assert long == short, (short, long)
    assert short < 20
    assert gm.list_recent_conversations().data.rows[0].msg_count in (6, 802)


def _counts(gm: GhostMem, conv_id: str) -> tuple[Any, ...]:
    with gm.connection() as conn:
        row = conn.execute(
            "SELECT msg_count, started_at, ended_at, first_snippet FROM ghostmem.conversations"
            " WHERE owner = %s AND conv_id = %s",
            (gm.owner, conv_id),
        ).fetchone()
    assert row is not None
    return tuple(row)


def _recounted(gm: GhostMem, conv_id: str) -> tuple[Any, ...]:
    """The counts once the conversation is saved whole again (the path that recounts every message)."""
    record = ConversationRecord(conv_id=conv_id, platform="langchain", messages=gm.capture_messages(conv_id))
    with gm.connection() as conn:
        save_conversation(conn, gm.owner, "personal", record, embedder=None)
    return _counts(gm, conv_id)


def test_appended_counts_are_what_a_recount_gives(gm: GhostMem) -> None:
    sequences = {
        # the bot speaks first: the snippet is its message until the user's first one arrives
        "bot-first": [
            [_msg("assistant", "Hello, I can help with deploys.")],
            [_msg("tool", "deploy log: 3 steps")],
            [_msg("user", "Why did step 2 fail?"), _msg("assistant", "A missing secret.")],
            [_msg("user", "And step 3?")],
        ],
        # nothing conversational at first: no count, no snippet, until the user speaks
        "system-first": [[_msg("system", "You are terse.")], [_msg("user", ""), _msg("user", "second")]],
        "user-first": [[_msg("user", "q1")], [_msg("assistant", "a1")], [_msg("user", "q2")]],
    }
    for conv_id, chunks in sequences.items():
        for chunk in chunks:
            gm.capture_append(conv_id, chunk, platform="langchain")
        assert _counts(gm, conv_id) == _recounted(gm, conv_id), conv_id
    assert _counts(gm, "bot-first")[0] == 4 and _counts(gm, "bot-first")[3] == "Why did step 2 fail?"
    assert _counts(gm, "system-first")[0] == 2 and _counts(gm, "system-first")[3] == ""
    assert _counts(gm, "user-first")[0] == 3 and _counts(gm, "user-first")[3] == "q1"
    with gm.connection() as conn:  # each appended message with words has its word count (migration 107)
        kept, actual = word_counts(conn)
        assert kept == actual and sum(row[0] == gm.owner for row in kept) == 9


def test_an_imported_append_without_times_fills_them_once_they_come(gm: GhostMem) -> None:
    """An importer appending the new lines of a file (``append=True``): messages without a time leave the
    conversation's times empty; the first timed ones set them, later ones leave the first time alone."""
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    chunks = [
        [_msg("user", "untimed question")],
        [
            _msg("assistant", "timed answer", start),
            _msg("user", "timed follow-up", start + timedelta(minutes=5)),
        ],
        [_msg("assistant", "late answer", start + timedelta(hours=1))],
    ]
    seq = 0
    for chunk in chunks:
        messages = []
        for m in chunk:
            messages.append(MessageRecord(native_id=f"line-{seq}", role=m.role, text=m.text, ts=m.ts))
            seq += 1
        with gm.connection() as conn:
            record = ConversationRecord(conv_id="imported", platform="codex", messages=messages)
            save_conversation(conn, gm.owner, "personal", record, embedder=None, append=True)
    counts = _counts(gm, "imported")
    assert counts[:2] == (4, start) and counts[3] == "untimed question"
    assert counts == _recounted(gm, "imported")


def _positions(gm: GhostMem, conv_id: str) -> list[tuple[int, str, str]]:
    with gm.connection() as conn:
        rows = conn.execute(
            "SELECT seq, native_id, text FROM ghostmem.messages WHERE owner = %s AND conv_id = %s ORDER BY seq",
            (gm.owner, conv_id),
        ).fetchall()
    return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]


def test_concurrent_appends_to_one_conversation_get_distinct_gapless_positions(
    gm: GhostMem, pg_dsn: str
) -> None:
    """Six writers (each its own connection, as six processes) append five turns each to one conversation at once:
    every message gets its own position, 0 to 59 without a gap, its default id is that position, and each writer's
    messages keep their order."""
    gm.connect()  # migrated

    def writer(w: int) -> None:
        for n in range(5):
            with psycopg.connect(pg_dsn) as conn:
                turn = [_msg("user", f"writer {w} question {n}"), _msg("assistant", f"writer {w} answer {n}")]
                append_messages(conn, gm.owner, "shared", "langchain", turn, embedder=gm.embedder)

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(writer, range(6)))
    stored = _positions(gm, "shared")
    assert [(seq, native_id) for seq, native_id, _ in stored] == [(n, str(n)) for n in range(60)]
    for w in range(6):
        mine = [text for _, _, text in stored if text.startswith(f"writer {w} ")]
        assert mine == [f"writer {w} {kind} {n}" for n in range(5) for kind in ("question", "answer")]
    assert _counts(gm, "shared") == _recounted(gm, "shared")


def test_a_capture_waits_for_an_import_of_the_same_conversation(gm: GhostMem, pg_dsn: str) -> None:
    """An import appending to a conversation (``append=True``, the new lines of a file) holds it until it commits; a
    capture appending to it meanwhile waits, then numbers its messages after the imported ones: it reads where the
    conversation ends once it holds the conversation (before, it read it first, took the id '0' the import had just
    stored, and its message was dropped)."""
    gm.connect()
    imported = ConversationRecord(
        conv_id="both",
        platform="langchain",
        messages=[_msg("user", "imported one"), _msg("assistant", "imported two")],
    )
    imported.messages[:] = [replace(m, native_id=str(n)) for n, m in enumerate(imported.messages)]
    with psycopg.connect(pg_dsn) as importer, ThreadPoolExecutor(1) as pool:
        save_conversation(importer, gm.owner, "personal", imported, embedder=None, append=True)
        capture = pool.submit(gm.capture_append, "both", [_msg("user", "captured")], platform="langchain")
        time.sleep(0.5)
        assert not capture.done()  # waiting for the import's transaction
        importer.commit()
        assert capture.result(timeout=30).messages_new == 1
    assert _positions(gm, "both") == [
        (0, "0", "imported one"),
        (1, "1", "imported two"),
        (2, "2", "captured"),
    ]


def test_an_append_for_an_owner_the_statistics_have_not_seen_reads_only_its_own_rows(server_dsn: str) -> None:
    """The planner's statistics know nothing of an owner who came after the last ANALYZE (a new user) nor of any
    owner in a never-analyzed table, and estimate one row for them. An append's statements that find the messages it
    wrote by id could then read every message of the owner through an owner-leading index (they did: 806 rows for a
    conversation of 800, on every append). Both cases: an analyzed table that has never seen the owner, and a
    never-analyzed one written through two pooled connections (each plans with its own view of the indexes)."""
    with fresh_database(server_dsn, "ghostmem_unseen") as dsn:
        with GhostMem(dsn=dsn, owner="early", embedder=HashEmbedder(), pool_min_size=2) as early:
            with (
                early.connection() as b,
                early.connection() as a,
            ):  # two pooled connections, one after the other
                append_messages(b, "early", "short", "langchain", _turn(0), embedder=early.embedder)
                b.commit()
                turns = [m for n in range(400) for m in _turn(n)]
                append_messages(a, "early", "long", "langchain", turns, embedder=early.embedder)
                a.commit()
                for conn in (b, a, b, a, b):
                    for conv_id in ("short", "long", "long"):
                        before = _rows_read(conn)
                        append_messages(
                            conn, "early", conv_id, "langchain", _turn(-1), embedder=early.embedder
                        )
                        assert _rows_read(conn) - before < 20, (conv_id, _rows_read(conn) - before)
                        conn.commit()
            with early.connection() as conn:
                conn.execute("ANALYZE ghostmem.messages")
        with GhostMem(dsn=dsn, owner="newcomer", embedder=HashEmbedder()) as newcomer:
            newcomer.capture_append("short", _turn(0), platform="langchain")
            newcomer.capture_append("long", [m for n in range(400) for m in _turn(n)], platform="langchain")
            short, long = _appending_reads(newcomer, "short"), _appending_reads(newcomer, "long")
            assert long == short and short < 20, (short, long)


def _imported(conv_id: str, n: int) -> ConversationRecord:
    """An importer's append: one new line of the conversation's file."""
    line = MessageRecord(native_id=f"line-{n}", role="user", text=f"imported line {n}")
    return ConversationRecord(conv_id=conv_id, platform="langchain", messages=[line])


# Conversation ids of 200 characters: their (owner, tier, conv_id, seq) index is a level taller than the owner's
# (owner, tier, native_id) one at 3,000 messages, the height at which a one-row estimate chooses the lower index.
LONG_IDS = [f"{n:03d}-" + "thread" * 33 for n in range(30)]


@contextmanager
def _never_analyzed(
    server_dsn: str, name: str, setup: Callable[[Connection[Any]], None]
) -> Iterator[tuple[GhostMem, Connection[Any], Connection[Any]]]:
    """A database of its own, never analyzed, written through two pooled connections (each plans with its own view
    of the indexes): ``setup`` on the first, committed (it has then planned against one-page indexes), then the
    second writes 50 turns to each of :data:`LONG_IDS`; yields the store and the two connections."""
    with (
        fresh_database(server_dsn, name) as dsn,
        GhostMem(dsn=dsn, owner="early", embedder=HashEmbedder(), pool_min_size=2) as early,
        early.connection() as b,
        early.connection() as a,
        psycopg.connect(dsn, autocommit=True) as admin,
    ):
        # Autovacuum would analyze the table after the 3,000 writes below (it did under load): held off so the
        # planner sees the never-analyzed table this precondition names.
        admin.execute("ALTER TABLE ghostmem.messages SET (autovacuum_enabled = false)")
        setup(b)
        b.commit()
        for conv_id in LONG_IDS:
            append_messages(
                a, "early", conv_id, "langchain", [m for n in range(50) for m in _turn(n)], embedder=None
            )
        a.commit()
        yield early, b, a
        never_analyzed = b.execute("SELECT reltuples FROM pg_class WHERE oid = 'ghostmem.messages'::regclass")
        assert never_analyzed.fetchone() == (-1,)


def test_where_a_conversation_ends_is_read_from_its_own_index_entries_whatever_the_planner_knows(
    server_dsn: str,
) -> None:
    """Where a conversation ends (live capture's last message, an importer's append) and whether its user spoke
    before (its first snippet) are read from the conversation's own entries of its (owner, tier, conv_id, seq)
    index. In a never-analyzed table the planner estimates one row for any owner, so the owner's (owner, tier,
    native_id) index and a sort of that one row cost the same, and the lower index won: with conversation ids of 200
    characters (conv_seq a level taller than native_id), every capture append read all 3,000 messages of the owner,
    twice. Each connection also charges an index by the height it last saw: one that had seen the indexes as one page
    read all of the owner's messages on its second look at where a conversation ends (cap.md's case, through
    capture_sync, which writes nothing when nothing is new)."""
    synced = [*_turn(0), *_turn(1)]

    def setup(b: Connection[Any]) -> None:
        append_messages(b, "early", "short", "langchain", _turn(0), embedder=None)
        sync_messages(b, "early", "synced", "langchain", synced, ["0", "1", "2", "3"], embedder=None)

    with _never_analyzed(server_dsn, "ghostmem_end", setup) as (early, b, a):
        for n in range(8):  # b, a, b, a...: each writes to both conversations
            conn = (b, a)[n % 2]
            for conv_id in ("short", LONG_IDS[0]):
                before = _rows_read(conn)
                sync_messages(
                    conn, "early", "synced", "langchain", synced, ["0", "1", "2", "3"], embedder=None
                )
                append_messages(conn, "early", conv_id, "langchain", _turn(n), embedder=None)
                save_conversation(
                    conn, "early", "personal", _imported(conv_id, n), embedder=None, append=True
                )
                assert _rows_read(conn) - before < 30, (n, conv_id, _rows_read(conn) - before)
                conn.commit()
        written = 3000 + 2 + 4 + 2 * 8 * 3
        assert b.execute("SELECT count(*) FROM ghostmem.messages").fetchone() == (written,)
        short = _positions(early, "short")
        assert [seq for seq, _, _ in short] == list(range(2 + 8 * 3))
        assert [text for _, _, text in short][2:5] == [*(m.text for m in _turn(0)), "imported line 0"]
        assert [text for _, _, text in _positions(early, "synced")] == [m.text for m in synced]


def test_where_a_conversation_ends_is_read_from_ghostmem_whatever_the_session_shadows(gm: GhostMem) -> None:
    """The functions of migrations 147 and 159 name ghostmem's table when they are created (SQL-standard bodies), so a
    session's temp table called messages, first on its search_path and saying the conversation ends at 999, is never
    what they read; and the sorting they disable stays disabled for their own statement only."""
    gm.capture_append("real", _turn(0), platform="langchain")
    with gm.connection() as conn:
        conn.execute("CREATE TEMP TABLE messages ON COMMIT DROP AS SELECT * FROM ghostmem.messages WHERE owner = %s",
                     (gm.owner,))  # fmt: skip
        conn.execute("UPDATE pg_temp.messages SET seq = seq + 998, native_id = 'forged' || seq")
        conn.execute("SET LOCAL search_path = pg_temp, ghostmem, public")
        assert conn.execute("SELECT max(seq) FROM messages").fetchone() == (999,)
        append_messages(conn, gm.owner, "real", "langchain", _turn(1), embedder=None)
        # and so does migration 159's, which reads a whole conversation (reading it back, replacing it)
        assert [m.native_id for m in load_messages(conn, gm.owner, "real")] == ["0", "1", "2", "3"]
        assert conn.execute("SHOW enable_sort").fetchone() == ("on",)
    assert [(seq, native_id) for seq, native_id, _ in _positions(gm, "real")] == [
        (n, str(n)) for n in range(4)
    ]
    assert _counts(gm, "real") == _recounted(gm, "real")


def test_replacing_a_conversation_reads_its_own_rows_whatever_the_planner_knows(server_dsn: str) -> None:
    """Live capture replacing a conversation (capture_replace; a sync whose list does not begin with what is stored)
    deletes the messages it no longer holds and recounts the conversation, and reading a captured conversation back
    reads its messages. As plain statements by (owner, tier, conv_id), in a never-analyzed table (one row estimated
    for any owner) each was answered through the owner's (owner, tier, native_id) index, filtering every message of
    the owner: 6,013 rows read to replace a 4-message conversation beside 3,000 others (40,017 beside 20,000 with
    36-character ids). Through migration 159's function they read the conversation's own index entries."""

    def setup(b: Connection[Any]) -> None:
        append_messages(b, "early", "short", "langchain", [*_turn(0), *_turn(1)], embedder=None)

    with _never_analyzed(server_dsn, "ghostmem_replace", setup) as (early, b, a):
        for n in range(4):
            conn = (b, a)[n % 2]
            # the first answer dropped and a turn added: not a beginning of what is stored, so it is replaced
            kept = [_turn(0)[0], *_turn(1), *_turn(100 + n)]
            before = _rows_read(conn)
            save_messages(conn, "early", "short", "langchain", kept, embedder=None)
            sync_messages(
                conn, "early", "short", "langchain", kept[::-1], ["a", "b", "c", "d", "e"], embedder=None
            )
            assert [m.text for m in load_messages(conn, "early", "short")] == [m.text for m in kept[::-1]]
            assert _rows_read(conn) - before < 40, (n, _rows_read(conn) - before)
            conn.commit()
        assert b.execute("SELECT count(*) FROM ghostmem.messages").fetchone() == (3000 + 5,)
        assert _counts(early, "short")[0] == 5
        assert [text for _, _, text in _positions(early, "short")] == [m.text for m in kept[::-1]]
