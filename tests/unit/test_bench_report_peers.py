"""docs/benchmarks.md's peers tables: a run's block load (run-queue waits, steal) beside the server's CPU, and a
results file from before those figures were recorded still renders, with '–' where they are missing."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from bench import report

LOAD_KEYS = ("server_runq_ms_per_search", "bench_runq_ms_per_search", "steal_share")


def _write(directory: Path, run: dict[str, Any]) -> Path:
    directory.mkdir()
    (directory / "peers-100000.json").write_text(json.dumps(run))
    return directory


def _peers_run(with_load: bool) -> dict[str, Any]:
    """The committed 100k peers run, its systems' block load figures removed or set to known values."""
    run = copy.deepcopy(json.loads((report.RESULTS / "peers-100000.json").read_text()))
    for case in run["cases"]:
        for name, entry in case["systems"].items():
            for key in LOAD_KEYS:
                entry.pop(key, None)
            if with_load:
                gm = name == "ghostmem hybrid"
                entry.update(
                    server_runq_ms_per_search=1.25 if gm else 7.5,
                    bench_runq_ms_per_search=0.4 if gm else 4.2,
                    steal_share=0.0312 if gm else 0.125,
                )
    return run


def test_a_runs_block_load_is_shown_beside_the_cpu(tmp_path: Path) -> None:
    doc = report.render(_write(tmp_path / "new", _peers_run(with_load=True)), with_plots=False)
    assert "server run-queue wait ms per search | bench run-queue wait ms per search | steal |" in doc
    # the summary: each side's block, server / bench wait per search / steal
    assert "| 1.25 / 0.40 / 3.1 % | 7.50 / 4.20 / 12.5 % |" in doc
    # a case's table: the three figures right after the server's CPU per search
    gm_cpu = _peers_run(with_load=False)["cases"][0]["systems"]["ghostmem hybrid"]["cpu_ms_per_search"]
    assert f"| {gm_cpu:.2f} | 1.25 | 0.40 | 3.1 % |" in doc


def test_a_run_from_before_the_block_load_still_renders_with_dashes(tmp_path: Path) -> None:
    run = _peers_run(with_load=False)
    doc = report.render(_write(tmp_path / "old", run), with_plots=False)
    gm, lc = (
        run["cases"][0]["systems"][name]["cpu_ms_per_search"]
        for name in ("ghostmem hybrid", "PGVectorStore hybrid")
    )
    assert f"| {gm:.2f} | – | – | – |" in doc  # a case's table
    assert f"| {gm:.2f} / {lc:.2f} | – | – |" in doc  # the summary
