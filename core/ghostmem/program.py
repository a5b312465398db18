"""Operations written once, run on a sync or an async connection.

An operation is a generator that *yields* steps — a :class:`Query` to execute or an :class:`Embed` request — and
receives their results; it *returns* its result model. :func:`run_sync` and :func:`run_async` drive the same
generator over a psycopg ``Connection`` or ``AsyncConnection``, so no query or rule is written twice.

Example::

    def count_conversations(ctx: OpContext, args: Args) -> Program[int]:
        rows = yield Query(sql.SQL("SELECT count(*) AS n FROM ghostmem.conversations WHERE owner = %s"),
                           (ctx.owner,))
        return int(rows[0]["n"])
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypeVar

from psycopg import AsyncConnection, Connection, sql
from psycopg.rows import dict_row, tuple_row

from ghostmem import db
from ghostmem.embed import Embedder
from ghostmem.errors import translated

T = TypeVar("T")
Row: TypeAlias = dict[str, Any]
Params: TypeAlias = Sequence[Any] | Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class Query:
    """One SQL statement with bound parameters. ``fetch="none"`` for statements that return no rows, ``"tuples"``
    for rows as tuples (:class:`Tuples`): cheaper to fetch than a dict per row (``"all"``) for many columns."""

    text: str | bytes | sql.SQL | sql.Composed
    params: Params = None
    fetch: Literal["all", "none", "tuples"] = "all"


@dataclass(frozen=True, slots=True)
class Tuples:
    """The rows of a ``fetch="tuples"`` query and where each column is in them (``at``: name -> index)."""

    at: dict[str, int]
    rows: list[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Embed:
    """Ask the driver for the embedding of a search query (sent back as :func:`ghostmem.db.vector` makes it, a
    query parameter for a ``vector``)."""

    text: str


Step: TypeAlias = Query | Embed
Program: TypeAlias = Generator[Step, Any, T]


def run_sync(program: Program[T], conn: Connection[Any], embedder: Embedder | None) -> T:
    """Drive ``program`` to completion on a sync connection (one transaction: the caller's).

    A database error comes out as its ghostmem error (:func:`ghostmem.errors.translated`)."""
    reply: Any = None
    try:
        with translated():
            while True:
                step = program.send(reply)
                if isinstance(step, Embed):
                    db.use_vectors(conn)
                    reply = _embed(embedder, step)
                else:
                    with conn.cursor(row_factory=_row_factory(step)) as cur:
                        cur.execute(step.text, step.params)
                        reply = _reply(step, cur, cur.fetchall() if step.fetch != "none" else None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def run_async(program: Program[T], conn: AsyncConnection[Any], embedder: Embedder | None) -> T:
    """Drive ``program`` on an async connection; embeddings run in a worker thread."""
    reply: Any = None
    try:
        with translated():
            while True:
                step = program.send(reply)
                if isinstance(step, Embed):
                    await db.use_vectors_async(conn)
                    reply = await asyncio.to_thread(_embed, embedder, step)
                else:
                    async with conn.cursor(row_factory=_row_factory(step)) as cur:
                        await cur.execute(step.text, step.params)
                        reply = _reply(step, cur, await cur.fetchall() if step.fetch != "none" else None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _row_factory(step: Query) -> Any:
    return tuple_row if step.fetch == "tuples" else dict_row


def _reply(step: Query, cur: Any, rows: list[Any] | None) -> Any:
    """What the program receives for ``step``: its rows (None for ``fetch="none"``), or :class:`Tuples`."""
    if step.fetch != "tuples" or rows is None:
        return rows
    return Tuples({column.name: i for i, column in enumerate(cur.description)}, rows)


def _embed(embedder: Embedder | None, step: Embed) -> Any:
    if embedder is None:
        raise RuntimeError("this operation needs an embedder, and none is configured")
    return db.vector(embedder.embed_query(step.text))
