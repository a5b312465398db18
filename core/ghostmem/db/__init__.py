"""Database access: where the server is, pools that are ready to use, and migrations.

``resolve_dsn`` gives the DSN of ``GHOSTMEM_DSN`` / ``dsn=`` or starts the embedded server; ``prepare`` checks the
server is reachable and migrates it; ``open_pool`` / ``open_async_pool`` open psycopg pools; ``checkout`` /
``acheckout`` lend one of a pool's connections to an operation.

Pools survive a server restart or failover: every connection is checked as it is taken out (one empty round
trip). A connection the server terminated fails the check; since every other idle connection of the pool dates
from before the same restart, the pool is drained (all of them replaced) and the call takes a new connection, so
a restart costs no error once the server is back. While it is down, a call waits at most ``pool_timeout`` seconds
and fails with one sentence, and the pool's background reconnection gives up after as long (psycopg's default
backs off for five minutes, which would leave the first calls after a long outage waiting for the next attempt).

An application may hand in its own pool (``GhostMem(pool=...)``), configured as it likes (LangGraph's
checkpointer pools use autocommit and ``dict_row``): ``checkout`` checks its connections the same way, puts a lent
connection into the mode operations need (one transaction, tuple rows, pgvector types registered) and gives it
back as it found it.

A vector goes to the server as :func:`vector` makes it and comes back as a float32 numpy array, through pgvector's
adapters; code handed a connection it did not take from a pool calls :func:`use_vectors` first.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from pgvector.psycopg import register_vector, register_vector_async
from psycopg import errors
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from ghostmem.config import DEFAULT_RUNTIME_ROLE, Settings
from ghostmem.db import migrate as migrations
from ghostmem.db.server import EmbeddedServer
from ghostmem.errors import DatabaseUnavailable, InvalidArgument, SchemaMismatch, translate, translated

logger = logging.getLogger(__name__)

__all__ = [
    "EmbeddedServer",
    "acheckout",
    "checkout",
    "open_async_pool",
    "open_pool",
    "pool_dsn",
    "prepare",
    "redact_dsn",
    "resolve_dsn",
    "use_vectors",
    "vector",
]

# Arguments of psycopg's connect() that are not connection parameters (a pool passes them through ``kwargs``).
_CONNECT_OPTIONS = frozenset({"autocommit", "prepare_threshold", "context", "row_factory", "cursor_factory"})


def resolve_dsn(settings: Settings) -> str:
    """The configured DSN, or the embedded server's (started if it is not running)."""
    if settings.dsn:
        return settings.dsn
    dsn = EmbeddedServer(settings.home).start().dsn()
    assert dsn is not None
    return dsn


_URI_USERINFO = re.compile(
    r"^[a-z][a-z0-9+.-]*://(?P<user>[^:]*):(?P<password>.*)@", re.IGNORECASE | re.DOTALL
)
# password=VALUE as a keyword or a URI parameter: quoted, or every word up to the next ``keyword=`` (unquoted spaces
# make the DSN malformed, but the words are still the password) or ``&``
_KEYWORD_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^&\s]*(?:\s+(?![\w.]+\s*=)[^&\s]+)*)")


def _password_text(dsn: str) -> str:
    """What the person who wrote ``dsn`` meant as its password (see :func:`redact_dsn`), or ``""``."""
    uri = _URI_USERINFO.match(dsn)
    keyword = _KEYWORD_PASSWORD.search(dsn)
    return (uri.group("password") if uri else "") + (keyword.group(2) if keyword else "")


def redact_dsn(dsn: str) -> str:
    """The DSN without its password, for messages and logs. In a URI the password is everything from the colon after
    the user to the *last* ``@`` (what the person who typed it meant, whatever it holds: a password with an unescaped
    ``@``, ``/``, ``?`` or ``#`` is masked whole, even where libpq would read part of it as the host)."""
    keywords = _KEYWORD_PASSWORD.sub(r"\1***", dsn)
    return _URI_USERINFO.sub(lambda m: f"{m.group()[: m.start('password')]}***@", keywords, count=1)


def check_dsn(dsn: str) -> str:
    """``dsn`` when libpq can read it as it was meant; else one sentence that says what is wrong, the password masked
    (libpq's own message quotes the whole DSN). A URI whose user or password holds an unescaped ``@``, ``/``, ``?``
    or ``#`` is refused: libpq would read the rest of the password as the host (and send it to DNS, and quote it in
    its error), so it must be percent-encoded."""
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        # libpq quotes the token it choked on, which may be (part of) the password: such a token is masked
        secret = _password_text(dsn)
        reason = re.sub(
            r'"([^"]*)"',
            lambda m: (
                '"***"'
                if secret and m.group(1) and (m.group(1) in secret or secret in m.group(1))
                else m.group()
            ),
            str(exc).strip().replace(dsn, redact_dsn(dsn)),
        )
        raise InvalidArgument(f"malformed DSN {redact_dsn(dsn)}: {redact_dsn(reason)}") from None
    userinfo = _URI_USERINFO.match(dsn)
    if userinfo and any(c in userinfo.group("user") + userinfo.group("password") for c in "@/?#"):
        raise InvalidArgument(
            f"malformed DSN {redact_dsn(dsn)}: its user or password holds @, /, ? or #, which a URL must "
            "percent-encode (@ is %40, / is %2F, ? is %3F, # is %23), or give it as password='...' in the "
            "keyword form"
        )
    return dsn


def connect(
    dsn: str,
    *,
    fix: str = "start the server or fix GHOSTMEM_DSN (unset it to use the embedded server)",
    **kwargs: Any,
) -> psycopg.Connection[Any]:
    """A plain connection, or one clear sentence on why the server cannot be reached (ending with ``fix``: what
    to do about it)."""
    check_dsn(dsn)
    try:
        return psycopg.connect(dsn, connect_timeout=10, **kwargs)
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise DatabaseUnavailable(
            f"cannot connect to Postgres at {redact_dsn(dsn)} ({reason}): {fix}"
        ) from exc


def prepare(dsn: str, dims: int, embed_model: str, runtime_role: str = DEFAULT_RUNTIME_ROLE) -> list[str]:
    """Check the server and apply pending migrations; returns the migrations applied now.

    A schema that is already current is only checked, never touched, so an application may connect with a login
    role that may not migrate once an administrator has (``ghostmem grant-app`` gives it what it needs). A schema
    that is behind, found by a role that may not migrate it, is one sentence naming the administrator's command.
    """
    with connect(dsn, autocommit=True) as conn:
        missing = migrations.pending(conn)
        if missing == []:
            try:
                migrations.check_dims(conn, dims)
            except errors.InsufficientPrivilege:
                raise DatabaseUnavailable(
                    f"role {conn.info.user} may not read ghostmem's tables in this database: an administrator runs "
                    f"`ghostmem grant-app {conn.info.user}` (or `--read-only`) as the role that owns them"
                ) from None
            return []
        try:
            return migrations.migrate(conn, dims, embed_model, runtime_role)
        except errors.InsufficientPrivilege:
            raise SchemaMismatch(migrations.cannot_migrate(conn, missing)) from None


def pool_dsn(pool: ConnectionPool | AsyncConnectionPool) -> str:
    """The DSN a pool connects with (its conninfo plus the connection parameters among its ``kwargs``)."""
    conninfo, kwargs = pool.conninfo, pool.kwargs
    if not isinstance(conninfo, str) or not isinstance(kwargs, dict):
        raise InvalidArgument(
            "this pool computes its connection parameters at connect time: pass dsn=... too, for migrations"
        )
    params = {k: v for k, v in kwargs.items() if k not in _CONNECT_OPTIONS}
    return psycopg.conninfo.make_conninfo(conninfo, **params)


# How long a pool keeps retrying a connection that failed: not at all. psycopg_pool counts a connection it is
# retrying (with a growing pause between tries) as one of its connections, and opens no other while it waits: a
# call just after the server came back waited for the next scheduled try (up to seconds, measured 1.9-3.0 s with a
# pool timeout of 10 s) or timed out. Given up at once, the connection is simply missing, and the next call that
# needs one opens it then.
_RECONNECT = 0.0


def open_pool(dsn: str, settings: Settings, *, standby: bool = False) -> ConnectionPool:
    """A pool of ``settings``' sizes, open and holding its first connections. A ``standby``'s pool does not wait
    for them: a read that finds none in time goes to the primary (see :mod:`ghostmem.db.replica`)."""
    pool = ConnectionPool(
        check_dsn(dsn),
        min_size=settings.pool_min_size,
        max_size=settings.pool_max_size,
        timeout=settings.read_wait if standby else settings.pool_timeout,
        reconnect_timeout=_RECONNECT,
        kwargs={"connect_timeout": 10},
        open=False,
        name="ghostmem-standby" if standby else "ghostmem",
    )
    pool.open()
    if standby:
        return pool
    try:
        pool.wait(timeout=30)
    except Exception as exc:
        pool.close()
        raise DatabaseUnavailable(f"cannot open a connection pool to {redact_dsn(dsn)}: {exc}") from exc
    return pool


async def open_async_pool(dsn: str, settings: Settings, *, standby: bool = False) -> AsyncConnectionPool:
    """The async twin of :func:`open_pool`."""
    pool = AsyncConnectionPool(
        check_dsn(dsn),
        min_size=settings.pool_min_size,
        max_size=settings.pool_max_size,
        timeout=settings.read_wait if standby else settings.pool_timeout,
        reconnect_timeout=_RECONNECT,
        kwargs={"connect_timeout": 10},
        open=False,
        name="ghostmem-async-standby" if standby else "ghostmem-async",
    )
    await pool.open()
    if standby:
        return pool
    try:
        await pool.wait(timeout=30)
    except Exception as exc:
        await pool.close()
        raise DatabaseUnavailable(f"cannot open a connection pool to {redact_dsn(dsn)}: {exc}") from exc
    return pool


def vector(values: Sequence[float] | NDArray[Any]) -> NDArray[np.float32]:
    """An embedding as a query parameter: pgvector's adapter sends a float32 array as a ``vector`` (binary, no
    text in between). float32 is what a ``vector`` column holds, so the conversion happens once, here, and a
    vector read back equals the one written."""
    return np.asarray(values, dtype=np.float32)


def use_vectors(conn: psycopg.Connection[Any]) -> bool:
    """Register pgvector's types on ``conn`` unless they are; ``True`` when that took a query (in a transaction)."""
    if conn.adapters.types.get("vector") is not None:
        return False
    register_vector(conn)
    return True


async def use_vectors_async(conn: psycopg.AsyncConnection[Any]) -> bool:
    """The async twin of :func:`use_vectors`."""
    if conn.adapters.types.get("vector") is not None:
        return False
    await register_vector_async(conn)
    return True


@contextmanager
def checkout(
    pool: ConnectionPool,
    *,
    timeout: float | None = None,
    committed: Callable[[psycopg.Connection[Any]], None] | None = None,
) -> Iterator[psycopg.Connection[Any]]:
    """One of ``pool``'s connections for one operation: one transaction (committed on success, rolled back on
    error), tuple rows, pgvector types; a server that cannot be reached, or no connection within ``timeout``
    seconds (else the pool's), is :class:`DatabaseUnavailable`. ``committed`` is called with the connection once
    the transaction has committed, before the pool gets it back."""
    conn = _checked(pool, timeout)
    try:
        saved = conn.autocommit, conn.row_factory
        conn.autocommit, conn.row_factory = False, tuple_row
        try:
            if use_vectors(conn):
                conn.commit()  # idle again: an operation may switch to autocommit (imports do)
            with translated():
                with conn:
                    yield conn
                if committed is not None:
                    committed(conn)
        finally:
            if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                conn.autocommit, conn.row_factory = saved
    finally:
        pool.putconn(conn)


@asynccontextmanager
async def acheckout(
    pool: AsyncConnectionPool,
    *,
    timeout: float | None = None,
    committed: Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]] | None = None,
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """The async twin of :func:`checkout`."""
    conn = await _achecked(pool, timeout)
    try:
        saved = conn.autocommit, conn.row_factory
        if saved[0]:
            await conn.set_autocommit(False)
        conn.row_factory = tuple_row
        try:
            if await use_vectors_async(conn):
                await conn.commit()
            with translated():
                async with conn:
                    yield conn
                if committed is not None:
                    await committed(conn)
        finally:
            if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                await conn.set_autocommit(saved[0])
                conn.row_factory = saved[1]
    finally:
        await pool.putconn(conn)


def _checked(pool: ConnectionPool, timeout: float | None) -> psycopg.Connection[Any]:
    """A connection that answered an empty query; on a dead one, drain the pool and take a fresh one."""
    for _ in range(2):
        try:
            conn = pool.getconn(timeout)
        except PoolTimeout as exc:
            raise DatabaseUnavailable(_no_connection(pool, timeout)) from exc
        try:
            ConnectionPool.check_connection(conn)
        except psycopg.Error as exc:
            failure = exc
            pool.putconn(conn)  # broken: the pool discards and replaces it
            pool.drain()
        else:
            return conn
    raise translate(failure) from failure


async def _achecked(pool: AsyncConnectionPool, timeout: float | None) -> psycopg.AsyncConnection[Any]:
    """The async twin of :func:`_checked`."""
    for _ in range(2):
        try:
            conn = await pool.getconn(timeout)
        except PoolTimeout as exc:
            raise DatabaseUnavailable(_no_connection(pool, timeout)) from exc
        try:
            await AsyncConnectionPool.check_connection(conn)
        except psycopg.Error as exc:
            failure = exc
            await pool.putconn(conn)
            await pool.drain()
        else:
            return conn
    raise translate(failure) from failure


def _no_connection(pool: ConnectionPool | AsyncConnectionPool, timeout: float | None) -> str:
    return (
        f"no database connection within {pool.timeout if timeout is None else timeout:g}s (pool of {pool.max_size}): the server is down or "
        "restarting, or every connection is busy; try again shortly (GHOSTMEM_POOL_MAX_SIZE sets the pool size)"
    )
