"""bench.server_cpu reads a server's CPU time from /proc: parsing, which processes count, and what each one counts;
and, over the same block, the run-queue waits of the server's processes and of the bench's threads, and the steal.

The /proc here is a directory built by the test (the real one is read in tests/integration/test_bench_server_cpu.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.server_cpu import Block, ServerCPU, parse_machine_time, parse_schedstat, parse_stat

TICKS = 100


def stat_line(
    pid: int, name: str, ppid: int, utime: int, stime: int, cutime: int = 0, cstime: int = 0
) -> str:
    """A /proc/<pid>/stat line as Linux writes it (fields 3-22; 44 fields in all)."""
    fields = [
        "S",
        ppid,
        pid,
        pid,
        0,
        -1,
        4194560,
        100,
        0,
        0,
        0,
        utime,
        stime,
        cutime,
        cstime,
        20,
        0,
        1,
        0,
        5000,
    ]
    fields += [0] * 24
    return f"{pid} ({name}) " + " ".join(str(f) for f in fields) + "\n"


def make_proc(
    root: Path,
    processes: dict[int, tuple[str, int, int, int, int, int]],
    schedstat: dict[int, int],
    waits: dict[int, int] | None = None,
    cpu_line: str = "cpu  1 2 3",
) -> Path:
    """A fake /proc: pid -> (name, ppid, utime, stime, cutime, cstime) in ticks; schedstat: pid -> nanoseconds on a
    core; waits: pid -> nanoseconds in a run queue (0 if not given)."""
    for pid, (name, ppid, utime, stime, cutime, cstime) in processes.items():
        d = root / str(pid)
        d.mkdir(parents=True, exist_ok=True)
        (d / "stat").write_text(stat_line(pid, name, ppid, utime, stime, cutime, cstime))
        if pid in schedstat:
            (d / "schedstat").write_text(f"{schedstat[pid]} {(waits or {}).get(pid, 0)} 1\n")
    (root / "stat").write_text(f"{cpu_line}\nbtime 1700000000\n")
    (root / "self").mkdir(exist_ok=True)  # not a pid: skipped
    return root


def make_threads(root: Path, threads: dict[int, tuple[int, int]]) -> None:
    """The reading process' threads in a fake /proc: tid -> (start ticks, run-queue nanoseconds); others go."""
    task = root / "self" / "task"
    task.mkdir(parents=True, exist_ok=True)
    for old in task.iterdir():
        if int(old.name) not in threads:
            for f in old.iterdir():
                f.unlink()
            old.rmdir()
    for tid, (start, wait) in threads.items():
        d = task / str(tid)
        d.mkdir(exist_ok=True)
        line = stat_line(tid, "python", 1, 0, 0).split()
        line[21] = str(start)  # field 22: the start time
        (d / "stat").write_text(" ".join(line) + "\n")
        (d / "schedstat").write_text(f"5000 {wait} 3\n")


def test_a_stat_line_is_parsed_whatever_the_process_name() -> None:
    st = parse_stat(stat_line(42, "postgres: bench ) (idle", 7, 150, 50, 30, 20), TICKS)
    assert st.name == "postgres: bench ) (idle" and st.ppid == 7
    assert st.own == pytest.approx(2.0) and st.reaped_children == pytest.approx(0.5)
    assert st.start_ticks == 5000


def test_the_server_is_its_postmaster_and_the_postmasters_children(tmp_path: Path) -> None:
    ticks = ServerCPU(0).ticks
    proc = make_proc(
        tmp_path,
        {
            10: ("postgres", 1, 1 * ticks, 0, 3 * ticks, 0),  # postmaster; its exited children: 3 s
            11: ("postgres", 10, 2 * ticks, 1 * ticks, 0, 0),  # a backend: 3 s by stat
            12: ("postgres", 10, 0, 0, 0, 0),  # a backend with schedstat: 0.25 s
            13: ("postgres", 1, 50 * ticks, 0, 0, 0),  # another server's postmaster: not counted
            14: ("python", 13, 40 * ticks, 0, 0, 0),  # its child: not counted
        },
        schedstat={12: 250_000_000},
    )
    assert ServerCPU(10, proc).seconds() == pytest.approx(1 + 3 + 3 + 0.25)


def test_a_process_that_exits_moves_from_the_live_sum_to_the_reaped_one(tmp_path: Path) -> None:
    ticks = ServerCPU(0).ticks
    procs = {10: ("postgres", 1, 0, 0, 0, 0), 11: ("postgres", 10, 4 * ticks, 0, 0, 0)}
    cpu = ServerCPU(10, make_proc(tmp_path, procs, {}))
    before = cpu.seconds()
    for f in (tmp_path / "11").iterdir():
        f.unlink()
    (tmp_path / "11").rmdir()
    make_proc(tmp_path, {10: ("postgres", 1, 0, 0, 5 * ticks, 0)}, {})  # reaped with 1 s more
    assert cpu.seconds() - before == pytest.approx(1.0)


def test_a_vanished_postmaster_is_an_error_not_a_zero(tmp_path: Path) -> None:
    cpu = ServerCPU(10, make_proc(tmp_path, {11: ("postgres", 10, 1, 1, 0, 0)}, {}))
    with pytest.raises(RuntimeError, match="postmaster"):
        cpu.seconds()


def test_a_schedstat_line_is_time_on_a_core_then_time_waiting_for_one() -> None:
    sched = parse_schedstat("1234567890 250000000 42\n")
    assert sched.cpu == pytest.approx(1.23456789) and sched.wait == pytest.approx(0.25)
    with pytest.raises(ValueError):
        parse_schedstat("1234567890\n")  # not a schedstat line: read as unknown, never as no wait


def test_the_steal_is_the_cpu_lines_eighth_value_out_of_the_first_eight() -> None:
    text = (
        "cpu  100 5 40 800 10 1 4 40 30 0\n"  # guest (30) is already in user: not counted twice
        "cpu0 50 2 20 400 5 0 2 20 15 0\n"
        "intr 12345\nbtime 1700000000\n"
    )
    machine = parse_machine_time(text)
    assert machine is not None and machine.steal == 40 and machine.total == 1000
    assert parse_machine_time("cpu  1 2 3 4\nbtime 1\n") is None  # a kernel that reports no steal
    assert parse_machine_time("btime 1\n") is None


def test_a_blocks_waits_are_the_servers_processes_and_the_bench_threads_alive_across_it(
    tmp_path: Path,
) -> None:
    ms = 1_000_000
    server = {
        10: ("postgres", 1, 0, 0, 0, 0),
        11: ("postgres", 10, 0, 0, 0, 0),
        12: ("postgres", 10, 0, 0, 0, 0),
    }
    other = {13: ("postgres", 1, 0, 0, 0, 0), 14: ("postgres", 13, 0, 0, 0, 0)}  # another server: not counted
    proc = make_proc(
        tmp_path,
        {**server, **other},
        schedstat=dict.fromkeys(range(10, 15), 1),
        waits={10: 1 * ms, 11: 5 * ms, 12: 7 * ms, 13: 100 * ms, 14: 100 * ms},
        cpu_line="cpu  100 0 100 700 0 0 0 100 0 0",
    )
    make_threads(proc, {1: (50, 2 * ms), 2: (60, 3 * ms), 3: (70, 4 * ms)})
    cpu = ServerCPU(10, proc)
    before = cpu.snapshot()
    # over the block: the postmaster waits 1 ms more, backend 11 4 ms more, backend 12 exits (its wait goes with
    # it), backend 15 starts and waits 6 ms; the other server waits 900 ms more; thread 1 waits 1 ms more, thread 2
    # exits and a new thread reuses tid 3 with 2 ms (all of it in the block); the machine runs 1,000 ticks more, 50
    # of them stolen
    for f in (proc / "12").iterdir():
        f.unlink()
    (proc / "12").rmdir()
    make_proc(
        proc,
        {10: server[10], 11: server[11], 15: ("postgres", 10, 0, 0, 0, 0), **other},
        schedstat=dict.fromkeys((10, 11, 13, 14, 15), 1),
        waits={10: 2 * ms, 11: 9 * ms, 15: 6 * ms, 13: 1000 * ms, 14: 1000 * ms},
        cpu_line="cpu  300 0 200 1350 0 0 0 150 0 0",
    )
    make_threads(proc, {1: (50, 3 * ms), 3: (90, 2 * ms)})
    block = cpu.snapshot().since(before)
    assert block.server_wait == pytest.approx((1 + 4 + 6) / 1000)
    assert block.bench_wait == pytest.approx((1 + 2) / 1000)
    assert (block.steal, block.machine_time) == (50, 1000)


def test_a_kernel_without_schedstat_or_steal_leaves_the_figures_unknown(tmp_path: Path) -> None:
    ticks = ServerCPU(0).ticks
    proc = make_proc(
        tmp_path, {10: ("postgres", 1, ticks, 0, 0, 0), 11: ("postgres", 10, ticks, 0, 0, 0)}, {}
    )
    cpu = ServerCPU(10, proc)
    block = cpu.snapshot().since(cpu.snapshot())
    assert block.cpu == 0.0  # read from /proc/<pid>/stat as before
    assert block.server_wait is None and block.bench_wait is None
    assert block.steal is None and block.machine_time is None


def test_a_system_whose_passes_saw_no_tick_of_the_machines_clock_had_no_steal() -> None:
    """bench.peers' steal share is the steal's ticks over the machine's over a system's passes; passes shorter than
    /proc/stat's tick (a smoke run's) may see none at all, and then none of steal either: 0, not a missing figure
    (the smoke run asserts it for every system). Where the kernel reports no steal, it stays unknown."""
    from bench.peers import _block_figures

    def block(steal: int | None, total: int | None) -> Block:
        return Block(cpu=0.001, server_wait=0.0, bench_wait=0.0, steal=steal, machine_time=total)

    assert _block_figures([block(0, 0), block(0, 0)], 2)["steal_share"] == 0.0
    assert _block_figures([block(0, 0), block(3, 12)], 2)["steal_share"] == 0.25
    assert "steal_share" not in _block_figures([block(None, None), block(3, 12)], 2)
