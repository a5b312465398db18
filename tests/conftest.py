"""Fixtures shared by every suite, and the tiers derived from them.

Database tests run against ``GHOSTMEM_TEST_DSN`` when it is set, else against a throwaway embedded server in a
temporary directory. Each test session gets its own database; each test its own owner, so tests never see each
other's rows.

Tiers are not declared by hand: a test that uses a server fixture (``server_dsn`` and everything built on it, or
``embedded_home``) is marked ``db``, one that uses ``real_embedder`` is marked ``model`` (``-m "not db"`` runs the
rest in seconds). ``tests/unit`` holds no ``db`` test; ``tests/integration`` holds the tests that need a server
(and the pure helpers' tests of the modules they cover). Shared builders live in ``tests/support``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from ghostmem import GhostMem, HashEmbedder
from ghostmem.db import EmbeddedServer
from support.databases import fresh_database

UNIT = Path(__file__).resolve().parent / "unit"
# fixture -> the marker every test using it gets (``item.fixturenames`` includes fixtures used indirectly)
TIER_OF_FIXTURE = {"server_dsn": "db", "embedded_home": "db", "real_embedder": "model"}
SLOW_TIMEOUT = 900  # seconds for a test marked ``slow`` (pyproject's ``timeout`` holds for the rest)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker in sorted({TIER_OF_FIXTURE[name] for name in used & TIER_OF_FIXTURE.keys()}):
            item.add_marker(marker)
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))
        if "db" in {m.name for m in item.iter_markers()} and item.path.is_relative_to(UNIT):
            raise pytest.UsageError(f"{item.nodeid} needs a database: it belongs in tests/integration")


@contextmanager
def _home() -> Iterator[Path]:
    """A mkdtemp home (which the embedded server's system user can be let into, unlike pytest's ``tmp_path``);
    its server is stopped and the directory removed afterwards, even when the test failed midway."""
    home = Path(tempfile.mkdtemp(prefix="ghostmem-test-"))
    try:
        yield home
    finally:
        EmbeddedServer(home).stop()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def server_dsn() -> Iterator[str]:
    """DSN of a server we may create databases on (the admin database)."""
    given = os.environ.get("GHOSTMEM_TEST_DSN")
    if given:
        yield given
        return
    with _home() as home:
        dsn = EmbeddedServer(home).start().dsn("postgres")
        assert dsn is not None
        yield dsn


@pytest.fixture
def embedded_home() -> Iterator[Path]:
    """A fresh ``GHOSTMEM_HOME`` for a test that runs its own embedded server (through the CLI or a notebook)."""
    with _home() as home:
        yield home


@pytest.fixture(scope="session")
def pg_dsn(server_dsn: str) -> Iterator[str]:
    """A fresh database for this test session, dropped at the end."""
    with fresh_database(server_dsn) as dsn:
        yield dsn


@pytest.fixture
def owner() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def gm(pg_dsn: str, owner: str) -> Iterator[GhostMem]:
    """A store on the test database with its own owner and the deterministic hash embedder."""
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as store:
        yield store


@pytest.fixture(scope="session")
def real_embedder():  # type: ignore[no-untyped-def]
    """The real all-MiniLM-L6-v2 model, loaded once per session."""
    from ghostmem.embed import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()
