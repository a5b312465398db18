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

What the machine's load did to a block is read with it, in the same walk of ``/proc``
(:meth:`ServerCPU.snapshot`; :meth:`Snapshot.since` turns two snapshots into a :class:`Block`):

* the **server's run-queue wait**: how long the same processes were runnable but waiting for a core
  (``/proc/<pid>/schedstat`` field 2, nanoseconds). Only live processes keep it: one that exits during the block
  (a closed connection, a parallel worker) takes its wait with it, so the figure is a floor;
* the **bench's run-queue wait**: the same field of every thread of the reading process
  (``/proc/self/task/*/schedstat``: a client that searches on another thread, as PGVectorStore's engine does on its
  event loop's thread, is counted with the thread that waits for it);
* the machine's **steal**: the time the hypervisor ran something else while this VM wanted a core, as a share of
  all CPU time (``/proc/stat``'s ``cpu`` line, its 8th value over the sum of the first eight).

Processes and threads are told apart by pid and start time, so a pid reused within a block is not taken for the
process it replaced.
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


@dataclass(frozen=True)
class SchedStat:
    """What ``/proc/<pid>/schedstat`` says of a process or thread (seconds)."""

    cpu: float  # field 1: time on a core
    wait: float  # field 2: time runnable, waiting in a run queue for a core


def parse_schedstat(line: str) -> SchedStat:
    """One ``/proc/<pid>/schedstat`` line: on-core ns, run-queue ns, timeslices."""
    on_core, waiting = line.split()[:2]
    return SchedStat(cpu=int(on_core) / 1e9, wait=int(waiting) / 1e9)


@dataclass(frozen=True)
class MachineTime:
    """The machine's CPU time so far by ``/proc/stat``'s ``cpu`` line (clock ticks, all cores)."""

    steal: int  # the 8th value
    total: int  # the sum of the first eight (guest time is counted in user)


def parse_machine_time(text: str) -> MachineTime | None:
    """``/proc/stat``'s aggregate ``cpu`` line; None on a kernel that reports no steal (fewer than 8 values)."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            values = [int(v) for v in line.split()[1:9]]
            return MachineTime(steal=values[7], total=sum(values)) if len(values) == 8 else None
    return None


Waits = dict[tuple[int, int], float]  # (pid, start ticks) -> run-queue seconds so far


@dataclass(frozen=True)
class Block:
    """What a block of work cost, between two snapshots (seconds; the steal in clock ticks of all cores)."""

    cpu: float
    server_wait: float | None  # None where the kernel keeps no schedstat
    bench_wait: float | None
    steal: int | None  # None where the kernel reports no steal
    machine_time: int | None


@dataclass(frozen=True)
class Snapshot:
    """One reading of ``/proc``: the server's CPU seconds so far, the run-queue waits so far of its live processes
    and of the bench's threads, and the machine's CPU time."""

    cpu: float
    server_waits: Waits
    bench_waits: Waits
    machine: MachineTime | None

    def since(self, before: Snapshot) -> Block:
        """This snapshot less an earlier one: a process or thread alive at both counts its difference, one started
        in between all its wait, one gone by now nothing (its wait went with it)."""
        steal = machine_time = None
        if self.machine is not None and before.machine is not None:
            steal = self.machine.steal - before.machine.steal
            machine_time = self.machine.total - before.machine.total
        return Block(
            cpu=self.cpu - before.cpu,
            server_wait=_waited(before.server_waits, self.server_waits),
            bench_wait=_waited(before.bench_waits, self.bench_waits),
            steal=steal,
            machine_time=machine_time,
        )


def _waited(before: Waits, after: Waits) -> float | None:
    if not after:
        return None
    return sum(wait - before.get(key, 0.0) for key, wait in after.items())


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
        return self.snapshot().cpu

    def snapshot(self) -> Snapshot:
        """The server's CPU seconds and its live processes' run-queue waits so far, the bench's threads' waits and
        the machine's CPU time: one walk of ``/proc``."""
        postmaster = self._stat(self.postmaster)
        if postmaster is None:
            raise RuntimeError(f"the server's postmaster (pid {self.postmaster}) is gone")
        processes = [(self.postmaster, postmaster)]
        for entry in self.proc.iterdir():
            if not entry.name.isdigit() or int(entry.name) == self.postmaster:
                continue
            child = self._stat(int(entry.name))
            if child is not None and child.ppid == self.postmaster:
                processes.append((int(entry.name), child))
        cpu, server_waits = 0.0, Waits()
        for pid, stat in processes:
            own, wait = self._own(pid, stat)
            cpu += own + stat.reaped_children
            if wait is not None:
                server_waits[(pid, stat.start_ticks)] = wait
        return Snapshot(cpu, server_waits, self._bench_waits(), self._machine_time())

    def process_seconds(self, pid: int) -> float | None:
        """CPU seconds one process (a backend of this server) has used so far; None when it is gone."""
        stat = self._stat(pid)
        return None if stat is None else self._own(pid, stat)[0]

    def _own(self, pid: int, stat: ProcStat) -> tuple[float, float | None]:
        """A process' own CPU seconds (by schedstat, else by stat) and its run-queue wait (None without schedstat)."""
        sched = self._schedstat(self.proc / str(pid))
        return (stat.own, None) if sched is None else (sched.cpu, sched.wait)

    def _bench_waits(self) -> Waits:
        waits = Waits()
        tasks = self.proc / "self" / "task"
        for task in tasks.iterdir() if tasks.is_dir() else ():
            stat, sched = self._stat_at(task), self._schedstat(task)
            if stat is not None and sched is not None:
                waits[(int(task.name), stat.start_ticks)] = sched.wait
        return waits

    def _machine_time(self) -> MachineTime | None:
        try:
            return parse_machine_time((self.proc / "stat").read_text())
        except (OSError, ValueError):
            return None

    @staticmethod
    def _schedstat(directory: Path) -> SchedStat | None:
        try:
            return parse_schedstat((directory / "schedstat").read_text())
        except (OSError, ValueError):
            return None  # gone, or a kernel that keeps no schedstat

    def _stat(self, pid: int) -> ProcStat | None:
        return self._stat_at(self.proc / str(pid))

    def _stat_at(self, directory: Path) -> ProcStat | None:
        try:
            return parse_stat((directory / "stat").read_text(), self.ticks)
        except (OSError, ValueError, IndexError):
            return None  # no such process (here, or any more)

    def _boot_time(self) -> float:
        for line in (self.proc / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
        raise RuntimeError("no btime in /proc/stat")
