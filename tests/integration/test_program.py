"""The sans-IO program driver against a real connection."""

from __future__ import annotations

import psycopg
from ghostmem import GhostMem
from ghostmem.program import Query, Tuples, run_async, run_sync


def test_program_driver_runs_queries_in_one_transaction(gm: GhostMem) -> None:
    def program():  # type: ignore[no-untyped-def]
        yield Query("CREATE TEMP TABLE t (x int) ON COMMIT DROP", fetch="none")
        yield Query("INSERT INTO t VALUES (%s), (%s)", (1, 2), fetch="none")
        rows = yield Query("SELECT sum(x) AS s FROM t")
        return rows[0]["s"]

    with gm.connection() as conn:
        assert run_sync(program(), conn, gm.embedder) == 3


def _two_rows():  # type: ignore[no-untyped-def]
    found = yield Query("SELECT 1 AS n, 'x' AS word UNION ALL SELECT 2, 'y'", fetch="tuples")
    return found


def test_a_query_fetches_its_rows_as_tuples_with_their_columns_places(gm: GhostMem) -> None:
    """``fetch="tuples"``: the rows as tuples (no dict per row), and where each named column is in them."""
    with gm.connection() as conn:
        found = run_sync(_two_rows(), conn, gm.embedder)
    assert found == Tuples({"n": 0, "word": 1}, [(1, "x"), (2, "y")])


async def test_the_async_driver_fetches_tuples_alike(pg_dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        found = await run_async(_two_rows(), conn, None)
    assert found == Tuples({"n": 0, "word": 1}, [(1, "x"), (2, "y")])
