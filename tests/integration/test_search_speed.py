"""What the search's speed relies on: per-owner message counts kept by the database, and the plans they lead to."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ghostmem import GhostMem, HashEmbedder
from ghostmem.args import SearchPersonalMemoryArgs
from ghostmem.program import run_sync
from ghostmem.search import search_personal_memory
from psycopg import Connection
from support.conversations import conversation, import_generic
from support.databases import fresh_database
from support.statements import generic_plan, recording

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


def test_message_counts_follow_every_write(own_dsn: str, tmp_path: Path) -> None:
    """Imports (two owners, two tiers), appends, a re-import, forgetting (a cascade of deletes) and TRUNCATE."""
    with (
        GhostMem(dsn=own_dsn, owner="ann", embedder=HashEmbedder()) as ann,
        GhostMem(dsn=own_dsn, owner="bob", embedder=HashEmbedder()) as bob,
    ):
        first = [conversation(f"c{i}", f"talk {i}", i, [f"hello {i}", "hi", "more"]) for i in range(5)]
        import_generic(ann, tmp_path / "a.jsonl", first)
        import_generic(
            ann, tmp_path / "lib.jsonl", [conversation("lib", "manual", 1, ["a", "b"])], tier="library"
        )
        import_generic(bob, tmp_path / "b.jsonl", [conversation("b0", "bob", 1, ["x", "y"])])
        # the same file again with one conversation grown: upserts count once, new messages are added
        first[0]["messages"].append(
            {"id": "c0-new", "role": "user", "text": "again", "ts": "2026-01-01T00:00:00Z"}
        )
        import_generic(ann, tmp_path / "a.jsonl", first)
        with ann.connection() as conn:
            kept, actual = _counts(conn)
            assert kept == actual
            assert _owner_totals(conn) == {
                ("ann", "personal"): 16,
                ("ann", "library"): 2,
                ("bob", "personal"): 2,
            }
            # a project moved (as an import does when a conversation's project changes) and a time corrected
            conn.execute(
                "UPDATE ghostmem.messages SET project = 'moved' WHERE owner = 'ann' AND conv_id = 'c2'"
            )
            conn.execute("UPDATE ghostmem.messages SET ts = ts - interval '400 days' WHERE conv_id = 'c3'")
            conn.execute("UPDATE ghostmem.messages SET embedding = embedding")  # changes nothing counted
            kept, actual = _counts(conn)
            assert kept == actual
        ann.forget("c1")
        with ann.connection() as conn:
            kept, actual = _counts(conn)
            assert kept == actual and _owner_totals(conn)[("ann", "personal")] == 13
            conn.execute("TRUNCATE ghostmem.messages CASCADE")
            assert _counts(conn) == (set(), set())


def test_the_store_size_of_the_idf_is_read_from_the_counts(gm: GhostMem, tmp_path: Path) -> None:
    """A query whose words are not all in one message fetches word by word; its idf needs the owner's store size,
    which comes from one row of message_counts (not from counting up to N_CAP rows of an index)."""
    import_generic(
        gm,
        tmp_path / "w.jsonl",
        [conversation(f"w{i}", f"w {i}", 1, [f"alpha note {i}", f"beta note {i}"]) for i in range(30)],
    )
    args = SearchPersonalMemoryArgs(query="alpha beta", mode="lexical")
    seen: list[tuple[str, Any]] = []
    with gm.connection() as conn:
        result = run_sync(recording(search_personal_memory(gm.context, args), conn, seen), conn, gm.embedder)
        text, params = seen[-1]  # explained in the search's transaction, with its settings
        rows = conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {text}".encode(), params)
        plan = "\n".join(r[0] for r in rows)
    assert result.rows  # each word matches alone: found word by word
    lex_n = plan.split("CTE lex_n", 1)[1].split("CTE lex_idf", 1)[0]
    assert "message_counts" in lex_n and "on messages" not in lex_n
    assert "never executed" not in lex_n.split("message_counts", 1)[1].splitlines()[0]


def _vector_depth_chosen(gm: GhostMem, **filters: Any) -> int:
    """The number of rows the search statement asks its HNSW scan for (the LIMIT of ``vec_scan``)."""
    seen: list[tuple[str, Any]] = []
    args = SearchPersonalMemoryArgs(query="deploy notes", limit=10, **filters)
    with gm.connection() as conn:
        run_sync(recording(search_personal_memory(gm.context, args), conn, seen), conn, gm.embedder)
    statement = seen[-1][0]
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
    assert _vector_depth_chosen(gm, project="nowhere") == 50
    assert _vector_depth_chosen(gm, days=3650, mode="vector") == 50  # alone, the vector leg fills the results
    with gm.connection() as conn:  # another owner's messages count for nothing
        conn.execute(
            "INSERT INTO ghostmem.message_counts VALUES ('someone-else', 'personal', 'generic', 'tiny', 1000000)"
        )
    assert _vector_depth_chosen(gm, project="tiny") == 50


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
                    assert "Bitmap Index Scan on messages_tsv" in plan, plan
