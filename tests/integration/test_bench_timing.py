"""What the speed benches measure, on a real server: how bench.peers times PGVectorStore's statements.

The figures themselves mean nothing here; what is checked is what each instrument covers.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from support.databases import fresh_database

from bench import peers


@pytest.fixture(scope="module")
def vector_dsn(server_dsn: str) -> Iterator[str]:
    """A database with pgvector, as PGVectorStore's."""
    with fresh_database(server_dsn, "ghostmem_bench_timing") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        yield dsn


def _run(engine: Any, statement: str) -> list[Any] | None:
    """One statement through the engine, as PGVectorStore runs its own (a connection of the pool, rows fetched)."""
    from sqlalchemy import text

    async def go() -> list[Any] | None:
        async with engine._pool.connect() as conn:
            result = await conn.execute(text(statement))
            return list(result.mappings().fetchall()) if result.returns_rows else None

    return engine._run_as_sync(go())  # type: ignore[no-any-return]


def test_pgvectorstores_statements_are_timed_until_their_rows_are_in_the_client(vector_dsn: str) -> None:
    """The compared clock covers the driver's execute and fetch; SQLAlchemy's cursor events (the earlier figure)
    cover them too, since its async adapter fetches every row inside its execute — with many rows to parse."""
    clock, events = peers.StatementClock(), peers.StatementClock()
    engine = peers._pgvectorstore_engine(vector_dsn, clock, events, None)
    try:
        _run(engine, "SELECT 1")  # connected: the connection's setup is not in what follows
        clock.take(), events.take()
        t0 = time.perf_counter()
        rows = _run(engine, "SELECT repeat('x', 200) AS t FROM generate_series(1, 50000)")
        wall = time.perf_counter() - t0
        assert rows is not None and len(rows) == 50000
        timed, by_events = clock.take(), events.take()
        assert 0 < timed <= by_events <= wall
        # a statement without rows (SET) counts from its execute to that execute's end
        _run(engine, "SET LOCAL statement_timeout = 0")
        assert clock.take() > 0
    finally:
        engine._run_as_sync(engine.close())


def test_a_statement_clock_pairs_starts_and_stops_in_order_and_take_resets() -> None:
    clock = peers.StatementClock()
    clock.start()
    time.sleep(0.02)
    clock.start()
    clock.stop()  # ends the first statement started (~20 ms)
    clock.add(1.0)
    total = clock.take()
    assert 1.015 <= total < 1.5 and clock.count == 2
    clock.stop()  # the second statement, never stopped before take: dropped, not added later
    assert clock.take() == 0.0
