"""What the search's speed relies on: per-owner message counts kept by the database, and the plans they lead to."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder, db, maintenance, search
from ghostmem.args import SearchPersonalMemoryArgs
from ghostmem.program import Program, Query, run_sync
from ghostmem.records import MessageRecord
from ghostmem.search import Scan, search_messages, search_personal_memory, vector_scan
from psycopg import Connection, sql
from psycopg.rows import dict_row
from support.conversations import conversation, import_generic
from support.copies import owner_index, share_ids, vector_bits, vector_partitions, word_counts
from support.databases import app_login, fresh_database
from support.statements import (
    PENDING_LIST_OPTIONS,
    PROJECT_FETCH,
    SEARCHED_GIN,
    TITLE_FETCH,
    WORD_FETCH,
    check_short_pending_lists,
    generic_plan,
    gin_options,
    index_pages,
    merge_pending,
    read_without_jit,
    recording,
)

_KEPT = """
    SELECT 'counts', owner, tier, platform || '/' || project, n FROM ghostmem.message_counts WHERE n <> 0
    UNION ALL
    SELECT 'days', owner, tier, day::text, n FROM ghostmem.message_days WHERE n <> 0
"""
_ACTUAL = """
    SELECT 'counts', owner, tier, platform || '/' || coalesce(project, ''), count(*) FROM ghostmem.messages
    GROUP BY owner, tier, platform, project
    UNION ALL
    SELECT 'days', owner, tier, (ts AT TIME ZONE 'UTC')::date::text, count(*) FROM ghostmem.messages
    WHERE ts IS NOT NULL GROUP BY owner, tier, (ts AT TIME ZONE 'UTC')::date
"""


def _counts(conn: Connection[Any]) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """(what message_counts and message_days say, what the messages table holds), zero counts left out."""
    return set(conn.execute(_KEPT).fetchall()), set(conn.execute(_ACTUAL).fetchall())


_COPIED = "owner, id, tier, conv_id, ts, platform, project, {}::text"
_VECTORS_KEPT = "SELECT " + _COPIED.format("embedding") + " FROM ghostmem.message_vectors"
_VECTORS_ACTUAL = (
    "SELECT " + _COPIED.format("embedding::halfvec") + " FROM ghostmem.messages WHERE embedding IS NOT NULL"
)


def _vectors(conn: Connection[Any]) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """(the compact copies of migration 101, what they should be: every message with a vector, as halfvec), each
    owner's in a partition of its own (163)."""
    placed = vector_partitions(conn)
    assert all(len(parts) == 1 for parts in placed.values()), placed
    assert len(set.union(set(), *placed.values())) == len(placed), placed
    return set(conn.execute(_VECTORS_KEPT).fetchall()), set(conn.execute(_VECTORS_ACTUAL).fetchall())


def _owner_totals(conn: Connection[Any]) -> dict[tuple[str, str], int]:
    rows = conn.execute(
        "SELECT owner, tier, sum(n) FROM ghostmem.message_counts GROUP BY 1, 2 HAVING sum(n) > 0"
    )
    return {(o, t): int(n) for o, t, n in rows}


@pytest.fixture
def own_dsn(server_dsn: str) -> Iterator[str]:
    """A database of its own: these tests count (and truncate) every owner's messages."""
    with fresh_database(server_dsn, "ghostmem_counts") as dsn:
        yield dsn


def test_counts_compact_vectors_and_word_counts_follow_every_write(own_dsn: str, tmp_path: Path) -> None:
    """The message counts (092), the compact vectors (101) with their bits (110) and the word counts (107) after
    imports (two owners, two tiers, the import embedding each message by an update), appends, a re-import, a live
    capture, moves, edits, a vector lost, Japanese words added, forgetting (a cascade of deletes), clearing an owner
    (`ghostmem demo --remove`) and TRUNCATE."""
    with (
        GhostMem(dsn=own_dsn, owner="ann", embedder=HashEmbedder()) as ann,
        GhostMem(dsn=own_dsn, owner="bob", embedder=HashEmbedder()) as bob,
    ):
        first = [conversation(f"c{i}", f"talk {i}", i, [f"hello {i}", "hi", "more"]) for i in range(5)]
        import_generic(ann, tmp_path / "a.jsonl", first)
        import_generic(
            ann, tmp_path / "lib.jsonl", [conversation("lib", "manual", 1, ["a", "b"])], tier="library"
        )
        import_generic(bob, tmp_path / "b.jsonl", [conversation("b0", "bob", 1, ["hello bob", "y"])])
        # the same file again with one conversation grown: upserts count once, new messages are added
        first[0]["messages"].append(
            {"id": "c0-new", "role": "user", "text": "again", "ts": "2026-01-01T00:00:00Z"}
        )
        import_generic(ann, tmp_path / "a.jsonl", first)
        with ann.connection() as conn:
            kept, actual = _counts(conn)
            assert kept == actual
            kept, actual = _vectors(conn)
            assert (
                kept == actual and len(kept) == 12
            )  # "hello i", "more", "again", "manual", "hello bob": short ones are not embedded
            kept, actual = vector_bits(conn)
            assert kept == actual and len(kept) == 12
        # a live conversation captured turn by turn (each append embeds its own messages)
        for turn in range(2):
            ann.capture_append(
                "live",
                [
                    MessageRecord(native_id="", role="user", text=f"live question {turn} on deploys"),
                    MessageRecord(native_id="", role="assistant", text=f"live answer {turn}"),
                ],
                platform="langchain",
            )
        with ann.connection() as conn:
            kept, actual = _vectors(conn)
            assert kept == actual and len(kept) == 16
            kept, actual = vector_bits(conn)
            assert kept == actual and len(kept) == 16
            conn.execute("DELETE FROM ghostmem.conversations WHERE owner = 'ann' AND conv_id = 'live'")
            conn.execute("DELETE FROM ghostmem.messages WHERE owner = 'ann' AND conv_id = 'live'")
            kept, actual = vector_bits(conn)
            assert kept == actual and len(kept) == 12
            assert _owner_totals(conn) == {
                ("ann", "personal"): 16,
                ("ann", "library"): 2,
                ("bob", "personal"): 2,
            }
            kept, actual = word_counts(conn)
            assert kept == actual and len(kept) == 20
            # a project moved (as an import does when a conversation's project changes) and a time corrected
            conn.execute(
                "UPDATE ghostmem.messages SET project = 'moved' WHERE owner = 'ann' AND conv_id = 'c2'"
            )
            conn.execute("UPDATE ghostmem.messages SET ts = ts - interval '400 days' WHERE conv_id = 'c3'")
            conn.execute("UPDATE ghostmem.messages SET embedding = embedding")  # changes nothing counted
            kept, actual = _counts(conn)
            assert kept == actual
            # edits: more words, words added by the Japanese analyser, a message that no longer has words (a tool
            # output now) and one that gets them, a place changed
            before = {r[1]: r[5] for r in word_counts(conn)[0]}
            conn.execute(
                "UPDATE ghostmem.messages SET text = 'many more words than before' WHERE native_id = 'c0-1'"
            )
            conn.execute(
                "UPDATE ghostmem.messages SET morphemes = '{ja:会話,ja:移行}' WHERE native_id = 'c0-2'"
            )
            conn.execute("UPDATE ghostmem.messages SET role = 'tool' WHERE native_id = 'c2-0'")
            conn.execute("UPDATE ghostmem.messages SET role = 'user', text = 'back' WHERE native_id = 'c2-0'")
            conn.execute("UPDATE ghostmem.messages SET role = 'tool' WHERE native_id = 'c2-1'")
            conn.execute("UPDATE ghostmem.messages SET seq = seq + 10 WHERE conv_id = 'c3'")
            kept, actual = word_counts(conn)
            assert kept == actual and len(kept) == 19
            edited = dict(
                conn.execute(
                    "SELECT native_id, id FROM ghostmem.messages WHERE native_id IN ('c0-1', 'c0-2')"
                ).fetchall()
            )
            after = {r[1]: r[5] for r in kept}
            assert after[edited["c0-1"]] > before[edited["c0-1"]]
            assert after[edited["c0-2"]] == before[edited["c0-2"]] + 2
            conn.execute(  # a vector lost, another changed
                "UPDATE ghostmem.messages SET embedding = CASE WHEN seq = 0 THEN NULL"
                " ELSE (SELECT embedding FROM ghostmem.messages WHERE native_id = 'c0-0') END WHERE conv_id = 'c4'"
            )
            kept, actual = _vectors(conn)
            assert kept == actual and len(kept) == 12  # c4: "hello 4" lost its vector, "hi" got one
            kept, actual = vector_bits(conn)
            assert kept == actual and len(kept) == 12
            moved = conn.execute(  # the project moved and the time corrected above, in the quantized copies too
                "SELECT count(*) FILTER (WHERE project = 'moved'), count(*) FILTER (WHERE ts < now() - interval"
                " '300 days') FROM ghostmem.message_bits WHERE conv_id IN ('c2', 'c3')"
            ).fetchone()
            assert moved is not None and moved[0] > 0 and moved[1] > 0
        ann.forget("c1")
        with ann.connection() as conn:
            kept, actual = _counts(conn)
            assert kept == actual and _owner_totals(conn)[("ann", "personal")] == 13
            kept, actual = _vectors(conn)
            assert kept == actual and len(kept) == 10
            kept, actual = word_counts(conn)
            assert kept == actual and len(kept) == 16
            kept, actual = vector_bits(conn)
            assert kept == actual and len(kept) == 10
            # `ghostmem demo --remove`: bob's copies go, ann's stay
            assert maintenance.clear(conn, "bob") == ["b0"]
            kept, actual = _vectors(conn)
            assert kept == actual and len(kept) == 9 and {row[0] for row in kept} == {"ann"}
            kept, actual = word_counts(conn)
            assert kept == actual and len(kept) == 14 and {row[0] for row in kept} == {"ann"}
            kept, actual = vector_bits(conn)
            assert kept == actual and len(kept) == 9 and {row[0] for row in kept} == {"ann"}
            conn.execute("TRUNCATE ghostmem.messages CASCADE")
            assert _counts(conn) == (set(), set())
            assert _vectors(conn) == (set(), set())
            assert word_counts(conn) == (set(), set())
            assert vector_bits(conn) == (set(), set())


def test_the_copies_pair_old_and_new_rows_by_the_messages_key(own_dsn: str, tmp_path: Path) -> None:
    """The messages' key is (id, owner) (migration 100): two owners may hold one id (rows written with explicit
    ids, as a restore or a merge of two stores writes them). Updates touching both owners' rows of the same ids —
    one owner's rows, both at once, a word refill, a vector lost, a message moved to a third owner — leave the
    counts (092), compact vectors (101), word counts (107) and bits (110) exactly as recomputed. Paired by id alone,
    an update of both failed ("ON CONFLICT DO UPDATE command cannot affect row a second time")."""
    for name in ("ann", "bob", "cy"):
        with GhostMem(dsn=own_dsn, owner=name, embedder=HashEmbedder()) as gm:
            texts = [f"{name} deploys the staging server", "the answer with more words", "short"]
            import_generic(gm, tmp_path / f"{name}.jsonl", [conversation("c", "talk", 2, texts, project="p")])
    with GhostMem(dsn=own_dsn, owner="ann", embedder=HashEmbedder()) as gm, gm.connection() as conn:
        assert share_ids(conn, "bob", "ann") == 3  # bob's messages written again with ann's ids

        def exact() -> None:
            for copies in (_counts, _vectors, word_counts, vector_bits):
                kept, actual = copies(conn)
                assert kept == actual, copies.__name__
            assert len(_vectors(conn)[0]) > 0 and len(word_counts(conn)[0]) > 0

        exact()
        for update in (
            "UPDATE ghostmem.messages SET project = 'q' WHERE owner = 'ann'",
            "UPDATE ghostmem.messages SET ts = ts - interval '3 days' WHERE owner IN ('ann', 'bob')",
            "UPDATE ghostmem.messages SET project = 'r', seq = seq + 10 WHERE owner IN ('ann', 'bob')",
            "UPDATE ghostmem.messages SET text = text || ' again' WHERE owner IN ('ann', 'bob')",
            "UPDATE ghostmem.messages SET embedding = NULL WHERE owner = 'bob' AND seq = 10",
            "UPDATE ghostmem.messages SET embedding = embedding, meta = meta WHERE true",
            # a message moved: the same id under another owner (cy holds the conversation)
            "UPDATE ghostmem.messages SET owner = 'cy', native_id = 'moved' WHERE owner = 'bob' AND seq = 11",
        ):
            conn.execute(update)
            exact()
        moved = conn.execute(
            "SELECT v.owner FROM ghostmem.message_vectors v JOIN ghostmem.messages m ON m.id = v.id"
            " AND m.owner = 'cy' AND m.native_id = 'moved' ORDER BY 1"
        ).fetchall()
        assert moved == [
            ("ann",),
            ("cy",),
        ]  # the moved message's copy (and ann's of the same id), none of bob's


def test_the_store_size_of_the_idf_comes_from_the_plan_statements_counts(
    gm: GhostMem, tmp_path: Path
) -> None:
    """A query whose words are not all in one message fetches word by word; its idf needs the owner's store size
    (messages of the searched tiers, capped at N_CAP), which the plan statement has already summed from
    message_counts: the main statement takes it as a parameter and reads no count itself (no scan of the counts,
    no plan nodes for it). Another owner's messages and an unsearched tier are not counted."""
    import_generic(
        gm,
        tmp_path / "w.jsonl",
        [conversation(f"w{i}", f"w {i}", 1, [f"alpha note {i}", f"beta note {i}"]) for i in range(30)],
    )
    import_generic(
        gm,
        tmp_path / "lib.jsonl",
        [conversation(f"l{i}", f"l {i}", 1, [f"alpha page {i}", f"beta page {i}"]) for i in range(5)],
        tier="library",
    )
    with GhostMem(dsn=gm.dsn, owner="someone-else", embedder=HashEmbedder()) as other:
        import_generic(
            other,
            tmp_path / "o.jsonl",
            [conversation(f"o{i}", f"o {i}", 1, [f"alpha other {i}", f"beta other {i}"]) for i in range(20)],
        )
    for library, owned in ((False, 60), (True, 70)):
        args = SearchPersonalMemoryArgs(query="alpha beta", mode="lexical", include_library=library)
        seen: list[tuple[str, Any]] = []
        with gm.connection() as conn:
            result = run_sync(
                recording(search_personal_memory(gm.context, args), conn, seen), conn, gm.embedder
            )
            text, params = seen[-1]  # explained in the search's transaction, with its settings
            rows = conn.execute(
                f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {text}".encode(), params
            )
            plan = "\n".join(r[0] for r in rows)
        assert result.rows  # each word matches alone: found word by word
        assert params is not None and params["store_n"] == float(owned)  # type: ignore[call-overload]
        assert "message_counts" not in text and "message_counts" not in plan
    assert search.store_size(0) == 1.0 and search.store_size(search.N_CAP + 1) == float(search.N_CAP)


def test_the_shown_messages_times_come_as_timestamps(gm: GhostMem, tmp_path: Path) -> None:
    """The main statement returns a shown message's time as a timestamptz, which the driver reads natively (as
    to_json it was a json text parsed on every row, and then parsed again as a date); the hit's time is the
    stored one."""
    import_generic(gm, tmp_path / "t.jsonl", [conversation("t1", "t", 2, ["alpha beta", "gamma delta"])])
    args = SearchPersonalMemoryArgs(query="alpha beta", mode="lexical")
    seen: list[tuple[str, Any]] = []
    with gm.connection() as conn:
        result = run_sync(recording(search_personal_memory(gm.context, args), conn, seen), conn, gm.embedder)
        text, params = seen[-1]
        with conn.cursor() as cur:
            cur.execute(text.encode(), params)
            types = {d.name: d.type_code for d in cur.description or []}
        stored = conn.execute(
            "SELECT ts FROM ghostmem.messages WHERE owner = %s AND conv_id = 't1' AND seq = %s",
            (gm.context.owner, result.rows[0].matches[0].seq),
        ).fetchone()
    assert types["ts"] == conn.adapters.types["timestamptz"].oid
    assert stored is not None and result.rows[0].matches[0].ts == stored[0]


def _sent(who: GhostMem, args: SearchPersonalMemoryArgs) -> tuple[tuple[str, ...], str, str]:
    """The texts of a search's statements as sent (the plan statement's, the main one's), how the main statement's
    rows were fetched, and the result as JSON."""
    fetched: list[str] = []

    def fetches(program: Program[Any]) -> Program[Any]:
        reply: Any = None
        try:
            while True:
                step = program.send(reply)
                if isinstance(step, Query):
                    fetched.append(step.fetch)
                reply = yield step
        except StopIteration as done:
            return done.value

    seen: list[tuple[str, Any]] = []
    with who.connection() as conn:
        program = fetches(recording(search_personal_memory(who.context, args), conn, seen))
        result = run_sync(program, conn, who.embedder)
    return tuple(text for text, _ in seen), fetched[-1], result.model_dump_json()


def test_a_search_statement_is_composed_once_per_shape_never_across_owners(
    gm: GhostMem, tmp_path: Path
) -> None:
    """A search's statements are composed once per shape (search._text: the plan statement's, which filters are
    given and the search's sizes; the main statement's, search._statement, also the plan's literals, legs and
    scans, the bonuses) and reused by later searches of that shape; another owner, a hostile name, gets its own;
    and every reused text, whatever came before it, is the one composed afresh for that search (the same
    results). The main statement's rows come as tuples (a dict per row cost more to fetch)."""
    convs = [
        conversation(f"c{i}", f"c {i}", i, [f"alpha deploy note {i}", f"when was beta {i} due"], "ops")
        for i in range(12)
    ]
    import_generic(gm, tmp_path / "a.jsonl", convs)
    hostile = "o'ther%s %(owner)s"
    with GhostMem(dsn=gm.dsn, owner=hostile, embedder=HashEmbedder()) as other:
        import_generic(other, tmp_path / "o.jsonl", convs)
        searches = [
            (who, SearchPersonalMemoryArgs(query=query, mode=mode, limit=limit, **filters))
            for who in (gm, other)
            for mode in ("hybrid", "lexical", "vector")
            for filters in ({}, {"days": 7}, {"project": "ops"}, {"platform": "generic"})
            for query, limit in (
                ("alpha deploy", 10),
                ("deploy note", 10),
                ("when was beta due", 10),
                ("alpha deploy", 20),  # a walk of a project's graph keeps more (the plan statement)
            )
        ]
        fresh = []
        for who, args in searches:
            search._composed.cache_clear()
            search._kept_plans.clear()  # every search runs its plan statement (test_kept_plans.py)
            fresh.append(_sent(who, args))
        search._composed.cache_clear()
        reused = []
        for who, args in reversed(searches):
            search._kept_plans.clear()
            reused.append(_sent(who, args))
        reused.reverse()
        composed = search._composed.cache_info()
    assert reused == fresh
    # two statements a search; "deploy note" is "alpha deploy"'s shape: at least a quarter reuse their texts
    assert composed.hits >= len(searches) // 2 and composed.hits + composed.misses == 2 * len(searches)
    assert {fetch for _, fetch, _ in fresh} == {"tuples"}
    for (who, _), (texts, _, _) in zip(searches, fresh, strict=True):
        stranger = other if who is gm else gm
        assert len(texts) == 2 and all(
            search._written(stranger.context.owner).as_string() not in t for t in texts
        )
    assert any(search._written(hostile).as_string() in texts[1] for texts, _, _ in fresh)


def test_the_plan_statement_reads_the_indexes_days_through_the_catalogs_index(
    gm: GhostMem, tmp_path: Path
) -> None:
    """The plan statement looks up the day of the owner's recent graph (migration 210) and of its recent words
    (240), the indexes' comments, as sub-selects of pg_description in its own plan (an index scan each), not by
    obj_description(), an SQL function run on its own at every call; the day is the comment itself."""
    import_generic(gm, tmp_path / "d.jsonl", [conversation("d1", "d", 1, ["alpha beta", "gamma delta"])])
    for filters in ({"days": 7}, {}):
        args = SearchPersonalMemoryArgs(query="alpha beta", **filters)
        seen: list[tuple[str, Any]] = []
        with gm.connection() as conn:
            run_sync(recording(search_personal_memory(gm.context, args), conn, seen), conn, gm.embedder)
            text = seen[0][0]
            plan = generic_plan(conn, text)
        assert "obj_description" not in text and "obj_description" not in plan
        assert "Index Scan using pg_description_o_c_o_index" in plan
    with gm.connection() as conn:
        conn.execute("COMMENT ON INDEX ghostmem.messages_owner_ts IS '2026-11-01 00:00:00+00'")
        read = conn.execute(
            sql.SQL(
                "SELECT {commented}, {missing}, obj_description('ghostmem.messages_owner_ts'::regclass, 'pg_class')"
            ).format(
                commented=search._comment("'ghostmem.messages_owner_ts'::regclass"),
                missing=search._comment("to_regclass('ghostmem.no_such_index')"),
            )
        ).fetchone()
        conn.rollback()
    assert read == ("2026-11-01 00:00:00+00", None, "2026-11-01 00:00:00+00")


def _vector_depth_chosen(gm: GhostMem, **filters: Any) -> int:
    """The number of rows the search statement asks its HNSW scan for (the LIMIT of ``vec_scan``)."""
    seen: list[tuple[str, Any]] = []
    args = SearchPersonalMemoryArgs(query="deploy notes", limit=10, **filters)
    with gm.connection() as conn:
        run_sync(recording(search_personal_memory(gm.context, args), conn, seen), conn, gm.embedder)
    statement = seen[-1][0]
    if "vec_scan AS MATERIALIZED" not in statement:
        return 0  # no vector leg: nothing in scope for it to find
    return int(statement.split("vec_scan AS MATERIALIZED", 1)[1].split("LIMIT", 1)[1].split()[0])


def test_the_vector_depth_follows_how_narrow_the_filters_are(gm: GhostMem, tmp_path: Path) -> None:
    """The strategy per filter: unfiltered 100 rows; a filter keeping at least 5% of the owner's messages (a time
    window, a platform) 20; a narrower one (one small project, an old window) 50. Shares come from the counts."""
    convs = [
        conversation(f"big-{i}", f"big {i}", i % 40, [f"deploy notes {i}", "fine"], "big") for i in range(90)
    ]
    convs += [
        conversation(f"tiny-{i}", f"tiny {i}", 200, [f"deploy of tiny {i}", "ok"], "tiny") for i in range(2)
    ]
    import_generic(gm, tmp_path / "share.jsonl", convs)
    assert _vector_depth_chosen(gm) == 100
    assert _vector_depth_chosen(gm, days=3650) == 20  # everything
    assert _vector_depth_chosen(gm, days=10) == 20  # a quarter of the conversations ended in the last 10 days
    assert _vector_depth_chosen(gm, platform="generic") == 20
    assert _vector_depth_chosen(gm, project="big") == 20
    assert _vector_depth_chosen(gm, project="tiny") == 50  # 4 of 184 messages
    assert _vector_depth_chosen(gm, days=100, project="big") == 20
    assert _vector_depth_chosen(gm, days=150, project="tiny") == 50  # no tiny message is that recent
    assert _vector_depth_chosen(gm, project="nowhere") == 0  # no message in scope: no vector leg
    assert _vector_depth_chosen(gm, days=3650, mode="vector") == 50  # alone, the vector leg fills the results
    with gm.connection() as conn:  # another owner's messages count for nothing
        conn.execute(
            "INSERT INTO ghostmem.message_counts VALUES ('someone-else', 'personal', 'generic', 'tiny', 1000000)"
        )
    assert _vector_depth_chosen(gm, project="tiny") == 50


def test_the_plan_statement_reads_each_count_once_and_sums_what_each_filter_asks(
    gm: GhostMem, tmp_path: Path, server_dsn: str
) -> None:
    """The plan statement reads the owner's rows of message_counts in one scan (and message_days once, for a time
    window) and sums from it what the search's filters ask (search._counts; with a project alone, first by tier and
    project): the store, the searched tiers, the share the filters keep, the vector leg's scope, the matching
    projects. Each sum is checked against the counts
    read here, for every filter and their combinations, beside another owner and a library tier whose rows count
    only for the owner's graph (every tier); a project is matched literally (its ``_`` is no wildcard)."""
    convs = [
        conversation(f"a{i}", f"talk {i}", i * 9, [f"deploy notes {i}", "fine"], "alpha") for i in range(12)
    ]
    convs += [
        conversation(f"b{i}", f"beta {i}", i * 30, [f"beta notes {i}", "ok", "more"], "beta_x")
        for i in range(4)
    ]
    convs += [conversation(f"bx{i}", f"betaxx {i}", 2, [f"loose notes {i}"], "betaxx") for i in range(3)]
    convs += [conversation(f"t{i}", f"Alpha review {i}", 1, [f"titled notes {i}", "sure"]) for i in range(2)]
    import_generic(gm, tmp_path / "mine.jsonl", convs)
    import_generic(
        gm,
        tmp_path / "lib.jsonl",
        [conversation("lib", "alpha lib", 1, ["library alpha", "x"], "alpha")],
        tier="library",
    )
    with GhostMem(dsn=gm.dsn, owner="someone-else", embedder=HashEmbedder()) as other:
        import_generic(
            other, tmp_path / "other.jsonl", [conversation("o", "alpha", 1, ["alpha notes", "y"], "alpha")]
        )
    with gm.connection() as conn:  # a second platform of the owner's, as message_counts keeps it
        conn.execute(
            "INSERT INTO ghostmem.message_counts VALUES (%s, 'personal', 'codex', 'alpha', 40),"
            " (%s, 'personal', 'codex', '', 7)",
            (gm.owner, gm.owner),
        )
        counts = conn.execute(
            "SELECT tier, platform, project, n FROM ghostmem.message_counts WHERE owner = %s", (gm.owner,)
        ).fetchall()
        titles = conn.execute(
            "SELECT tier, title, msg_count, conv_id FROM ghostmem.conversations WHERE owner = %s", (gm.owner,)
        ).fetchall()
    filters: list[dict[str, Any]] = [
        {},
        {"days": 5},
        {"days": 400},
        {"platform": "generic"},
        {"platform": "codex"},
        {"platform": "codex", "days": 40},
        {"project": "alpha"},
        {"project": "ALPHA", "days": 20},
        {"project": "beta_x"},
        {"project": "a", "platform": "codex"},
        {"project": "nowhere"},
    ]
    for given in filters:
        seen: list[tuple[str, Any]] = []
        args = SearchPersonalMemoryArgs(query="deploy notes", **given)
        with gm.connection() as conn:
            run_sync(recording(search_personal_memory(gm.context, args), conn, seen), conn, gm.embedder)
            text, params = seen[0]
            with conn.cursor(row_factory=dict_row) as cur:
                plan = cur.execute(text.encode(), params).fetchone()
            plan_text = generic_plan(conn, text)
            window = conn.execute(
                "SELECT coalesce(sum(n), 0) FROM ghostmem.message_days WHERE owner = %s AND tier = 'personal'"
                " AND day >= ((now() - make_interval(days => %s)) AT TIME ZONE 'UTC')::date",
                (gm.owner, given.get("days", 0)),
            ).fetchone()
        # each table read once (a scan "on" the table itself, not its index)
        assert len(re.findall(r" on message_counts(?!\w)", plan_text)) == 1, (given, plan_text)
        assert len(re.findall(r" on message_days(?!\w)", plan_text)) == ("days" in given), (given, plan_text)
        # with a project (and no platform) the counts are first summed by what the comparisons read, tier and
        # project: the ILIKE and the graph's look-up run once a project, not once a row of each platform
        grouped = bool(re.search(r"Group Key: (\w+)\.tier, \1\.project$", plan_text, re.M))
        assert grouped == ("project" in given and "platform" not in given), (given, plan_text)
        # the titles searched once, for a project (the statement gets the ids: "titled")
        assert len(re.findall(r" on conversations(?!\w)", plan_text)) == ("project" in given), (
            given,
            plan_text,
        )
        assert plan is not None and window is not None
        got = {
            k: plan[k]
            for k in ("owner_rows", "scope_rows", "projects", "owner_graph_rows", "graphs", "graph_rows")
        }
        got["titled"] = sorted(plan["titled"]) if plan["titled"] is not None else None
        expected = _expected_plan(given, counts, titles, int(window[0]))
        assert math.isclose(plan["share"], expected.pop("share"), rel_tol=1e-12), given
        assert got == expected, given


def _expected_plan(
    given: dict[str, Any], counts: list[tuple[Any, ...]], titles: list[tuple[Any, ...]], window: int
) -> dict[str, Any]:
    """What the plan statement should say of the owner's counts (``counts``: its rows of message_counts,
    ``titles``: its conversations) under the filters ``given``, in the personal tier (``window``: its messages of
    the time window)."""
    project = given.get("project")

    def matched(name: str | None) -> bool:  # a substring, case-insensitive (the pattern's _ taken literally)
        return project is not None and name is not None and project.lower() in name.lower()

    mine = [(platform, name, n) for tier, platform, name, n in counts if tier == "personal"]
    owner_rows = sum(n for _, _, n in mine)
    platform_rows = sum(n for platform, _, n in mine if platform == given.get("platform"))
    kept = sum(
        n
        for platform, name, n in mine
        if given.get("platform", platform) == platform and (project is None or matched(name))
    )
    share = kept / owner_rows if given else 1.0
    if "days" in given:
        share = share * window / owner_rows
    titled = [(n, conv_id) for tier, title, n, conv_id in titles if tier == "personal" and matched(title)]
    if project is not None:
        scope = sum(n for _, name, n in mine if matched(name)) + sum(n for n, _ in titled)
    elif "platform" in given:
        scope = platform_rows if "days" not in given else math.ceil(platform_rows * window / owner_rows)
    else:
        scope = window if "days" in given else owner_rows
    return {
        "owner_rows": owner_rows,
        "share": share,
        "scope_rows": scope,
        "projects": sorted({name for _, name, _ in mine if matched(name)}) if project is not None else None,
        "owner_graph_rows": sum(row[3] for row in counts),
        "graphs": [],
        "graph_rows": 0,
        "titled": sorted(conv_id for _, conv_id in titled) if project is not None else None,
    }


def test_the_generic_plan_reads_through_the_indexes_beside_another_owner(
    server_dsn: str, tmp_path: Path
) -> None:
    """In a database with several owners the owner's selectivity in a generic plan is a guess (1/number of owners):
    the plan must still fetch words through the GIN index alone — no sequential scan of messages (a rare word would
    read all of it) and no AND with an (owner, ...) btree bitmap (every entry of a large owner), for a small owner
    and a large one alike. (Which path the vector leg takes at this size is the planner's cost choice: at a few
    hundred rows an exact sort beats HNSW; test_search.py pins HNSW with sorts made expensive.)"""
    with fresh_database(server_dsn, "ghostmem_plans") as dsn:
        big_convs = [
            conversation(f"b{i}", f"b {i}", i % 30, [f"routine deploy log {i}", "fine"]) for i in range(300)
        ]
        small_convs = [conversation(f"s{i}", f"s {i}", 1, [f"deploy of tiny {i}", "ok"]) for i in range(5)]
        for owner, convs in (("big", big_convs), ("small", small_convs)):
            with GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder()) as gm:
                import_generic(gm, tmp_path / f"{owner}.jsonl", convs)
        for owner in ("small", "big"):
            with GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder()) as gm:
                with gm.connection() as conn:
                    conn.execute("ANALYZE ghostmem.messages")
                for filters in ({}, {"days": 7}, {"project": "ops"}):
                    seen: list[tuple[str, Any]] = []
                    args = SearchPersonalMemoryArgs(query="rare deploy", **filters)
                    with gm.connection() as conn:
                        program = recording(search_personal_memory(gm.context, args), conn, seen)
                        run_sync(program, conn, gm.embedder)
                        plan = generic_plan(
                            conn, seen[-1][0]
                        )  # in the search's transaction, with its settings
                    assert "Seq Scan on messages" not in plan and "BitmapAnd" not in plan, (
                        owner,
                        filters,
                        plan,
                    )
                    assert "Bitmap Index Scan on messages_owner_words" in plan, plan
                    # a word known to be common (migration 220) is looked up by the list's key, one probe a word,
                    # never the whole list (an EXISTS was planned as a hashed sub-plan reading all of it)
                    lex_terms = plan.split("CTE lex_terms", 1)[1].split("\n  CTE ", 1)[0]
                    assert "using common_words_pkey on common_words" in lex_terms, lex_terms
                    assert "hashed" not in lex_terms and "Seq Scan on common_words" not in plan, lex_terms
                    # the word-by-word candidates leave out the conjunction's through a hashed set of its ids, never
                    # a nested-loop anti join (each candidate tested against each message of the conjunction)
                    lex_cand = plan.split("CTE lex_cand", 1)[1].split("\n  CTE ", 1)[0]
                    assert "(hashed SubPlan" in lex_cand and "Anti Join" not in lex_cand, lex_cand
                    # a candidate's query words are tested on the words its word's fetch read (one one-lexeme query
                    # a word), never by reading the message again, and once a message: the fetches' rows are made
                    # distinct by id before the test (a message several words fetched is tested once)
                    lex_hits = plan.split("CTE lex_hits", 1)[1].split("\n  CTE ", 1)[0]
                    assert "@@ lq" not in lex_hits and "lex_terms u" not in lex_hits, lex_hits
                    assert "CTE Scan on lex_terms u" in lex_cand and ".tsv @@ lq)" in lex_cand, lex_cand
                    tested = lex_cand.split("Unique", 1)[1]
                    assert re.search(r"Sort Key: h_\d+\.id\n", tested) and "SubPlan" in tested, lex_cand
                    assert " on messages" not in lex_cand and "tsvector_to_array" not in plan, lex_cand
                    # a window's idf is read from the sums of the sets of query words (lex_sums), each summed once
                    lex_win = plan.split("CTE lex_win", 1)[1].split("\n  CTE ", 1)[0]
                    assert "CTE Scan on lex_sums" in lex_win and "sums[" in lex_win, lex_win
                    lex_sums = plan.split("CTE lex_sums", 1)[1].split("\n  CTE ", 1)[0]
                    assert "generate_series" in lex_sums and "CTE Scan on lex_idf" in lex_sums, lex_sums
                    # the windows' lengths: a range of the narrow rows of 107 a candidate (its neighbourhood, for
                    # its three windows; session 30), never the messages themselves, found by integers (190: the
                    # conversation id's hash and the place), the place's texts checked after; the windows themselves
                    # read no lengths of their own
                    lex_nb = plan.split("CTE lex_nb", 1)[1].split("\n  CTE ", 1)[0]
                    assert "using message_lengths_window on message_lengths" in lex_nb, lex_nb
                    assert "CTE Scan on lex_cand" in lex_nb, lex_nb
                    read = lex_nb.split("Index Cond: ", 1)[1].split("\n")
                    key = "hashtextextended(conv_id, '0'::bigint)"
                    assert (
                        read[0].lstrip("(").startswith(key) and f"= {key.replace('(', '(o.')}" in read[0]
                    ), lex_nb
                    checked = read[1].strip().removeprefix("Filter: ")
                    assert all(f"({c} = " in checked for c in ("owner", "tier", "conv_id")), lex_nb
                    assert plan.count("on message_lengths") == 1, plan
                    assert "messages_conv_seq" not in plan, plan


def test_a_window_reads_the_lengths_of_its_own_conversation_only(server_dsn: str, tmp_path: Path) -> None:
    """The window reads find a conversation's rows by the hash of its id (migration 190), which every conversation of
    that id shares, of any owner and tier: beside another owner's conversation and the owner's library conversation
    of the same id, their messages many times longer, the owner's lexical scores (each window's length and the
    windows' mean) are those it had alone."""
    long = " ".join(f"filler{i}" for i in range(60))
    mine = [
        conversation("shared", "shared", 1, ["boats and harbours", "the zeppelin landed", "short reply"]),
        *(
            conversation(f"c{i}", f"c {i}", 2, ["hello", f"a zeppelin {' word' * i}", "bye"])
            for i in range(4)
        ),
    ]
    twin = [conversation("shared", "twin", 1, [long, f"zeppelin {long}", long])]
    with (
        fresh_database(server_dsn, "ghostmem_windows") as dsn,
        GhostMem(dsn=dsn, owner="me", embedder=HashEmbedder()) as gm,
    ):
        import_generic(gm, tmp_path / "mine.jsonl", mine)

        def scores() -> dict[str, float]:
            found = gm.search_personal_memory("zeppelin", mode="lexical", explain=True).data.rows
            return {hit.conv_id: hit.explain["lexical_score"] for hit in found if hit.explain is not None}

        alone = scores()
        assert set(alone) == {"shared", "c0", "c1", "c2", "c3"}
        import_generic(gm, tmp_path / "library.jsonl", twin, tier="library")
        with GhostMem(dsn=dsn, owner="other", embedder=HashEmbedder()) as other:
            import_generic(other, tmp_path / "other.jsonl", twin)
        with gm.connection() as conn:
            place = (
                "SELECT count(DISTINCT (owner, tier)) FROM ghostmem.message_lengths WHERE conv_id = 'shared'"
            )
            assert conn.execute(place).fetchone() == (3,)
        assert scores() == pytest.approx(alone, rel=1e-12)


def test_a_connection_plans_each_search_statement_once(server_dsn: str, tmp_path: Path) -> None:
    """Both statements of a search are prepared by psycopg (on their sixth run on a connection) and reuse one
    generic plan, in every case and for a small owner beside a large one: the main statement at once (the plan
    statement's settings ask for it), the plan statement, which runs before them, after the five plans PostgreSQL
    makes for the values of its first prepared runs. It reads the values from a sub-query the planner cannot see
    into (search._SEARCH_VALUES); with them as parameters the plans for the values were estimated cheaper, for a
    time window and for the small owner in every case, and the plan statement was planned again on every search."""
    with fresh_database(server_dsn, "ghostmem_prepared") as dsn:
        for owner, n in (("big", 1100), ("small", 5)):  # a conversation a day: three years of daily counts
            convs = [
                conversation(f"{owner}{i}", f"{owner} {i}", i, [f"routine deploy log {i}", "fine"], "ops")
                for i in range(n)
            ]
            with GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder()) as gm:
                import_generic(gm, tmp_path / f"{owner}.jsonl", convs)
        with GhostMem(dsn=dsn, owner="big", embedder=HashEmbedder()) as gm, gm.connection() as conn:
            conn.execute("ANALYZE ghostmem.message_days")
        runs = 14  # 5 unprepared, 5 prepared with plans for their values, then the generic plan
        for owner in ("small", "big"):
            for filters in ({}, {"days": 7}, {"days": 30}, {"platform": "generic"}, {"project": "ops"}):
                with GhostMem(
                    dsn=dsn, owner=owner, embedder=HashEmbedder(), pool_min_size=1, pool_max_size=1
                ) as gm:
                    for i in range(runs):
                        search._kept_plans.clear()  # the plan statement runs every time (test_kept_plans.py)
                        gm.run("search_personal_memory", {"query": f"deploy log {i}", **filters})
                    with gm.connection() as conn:
                        prepared = conn.execute(
                            "SELECT statement LIKE '%set_config(''plan_cache_mode''%', generic_plans, custom_plans"
                            " FROM pg_prepared_statements ORDER BY 1"
                        ).fetchall()
                # the main statement (bound after the settings: always generic), then the plan statement
                assert prepared == [(False, runs - 5, 0), (True, runs - 10, 5)], (owner, filters, prepared)


@pytest.mark.parametrize("mode", ["hybrid", "lexical", "vector"])
def test_a_search_never_compiles_its_statement(gm: GhostMem, tmp_path: Path, mode: str) -> None:
    """The search statement's estimated cost is above PostgreSQL's default ``jit_above_cost`` (100,000), so a server
    built with JIT would compile its expressions on every search (a generic plan keeps no compiled code), for a
    statement that runs in milliseconds: the search turns JIT off in its transaction, whatever the server, the
    database or the session says, and only there."""
    import_generic(gm, tmp_path / "j.jsonl", [conversation("j", "jit", 1, ["deploy notes", "fine"])])
    args = SearchPersonalMemoryArgs(query="deploy notes", mode=mode)
    with gm.connection() as conn:
        found = read_without_jit(
            conn, lambda: run_sync(search_personal_memory(gm.context, args), conn, gm.embedder)
        )
    assert found.rows


def _ledger(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        conversation(
            f"c{i}",
            f"ledger topic {i}",
            i % 20,
            [f"ledger entry {i} kiwi{i} mango{i % 7}", f"noted {i} papaya{i} guava{i}"] * 2,
            project=f"books{i % 5}/ledger",
        )
        for i in range(start, start + n)
    ]


@contextmanager
def _migrated_with_app(server_dsn: str, prefix: str) -> Iterator[tuple[str, str]]:
    """A migrated database of its own and an application's login to it (``ghostmem grant-app``)."""
    with fresh_database(server_dsn, prefix) as dsn:
        with GhostMem(dsn=dsn, owner="setup", embedder=HashEmbedder()) as gm:
            gm.connect()
        with app_login(dsn) as app_dsn:
            yield dsn, app_dsn


def _without_autovacuum(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as admin:
        for table in ("messages", "conversations"):
            admin.execute(f"ALTER TABLE ghostmem.{table} SET (autovacuum_enabled = false)")


_FETCHES = [
    (WORD_FETCH, {"owner": "a", "lexeme": "papaya7"}, SEARCHED_GIN[0]),
    (TITLE_FETCH, {"pattern": "%topic 7%"}, SEARCHED_GIN[1]),
    (PROJECT_FETCH, {"pattern": "%books3%"}, SEARCHED_GIN[2]),
]


def test_what_a_search_scan_reads_of_the_queued_writes_is_bounded(server_dsn: str, tmp_path: Path) -> None:
    """A GIN index queues what is written in a pending list that every scan reads whole until it is merged. The
    indexes a search reads (the words', the titles' and projects' trigrams) merge theirs at 256 kB (migration 116):
    after an import of 400 conversations by an application's login (which merges nothing at its end, migration
    260) each holds at most 32 pending pages (with PostgreSQL's 4 MB it held 69, 67 and 56, read by every fetch),
    and a fetch reads at most that many pages more than once they are merged."""
    with _migrated_with_app(server_dsn, "ghostmem_gin") as (dsn, app_dsn):
        with GhostMem(dsn=app_dsn, owner="a", embedder=HashEmbedder()) as gm:
            import_generic(gm, tmp_path / "a.jsonl", _ledger(400))
            assert [r.conv_id for r in gm.search_personal_memory("papaya7", mode="lexical").data.rows] == [
                "c7"
            ]
        with psycopg.connect(dsn) as conn:
            assert gin_options(conn) == dict.fromkeys(SEARCHED_GIN, PENDING_LIST_OPTIONS)
            check_short_pending_lists(conn, _FETCHES)


def test_an_import_leaves_nothing_queued_in_the_indexes_a_search_reads(
    server_dsn: str, tmp_path: Path
) -> None:
    """Migration 260: the end of an import (maintenance.build_project_graphs, as after an embedding or reembed)
    merges the pending list of every GIN index of messages and conversations, so the searches after it read no
    queued entries: what an application's import queued (a fetch then reads more pages) is merged by the owner's
    next import, after which each fetch reads what it reads once merged. Attack: the application's login may
    execute neither the merge function nor gin_clean_pending_list itself (it does not own the indexes)."""
    with _migrated_with_app(server_dsn, "ghostmem_gin_merged") as (dsn, app_dsn):
        _without_autovacuum(dsn)  # autovacuum merges the lists whenever it runs
        with GhostMem(dsn=app_dsn, owner="a", embedder=HashEmbedder()) as gm:
            import_generic(gm, tmp_path / "a.jsonl", _ledger(400))
        with psycopg.connect(app_dsn, autocommit=True) as app:
            assert maintenance.merge_pending_lists(app) == 0  # skipped
            for statement in (
                "SELECT ghostmem.merge_pending_lists()",
                "SELECT gin_clean_pending_list('ghostmem.messages_owner_words'::regclass)",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    app.execute(statement)
        with psycopg.connect(dsn) as conn:
            queued = [index_pages(conn, *fetch) for fetch in _FETCHES]
        with GhostMem(dsn=dsn, owner="a", embedder=HashEmbedder()) as gm:
            import_generic(gm, tmp_path / "b.jsonl", _ledger(1, start=400))
            assert [r.conv_id for r in gm.search_personal_memory("papaya7", mode="lexical").data.rows] == [
                "c7"
            ]
        with psycopg.connect(dsn) as conn:
            after = [index_pages(conn, *fetch) for fetch in _FETCHES]
            assert merge_pending(conn, SEARCHED_GIN) == [0, 0, 0]
            merged = [index_pages(conn, *fetch) for fetch in _FETCHES]
        assert after == merged and all(q > m for q, m in zip(queued, merged, strict=True)), (queued, merged)
        with psycopg.connect(dsn) as conn:  # and the function returns the pages it merged
            conn.execute("UPDATE ghostmem.messages SET text = text || ' x' WHERE owner = 'a' AND seq < 2")
            conn.commit()
            assert maintenance.merge_pending_lists(conn) > 0 and maintenance.merge_pending_lists(conn) == 0


def test_an_import_merges_what_its_own_enrichment_queued(server_dsn: str, tmp_path: Path) -> None:
    """The merge of migration 260 comes after the import's last write: the enrichment after the embedding rewrites
    each conversation it changed (title, project, topic), which queues entries in the titles' and projects' trigram
    indexes, so an owner's import of 400 conversations leaves nothing queued in any index a search reads."""
    with _migrated_with_app(server_dsn, "ghostmem_gin_enriched") as (dsn, _):
        _without_autovacuum(dsn)  # autovacuum merges the lists whenever it runs
        with GhostMem(dsn=dsn, owner="a", embedder=HashEmbedder()) as gm:
            import_generic(gm, tmp_path / "a.jsonl", _ledger(400))
        with psycopg.connect(dsn) as conn:
            assert merge_pending(conn, SEARCHED_GIN) == [0, 0, 0]


def test_the_vector_leg_chooses_the_cheapest_scan() -> None:
    """The strategy per case, on the shapes of the bench (docs/search.md, "Small scopes: an exact scan" and "Scopes
    between: a quantized scan"): an HNSW scan passes over at least ef_search rows, and about vec_depth x graph /
    kept rows under a filter (the graph: the owner's own vectors, migration 163); an exact scan reads its scope; a
    quantized one reads it at a fraction of the cost and ranks its candidates again."""
    ef = 100  # the walk's candidates (search.message_ef_search): 100 up to 100,000 messages, 200 at a million
    # one owner of 100,000 messages (vec_depth 20 under a wide filter, 50 under a narrow one, as vector_depth says)
    assert vector_scan(100_000, 100_000, 100_000, 100, ef) == "hnsw"  # no filter
    assert vector_scan(8_740, 8_740, 100_000, 20, ef) == "quantized"  # days=7: 20 rows of 9% of the index
    assert vector_scan(16_608, 16_608, 100_000, 20, ef) == "hnsw"  # days=30: 17%
    assert vector_scan(14_440, 14_440, 100_000, 20, ef) == "hnsw"  # a platform (its rows: migration 120), 14%
    assert vector_scan(4_430, 4_430, 100_000, 50, ef) == "exact"  # a platform of 4% (narrow: 50 rows)
    assert vector_scan(3_237, 3_237, 100_000, 50, ef) == "exact"  # one project of 3,200 messages
    # one owner of 1,000,000 messages
    assert vector_scan(34_057, 34_057, 1_010_845, 50, 2 * ef) == "quantized"  # one project: 3.4%
    assert vector_scan(82_669, 82_669, 1_010_845, 20, 2 * ef) == "hnsw"  # the last 7 days
    # 10,000 messages, beside 1,000,000 of another owner or in a database of their own: the graph is theirs alone
    # (migration 163; in the graph both owners shared, their 100 nearest were read quantized)
    assert vector_scan(10_000, 10_000, 10_000, 100, ef) == "hnsw"
    assert vector_scan(1_281, 1_281, 10_000, 20, ef) == "exact"  # a platform (HNSW before 120: scope 10,000)
    assert vector_scan(961, 961, 10_000, 20, ef) == "exact"  # their last 7 days
    # one owner without a filter (the retrieval benchmarks' stores): its 100 rows never come from a quantized scan,
    # so the number of candidates cannot change what those searches return
    assert {vector_scan(n, n, n, 100, ef) for n in range(100, 2_000_000, 997)} == {"exact", "hnsw"}
    # a filter that the counts say nothing passes: the index scan would run to its tuple cap, so the scope is read
    # (whole, or quantized once it is large enough for the candidates' re-rank to pay)
    assert vector_scan(3_000, 0, 100_000, 50, ef) == "exact"
    assert vector_scan(5_000, 0, 100_000, 50, ef) == "quantized"


def test_the_querys_planes_give_its_dot_product_with_a_rows_signs() -> None:
    """query_planes: the first plane is the query's signs (binary_quantize's bits); the weighted planes as ±1
    vectors come closer to the query with each plane; and Σ w_b · (n − 2 · hamming(plane_b, bits)), what
    _PLANE_DISTANCE ranks by, is their dot product with the row's signs, exactly."""
    rng = np.random.default_rng(7)
    for _ in range(20):
        query = rng.normal(size=384).astype(np.float32)
        planes = search.query_planes(query)
        signs = [np.array([1.0 if c == "1" else -1.0 for c in str(planes[f"plane{b}"])]) for b in range(3)]
        weights = [float(planes[f"weight{b}"]) for b in range(3)]
        assert str(planes["plane0"]) == "".join("1" if x > 0 else "0" for x in query)
        errors = [
            np.linalg.norm(query - sum(w * s for w, s in zip(weights[:n], signs[:n], strict=True)))
            for n in (1, 2, 3)
        ]
        assert errors[0] > errors[1] > errors[2], errors
        row = rng.normal(size=384) > 0
        bits = "".join("1" if x else "0" for x in row)
        by_planes = sum(
            w * (384 - 2 * sum(a != b for a, b in zip(str(planes[f"plane{i}"]), bits, strict=True)))
            for i, w in enumerate(weights)
        )
        approx = sum(w * s for w, s in zip(weights, signs, strict=True))
        assert by_planes == pytest.approx(float(approx @ np.where(row, 1.0, -1.0)), rel=1e-9)


def test_a_scope_read_from_its_index_is_quantized_against_the_walk() -> None:
    """A time window's or a platform's quantized scan reads the index alone (migration 164) and costs
    QUANTIZED_INDEX_ROW_COST a row against the HNSW walk; a project's reads the table (QUANTIZED_ROW_COST). The cases
    of the bench whose choice that changes, and those it leaves (docs/search.md, "A quantized scan read from the
    index"); the exact scan keeps the scopes it wins at the table's cost."""
    ef = 100

    def both(*shape: int) -> tuple[str, str]:
        return vector_scan(*shape), vector_scan(*shape, index_only=True)

    # 100k messages searched by meaning alone (vec_depth 50): a month and a platform are read quantized
    assert both(16_576, 16_576, 100_000, 50, ef) == (
        "hnsw",
        "quantized",
    )  # days=30: as fast, as many exact rows
    assert both(14_440, 14_440, 100_000, 50, ef) == (
        "hnsw",
        "quantized",
    )  # platform=codex: 1.26-1.37x less CPU
    assert both(8_704, 8_704, 100_000, 50, ef) == ("quantized", "quantized")  # days=7
    # ... hybrid (vec_depth 20 under a wide filter) still walks a month and a platform, reads a week quantized
    assert both(16_576, 16_576, 100_000, 20, ef) == ("hnsw", "hnsw")
    assert both(14_440, 14_440, 100_000, 20, ef) == ("hnsw", "hnsw")
    assert both(8_704, 8_704, 100_000, 20, ef) == ("quantized", "quantized")
    # a scope the exact scan wins at the table's cost stays exact (a platform's last 14 days: its rows are the
    # exact ones, where the index-only scan kept 0.994 of them)
    assert both(4_150, 4_150, 100_000, 50, ef) == ("exact", "exact")
    assert both(4_430, 4_430, 100_000, 50, ef) == ("exact", "exact")
    # 1M messages (ef 200): the bench's cases keep their walks ...
    assert both(82_005, 82_005, 1_000_000, 50, 2 * ef) == ("hnsw", "hnsw")  # days=7 (quantized: 1.6x the CPU)
    assert both(82_005, 82_005, 1_000_000, 20, 2 * ef) == ("hnsw", "hnsw")
    assert both(163_724, 163_724, 1_000_000, 50, 2 * ef) == ("hnsw", "hnsw")  # days=30
    assert both(139_807, 139_807, 1_000_000, 50, 2 * ef) == ("hnsw", "hnsw")  # platform=codex (3.2x)
    # ... and narrower scopes by meaning alone are read quantized (1.04-1.37x less CPU, 0.98 of the exact rows
    # instead of 0.96), while hybrid's shallower walk of them stays (quantized: 1.15-1.17x the CPU)
    assert both(54_724, 54_724, 1_000_000, 50, 2 * ef) == ("hnsw", "quantized")  # days=3
    assert both(62_316, 62_316, 1_000_000, 50, 2 * ef) == ("hnsw", "quantized")  # days=4
    assert both(52_318, 52_318, 1_000_000, 50, 2 * ef) == ("hnsw", "quantized")  # platform=cursor
    assert both(54_724, 54_724, 1_000_000, 20, 2 * ef) == ("hnsw", "hnsw")
    assert both(52_318, 52_318, 1_000_000, 20, 2 * ef) == ("hnsw", "hnsw")
    # a filter alone chooses (never the unfiltered scope, whatever its size)
    assert {vector_scan(n, n, n, 100, ef, index_only=True) for n in range(100, 2_000_000, 997)} == {
        "exact",
        "hnsw",
    }


@pytest.mark.parametrize(
    ("filters", "index_only"),
    [
        ({}, False),
        ({"days": 30}, True),
        ({"platform": "generic"}, True),
        ({"days": 7, "platform": "generic"}, True),
        ({"project": "ledger"}, False),
        ({"project": "ledger", "days": 30}, False),
        ({"project": "ledger", "platform": "generic"}, False),
    ],
)
def test_a_search_says_whether_its_scope_is_read_from_the_index(
    gm: GhostMem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, filters: dict[str, Any], index_only: bool
) -> None:
    """The vector leg's choice is told its scope is read from the index alone for a time window, a platform or both
    (message_bits_owner_ts / _platform_ts, migration 164: test_a_scope_is_read_through_its_index), never for a
    project's scope (the titled conversations, the project's rows: the table)."""
    import_generic(
        gm,
        tmp_path / "k.jsonl",
        [conversation("k", "ledger", 1, ["the ledger notes", "fine"], "/w/ledger")],
    )
    told: list[bool] = []
    choose = search.vector_scan

    def spy(*shape: Any) -> Scan:
        told.append(shape[7])  # index_only
        return choose(*shape)

    monkeypatch.setattr(search, "vector_scan", spy)
    found = gm.search_personal_memory("ledger notes", mode="vector", **filters)
    assert told == [index_only] and found.data.rows


def test_the_walk_of_an_owners_graph_keeps_more_candidates_as_its_own_graph_grows(
    gm: GhostMem, owner: str, tmp_path: Path
) -> None:
    """The vector leg's hnsw.ef_search follows the size of the owner's own graph (its messages of every tier, from
    the counts of migration 092), never another owner's: 100 at 100,000 messages, 100 more for each tenfold beyond
    (200 at a million) and as many fewer below, never fewer than the leg's depth (250 rows for 50 conversations)
    or, under a filter, than FILTERED_EF_SEARCH (75) or the most rows a filtered leg asks (250 for 50)."""
    import_generic(
        gm, tmp_path / "mine.jsonl", [conversation("c1", "plans", 1, ["the deploy plan", "ready"], "/a")]
    )

    def ef_search(limit: int = 10, platform: str | None = None) -> str:
        search._kept_plans.clear()  # count() writes the counts alone: the owner's token stays
        with gm.connection() as conn:
            args = SearchPersonalMemoryArgs(query="deploy plan", limit=limit, platform=platform)
            run_sync(search_personal_memory(gm.context, args), conn, gm.embedder)
            row = conn.execute("SHOW hnsw.ef_search").fetchone()
            conn.rollback()
        assert row is not None
        return str(row[0])

    def count(who: str, tier: str, n: int) -> None:
        with gm.connection() as conn:
            conn.execute(
                "INSERT INTO ghostmem.message_counts (owner, tier, platform, project, n)"
                " VALUES (%s, %s, 'generic', 'counted', %s)"
                " ON CONFLICT (owner, tier, platform, project) DO UPDATE SET n = EXCLUDED.n",
                (who, tier, n),
            )
            conn.commit()

    assert ef_search() == "100"
    assert ef_search(platform="generic") == "75"  # a filter: its leg asks 20 or 50 rows of a small graph
    count(f"{owner}-large", "personal", 10_000_000)  # another owner's graph
    assert ef_search() == "100"
    assert ef_search(platform="generic") == "75"
    for n, expected, filtered in (
        (99_990, "100", "100"),
        (999_990, "200", "200"),
        (9_999_990, "300", "300"),
        (316_218, "150", "150"),
        (70_790, "100", "85"),  # 100 - 100 x 0.15
        (56_240, "100", "75"),
        (20_000, "100", "75"),
    ):
        count(owner, "library", n)  # the graph holds the owner's messages of every tier
        assert (ef_search(), ef_search(platform="generic")) == (expected, filtered), n
    assert ef_search(limit=50) == "250"
    assert ef_search(limit=50, platform="generic") == "250"


def _statement(gm: GhostMem, args: SearchPersonalMemoryArgs, *disabled: str) -> tuple[str, str]:
    """The search's main statement and its generic plan (in the search's transaction, with its settings, and the
    ``disabled`` plan types off)."""
    seen: list[tuple[str, Any]] = []
    with gm.connection() as conn:
        run_sync(recording(search_personal_memory(gm.context, args), conn, seen), conn, gm.embedder)
        for setting in disabled:
            conn.execute(f"SET LOCAL {setting} = off".encode())
        return seen[-1][0], generic_plan(conn, seen[-1][0])


def test_a_scope_is_read_through_its_index(
    server_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exact scan reads the compact vectors of the owner's partition, and the quantized scan their bits, through
    the index of its scope — the owner's (owner, tier, ts) range, or the project's and titled conversations' entries
    — never a sequential scan, a time window's or a platform's bits from the index alone (migration 164: the table
    vacuumed every thousand rows written); the quantized scan's candidates are read again through the primary key
    of the owner's partition; where the model says the scope is large, the vector leg walks the HNSW graph of the owner's
    partition."""
    with fresh_database(server_dsn, "ghostmem_exact") as dsn:
        big = [
            conversation(f"b{i}", f"b {i}", i % 30, [f"routine deploy log {i}", "fine"]) for i in range(300)
        ]
        small = [
            conversation(f"s{i}", f"s {i}", i, [f"deploy of tiny {i}", "all went well"], "tiny")
            for i in range(5)
        ]
        small.append(conversation("t", "notes on tiny", 2, ["deploy notes", "the tiny deploy went well"]))
        for owner, convs in (("big", big), ("small", small)):
            with GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder()) as gm:
                import_generic(gm, tmp_path / f"{owner}.jsonl", convs)
        with GhostMem(dsn=dsn, owner="small", embedder=HashEmbedder()) as gm:
            # the conversations spread over four platforms, three of small's on one
            with gm.connection() as conn:
                conn.execute(
                    "UPDATE ghostmem.messages SET platform = CASE WHEN conv_id IN ('s0', 's1', 't') THEN 'codex'"
                    " ELSE (ARRAY['generic', 'codex', 'gemini', 'cursor'])[1 + abs(hashtext(conv_id)) % 4] END"
                )
            # the tables analysed, the bits' pages all-visible as autovacuum leaves them (164: every 1,000 rows)
            with psycopg.connect(dsn, autocommit=True) as conn:
                for table in ("messages", "message_vectors", "message_bits"):
                    conn.execute(f"VACUUM ANALYZE ghostmem.{table}".encode())
                assert conn.execute(
                    "SELECT reloptions FROM pg_class WHERE oid = 'ghostmem.message_bits'::regclass"
                ).fetchone() == (["autovacuum_vacuum_insert_scale_factor=0"],)
            text, _ = _statement(gm, SearchPersonalMemoryArgs(query="tiny deploy"))
            assert "FROM ghostmem.message_vectors m" in text  # the model's choice for 12 rows
            # a platform's scope is its rows (counted by 092), within a time window its share of them
            scopes: list[int] = []

            def exact(scope_rows: int, *_: Any) -> str:
                scopes.append(scope_rows)
                return "exact"

            monkeypatch.setattr(search, "vector_scan", exact)
            _statement(gm, SearchPersonalMemoryArgs(query="tiny deploy", platform="codex"))
            _statement(gm, SearchPersonalMemoryArgs(query="tiny deploy", platform="codex", days=3))
            _statement(gm, SearchPersonalMemoryArgs(query="tiny deploy", platform="codex", project="tiny"))
            with gm.connection() as conn:
                codex, total, window, project = conn.execute(
                    "SELECT count(*) FILTER (WHERE platform = 'codex'), count(*), count(*) FILTER (WHERE (ts AT TIME ZONE"
                    " 'UTC')::date >= ((now() - interval '3 days') AT TIME ZONE 'UTC')::date),"
                    " count(*) FILTER (WHERE project = 'tiny' OR conv_id = 't')"
                    " FROM ghostmem.messages WHERE owner = 'small'"
                ).fetchone() or (0, 0, 0, 0)
            assert 0 < codex < total and 0 < window < total
            assert scopes == [codex, math.ceil(codex * window / total), project]  # a project: its own rows
            with gm.connection() as conn:  # the indexes of the owner's partition of the compact vectors (163)
                named = {
                    name: owner_index(conn, name, "small")
                    for name in (
                        "message_vectors_pkey",
                        "message_vectors_owner_ts",
                        "message_vectors_owner_platform_ts",
                        "message_vectors_owner_project_ts",
                        "message_vectors_owner_conv",
                        "message_vectors_embedding_hnsw",
                    )
                }
            graph = named["message_vectors_embedding_hnsw"]
            digest = named["message_vectors_pkey"].removeprefix("message_vectors_").removesuffix("_pkey")
            for scan in ("exact", "quantized"):
                monkeypatch.setattr(search, "vector_scan", lambda *_, scan=scan: scan)
                for filters, index in (
                    (
                        {},
                        "on message_bits_",
                    ),  # the owner's rows: any of its indexes (all lead with owner, tier)
                    # a time window's and a platform's bits from the index alone (migration 164)
                    ({"days": 7}, "Index Only Scan using message_bits_owner_ts"),
                    ({"platform": "codex"}, "Index Only Scan using message_bits_owner_platform_ts"),  # 120
                    (
                        {"platform": "codex", "days": 7},
                        "Index Only Scan using message_bits_owner_platform_ts",
                    ),
                    (
                        {"project": "tiny"},
                        "message_bits_owner_project_ts",
                    ),  # last: with its titled conversation
                ):
                    text, plan = _statement(gm, SearchPersonalMemoryArgs(query="tiny deploy", **filters))
                    vec_scan = plan.split("CTE vec_scan", 1)[1].split("\n  CTE ", 1)[0]
                    assert "FROM ghostmem.message_vectors" in text and "Seq Scan" not in plan, (filters, plan)
                    assert graph not in plan, (filters, plan)
                    # nor when sorting looks dear: an exact or quantized scan never becomes a walk of the graph
                    # (whose order is the distance's: the generic plan of a narrow project's exact scan at 10,000
                    # messages walked it, 7.5 against 1.9 ms)
                    _, unsorted = _statement(
                        gm, SearchPersonalMemoryArgs(query="tiny deploy", **filters), "enable_sort"
                    )
                    assert graph not in unsorted, (filters, unsorted)
                    # the compact vectors of the owner's partition alone, pruned when planned: the planner reads
                    # its 12 rows through the index it likes best (at scale the scope's, as for the bits)
                    assert "Subplans Removed" not in plan and "message_vectors_" in vec_scan, (filters, plan)
                    read = re.findall(r"message_vectors_([0-9a-f]{8,})", plan)
                    assert all(digest.startswith(part) for part in read), (filters, plan)
                    if scan == "quantized":
                        # a window's or a platform's cut from its sample (migration 200), the rows within it
                        # from the covering index; the owner's whole store and a project sorted whole
                        sampled = "days" in filters or "platform" in filters
                        bits = plan.split("CTE vec_scan", 1)[0] if sampled else vec_scan
                        assert "FROM ghostmem.message_bits m" in text and index in bits, (filters, plan)
                        assert ("vec_cut" in text) == sampled, (filters, text)
                        if sampled:
                            sample = index.replace("Index Only Scan using ", "") + "_sample"
                            assert f"Index Only Scan using {sample} " in bits, (filters, plan)
                            assert f"{index} " in bits.split("CTE vec_near", 1)[1], (filters, plan)
                        assert f"{named['message_vectors_pkey']}" in vec_scan, vec_scan  # the candidates
            # the titled conversation's bits through the conversation index, with the project's
            assert "message_bits_owner_conv" in vec_scan and "BitmapOr" in vec_scan, vec_scan
            # as for a scope the model finds large: the HNSW scan of the owner's partition (which index the planner
            # picks for it at this size is its cost choice; test_search.py pins HNSW with sorts made expensive)
            monkeypatch.setattr(search, "vector_scan", lambda *_: "hnsw")
            text, plan = _statement(gm, SearchPersonalMemoryArgs(query="tiny deploy", project="tiny"))
            assert "FROM ghostmem.message_vectors m" in text and "message_bits" not in text
            assert "m.owner = 'small'" in text and "<=> %(qvec)s::vector::halfvec" in text


def _nearest(
    conn: Connection[Any], owner: str, query: Any, where: str, params: dict[str, Any]
) -> list[tuple[int, float]]:
    """(id, distance) of the owner's 10 nearest messages to ``query`` within ``where``, by a full scan of every
    stored vector (no index)."""
    conn.execute("SET LOCAL enable_indexscan = off")
    conn.execute("SET LOCAL enable_bitmapscan = off")
    rows = conn.execute(
        "SELECT m.id, m.embedding <=> %(q)s FROM ghostmem.messages m JOIN ghostmem.conversations c"
        " ON c.owner = m.owner AND c.tier = m.tier AND c.conv_id = m.conv_id"
        f" WHERE m.owner = %(owner)s AND m.embedding IS NOT NULL AND {where}"
        " ORDER BY 2, 1 LIMIT 10",
        {"owner": owner, "q": query, **params},
    ).fetchall()
    return [(r[0], float(r[1])) for r in rows]


def test_the_exact_and_quantized_scans_find_the_nearest_messages(
    gm: GhostMem, owner: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compact vectors (halfvec), and their bits with enough candidates, give the nearest messages of a full
    scan of the stored vectors, as the HNSW path does, under every filter: the same distances (halfvec rounds each
    by less than 1e-3, so messages at the same distance may come in another order). With fewer candidates than
    the scope the quantized scan still returns the owner's messages within the filter, ordered by their true
    distance. Another owner's messages, the query itself (Hamming distance 0) on the platform searched, never come
    back."""

    def text(i: int) -> str:  # a mix of the query's words and others: distances spread out
        words = (
            ["deploy"] * (1 + i % 4) + ["plan"] * (1 + i % 3) + ["number"] * (1 + i % 5) + ["so"] * (i % 7)
        )
        return " ".join([*words, f"w{i}", f"x{i}"])

    convs = [
        conversation(f"c{i}", f"talk {i}", i % 20, [text(i), text(i + 40)], "alpha" if i % 3 == 0 else "beta")
        for i in range(40)
    ]
    convs.append(conversation("titled", "alpha review", 1, ["deploy review of the week", "all green"]))
    import_generic(gm, tmp_path / "mine.jsonl", convs)
    # half of them on another platform: a platform's scope is its own index range
    with gm.connection() as conn:
        conn.execute(
            "UPDATE ghostmem.messages SET platform = 'codex' WHERE owner = %s AND conv_id ~ '^c[0-9]*[13579]$'",
            (gm.context.owner,),
        )
    query = "deploy deploy deploy plan plan number"
    with GhostMem(dsn=gm.dsn, owner=f"{owner}-mallory", embedder=HashEmbedder()) as mallory:
        import_generic(
            mallory, tmp_path / "hers.jsonl", [conversation("m", "alpha", 1, [query, query], "alpha")]
        )
    qvec = db.vector(gm.embedder.embed_query(query))
    cases: list[tuple[dict[str, Any], str, dict[str, Any]]] = [
        ({}, "true", {}),
        ({"days": 5}, "m.ts >= now() - interval '5 days'", {}),
        ({"platform": "generic"}, "m.platform = 'generic'", {}),
        ({"project": "alpha"}, "(m.project ILIKE %(p)s OR c.title ILIKE %(p)s)", {"p": "%alpha%"}),
    ]
    for filters, where, params in cases:
        args = SearchPersonalMemoryArgs(query=query, mode="vector", limit=2, **filters)
        for scan, candidates in (("exact", 20), ("quantized", 20), ("hnsw", 20), ("quantized", 2)):
            monkeypatch.setattr(search, "vector_scan", lambda *_, scan=scan: scan)
            monkeypatch.setattr(search, "QUANTIZED_CANDIDATES", candidates)  # 20 = every row of these scopes
            seen: list[tuple[str, Any]] = []
            with gm.connection() as conn:
                program = recording(search_messages(gm.context, args, depth=10, floor=-1), conn, seen)
                rows = sorted(run_sync(program, conn, gm.embedder), key=lambda r: r["vec_rank"])
                expected = _nearest(conn, gm.context.owner, qvec, where, params)
                true = dict(  # the stored vectors' distances of what came back, if the owner's
                    conn.execute(
                        "SELECT id, embedding <=> %s FROM ghostmem.messages WHERE owner = %s AND id = ANY(%s)",
                        (qvec, gm.context.owner, [r["id"] for r in rows]),
                    ).fetchall()
                )
                kept = {  # the owner's messages within the filter
                    r[0]
                    for r in conn.execute(
                        "SELECT m.id FROM ghostmem.messages m JOIN ghostmem.conversations c ON c.owner = m.owner"
                        f" AND c.tier = m.tier AND c.conv_id = m.conv_id WHERE m.owner = %(owner)s AND {where}",
                        {"owner": gm.context.owner, **params},
                    )
                }
            assert ("ghostmem.message_bits" in seen[-1][0]) == (scan == "quantized")
            assert "ghostmem.message_vectors" in seen[-1][0]
            assert len(rows) == len(expected) == 10, (filters, scan)
            assert {r["id"] for r in rows} <= kept and set(true) == {r["id"] for r in rows}, (filters, scan)
            if candidates < 20:  # 20 of the scope's 40-82 rows ranked again: ordered by their true distance
                assert len(kept) > 20
                assert [r["id"] for r in rows] == sorted(true, key=lambda i: (true[i], i)), filters
                assert all(abs(r["vec_dist"] - true[r["id"]]) < 1e-3 for r in rows), filters
                continue
            for row, (_, distance) in zip(rows, expected, strict=True):
                assert abs(row["vec_dist"] - distance) < 1e-3, (filters, scan)
                assert true[row["id"]] <= expected[-1][1] + 1e-3, (filters, scan)


def _bits_scans(node: dict[str, Any]) -> Iterator[int]:
    """The loops of every scan of the quantized bits under ``node`` of an ``EXPLAIN (ANALYZE, FORMAT JSON)``, in
    the plan's order (0: never run)."""
    if node.get("Relation Name") == "message_bits":
        yield int(node["Actual Loops"])
    for child in node.get("Plans", []):
        yield from _bits_scans(child)


def test_a_quantized_scan_sorts_only_the_rows_within_its_samples_cut(
    gm: GhostMem, owner: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A time window's or a platform's quantized scan (migration 200) takes its cut from the scope's sample (the
    rows whose id hashes to 0 modulo 16) and sorts only the rows within it: its candidates are still the scope's
    nearest by Hamming distance, ties by id, and of those the ones nearest by the query's planes (query_planes) are
    ranked again, so the leg returns what a direct computation over every compact vector of the scope gives,
    whether the cut holds enough rows (the whole sort never runs), too few (it runs instead) or there is none (a
    sample smaller than the cut's rank). Another owner's messages, copies of the query (Hamming distance 0) in the
    same window and on the same platform, neither come back nor narrow the cut."""

    def text(i: int) -> str:  # a query word or none and others: Hamming distances 1-6 from the query's bits
        return " ".join(["deploy"] * (i % 2) + [f"w{i % 37}", f"x{i % 11}", f"y{i % 7}", f"z{i}"])

    convs = [
        conversation(f"c{i}", f"talk {i}", i % 20, [text(i), text(i + 500), text(i + 900)])
        for i in range(160)
    ]
    import_generic(gm, tmp_path / "mine.jsonl", convs)
    query = "deploy plan"
    with GhostMem(dsn=gm.dsn, owner=f"{owner}-mallory", embedder=HashEmbedder()) as mallory:
        hers = [conversation(f"m{i}", "mine", i % 20, [query, query, query]) for i in range(80)]
        import_generic(mallory, tmp_path / "hers.jsonl", hers)
    with gm.connection() as conn:
        for who in (owner, f"{owner}-mallory"):  # half of each owner's conversations on another platform
            conn.execute(
                "UPDATE ghostmem.messages SET platform = 'codex' WHERE owner = %s AND conv_id ~ '[13579]$'",
                (who,),
            )
    qvec = db.vector(gm.embedder.embed_query(query))
    monkeypatch.setattr(search, "vector_scan", lambda *_: "quantized")
    monkeypatch.setattr(search, "QUANTIZED_RERANKED", 1)  # 10 of the candidates ranked again (10 rows asked)
    planes = search.query_planes(qvec)

    def plane_distance(bits: str) -> float:  # as _PLANE_DISTANCE adds them up
        total = 0.0
        for b in range(search.QUANTIZED_PLANES):
            plane, weight = str(planes[f"plane{b}"]), float(planes[f"weight{b}"])
            total += sum(x != y for x, y in zip(plane, bits, strict=True)) * weight
        return total

    for filters, where in (
        ({"days": 30}, "v.ts >= now() - interval '30 days'"),
        ({"platform": "codex"}, "v.platform = 'codex'"),
        ({"platform": "codex", "days": 10}, "v.platform = 'codex' AND v.ts >= now() - interval '10 days'"),
    ):
        # 20 or 200 candidates of the scope's 240-480 rows (10 rows asked), the cut at the sample's share of them,
        # at its nearest row, past its last
        for per_row, margin, path in ((2, 2, "cut"), (20, 0, "whole"), (2, 1000, "no cut")):
            monkeypatch.setattr(search, "QUANTIZED_CANDIDATES", per_row)
            monkeypatch.setattr(search, "QUANTIZED_SAMPLE_MARGIN", margin)
            candidates = search.quantized_candidates(10)
            rank = search.quantized_sample_rank(candidates)
            args = SearchPersonalMemoryArgs(query=query, mode="vector", limit=2, **filters)
            seen: list[tuple[str, Any]] = []
            with gm.connection() as conn:
                program = recording(search_messages(gm.context, args, depth=10, floor=-1), conn, seen)
                rows = sorted(run_sync(program, conn, gm.embedder), key=lambda r: r["vec_rank"])
                (plan,) = conn.execute(
                    f"EXPLAIN (ANALYZE, FORMAT JSON) {seen[-1][0]}".encode(), seen[-1][1]
                ).fetchone() or [None]
                conn.execute("SET LOCAL enable_indexscan = off")
                conn.execute("SET LOCAL enable_indexonlyscan = off")
                conn.execute("SET LOCAL enable_bitmapscan = off")
                conn.execute("SET LOCAL enable_seqscan = on")
                direct = f"""
                    SELECT v.id, binary_quantize(v.embedding) <~> binary_quantize(%(q)s::halfvec) AS d,
                           (hashint8(v.id) & 15) = 0 AS sampled, binary_quantize(v.embedding)::text AS bits
                    FROM ghostmem.message_vectors v WHERE v.owner = %(owner)s AND {where}"""
                scope = conn.execute(direct + " ORDER BY 2, 1", {"q": qvec, "owner": owner}).fetchall()
                nearest = sorted(scope[:candidates], key=lambda r: (plane_distance(r[3]), r[0]))[:10]
                expected = [
                    r[0]
                    for r in conn.execute(
                        "SELECT id FROM ghostmem.message_vectors WHERE owner = %s AND id = ANY(%s)"
                        " ORDER BY cosine_distance(embedding, %s::halfvec), id LIMIT 10",
                        (owner, [r[0] for r in nearest], qvec),
                    )
                ]
            sample = [d for _, d, sampled, _ in scope if sampled]
            within = sum(d <= sample[rank] for _, d, _, _ in scope) if rank < len(sample) else None
            # each path is the one this case takes
            assert {
                "cut": within is not None and within >= candidates,
                "whole": within is not None and within < candidates,
                "no cut": within is None,
            }[path], (filters, path, within, len(sample))
            assert [r["id"] for r in rows] == expected, (filters, path)
            # the sample, the rows within its cut, and the whole scope sorted only when they are too few
            assert list(_bits_scans(plan[0]["Plan"])) == [1, 1, int(path == "whole")], (filters, path, plan)


def test_an_owners_word_fetches_read_only_its_own_entries(server_dsn: str, tmp_path: Path) -> None:
    """Beside an owner with 300 messages holding the query's words, a small owner's lexical fetches read only its
    own 5 (the words are keyed by owner in the GIN index, migration 102) and find the same as alone."""
    with fresh_database(server_dsn, "ghostmem_words") as dsn:
        big = [conversation(f"b{i}", f"b {i}", 1, [f"routine deploy log {i}", "fine"]) for i in range(300)]
        small = [conversation(f"s{i}", f"s {i}", 1, [f"routine deploy of tiny {i}", "ok"]) for i in range(5)]
        results, scanned = {}, {}
        for owners in (("small",), ("big", "small")):  # alone, then beside the big owner
            for owner in owners:
                with GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder()) as gm:
                    import_generic(gm, tmp_path / f"{owner}.jsonl", big if owner == "big" else small)
            # As autovacuum does after an import (a table never analysed at all is planned as if of a few rows), and
            # before it could: the words still in the GIN's pending list then go to its tree. Left to autovacuum,
            # its merge could run during the EXPLAIN: once the small owner's fetch read 10 entries alone (a full
            # suite on a loaded machine; likely its 5 counted both in the pending list and in the tree).
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE ghostmem.messages")
            with GhostMem(dsn=dsn, owner="small", embedder=HashEmbedder()) as gm:
                args = SearchPersonalMemoryArgs(query="routine deploy", mode="lexical")
                seen: list[tuple[str, Any]] = []
                with gm.connection() as conn:
                    program = recording(search_personal_memory(gm.context, args), conn, seen)
                    results[owners] = [r.conv_id for r in run_sync(program, conn, gm.embedder).rows]
                    text, params = seen[-1]
                    explain = f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {text}"
                    rows = conn.execute(explain.encode(), params)
                    plan = "\n".join(r[0] for r in rows)
            fetch = plan.split("CTE lex_all", 1)[1].split("\n  CTE ", 1)[0]
            assert "Bitmap Index Scan on messages_owner_words" in fetch, plan
            scanned[owners] = (
                fetch.split("Bitmap Index Scan on messages_owner_words", 1)[1].split("rows=")[1].split()[0]
            )
        assert results[("small",)] == results[("big", "small")] and len(results[("small",)]) == 5
        # the index entries read, as alone: not the big owner's 300 matches too
        assert scanned[("small",)] == scanned[("big", "small")], scanned


def test_owners_named_alike_or_with_quotes_keep_their_own_words(pg_dsn: str, tmp_path: Path) -> None:
    """An owner's name is hashed into its words' key: names with quotes, backslashes, colons or one another's
    prefix neither break the index or the query nor reach one another's messages, in any mode."""
    names = ["o'brien", "o'brien\\:x", "o'brien:", "ja:o"]
    for i, name in enumerate(names):
        with GhostMem(dsn=pg_dsn, owner=name, embedder=HashEmbedder()) as gm:
            convs = [
                conversation(f"c{i}", f"mine {i}", 1, [f"quarterly deploy ledger {i}", "マーラーの交響曲"])
            ]
            import_generic(gm, tmp_path / f"{i}.jsonl", convs)
    for i, name in enumerate(names):
        with GhostMem(dsn=pg_dsn, owner=name, embedder=HashEmbedder()) as gm:
            for mode in ("lexical", "hybrid", "vector"):
                for query in ("quarterly deploy ledger", "交響曲", "o'brien:x \\ ' :*"):
                    rows = gm.search_personal_memory(query, mode=mode).data.rows
                    assert {r.conv_id for r in rows} <= {f"c{i}"}, (name, mode, query)
            assert [
                r.conv_id for r in gm.search_personal_memory("quarterly ledger", mode="lexical").data.rows
            ] == [f"c{i}"]


def test_the_titles_are_searched_once_and_only_the_owners_conversations_of_a_title_come_back(
    gm: GhostMem, owner: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project filter's titled conversations are found by the plan statement (one trigram search of the titles)
    and handed to the search statement as ids, which never reads the titles itself. The ids are the owner's: another
    owner's conversation of the same id whose title matches brings back neither its messages nor the owner's
    conversation of that id (whose title and project do not match), in every mode and whichever scan the vector
    leg takes; the owner's own titled conversation comes back."""
    said = ["deploy plan for the release", "the deploy plan is ready"]
    mine = [
        conversation("twin", "plain talk", 1, said, "/src/other"),
        conversation("mine", "Kestrel review", 2, said, "/src/other"),
        *[conversation(f"c{i}", f"talk {i}", 1 + i, said, "/src/other") for i in range(6)],
    ]
    import_generic(gm, tmp_path / "mine.jsonl", mine)
    with GhostMem(dsn=gm.dsn, owner=f"{owner}-mallory", embedder=HashEmbedder()) as mallory:
        hers = [conversation("twin", "kestrel plans", 1, said, "/src/kestrel-not")]
        import_generic(mallory, tmp_path / "hers.jsonl", hers)
    for scan in ("exact", "quantized", "hnsw"):
        monkeypatch.setattr(search, "vector_scan", lambda *_, scan=scan: scan)
        for mode in ("lexical", "hybrid", "vector"):
            args = SearchPersonalMemoryArgs(query="deploy plan", project="kestrel", mode=mode, limit=20)
            seen: list[tuple[str, Any]] = []
            search._kept_plans.clear()  # the plan statement runs (test_kept_plans.py)
            with gm.connection() as conn:
                result = run_sync(
                    recording(search_personal_memory(gm.context, args), conn, seen), conn, gm.embedder
                )
                # (an EXPLAIN's text run more than five times would be prepared: the plan statement's once a mode)
                plans = [
                    generic_plan(conn, text) if scan == "exact" or i else ""
                    for i, (text, _) in enumerate(seen)
                ]
            assert [r.conv_id for r in result.rows] == ["mine"], (scan, mode)
            assert seen[0][1]["owner"] == gm.owner and len(seen) == 2
            assert scan != "exact" or "title ~~*" in plans[0], plans[0]  # the one search of the titles
            assert "title ~~*" not in plans[1] and "title_trgm" not in plans[1], (scan, mode, plans[1])
            assert "title ILIKE" in seen[0][0] and "title ILIKE" not in seen[1][0], (scan, mode)


def test_a_project_is_matched_literally_by_every_scan_and_leg(
    gm: GhostMem, owner: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project filter is a literal, case-insensitive substring of the project or of the conversation's title, in
    every mode and whichever scan the vector leg takes (its exact and quantized scans list the owner's matching
    projects from the counts, the HNSW scan and the lexical leg check each row): `%`, `_` and a backslash match
    only themselves (as wildcards they would match every conversation), the longest project the argument takes
    (200 four-byte characters) names nothing and is no error, a project stored shortened (longer than 1,000
    bytes) is found by its start, and another owner's conversation of the same project never comes back."""
    said = ["deploy plan for the release", "the deploy plan is ready"]
    hostile = "/src/100%_Done\\x"
    deep = "/src/" + "deep/" * 400  # 2,005 bytes: stored shortened (limits.STORED_PROJECT_BYTES)
    convs = [
        conversation("pct", "plain", 1, said, hostile),
        conversation("titled", "review of 100%_done\\X", 2, said, "/src/other"),
        conversation("long", "plain too", 3, said, deep),
        *[conversation(f"c{i}", f"talk {i}", 1 + i, said, f"/src/alpha{i}") for i in range(12)],
    ]
    import_generic(gm, tmp_path / "mine.jsonl", convs)
    with GhostMem(dsn=gm.dsn, owner=f"{owner}-mallory", embedder=HashEmbedder()) as mallory:
        import_generic(mallory, tmp_path / "hers.jsonl", [conversation("m", hostile, 1, said, hostile)])
    expected = {
        "%": {"pct", "titled"},
        "_": {"pct", "titled"},
        "\\": {"pct", "titled"},
        "100%_done\\x": {"pct", "titled"},
        "0%": {"pct", "titled"},
        "\U0001d518" * 200: set(),
        deep[:200]: {"long"},
        "ALPHA1": {"c1", "c10", "c11"},
    }
    for scan in ("exact", "quantized", "hnsw"):
        monkeypatch.setattr(search, "vector_scan", lambda *_, scan=scan: scan)
        for mode in ("lexical", "hybrid", "vector"):
            for project, wanted in expected.items():
                result = gm.search_personal_memory("deploy plan", project=project, mode=mode, limit=20)
                assert {r.conv_id for r in result.data.rows} == wanted, (scan, mode, project)
