"""An append to a conversation costs its own messages: the conversation's counts (messages, first and last times,
first snippet) move by the new messages alone, whatever the conversation's length — and end up exactly what a
recount of all its messages gives."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from ghostmem import GhostMem
from ghostmem.capture import append_messages
from ghostmem.records import ConversationRecord, MessageRecord
from ghostmem.store import save_conversation
from psycopg import Connection
from support.copies import word_counts


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
