"""The CPU time a local PostgreSQL server has used, read from ``/proc``: what a block of searches cost the server.

A search's latency is the wall time of its statements; once a system runs statements at once on several
connections, that is no longer the work it did. The server's CPU time over a block of searches, divided by their
number, is the second figure: the work each search costs whatever its latency.

The server's processes are its postmaster and the postmaster's children: a backend per connection, parallel
workers, autovacuum, the checkpointer and the other background processes. A live process counts its own CPU time
(``/proc/<pid>/schedstat``, in nanoseconds; ``utime + stime`` of ``/proc/<pid>/stat``, in clock ticks, where the
kernel keeps no schedstat); a child that has exited (a parallel worker, a closed connection) is counted in the
postmaster's ``cutime + cstime`` once reaped. The background processes are in the sum: on an idle bench server
they add a few milliseconds a minute, within the reading's resolution.

Only a server on this machine can be read: the server is found as the parent of the reading connection's own
backend, which must be a process here that started when the server says that backend started; otherwise
:meth:`ServerCPU.of` returns None (a server elsewhere, another container) and the figure is left out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

PROC = Path("/proc")
START_TOLERANCE_S = 2.0  # a backend's start by /proc and by the server: clock ticks and rounding apart


@dataclass(frozen=True)
class ProcStat:
    """What ``/proc/<pid>/stat`` says of a process (times in seconds)."""

    name: str
    ppid: int
    own: float  # utime + stime
    reaped_children: float  # cutime + cstime: children that have exited and been waited for
    start_ticks: int  # clock ticks after boot


def parse_stat(line: str, ticks_per_second: int) -> ProcStat:
    """One ``/proc/<pid>/stat`` line (the name, in parentheses, may hold spaces and parentheses itself)."""
    head, _, tail = line.rpartition(")")
    name = head.partition("(")[2]
    fields = tail.split()  # fields[0] is the state (field 3 of proc(5))
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    return ProcStat(
        name=name,
        ppid=int(fields[1]),
        own=(utime + stime) / ticks_per_second,
        reaped_children=(cutime + cstime) / ticks_per_second,
        start_ticks=int(fields[19]),
    )


class ServerCPU:
    """Reads the CPU seconds a local server's processes have used so far (see the module's docstring)."""

    def __init__(self, postmaster: int, proc: Path = PROC) -> None:
        self.postmaster = postmaster
        self.proc = proc
        self.ticks = os.sysconf("SC_CLK_TCK")

    @classmethod
    def of(cls, conn: psycopg.Connection[Any], proc: Path = PROC) -> ServerCPU | None:
        """The server ``conn`` is connected to, if it runs on this machine (None otherwise)."""
        row = conn.execute(
            "SELECT pid, extract(epoch FROM backend_start) FROM pg_catalog.pg_stat_activity "
            "WHERE pid = pg_catalog.pg_backend_pid()"
        ).fetchone()
        if row is None or row[1] is None:
            return None
        reader = cls(0, proc)
        backend = reader._stat(int(row[0]))
        if backend is None or not backend.name.startswith("postgres"):
            return None
        started = reader._boot_time() + backend.start_ticks / reader.ticks
        if abs(started - float(row[1])) > START_TOLERANCE_S:
            return None  # a process of this machine with the same pid, not the server's backend
        reader.postmaster = backend.ppid
        return reader

    def seconds(self) -> float:
        """CPU seconds used by the postmaster, its live children and its reaped ones, up to now."""
        postmaster = self._stat(self.postmaster)
        if postmaster is None:
            raise RuntimeError(f"the server's postmaster (pid {self.postmaster}) is gone")
        total = self._own_seconds(self.postmaster, postmaster) + postmaster.reaped_children
        for entry in self.proc.iterdir():
            if not entry.name.isdigit() or int(entry.name) == self.postmaster:
                continue
            child = self._stat(int(entry.name))
            if child is not None and child.ppid == self.postmaster:
                total += self._own_seconds(int(entry.name), child) + child.reaped_children
        return total

    def process_seconds(self, pid: int) -> float | None:
        """CPU seconds one process (a backend of this server) has used so far; None when it is gone."""
        stat = self._stat(pid)
        return None if stat is None else self._own_seconds(pid, stat)

    def _own_seconds(self, pid: int, stat: ProcStat) -> float:
        try:
            return int((self.proc / str(pid) / "schedstat").read_text().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            return stat.own

    def _stat(self, pid: int) -> ProcStat | None:
        try:
            return parse_stat((self.proc / str(pid) / "stat").read_text(), self.ticks)
        except (OSError, ValueError, IndexError):
            return None  # no such process (here, or any more)

    def _boot_time(self) -> float:
        for line in (self.proc / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
        raise RuntimeError("no btime in /proc/stat")
