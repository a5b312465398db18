"""Reads on a streaming-replication standby, everything else on the primary.

A client given ``read_dsn`` (or ``read_pool``) sends the operations whose :class:`ghostmem.ops.Effect` is
``READS`` to a standby and everything else (writes, ghost searches, which record use, imports, capture, every
``connection()``) to the primary. What a read may see:

- **Its own client's writes, always.** After each of its transactions on the primary, the client notes the
  primary's WAL position (``pg_current_wal_lsn()``, one round trip, only when a standby is configured); a read
  runs on the standby only once the standby has replayed that far (``pg_last_wal_replay_lsn()``), waiting at most
  ``read_wait`` seconds, else it runs on the primary. So a search right after a ``remember`` or a captured turn
  finds it, and a read never sees older data than the client saw on the primary before (migrations included:
  the position is noted when the client connects). The check is one query on the standby connection, made only
  while the client has written something that connection has not been seen to hold.
- **Other processes' writes, after the replication lag**, which this client does not bound (watch
  ``pg_stat_replication`` on the primary).

When the standby cannot serve a read, the read runs on the primary, never failing because of the standby: a
standby that is down, refuses connections, cancels the query (a recovery conflict), gives no connection within
``read_wait`` or cannot replay the client's writes within ``read_wait`` is left alone for ``read_retry`` seconds
(one warning when it is first left, one info line when it serves again); a standby pool whose connections are all
busy sends the read to the primary at once. An error that is the read's own answer (an unknown id, a bad
argument) is not a standby failure and is raised as it is.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ghostmem.config import Settings
from ghostmem.db import acheckout, checkout, open_async_pool, open_pool, pool_dsn, redact_dsn
from ghostmem.db.loops import LoopPools
from ghostmem.errors import DatabaseError, DatabaseUnavailable, InvalidArgument

logger = logging.getLogger(__name__)

T = TypeVar("T")

# The WAL position of a server as a number: how far it has written (a primary), or replayed (a standby).
_POSITION = "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint"
_REPLAYED = (
    "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END"
    " - '0/0'::pg_lsn)::bigint"
)
_POLL = 0.005  # seconds between two looks at the standby's replay while a read waits for it
_UNKNOWN = 2**63 - 1  # the primary's position could not be read: no standby holds it, reads go to the primary

# What says the standby cannot serve now (not that the read is wrong): the server is unreachable, or it did not
# carry the query out (recovery cancelled it: a conflict with the primary's changes being replayed).
_STANDBY_FAILURES = (DatabaseUnavailable, DatabaseError)


class Missed(Exception):
    """The standby could not serve this read; the caller runs it on the primary."""


class _Route:
    """What one client's reads on its standby depend on: the primary's WAL position the client last saw, the
    position each standby connection was last seen to have replayed, and whether the standby is left alone."""

    def __init__(self, settings: Settings, where: str) -> None:
        self.wait = settings.read_wait
        self.retry = settings.read_retry
        self.where = where
        self.seen = 0
        self._replayed: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._resting_until = 0.0
        self._left = False
        self._lock = threading.Lock()

    def saw(self, position: int | None) -> None:
        """Note the primary's WAL position after one of this client's transactions; None when it could not be read
        (the connection broke right after the commit): then reads go to the primary until a position is known."""
        with self._lock:
            if position is None:
                self.seen = _UNKNOWN
            else:
                self.seen = position if self.seen == _UNKNOWN else max(self.seen, position)

    def saw_on(self, conn: psycopg.Connection[Any]) -> None:
        """Note the primary's WAL position read on ``conn``, whose transaction has just committed."""
        try:
            with conn.transaction():
                row = conn.execute(_POSITION).fetchone()
        except psycopg.Error:
            row = None
        self.saw(int(row[0]) if row else None)

    def holds(self, conn: Any) -> bool:
        """Whether ``conn``'s server was seen to have replayed everything this client saw on the primary."""
        with self._lock:
            return self._replayed.get(conn, -1) >= self.seen

    def replayed(self, conn: Any, position: int | None) -> None:
        with self._lock:
            self._replayed[conn] = position if position is not None else -1

    def open(self) -> bool:
        return time.monotonic() >= self._resting_until

    def leave(self, why: str) -> None:
        """Send reads to the primary for ``read_retry`` seconds."""
        with self._lock:
            first, self._left = not self._left, True
            self._resting_until = time.monotonic() + self.retry
        if first:
            logger.warning(
                "reads go to the primary: the standby %s %s (trying it again every %gs)",
                self.where,
                why,
                self.retry,
            )

    def served(self) -> None:
        if self._left:
            with self._lock:
                back, self._left = self._left, False
            if back:
                logger.info("reads go to the standby %s again", self.where)


def _full(pool: ConnectionPool | AsyncConnectionPool) -> bool:
    """Every connection the pool may hold exists and is lent out: waiting would only slow the read down."""
    stats = pool.get_stats()
    return stats["pool_available"] == 0 and stats["pool_size"] >= pool.max_size


def _where(settings: Settings, pool: ConnectionPool | AsyncConnectionPool | None) -> str:
    if pool is not None:
        return f"of pool {pool.name!r}"
    assert settings.read_dsn is not None
    return f"at {redact_dsn(settings.read_dsn)}"


class Standby:
    """The read side of a :class:`ghostmem.GhostMem`: the standby's pool (opened on first use, or the
    application's ``read_pool``, never closed by ghostmem) and the route that decides whether it serves a read."""

    def __init__(self, settings: Settings, pool: ConnectionPool | None = None) -> None:
        self.settings = settings
        self.route = _Route(settings, _where(settings, pool))
        self._given = pool
        self._pool: ConnectionPool | None = pool
        self._lock = threading.Lock()

    def pool(self) -> ConnectionPool:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    assert self.settings.read_dsn is not None
                    self._pool = open_pool(self.settings.read_dsn, self.settings, standby=True)
        return self._pool

    def saw(self, conn: psycopg.Connection[Any]) -> None:
        """See :meth:`_Route.saw_on` (the ``committed`` hook of the primary's checkouts)."""
        self.route.saw_on(conn)

    def serve(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``work`` done on the standby, or :class:`Missed` when the standby cannot do it now."""
        if not self.route.open():
            raise Missed
        try:
            pool = self.pool()
            if _full(pool):
                raise Missed
            with checkout(pool, timeout=self.settings.read_wait) as conn:
                if not self._caught_up(conn):
                    self.route.leave(f"has not replayed this client's last write within {self.route.wait:g}s")
                    raise Missed
                result = work(conn)
        except _STANDBY_FAILURES as exc:
            self.route.leave(f"failed ({exc})")
            raise Missed from exc
        self.route.served()
        return result

    def _caught_up(self, conn: psycopg.Connection[Any]) -> bool:
        deadline = time.monotonic() + self.route.wait
        while not self.route.holds(conn):
            row = conn.execute(_REPLAYED).fetchone()
            self.route.replayed(conn, row[0] if row else None)
            if self.route.holds(conn):
                break
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL)
        return True

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, self._given
        if pool is not None and pool is not self._given:
            pool.close()

    def twin(self) -> AsyncStandby:
        """The async side of this standby (for the client's async twin): the same route, so a read of either side
        waits for the writes of both and a standby one side left alone is left alone by the other; a pool of its
        own on the same server (the application's sync ``read_pool`` lends its connection parameters)."""
        return AsyncStandby(
            self.settings, route=self.route, dsn=None if self._given is None else self._given_dsn
        )

    def _given_dsn(self) -> str:
        assert self._given is not None
        try:
            return pool_dsn(self._given)
        except InvalidArgument:
            raise InvalidArgument(
                "async calls read on the standby with a pool of their own, but this read_pool computes its "
                "connection parameters at connect time: pass read_dsn=... instead"
            ) from None


class AsyncStandby:
    """The async twin of :class:`Standby`, for :class:`ghostmem.AsyncGhostMem`: a pool per event loop
    (:class:`ghostmem.db.loops.LoopPools`), or the application's ``read_pool``. ``route`` and ``dsn`` (the
    standby's DSN, when not ``settings.read_dsn``) are given by :meth:`Standby.twin`."""

    def __init__(
        self,
        settings: Settings,
        pool: AsyncConnectionPool | None = None,
        *,
        route: _Route | None = None,
        dsn: Callable[[], str] | None = None,
    ) -> None:
        self.settings = settings
        self.route = route or _Route(settings, _where(settings, pool))
        self._dsn = dsn
        self._given = pool
        self.pools = LoopPools(self._open, pool)

    async def _open(self) -> AsyncConnectionPool:
        if self._given is not None:
            return self._given
        read_dsn = self._dsn() if self._dsn is not None else self.settings.read_dsn
        assert read_dsn is not None
        return await open_async_pool(read_dsn, self.settings, standby=True)

    async def saw(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """See :meth:`_Route.saw_on`."""
        try:
            async with conn.transaction():
                row = await (await conn.execute(_POSITION)).fetchone()
        except psycopg.Error:
            row = None
        self.route.saw(int(row[0]) if row else None)

    async def serve(self, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """See :meth:`Standby.serve`."""
        if not self.route.open():
            raise Missed
        try:
            pool = await self.pools.get()
            if _full(pool):
                raise Missed
            async with acheckout(pool, timeout=self.settings.read_wait) as conn:
                if not await self._caught_up(conn):
                    self.route.leave(f"has not replayed this client's last write within {self.route.wait:g}s")
                    raise Missed
                result = await work(conn)
        except _STANDBY_FAILURES as exc:
            self.route.leave(f"failed ({exc})")
            raise Missed from exc
        self.route.served()
        return result

    async def _caught_up(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        deadline = time.monotonic() + self.route.wait
        while not self.route.holds(conn):
            row = await (await conn.execute(_REPLAYED)).fetchone()
            self.route.replayed(conn, row[0] if row else None)
            if self.route.holds(conn):
                break
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(_POLL)
        return True
