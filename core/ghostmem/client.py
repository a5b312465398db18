"""``GhostMem`` and ``AsyncGhostMem``: one object per owner, every operation of :data:`ghostmem.OPS` as a method.

Connecting is lazy: the first call resolves the DSN (starting the embedded server if no DSN is set), migrates the
schema and opens a pool — once, however many calls arrive at the same time (a lock guards it). Each operation runs
in one transaction on one pooled connection (see :func:`ghostmem.db.checkout`). An application may pass its own
open pool (``pool=``); ghostmem borrows its connections and never closes it. With a standby (``read_dsn=`` or
``read_pool=``), the operations that only read run there and everything else on the primary
(:mod:`ghostmem.db.replica`).

Besides the operations, the client carries thin methods for the jobs around them, each handing its connection,
owner and embedder to the module that does the work: importing, embedding, enriching, forgetting and watching
(:mod:`ghostmem.maintenance`), switching the embedding model (:mod:`ghostmem.reembed`), live capture of an
application's conversations (:mod:`ghostmem.capture`), and the operator's project grants (:mod:`ghostmem.ghosts`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pgvector.psycopg import register_vector
from psycopg import AsyncConnection, Connection
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from pydantic import BaseModel

from ghostmem import db
from ghostmem.config import Settings, checked_embedder_name
from ghostmem.context import OpContext, checked_owner
from ghostmem.db.loops import LoopPools
from ghostmem.db.replica import AsyncStandby, Missed, Standby
from ghostmem.embed import Embedder, make_embedder
from ghostmem.errors import InvalidArgument, translated
from ghostmem.op_methods import AsyncOps, SyncOps
from ghostmem.ops import Effect, OpResult, OpSpec, get_op
from ghostmem.program import run_async, run_sync

if TYPE_CHECKING:
    from ghostmem.ingest import ImportReport
    from ghostmem.maintenance import EmbedReport, MaintainReport
    from ghostmem.records import MessageRecord, Platform
    from ghostmem.store import SaveResult

logger = logging.getLogger(__name__)

T = TypeVar("T")


class _Base:
    """Settings, embedder and context shared by both stores.

    Args:
        dsn: a libpq DSN or URL, a SQLAlchemy URL (``postgresql+psycopg://...``) or engine; ``None`` for
            ``GHOSTMEM_DSN`` or the embedded server.
        pool: an open psycopg pool of the application's to borrow connections from (``ConnectionPool`` for
            :class:`GhostMem`, ``AsyncConnectionPool`` for :class:`AsyncGhostMem`); migrations connect with its
            parameters, or with ``dsn`` when given. ghostmem never closes it.
        pool_min_size, pool_max_size, pool_timeout: the pool ghostmem opens itself (else
            ``GHOSTMEM_POOL_MIN_SIZE`` / ``GHOSTMEM_POOL_MAX_SIZE`` / ``GHOSTMEM_POOL_TIMEOUT``).
        read_dsn: a streaming-replication standby of the primary for the operations that only read (else
            ``GHOSTMEM_READ_DSN``); ``read_pool``: an application's open pool on one, instead. Its pool has the
            primary's sizes.
        read_wait, read_retry: seconds a read waits for the standby (a connection, or its replay of this client's
            last write) before it runs on the primary, and seconds a standby that failed or fell behind is left
            alone (else ``GHOSTMEM_READ_WAIT`` / ``GHOSTMEM_READ_RETRY``; see :mod:`ghostmem.db.replica`).
    """

    _pool_class: type[Any]
    _standby_class: Callable[[Settings, Any], Standby | AsyncStandby]
    _standby: Standby | AsyncStandby | None

    def __init__(
        self,
        dsn: Any = None,
        owner: str | None = None,
        *,
        embedder: Embedder | str | None = None,
        current_project: str | None = None,
        home: str | Path | None = None,
        settings: Settings | None = None,
        pool: ConnectionPool | AsyncConnectionPool | None = None,
        pool_min_size: int | None = None,
        pool_max_size: int | None = None,
        pool_timeout: float | None = None,
        read_dsn: Any = None,
        read_pool: ConnectionPool | AsyncConnectionPool | None = None,
        read_wait: float | None = None,
        read_retry: float | None = None,
    ) -> None:
        for name, given in (("pool", pool), ("read_pool", read_pool)):
            if given is not None and not isinstance(given, self._pool_class):
                raise InvalidArgument(
                    f"{type(self).__name__}({name}=...) takes a psycopg_pool.{self._pool_class.__name__} "
                    f"(got a {type(given).__name__})"
                )
        if read_dsn is not None and read_pool is not None:
            raise InvalidArgument(f"{type(self).__name__} takes read_dsn=... or read_pool=..., not both")
        self.settings = settings or Settings.from_env(
            dsn=dsn if dsn is not None or pool is None else db.pool_dsn(pool),
            owner=owner,
            embed_model=embedder if isinstance(embedder, str) else None,
            home=home,
            pool_min_size=pool_min_size,
            pool_max_size=pool_max_size,
            pool_timeout=pool_timeout,
            read_dsn=read_dsn,
            read_wait=read_wait,
            read_retry=read_retry,
        )
        self._embedder: Embedder | None = (
            embedder if embedder is not None and not isinstance(embedder, str) else None
        )
        if self._embedder is not None:  # a name given as a string was checked with the settings
            checked_embedder_name(self._embedder.name)
        self.context = OpContext(
            owner=self.settings.owner,
            current_project=current_project,
            runtime_role=self.settings.runtime_role,
        )
        self._dsn: str | None = None
        self._given_pool = pool
        self._migrated = False
        wanted = read_pool is not None or self.settings.read_dsn is not None
        self._standby = self._standby_class(self.settings, read_pool) if wanted else None

    @property
    def owner(self) -> str:
        return self.settings.owner

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = make_embedder(self.settings.embed_model, self.settings.home)
        return self._embedder

    @property
    def dsn(self) -> str:
        """The DSN in use (resolving it starts the embedded server when no DSN is configured)."""
        if self._dsn is None:
            self._dsn = db.resolve_dsn(self.settings)
        return self._dsn

    def _prepare(self) -> str:
        dsn = self.dsn
        if not self._migrated:
            db.prepare(dsn, self.embedder.dim, self.embedder.name, self.settings.runtime_role)
            self._migrated = True
        return dsn

    def migrate(self) -> list[str]:
        """Check the server and apply pending schema migrations now; returns the migrations applied."""
        applied = db.prepare(self.dsn, self.embedder.dim, self.embedder.name, self.settings.runtime_role)
        self._migrated = True
        return applied

    @contextmanager
    def _own_connection(self) -> Iterator[Connection[Any]]:
        """A connection of its own (not pooled) for a long job; commits on exit, rolls back on error."""
        with translated(), db.connect(self._prepare()) as conn:
            register_vector(conn)
            yield conn
            if self._standby is not None:
                conn.commit()
                self._standby.route.saw_on(conn)

    def _reembed(self, embedder: Embedder | str) -> dict[str, Any]:
        from ghostmem.reembed import reembed

        new = make_embedder(embedder, self.settings.home) if isinstance(embedder, str) else embedder
        done = reembed(self.dsn, new, self.settings.runtime_role)
        self._embedder = new
        return done

    def _args(self, spec: OpSpec[Any, Any], arguments: Mapping[str, Any] | BaseModel | None) -> Any:
        return spec.parse(arguments)


class GhostMem(_Base, SyncOps):
    """Synchronous store. ``GhostMem()`` uses the embedded server; ``GhostMem(dsn=...)`` any Postgres;
    ``GhostMem(pool=...)`` an application's own ``psycopg_pool.ConnectionPool``."""

    _pool_class = ConnectionPool
    _pool: ConnectionPool | None = None
    _standby_class = Standby
    _standby: Standby | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._aio: AsyncGhostMem | None = None

    @property
    def aio(self) -> AsyncGhostMem:
        """This store's asynchronous twin, made on first use: same settings, embedder and context, and the same
        standby route (an async read waits for this store's writes, and the other way round); every adapter built
        on this store shares it, and :meth:`close` / :meth:`aclose` close it too."""
        with self._lock:
            if self._aio is None:
                twin = AsyncGhostMem(settings=self.settings, embedder=self.embedder)
                twin.context = self.context
                twin._standby = None if self._standby is None else self._standby.twin()
                self._aio = twin
            return self._aio

    def connect(self) -> GhostMem:
        """Start/migrate/open now instead of on first use (fails fast with one clear sentence)."""
        self.pool  # noqa: B018 - property with side effects
        return self

    @property
    def pool(self) -> ConnectionPool:
        """The primary's pool, opened on first use (by one thread; the others wait for it)."""
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    dsn = self._prepare()
                    given = self._given_pool
                    pool = given if isinstance(given, ConnectionPool) else db.open_pool(dsn, self.settings)
                    if self._standby is not None:  # reads wait for the standby to hold what is there now
                        with db.checkout(pool, committed=self._standby.saw):
                            pass
                    self._pool = pool
        return self._pool

    @contextmanager
    def connection(self) -> Iterator[Connection[Any]]:
        """A pooled connection to the primary; commits on exit, rolls back on error."""
        with db.checkout(self.pool, committed=None if self._standby is None else self._standby.saw) as conn:
            yield conn

    def run(
        self,
        name: str,
        arguments: Mapping[str, Any] | BaseModel | None = None,
        *,
        context: OpContext | None = None,
    ) -> OpResult[Any]:
        """Run an operation by name with a dict of arguments (what the adapters call); ``context`` (whose memory,
        what the application bound) replaces the store's own for this call."""
        spec = get_op(name)
        args = self._args(spec, arguments)
        ctx = context or self.context

        def work(conn: Connection[Any]) -> Any:
            return run_sync(spec.program(ctx, args), conn, self.embedder)

        data = self._read(work) if spec.effect is Effect.READS else None
        if data is None:
            with self.connection() as conn:
                data = work(conn)
        return OpResult(spec.name, spec.render(data), data)

    def _read(self, work: Callable[[Connection[Any]], T]) -> T | None:
        """``work`` done on the standby; None when there is none or it cannot serve now."""
        if self._standby is None:
            return None
        self.pool  # noqa: B018 - connected to the primary first (migrated, its position noted)
        try:
            return self._standby.serve(work)
        except Missed:
            return None

    # -- maintenance: see ghostmem.maintenance ----------------------------------------------------------------

    def import_paths(
        self,
        paths: Sequence[str | Path] | None = None,
        *,
        tier: str = "personal",
        embed: bool = True,
        enrich: bool = True,
        progress: bool = False,
    ) -> ImportReport:
        """Import conversations from files, folders or export zips (every platform's usual place when ``paths`` is
        None), then embed (``embed=False``: later, with :meth:`embed_pending`) and enrich what changed."""
        from ghostmem import maintenance

        with self.connection() as conn:
            return maintenance.import_paths(
                conn, self.owner, tier, self.embedder, paths, embed=embed, enrich=enrich, progress=progress
            )

    def import_langchain_table(
        self,
        from_dsn: str,
        table: str,
        *,
        tier: str = "personal",
        embed: bool = True,
        enrich: bool = True,
        progress: bool = False,
    ) -> ImportReport:
        """Import a langchain-postgres ``PostgresChatMessageHistory`` table (``schema.table``) from the database at
        ``from_dsn``; later runs read only rows added since."""
        from ghostmem import maintenance

        with self.connection() as conn:
            return maintenance.import_langchain_table(
                conn,
                self.owner,
                tier,
                self.embedder,
                from_dsn,
                table,
                embed=embed,
                enrich=enrich,
                progress=progress,
            )

    def watch(
        self,
        paths: Sequence[str | Path] | None = None,
        *,
        tier: str = "personal",
        embed: bool = True,
        interval: float = 30.0,
        on_report: Callable[[ImportReport], None] | None = None,
        rounds: int | None = None,
    ) -> None:
        """Import, then poll every ``interval`` seconds and import what grew, until interrupted (or ``rounds``)."""
        from ghostmem import maintenance

        maintenance.watch(
            self.connection, self.owner, tier, self.embedder, paths,
            embed=embed, interval=interval, on_report=on_report, rounds=rounds,
        )  # fmt: skip

    def embed_pending(self, *, progress: bool = False) -> EmbedReport:
        """Embed the messages an import with ``embed=False`` left without a vector, and refresh their conversations."""
        from ghostmem import maintenance

        with self.connection() as conn:
            return maintenance.embed_pending(conn, self.owner, self.embedder, progress=progress)

    def enrich(self) -> int:
        """Recompute intensity, conversation vectors, clusters and topics of every conversation; returns how many."""
        from ghostmem import maintenance

        with self.connection() as conn:
            return maintenance.enrich(conn, self.owner)

    def maintain(self, *, every_owner: bool = False) -> MaintainReport:
        """Bring this owner's (``every_owner``: every owner's) search speedups up to date as the end of an import
        does (graphs, words indexes, pending lists, common words, statistics): for a store fed by live capture
        alone. Only the schema owner's role may (an application's raises :class:`PermissionDenied`)."""
        from ghostmem import maintenance

        with self.connection() as conn:
            return maintenance.maintain(conn, None if every_owner else self.owner)

    def forget(self, conv_id: str, *, force: bool = False) -> list[str]:
        """Delete a conversation (and its subagents' conversations) with its messages and vectors, and keep it from
        being imported again; returns the conversation ids removed. An id that is not stored raises
        :class:`NotFound` unless ``force`` (then it is only kept from ever being imported)."""
        from ghostmem import maintenance

        with self.connection() as conn:
            return maintenance.forget(conn, self.owner, conv_id, force=force)

    def unforget(self, conv_id: str) -> list[str]:
        """Undo :meth:`forget`: the conversation (and its subagents') may be imported again; returns their ids."""
        from ghostmem import maintenance

        with self.connection() as conn:
            return maintenance.unforget(conn, self.owner, conv_id)

    def reembed(self, embedder: Embedder | str) -> dict[str, Any]:
        """Switch the database to another embedding model (and dimension) and embed everything again; this client
        uses the new model afterwards. Every owner's data is re-embedded."""
        self.close()  # pooled connections know the old vector columns
        return self._reembed(embedder)

    # -- operator: project grants (ghostmem.ghosts) and application roles (ghostmem.db.roles) --------------------------------------------------------

    def grant_project(self, role: str, project: str) -> list[str]:
        """Let the database login role ``role`` claim ``project`` for ghost memories (its other claims are refused);
        returns every project the role may now claim."""
        from ghostmem.ghosts import grant_project

        with self.connection() as conn:
            return grant_project(conn, role, project)

    def revoke_project(self, role: str, project: str | None = None) -> list[str]:
        """Take ``project`` (None: the whole map) from ``role``; returns what it may still claim (empty: anything)."""
        from ghostmem.ghosts import revoke_project

        with self.connection() as conn:
            return revoke_project(conn, role, project)

    def restore_memory(self, memory_id: int) -> str:
        """Put this owner's retired ghost memory ``memory_id`` back into every search (same id, signals and
        feedback, a fresh vector); returns its text. Only the operator's role may (retiring is the agents')."""
        from ghostmem.ghosts import restore_memory

        with self.connection() as conn:
            return restore_memory(conn, self.owner, memory_id, self.embedder)

    def grant_app(self, role: str, *, read_only: bool = False) -> None:
        """Let the login ``role`` read (and unless ``read_only``, write) personal memory and use ghost memories,
        without migrating (it joins this client's runtime role)."""
        from ghostmem.db.roles import grant_app

        with self.connection() as conn:
            grant_app(conn, role, self.settings.runtime_role, read_only=read_only)

    def revoke_app(self, role: str) -> None:
        """Take back everything :meth:`grant_app` gave ``role``."""
        from ghostmem.db.roles import revoke_app

        with self.connection() as conn:
            revoke_app(conn, role, self.settings.runtime_role)

    # -- live capture: see ghostmem.capture (``owner``: whose memory, when not the client's) -------------------

    def _whose(self, owner: str | None) -> str:
        """The owner a capture call names (checked before anything is written), else the client's."""
        return checked_owner(owner) if owner else self.owner

    @contextmanager
    def _capturing(self, owner: str, conv_id: str) -> Iterator[Connection[Any]]:
        """A connection for a capture that writes ``owner``'s ``conv_id``, whose project then gets its graph if it
        has just grown large enough (:func:`ghostmem.maintenance.build_captured_project_graph`: the capture commits
        first, so a build killed or refused loses nothing captured)."""
        from ghostmem import maintenance

        with self.connection() as conn:
            yield conn
            maintenance.build_captured_project_graph(conn, owner, conv_id)

    def capture_messages(self, conv_id: str, *, owner: str | None = None) -> list[MessageRecord]:
        """The messages of a captured conversation, in order (empty when it does not exist)."""
        from ghostmem import capture

        with self.connection() as conn:
            return capture.load_messages(conn, self._whose(owner), conv_id)

    def capture_append(
        self,
        conv_id: str,
        messages: Sequence[MessageRecord],
        *,
        platform: Platform,
        title: str | None = None,
        project: str | None = None,
        owner: str | None = None,
    ) -> SaveResult:
        """Add ``messages`` at the end of a captured conversation (created on first use), stored and embedded at once
        so that searches find them when the call returns."""
        from ghostmem import capture

        with self._capturing(who := self._whose(owner), conv_id) as conn:
            return capture.append_messages(
                conn,
                who,
                conv_id,
                platform,
                messages,
                embedder=self.embedder,
                title=title,
                project=project,
            )

    def capture_replace(
        self,
        conv_id: str,
        messages: Sequence[MessageRecord],
        *,
        platform: Platform,
        title: str | None = None,
        project: str | None = None,
        owner: str | None = None,
    ) -> SaveResult:
        """Make a captured conversation hold exactly ``messages`` (an empty list deletes it)."""
        from ghostmem import capture

        with self._capturing(who := self._whose(owner), conv_id) as conn:
            return capture.save_messages(
                conn,
                who,
                conv_id,
                platform,
                messages,
                embedder=self.embedder,
                title=title,
                project=project,
            )

    def capture_remove(
        self,
        conv_id: str,
        index: int,
        *,
        platform: Platform,
        project: str | None = None,
        owner: str | None = None,
    ) -> MessageRecord | None:
        """Remove one message of a captured conversation (``index`` as in a list: -1 is the last); returns it, or
        None when there is no such message."""
        from ghostmem import capture

        with self._capturing(who := self._whose(owner), conv_id) as conn:
            return capture.remove_message(
                conn, who, conv_id, platform, index, embedder=self.embedder, project=project
            )

    def capture_delete(self, conv_id: str, *, owner: str | None = None) -> list[MessageRecord]:
        """Delete a captured conversation; returns the messages it held (empty when there was none)."""
        from ghostmem import capture

        with self.connection() as conn:
            return capture.remove_conversation(conn, self._whose(owner), conv_id)

    def capture_sync(
        self,
        conv_id: str,
        messages: Sequence[MessageRecord],
        ids: Sequence[str],
        *,
        platform: Platform,
        title: str | None = None,
        project: str | None = None,
        owner: str | None = None,
    ) -> SaveResult:
        """Make a captured conversation hold ``messages`` (an agent's whole thread, identified by the application's
        message ``ids``), writing only those not stored yet; a thread whose beginning changed is replaced."""
        from ghostmem import capture

        with self._capturing(who := self._whose(owner), conv_id) as conn:
            return capture.sync_messages(
                conn, who, conv_id, platform, messages, ids,
                embedder=self.embedder, title=title, project=project,
            )  # fmt: skip

    def capture_ids(self, platform: Platform, *, owner: str | None = None) -> list[str]:
        """The conv_ids of one platform's captured conversations, oldest first."""
        from ghostmem import capture

        with self.connection() as conn:
            return capture.conversation_ids(conn, self._whose(owner), platform)

    def close(self) -> None:
        """Close the pools ghostmem opened, this store's and its async twin's (a pool passed in stays open); the
        next call opens new ones. From inside the twin's running event loop, prefer ``await aclose()``."""
        with self._lock:
            pool, self._pool = self._pool, None
            twin = self._aio
        if pool is not None and pool is not self._given_pool:
            pool.close()
        if self._standby is not None:
            self._standby.close()
        if twin is not None:
            twin.close_sync()

    async def aclose(self) -> None:
        """Close both stores' pools from async code (the async ones on their loops, the sync ones in a worker
        thread)."""
        with self._lock:
            twin = self._aio
        if twin is not None:
            await twin.close()
        await asyncio.to_thread(self.close)

    def __enter__(self) -> GhostMem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncGhostMem(_Base, AsyncOps):
    """Asynchronous twin of :class:`GhostMem`: ``await agm.run(...)``, ``await agm.search_personal_memory(...)``."""

    _pool_class = AsyncConnectionPool
    _standby_class = AsyncStandby
    _standby: AsyncStandby | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        given = self._given_pool
        self._pools = LoopPools(self._open, given if isinstance(given, AsyncConnectionPool) else None)

    async def connect(self) -> AsyncGhostMem:
        await self.apool()
        return self

    async def apool(self) -> AsyncConnectionPool:
        """The primary's pool for the running event loop, opened on its first use (by one task; the others wait
        for it; see :mod:`ghostmem.db.loops`)."""
        return await self._pools.get()

    async def _open(self) -> AsyncConnectionPool:
        dsn = await asyncio.to_thread(self._prepare)
        given = self._given_pool
        pool = (
            given if isinstance(given, AsyncConnectionPool) else await db.open_async_pool(dsn, self.settings)
        )
        if self._standby is not None:  # reads wait for the standby to hold what is there now
            async with db.acheckout(pool, committed=self._standby.saw):
                pass
        return pool

    async def run(
        self,
        name: str,
        arguments: Mapping[str, Any] | BaseModel | None = None,
        *,
        context: OpContext | None = None,
    ) -> OpResult[Any]:
        spec = get_op(name)
        args = self._args(spec, arguments)
        ctx = context or self.context

        async def work(conn: AsyncConnection[Any]) -> Any:
            return await run_async(spec.program(ctx, args), conn, self.embedder)

        data = await self._read(work) if spec.effect is Effect.READS else None
        if data is None:
            pool = await self.apool()
            async with db.acheckout(
                pool, committed=None if self._standby is None else self._standby.saw
            ) as conn:
                data = await work(conn)
        return OpResult(spec.name, spec.render(data), data)

    async def _read(self, work: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T | None:
        """See :meth:`GhostMem._read`."""
        if self._standby is None:
            return None
        await self.apool()
        try:
            return await self._standby.serve(work)
        except Missed:
            return None

    # -- maintenance: the same jobs as GhostMem's, in a worker thread on a connection of their own --------------

    async def _in_thread(self, job: Callable[[Connection[Any]], T]) -> T:
        def work() -> T:
            with self._own_connection() as conn:
                return job(conn)

        return await asyncio.to_thread(work)

    async def import_paths(
        self,
        paths: Sequence[str | Path] | None = None,
        *,
        tier: str = "personal",
        embed: bool = True,
        enrich: bool = True,
        progress: bool = False,
    ) -> ImportReport:
        """See :meth:`GhostMem.import_paths`."""
        from ghostmem import maintenance

        return await self._in_thread(
            lambda conn: maintenance.import_paths(
                conn, self.owner, tier, self.embedder, paths, embed=embed, enrich=enrich, progress=progress
            )
        )

    async def import_langchain_table(
        self,
        from_dsn: str,
        table: str,
        *,
        tier: str = "personal",
        embed: bool = True,
        enrich: bool = True,
        progress: bool = False,
    ) -> ImportReport:
        """See :meth:`GhostMem.import_langchain_table`."""
        from ghostmem import maintenance

        return await self._in_thread(
            lambda conn: maintenance.import_langchain_table(
                conn,
                self.owner,
                tier,
                self.embedder,
                from_dsn,
                table,
                embed=embed,
                enrich=enrich,
                progress=progress,
            )
        )

    async def embed_pending(self, *, progress: bool = False) -> EmbedReport:
        """See :meth:`GhostMem.embed_pending`."""
        from ghostmem import maintenance

        return await self._in_thread(
            lambda conn: maintenance.embed_pending(conn, self.owner, self.embedder, progress=progress)
        )

    async def enrich(self) -> int:
        """See :meth:`GhostMem.enrich`."""
        from ghostmem import maintenance

        return await self._in_thread(lambda conn: maintenance.enrich(conn, self.owner))

    async def maintain(self, *, every_owner: bool = False) -> MaintainReport:
        """See :meth:`GhostMem.maintain`."""
        from ghostmem import maintenance

        return await self._in_thread(
            lambda conn: maintenance.maintain(conn, None if every_owner else self.owner)
        )

    async def forget(self, conv_id: str, *, force: bool = False) -> list[str]:
        """See :meth:`GhostMem.forget`."""
        from ghostmem import maintenance

        return await self._in_thread(lambda conn: maintenance.forget(conn, self.owner, conv_id, force=force))

    async def unforget(self, conv_id: str) -> list[str]:
        """See :meth:`GhostMem.unforget`."""
        from ghostmem import maintenance

        return await self._in_thread(lambda conn: maintenance.unforget(conn, self.owner, conv_id))

    async def reembed(self, embedder: Embedder | str) -> dict[str, Any]:
        """See :meth:`GhostMem.reembed`."""
        await self.close()
        return await asyncio.to_thread(self._reembed, embedder)

    async def close(self) -> None:
        """Close the pools ghostmem opened (a pool passed in stays open), each on its own event loop; the next call
        opens new ones."""
        await self._pools.close()
        if self._standby is not None:
            await self._standby.pools.close()

    def close_sync(self) -> None:
        """:meth:`close` for synchronous code (``GhostMem.close`` closes its twin with it)."""
        self._pools.close_sync()
        if self._standby is not None:
            self._standby.pools.close_sync()

    async def __aenter__(self) -> AsyncGhostMem:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
