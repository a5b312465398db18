"""Database access: where the server is, pools that are ready to use, and migrations.

``resolve_dsn`` gives the DSN of ``GHOSTMEM_DSN`` / ``dsn=`` or starts the embedded server; ``prepare`` checks the
server is reachable and migrates it; ``open_pool`` / ``open_async_pool`` return opened psycopg pools whose
connections have the pgvector types registered (which needs the extension, hence after ``prepare``).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import psycopg
from pgvector.psycopg import register_vector, register_vector_async
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ghostmem.config import DEFAULT_RUNTIME_ROLE, Settings
from ghostmem.db import migrate as migrations
from ghostmem.db.server import EmbeddedServer
from ghostmem.errors import DatabaseUnavailable

logger = logging.getLogger(__name__)

__all__ = ["EmbeddedServer", "open_async_pool", "open_pool", "prepare", "redact_dsn", "resolve_dsn"]


def resolve_dsn(settings: Settings) -> str:
    """The configured DSN, or the embedded server's (started if it is not running)."""
    if settings.dsn:
        return settings.dsn
    dsn = EmbeddedServer(settings.home).start().dsn()
    assert dsn is not None
    return dsn


def redact_dsn(dsn: str) -> str:
    """The DSN without its password, for messages and logs."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", re.sub(r"password=\S+", "password=***", dsn))


def connect(dsn: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """A plain connection, or one clear sentence on why the server cannot be reached."""
    try:
        return psycopg.connect(dsn, connect_timeout=10, **kwargs)
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise DatabaseUnavailable(
            f"cannot connect to Postgres at {redact_dsn(dsn)} ({reason}): start the server or fix GHOSTMEM_DSN "
            "(unset it to use the embedded server)"
        ) from exc


def prepare(dsn: str, dims: int, embed_model: str, runtime_role: str = DEFAULT_RUNTIME_ROLE) -> list[str]:
    """Check the server and apply pending migrations; returns the migrations applied now.

    A schema that is already current is only checked, never touched, so an application may connect with a
    login role that has no CREATE rights once an administrator has migrated.
    """
    with connect(dsn, autocommit=True) as conn:
        if migrations.is_current(conn):
            migrations.check_dims(conn, dims)
            return []
        return migrations.migrate(conn, dims, embed_model, runtime_role)


def _configure(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)


async def _configure_async(conn: psycopg.AsyncConnection[Any]) -> None:
    await register_vector_async(conn)


def open_pool(dsn: str, settings: Settings) -> ConnectionPool:
    pool = ConnectionPool(
        dsn,
        min_size=settings.pool_min_size,
        max_size=settings.pool_max_size,
        configure=_configure,
        kwargs={"connect_timeout": 10},
        open=False,
        name="ghostmem",
    )
    pool.open()
    try:
        pool.wait(timeout=30)
    except Exception as exc:
        pool.close()
        raise DatabaseUnavailable(f"cannot open a connection pool to {redact_dsn(dsn)}: {exc}") from exc
    return pool


async def open_async_pool(dsn: str, settings: Settings) -> AsyncConnectionPool:
    pool = AsyncConnectionPool(
        dsn,
        min_size=settings.pool_min_size,
        max_size=settings.pool_max_size,
        configure=_configure_async,
        kwargs={"connect_timeout": 10},
        open=False,
        name="ghostmem-async",
    )
    await pool.open()
    try:
        await pool.wait(timeout=30)
    except Exception as exc:
        await pool.close()
        raise DatabaseUnavailable(f"cannot open a connection pool to {redact_dsn(dsn)}: {exc}") from exc
    return pool
