"""Operations written once, run on a sync or an async connection.

An operation is a generator that *yields* steps — a :class:`Query` to execute, a :class:`Concurrent` set of
queries that may run at the same time, or an :class:`Embed` request — and receives their results; it *returns* its
result model. :func:`run_sync` and :func:`run_async` drive the same generator over a psycopg ``Connection`` or
``AsyncConnection``, so no query or rule is written twice.

Example::

    def count_conversations(ctx: OpContext, args: Args) -> Program[int]:
        rows = yield Query(sql.SQL("SELECT count(*) AS n FROM ghostmem.conversations WHERE owner = %s"),
                           (ctx.owner,))
        return int(rows[0]["n"])
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import AbstractAsyncContextManager, AbstractContextManager, AsyncExitStack, ExitStack
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypeVar

from psycopg import AsyncConnection, AsyncCursor, Connection, Cursor, sql
from psycopg.rows import dict_row

from ghostmem import db
from ghostmem.embed import Embedder
from ghostmem.errors import translated

T = TypeVar("T")
Row: TypeAlias = dict[str, Any]
Params: TypeAlias = Sequence[Any] | Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class Query:
    """One SQL statement with bound parameters. ``fetch="none"`` for statements that return no rows."""

    text: str | bytes | sql.SQL | sql.Composed
    params: Params = None
    fetch: Literal["all", "none"] = "all"


@dataclass(frozen=True, slots=True)
class Concurrent:
    """Statements that do not depend on each other (each reads only its parameters and committed data), to run at
    the same time: the first on the caller's connection, each other on a spare connection of the same pool, in a
    transaction of its own that runs ``setup`` first (the transaction settings the caller's earlier steps made,
    which the statements rely on). The reply is their rows, in order; or None, and nothing runs, when the runner
    has no spare for each of them free at that moment (a pool of one, a connection passed in without its pool,
    every connection busy): the program then does the same work on its own connection (a search runs its legs
    inside its one statement). The rows are the same wherever they are read: a spare's are used only if the caller's
    transaction has written nothing and is READ COMMITTED, where every statement reads what was committed when it
    started, whichever connection runs it; else every statement runs on the caller's connection, as does any
    statement that failed on a spare."""

    queries: tuple[Query, ...]
    setup: Query | None = None


@dataclass(frozen=True, slots=True)
class Embed:
    """Ask the driver for the embedding of a search query (sent back as :func:`ghostmem.db.vector` makes it, a
    query parameter for a ``vector``)."""

    text: str


Step: TypeAlias = Query | Concurrent | Embed
Program: TypeAlias = Generator[Step, Any, T]
# Where a runner finds a spare connection: a context that gives one of the caller's pool's connections if one is
# free now, or None (it never waits; see ghostmem.db.spare).
Spare: TypeAlias = Callable[[], AbstractContextManager[Connection[Any] | None]]
AsyncSpare: TypeAlias = Callable[[], AbstractAsyncContextManager[AsyncConnection[Any] | None]]

# Whether the caller's transaction may hand statements to another connection: it has written nothing (a statement
# on another connection would not see its writes) and takes a snapshot per statement (under REPEATABLE READ or
# SERIALIZABLE another connection's snapshot would differ from its own).
_SHAREABLE = (
    "SELECT txid_current_if_assigned() IS NULL"
    " AND current_setting('transaction_isolation') = 'read committed' AS shareable"
)
# How long a spare's statement waits for a lock before it gives up, and the statement runs on the caller's
# connection instead: the caller's own transaction may hold the lock (LOCK TABLE before a search), and the spare would
# wait for it forever, a wait in the client that the server's deadlock detector cannot see; a lock held by anyone
# else is then waited for on the caller's connection, as without a spare.
SPARE_LOCK_TIMEOUT = "50ms"
_SPARE_SETTINGS = Query("SELECT set_config('lock_timeout', %s, true)", (SPARE_LOCK_TIMEOUT,))
# Threads that run the statements given to spare connections (a sync caller runs its own statement meanwhile).
_SPARE_THREADS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="ghostmem-spare")


def run_sync(
    program: Program[T], conn: Connection[Any], embedder: Embedder | None, spare: Spare | None = None
) -> T:
    """Drive ``program`` to completion on a sync connection (one transaction: the caller's); ``spare`` lends the
    connections of a :class:`Concurrent` step (None: its statements run one after the other on ``conn``).

    A database error comes out as its ghostmem error (:func:`ghostmem.errors.translated`)."""
    reply: Any = None
    try:
        with translated():
            while True:
                step = program.send(reply)
                if isinstance(step, Embed):
                    db.use_vectors(conn)
                    reply = _embed(embedder, step)
                elif isinstance(step, Concurrent):
                    reply = _concurrent_sync(step, conn, spare)
                else:
                    reply = _execute_sync(conn, step)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _execute_sync(conn: Connection[Any], step: Query) -> Any:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(step.text, step.params)
        return cur.fetchall() if step.fetch == "all" else None


def _concurrent_sync(step: Concurrent, conn: Connection[Any], spare: Spare | None) -> list[Any] | None:
    first, *others = step.queries
    with ExitStack() as stack:
        given = [stack.enter_context(spare()) for _ in others] if spare is not None else [None]
        lent = [s for s in given if s is not None]
        if len(lent) < len(others):
            return None
        # The spares start at once; whether their rows may be used is asked of the caller's transaction in the same
        # round trip as its own statement (they only read: if not, they are dropped).
        futures = [
            _SPARE_THREADS.submit(_on_spare_sync, s, q, step.setup) for s, q in zip(lent, others, strict=True)
        ]
        try:
            with conn.pipeline():
                check, own = _sent_sync(conn, Query(_SHAREABLE)), _sent_sync(conn, first)
            shareable = bool(check.fetchone()["shareable"])  # type: ignore[index]
            replies = [own.fetchall()]
        finally:
            wait(futures)  # every spare's transaction is over before it goes back to the pool
    if not shareable:
        return replies + [_execute_sync(conn, q) for q in others]
    # a statement that failed on a spare runs again on the caller's connection (see _on_spare_sync)
    return replies + [
        _execute_sync(conn, q) if f.exception() is not None else f.result()
        for f, q in zip(futures, others, strict=True)
    ]


def _sent_sync(conn: Connection[Any], step: Query) -> Cursor[Row]:
    cur = conn.cursor(row_factory=dict_row)
    cur.execute(step.text, step.params)
    return cur


def _on_spare_sync(conn: Connection[Any], query: Query, setup: Query | None) -> Any:
    """``query`` in a transaction of its own on a spare connection (``setup`` first), ended before the connection
    is given back: one round trip.

    A spare can only make a step faster, never fail it: when its statement fails — its connection was lost (it is
    not checked before use: the caller's was, just before), it would wait for a lock (:data:`SPARE_LOCK_TIMEOUT`),
    or the statement's own error — the statement runs again on the caller's connection, which gives the same rows,
    or the error again, as its own."""
    with conn.pipeline(), conn.transaction():
        _sent_sync(conn, _SPARE_SETTINGS)
        if setup is not None:
            _sent_sync(conn, setup)
        cur = _sent_sync(conn, query)
    return cur.fetchall()


async def run_async(
    program: Program[T],
    conn: AsyncConnection[Any],
    embedder: Embedder | None,
    spare: AsyncSpare | None = None,
) -> T:
    """Drive ``program`` on an async connection; embeddings run in a worker thread, the statements of a
    :class:`Concurrent` step are awaited together on ``conn`` and the spares ``spare`` lends."""
    reply: Any = None
    try:
        with translated():
            while True:
                step = program.send(reply)
                if isinstance(step, Embed):
                    await db.use_vectors_async(conn)
                    reply = await asyncio.to_thread(_embed, embedder, step)
                elif isinstance(step, Concurrent):
                    reply = await _concurrent_async(step, conn, spare)
                else:
                    reply = await _execute_async(conn, step)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def _execute_async(conn: AsyncConnection[Any], step: Query) -> Any:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(step.text, step.params)
        return await cur.fetchall() if step.fetch == "all" else None


async def _concurrent_async(
    step: Concurrent, conn: AsyncConnection[Any], spare: AsyncSpare | None
) -> list[Any] | None:
    """See :func:`_concurrent_sync`: the statements are awaited together."""
    first, *others = step.queries

    async def own() -> tuple[bool, Any]:
        async with conn.pipeline():
            check, cur = await _sent_async(conn, Query(_SHAREABLE)), await _sent_async(conn, first)
        return bool((await check.fetchone())["shareable"]), await cur.fetchall()  # type: ignore[index]

    async with AsyncExitStack() as stack:
        given = [await stack.enter_async_context(spare()) for _ in others] if spare is not None else [None]
        lent = [s for s in given if s is not None]
        if len(lent) < len(others):
            return None
        # every statement runs to its end (return_exceptions) before a spare goes back to the pool
        done = await asyncio.gather(
            own(),
            *(_on_spare_async(s, q, step.setup) for s, q in zip(lent, others, strict=True)),
            return_exceptions=True,
        )
    mine = done[0]
    if isinstance(mine, BaseException):
        raise mine
    shareable, reply = mine
    if not shareable:
        return [reply] + [await _execute_async(conn, q) for q in others]
    # a statement that failed on a spare runs again on the caller's connection (see _on_spare_sync)
    return [reply] + [
        await _execute_async(conn, q) if isinstance(result, BaseException) else result
        for result, q in zip(done[1:], others, strict=True)
    ]


async def _sent_async(conn: AsyncConnection[Any], step: Query) -> AsyncCursor[Row]:
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(step.text, step.params)
    return cur


async def _on_spare_async(conn: AsyncConnection[Any], query: Query, setup: Query | None) -> Any:
    """See :func:`_on_spare_sync`."""
    async with conn.pipeline(), conn.transaction():
        await _sent_async(conn, _SPARE_SETTINGS)
        if setup is not None:
            await _sent_async(conn, setup)
        cur = await _sent_async(conn, query)
    return await cur.fetchall()


def _embed(embedder: Embedder | None, step: Embed) -> Any:
    if embedder is None:
        raise RuntimeError("this operation needs an embedder, and none is configured")
    return db.vector(embedder.embed_query(step.text))
