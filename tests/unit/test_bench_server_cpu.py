"""bench.server_cpu reads a server's CPU time from /proc: parsing, which processes count, and what each one counts.

The /proc here is a directory built by the test (the real one is read in tests/integration/test_bench_server_cpu.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.server_cpu import ServerCPU, parse_stat

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
    root: Path, processes: dict[int, tuple[str, int, int, int, int, int]], schedstat: dict[int, int]
) -> Path:
    """A fake /proc: pid -> (name, ppid, utime, stime, cutime, cstime) in ticks; schedstat: pid -> nanoseconds."""
    for pid, (name, ppid, utime, stime, cutime, cstime) in processes.items():
        d = root / str(pid)
        d.mkdir(parents=True, exist_ok=True)
        (d / "stat").write_text(stat_line(pid, name, ppid, utime, stime, cutime, cstime))
        if pid in schedstat:
            (d / "schedstat").write_text(f"{schedstat[pid]} 0 1\n")
    (root / "stat").write_text("cpu  1 2 3\nbtime 1700000000\n")
    (root / "self").mkdir(exist_ok=True)  # not a pid: skipped
    return root


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
