"""``GhostMem`` and ``AsyncGhostMem``: one object per owner, every operation of :data:`ghostmem.OPS` as a method.

Connecting is lazy: the first call resolves the DSN (starting the embedded server if no DSN is set), migrates the
schema and opens a pool. Each operation runs in one transaction on one pooled connection.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from psycopg import Connection
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from pydantic import BaseModel

from ghostmem import db
from ghostmem.config import Settings
from ghostmem.context import OpContext
from ghostmem.embed import Embedder, make_embedder
from ghostmem.ops import OPS, OpSpec, get_op
from ghostmem.program import run_async, run_sync

if TYPE_CHECKING:
    from ghostmem.ingest import ImportReport

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OpResult:
    """What an operation returns: ``text`` for a model to read, ``data`` (a pydantic model) for code."""

    op: str
    text: str
    data: BaseModel

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "text": self.text, "data": self.data.model_dump(mode="json")}


class _Base:
    def __init__(
        self,
        dsn: str | None = None,
        owner: str | None = None,
        *,
        embedder: Embedder | str | None = None,
        current_project: str | None = None,
        home: str | Path | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.settings = settings or Settings.from_env(
            dsn=dsn,
            owner=owner,
            embed_model=embedder if isinstance(embedder, str) else None,
            home=home,
        )
        self._embedder: Embedder | None = (
            embedder if embedder is not None and not isinstance(embedder, str) else None
        )
        self.context = OpContext(
            owner=self.settings.owner,
            current_project=current_project,
            runtime_role=self.settings.runtime_role,
        )
        self._dsn: str | None = None

    @property
    def owner(self) -> str:
        return self.settings.owner

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = make_embedder(self.settings.embed_model)
        return self._embedder

    @property
    def dsn(self) -> str:
        """The DSN in use (resolving it starts the embedded server when no DSN is configured)."""
        if self._dsn is None:
            self._dsn = db.resolve_dsn(self.settings)
        return self._dsn

    def _prepare(self) -> str:
        dsn = self.dsn
        db.prepare(dsn, self.embedder.dim, self.embedder.name, self.settings.runtime_role)
        return dsn

    def _args(self, spec: OpSpec[Any, Any], arguments: Mapping[str, Any] | BaseModel | None) -> Any:
        return spec.parse(arguments)


class GhostMem(_Base):
    """Synchronous store. ``GhostMem()`` uses the embedded server; ``GhostMem(dsn=...)`` any Postgres."""

    _pool: ConnectionPool | None = None

    def connect(self) -> GhostMem:
        """Start/migrate/open now instead of on first use (fails fast with one clear sentence)."""
        self.pool  # noqa: B018 - property with side effects
        return self

    @property
    def pool(self) -> ConnectionPool:
        if self._pool is None:
            self._pool = db.open_pool(self._prepare(), self.settings)
        return self._pool

    @contextmanager
    def connection(self) -> Iterator[Connection[Any]]:
        """A pooled connection; commits on exit, rolls back on error."""
        with self.pool.connection() as conn:
            yield conn

    def run(self, name: str, arguments: Mapping[str, Any] | BaseModel | None = None) -> OpResult:
        """Run an operation by name with a dict of arguments (what the adapters call)."""
        spec = get_op(name)
        args = self._args(spec, arguments)
        with self.connection() as conn:
            data = run_sync(spec.program(self.context, args), conn, self.embedder)
        return OpResult(spec.name, spec.render(data), data)

    def import_paths(
        self,
        paths: Sequence[str | Path] | None = None,
        *,
        tier: str = "personal",
        embed: bool = True,
        **kwargs: Any,
    ) -> ImportReport:
        """Import conversations from files, folders or export zips (default locations when ``paths`` is None)."""
        from ghostmem.ingest import import_paths

        return import_paths(self, paths, tier=tier, embed=embed, **kwargs)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> GhostMem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Callable[..., OpResult]: ...


class AsyncGhostMem(_Base):
    """Asynchronous twin of :class:`GhostMem`: ``await agm.run(...)``, ``await agm.search_personal_memory(...)``."""

    _pool: AsyncConnectionPool | None = None

    async def connect(self) -> AsyncGhostMem:
        await self.apool()
        return self

    async def apool(self) -> AsyncConnectionPool:
        if self._pool is None:
            dsn = await asyncio.to_thread(self._prepare)
            self._pool = await db.open_async_pool(dsn, self.settings)
        return self._pool

    async def run(self, name: str, arguments: Mapping[str, Any] | BaseModel | None = None) -> OpResult:
        spec = get_op(name)
        args = self._args(spec, arguments)
        pool = await self.apool()
        async with pool.connection() as conn:
            data = await run_async(spec.program(self.context, args), conn, self.embedder)
        return OpResult(spec.name, spec.render(data), data)

    async def import_paths(
        self,
        paths: Sequence[str | Path] | None = None,
        *,
        tier: str = "personal",
        embed: bool = True,
        **kwargs: Any,
    ) -> ImportReport:
        """Runs the (CPU-bound) importer in a worker thread with a sync store of the same settings."""

        def work() -> ImportReport:
            with GhostMem(settings=self.settings, embedder=self.embedder) as gm:
                gm.context = self.context
                return gm.import_paths(paths, tier=tier, embed=embed, **kwargs)

        return await asyncio.to_thread(work)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def __aenter__(self) -> AsyncGhostMem:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Callable[..., Any]: ...


def _signature(spec: OpSpec[Any, Any]) -> inspect.Signature:
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)]
    for name, info in spec.args_model.model_fields.items():
        default = (
            inspect.Parameter.empty if info.is_required() else info.get_default(call_default_factory=True)
        )
        kind = (
            inspect.Parameter.POSITIONAL_OR_KEYWORD
            if name in spec.cli_positional
            else inspect.Parameter.KEYWORD_ONLY
        )
        params.append(inspect.Parameter(name, kind, default=default, annotation=info.annotation))
    return inspect.Signature(params)


def _install_methods() -> None:
    """Give both classes one method per operation, with the operation's own signature and description."""
    for spec in OPS:
        signature = _signature(spec)

        def sync_method(self: GhostMem, *a: Any, _spec: OpSpec[Any, Any] = spec, **kw: Any) -> OpResult:
            bound = _signature(_spec).bind(self, *a, **kw)
            return self.run(_spec.name, {k: v for k, v in bound.arguments.items() if k != "self"})

        async def async_method(
            self: AsyncGhostMem, *a: Any, _spec: OpSpec[Any, Any] = spec, **kw: Any
        ) -> OpResult:
            bound = _signature(_spec).bind(self, *a, **kw)
            return await self.run(_spec.name, {k: v for k, v in bound.arguments.items() if k != "self"})

        for cls, method in ((GhostMem, sync_method), (AsyncGhostMem, async_method)):
            method.__name__ = spec.name
            method.__qualname__ = f"{cls.__name__}.{spec.name}"
            method.__doc__ = spec.description
            setattr(method, "__signature__", signature)  # noqa: B010 - functions have no typed slot for it
            setattr(cls, spec.name, method)


_install_methods()
