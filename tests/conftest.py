"""Fixtures shared by every suite.

Database tests run against ``GHOSTMEM_TEST_DSN`` when it is set, else against a throwaway embedded server in a
temporary directory. Each test session gets its own database; each test its own owner, so tests never see each
other's rows.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder
from ghostmem.db import EmbeddedServer
from psycopg import sql

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
FIXTURES = REPO / "core" / "ghostmem" / "data" / "exports"
EVAL = SHARED / "eval"


@pytest.fixture(scope="session")
def server_dsn() -> Iterator[str]:
    """DSN of a server we may create databases on (the admin database)."""
    given = os.environ.get("GHOSTMEM_TEST_DSN")
    if given:
        yield given
        return
    home = Path(tempfile.mkdtemp(prefix="ghostmem-test-"))
    server = EmbeddedServer(home)
    status = server.start()
    dsn = status.dsn("postgres")
    assert dsn is not None
    try:
        yield dsn
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_dsn(server_dsn: str) -> Iterator[str]:
    """A fresh database for this test session, dropped at the end."""
    name = f"ghostmem_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    info = psycopg.conninfo.conninfo_to_dict(server_dsn)
    info["dbname"] = name
    dsn = psycopg.conninfo.make_conninfo(**info)
    try:
        yield dsn
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


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
