"""What the speed benches measure, on a real server: the server's CPU time and a block's load (bench.server_cpu) and
how bench.peers times PGVectorStore's statements and sets up its iterative-scan reference.

The figures themselves mean nothing here; what is checked is what each instrument covers.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support.databases import fresh_database

from bench import peers
from bench.server_cpu import ServerCPU


@pytest.fixture(scope="module")
def vector_dsn(server_dsn: str) -> Iterator[str]:
    """A database with pgvector, as PGVectorStore's."""
    with fresh_database(server_dsn, "ghostmem_bench_timing") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        yield dsn


def _local_server() -> None:
    if os.environ.get("GHOSTMEM_TEST_DSN"):
        pytest.skip("GHOSTMEM_TEST_DSN's server may run elsewhere: its processes cannot be read here")


def _own_cpu(pid: int) -> float:
    """One process' CPU seconds, read on its own (the kernel's schedstat, in nanoseconds)."""
    return int((Path("/proc") / str(pid) / "schedstat").read_text().split()[0]) / 1e9


def test_the_servers_cpu_time_counts_a_busy_backends_work(server_dsn: str) -> None:
    _local_server()
    with psycopg.connect(server_dsn, autocommit=True) as conn, psycopg.connect(server_dsn) as busy:
        cpu = ServerCPU.of(conn)
        assert cpu is not None
        backend = busy.info.backend_pid
        ppid = int((Path("/proc") / str(backend) / "stat").read_text().rpartition(")")[2].split()[1])
        assert cpu.postmaster == ppid  # the reading connection's server is the busy connection's server
        before, own_before = cpu.seconds(), _own_cpu(backend)
        busy.execute("SELECT count(*) FROM generate_series(1, 3000000)").fetchone()
        used, own = cpu.seconds() - before, _own_cpu(backend) - own_before
    # CPU times, not wall time, so whatever the machine's load: the server's reading holds the busy backend's own
    # work, and beyond it only the server's other processes' (idle here: well under a second), not the machine's
    assert own > 0.05
    assert own <= used <= own + 1.0


def test_a_blocks_load_is_read_from_the_servers_processes_the_bench_threads_and_the_machine(
    server_dsn: str,
) -> None:
    _local_server()
    with psycopg.connect(server_dsn, autocommit=True) as conn, psycopg.connect(server_dsn) as busy:
        cpu = ServerCPU.of(conn)
        assert cpu is not None
        before = cpu.snapshot()
        done = threading.Event()
        # a thread started in the block, as PGVectorStore's engine runs its searches on its event loop's thread
        worker = threading.Thread(target=lambda: (sum(range(2_000_000)), done.wait(30)))
        worker.start()
        busy.execute("SELECT count(*) FROM generate_series(1, 2000000)").fetchone()
        after = cpu.snapshot()
        done.set()
        worker.join()
        backend = busy.info.backend_pid
    assert any(pid == backend for pid, _ in after.server_waits)
    assert any(tid == worker.native_id for tid, _ in after.bench_waits)
    assert any(tid == threading.get_native_id() for tid, _ in after.bench_waits)
    block = after.since(before)
    assert block.server_wait is not None and block.server_wait >= 0
    assert block.bench_wait is not None and block.bench_wait >= 0
    assert (
        block.steal is not None and block.machine_time is not None and 0 <= block.steal <= block.machine_time
    )
    assert block.machine_time > 0


def test_a_process_that_only_shares_the_backends_pid_is_not_taken_for_the_server(
    server_dsn: str, tmp_path: Path
) -> None:
    """A server elsewhere (another machine, another container) has backends whose pids may exist here too."""
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        pid = conn.info.backend_pid
        proc = tmp_path / "proc"
        (proc / str(pid)).mkdir(parents=True)
        (proc / "stat").write_text("btime 1000\n")
        fields = ["S", 1] + [0] * 17 + [123]  # started 1.23 s after a boot in 1970
        (proc / str(pid) / "stat").write_text(f"{pid} (postgres) " + " ".join(map(str, fields + [0] * 24)))
        assert ServerCPU.of(conn, proc) is None
        (proc / str(pid) / "stat").write_text(f"{pid} (python3) " + " ".join(map(str, fields + [0] * 24)))
        assert ServerCPU.of(conn, proc) is None
        (proc / str(pid) / "stat").unlink()
        assert ServerCPU.of(conn, proc) is None


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


def test_the_iterative_scans_connections_search_with_it(vector_dsn: str) -> None:
    clock, events = peers.StatementClock(), peers.StatementClock()
    engines = {
        options: peers._pgvectorstore_engine(vector_dsn, clock, events, options)
        for options in (None, peers.ITERATIVE_SCAN_OPTIONS, "-c hnsw.iterative_scan=relaxed")
    }
    try:
        settings = {options: peers._pgvector_settings(e) for options, e in engines.items()}
    finally:
        for e in engines.values():
            e._run_as_sync(e.close())
    assert settings[None]["hnsw.iterative_scan"] == "off"  # pgvector's default: the goal's row
    assert settings[peers.ITERATIVE_SCAN_OPTIONS]["hnsw.iterative_scan"] == "relaxed_order"
    # a misspelt value is dropped with a warning when pgvector loads, not refused at connect time: the settings
    # read back (and checked by the run) are what the searches get
    assert settings["-c hnsw.iterative_scan=relaxed"]["hnsw.iterative_scan"] == "off"
    for s in settings.values():
        assert s["hnsw.ef_search"] == "40" and s["hnsw.max_scan_tuples"] == "20000"
