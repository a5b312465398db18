"""The sans-IO program driver against a real connection."""

from __future__ import annotations

from ghostmem import GhostMem
from ghostmem.program import Query, run_sync


def test_program_driver_runs_queries_in_one_transaction(gm: GhostMem) -> None:
    def program():  # type: ignore[no-untyped-def]
        yield Query("CREATE TEMP TABLE t (x int) ON COMMIT DROP", fetch="none")
        yield Query("INSERT INTO t VALUES (%s), (%s)", (1, 2), fetch="none")
        rows = yield Query("SELECT sum(x) AS s FROM t")
        return rows[0]["s"]

    with gm.connection() as conn:
        assert run_sync(program(), conn, gm.embedder) == 3
