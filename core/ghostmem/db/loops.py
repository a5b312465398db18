"""Async pools that belong to the event loop they were opened on.

An ``AsyncConnectionPool``'s workers are tasks of the loop that opened it, so a pool cannot serve another loop (a
second ``asyncio.run``, a framework's loop in another thread), and a pool whose loop ends with the pool still
open leaves "Task was destroyed but it is pending!" behind. :class:`LoopPools` gives each loop that uses a client
a pool of its own, opened on first use by one task of that loop (a lock per loop), and closes each on its own
loop: awaited there while it runs, run once more while it is idle, and once it is closed (its tasks are gone) by
finishing the pool's idle connections. A pool left open when the interpreter exits is closed then.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable

from psycopg_pool import AsyncConnectionPool

logger = logging.getLogger(__name__)


class LoopPools:
    """One client's async pools, one per event loop, opened by ``opener`` on a loop's first call. The opener may
    return the application's own pool (``given``): that one is never closed here."""

    def __init__(
        self, opener: Callable[[], Awaitable[AsyncConnectionPool]], given: AsyncConnectionPool | None = None
    ) -> None:
        self._opener = opener
        self._given = given
        self._pools: dict[asyncio.AbstractEventLoop, AsyncConnectionPool] = {}
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._guard = threading.Lock()  # guards the two dicts across threads; never held across an await

    async def get(self) -> AsyncConnectionPool:
        """The running loop's pool, opened on its first use (by one task; the others wait for it). Opening one
        first closes the pools of loops that have been closed since."""
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is not None:
            return pool
        async with self._lock(loop):
            pool = self._pools.get(loop)
            if pool is None:
                for dead, _ in self._take(lambda other: other.is_closed()):
                    _close_idle_connections(dead)
                pool = await self._opener()
                with self._guard:
                    self._pools[loop] = pool
                _OPEN.add(self)
        return pool

    def opened(self) -> list[AsyncConnectionPool]:
        """The pools in use now, one per loop."""
        with self._guard:
            return list(self._pools.values())

    def _lock(self, loop: asyncio.AbstractEventLoop) -> asyncio.Lock:
        with self._guard:
            for other in [other for other in self._locks if other.is_closed()]:
                del self._locks[other]
            return self._locks.setdefault(loop, asyncio.Lock())

    def _take(
        self, which: Callable[[asyncio.AbstractEventLoop], bool]
    ) -> list[tuple[AsyncConnectionPool, asyncio.AbstractEventLoop]]:
        """Detach the pools of the loops ``which`` picks; those to be closed by the caller (not the given one)."""
        with self._guard:
            taken = [(pool, loop) for loop, pool in self._pools.items() if which(loop)]
            for _, loop in taken:
                del self._pools[loop]
            if not self._pools:
                _OPEN.discard(self)
        return [(pool, loop) for pool, loop in taken if pool is not self._given]

    async def close(self) -> None:
        """Close every pool opened here, each on its own loop; the next call opens a new one."""
        running = asyncio.get_running_loop()
        for pool, loop in self._take(lambda _: True):
            if loop is running:
                await pool.close()
            else:
                await asyncio.to_thread(_close_on_its_loop, pool, loop)

    def close_sync(self) -> None:
        """:meth:`close` for synchronous code. Called from inside a pool's own running loop (a sync function an
        async one called), that pool finishes closing in the background."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for pool, loop in self._take(lambda _: True):
            if loop is running:
                task = loop.create_task(pool.close())
                _CLOSING.add(task)
                task.add_done_callback(_CLOSING.discard)
            elif running is not None and not loop.is_running() and not loop.is_closed():
                # an idle loop cannot be run in a thread that is running another one
                worker = threading.Thread(target=_close_on_its_loop, args=(pool, loop))
                worker.start()
                worker.join()
            else:
                _close_on_its_loop(pool, loop)


# Pool closings started from synchronous code inside the pool's loop, kept until they finish.
_CLOSING: set[asyncio.Task[None]] = set()
# The LoopPools with a pool open: whatever an application left open is closed at interpreter exit, before the
# pools' pending worker tasks would be destroyed with their loop.
_OPEN: weakref.WeakSet[LoopPools] = weakref.WeakSet()


@atexit.register
def _close_left_open() -> None:
    for pools in list(_OPEN):
        try:
            pools.close_sync()
        except Exception as exc:  # the process is ending: note it, and go on closing the others
            logger.debug("closing an async pool at exit: %s", exc)


def _close_on_its_loop(pool: AsyncConnectionPool, loop: asyncio.AbstractEventLoop) -> None:
    """Close an async pool from outside its event loop, without blocking that loop: on the loop itself while it
    runs (in another thread), by running it once more while it is idle; a closed loop already ended the pool's
    workers, so only the idle connections are left, and they are closed directly."""
    if loop.is_running():
        asyncio.run_coroutine_threadsafe(pool.close(), loop).result(timeout=30)
    elif not loop.is_closed():
        loop.run_until_complete(pool.close())
    else:
        _close_idle_connections(pool)


def _close_idle_connections(pool: AsyncConnectionPool) -> None:
    """What ``pool.close()`` would close once its loop is gone: its idle connections (plain sockets; no task)."""
    pool._closed = True  # psycopg_pool has no public way to close a pool without its loop
    while pool._pool:
        pool._pool.popleft().pgconn.finish()
