"""Counting a test's own server connections: its DSN carries a unique ``application_name``."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg.conninfo import make_conninfo


def tagged(dsn: str) -> tuple[str, str]:
    """``dsn`` with a unique application_name, and that name."""
    name = f"pooltest-{uuid.uuid4().hex[:10]}"
    return make_conninfo(dsn, application_name=name), name


def backends(dsn: str, name: str) -> int:
    """How many server connections carry ``name`` now."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def wait_for_backends(dsn: str, name: str, expected: int) -> int:
    """Backends of ``name`` once they settle on ``expected`` (a closed connection leaves the view shortly after)."""
    deadline = time.monotonic() + 5
    while (seen := backends(dsn, name)) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return seen


@contextmanager
def peak_backends(dsn: str, name: str, every: float = 0.02) -> Iterator[list[int]]:
    """Sample the connections of ``name`` in a thread while the block runs; the list holds the peak."""
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not done.is_set():
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
                ).fetchone()
                peak[0] = max(peak[0], int(row[0]) if row else 0)
                done.wait(every)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()
