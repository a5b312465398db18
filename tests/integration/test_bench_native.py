"""Smoke runs of bench.store and bench.capture (fake embedder, few items) and their report sections, so the benches cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

from bench import capture, report, store


def test_store_bench_times_both_stores_and_reports_them(server_dsn: str, tmp_path: Path) -> None:
    out = tmp_path / "store-40.json"
    argv = ["--items", "40", "--users", "4", "--queries", "6", "--model", "hash", "--dsn", server_dsn]
    assert store.main([*argv, "--json", str(out)]) == 0
    run = json.loads(out.read_text())
    assert run["bench"] == "store" and run["command"].startswith("python -m bench.store " + " ".join(argv))
    for op, n in (("put", 40), ("search", 6)):
        assert run[op]["ghostmem"]["n"] == run[op]["langgraph"]["n"] == n
        assert run["ratio"][f"{op}_p50"] == round(
            run[op]["langgraph"]["p50_ms"] / run[op]["ghostmem"]["p50_ms"], 2
        )
    assert 0 <= run["top10_overlap"] <= 1
    text = report.render(tmp_path, tmp_path / "img", with_plots=False)
    assert "## LangGraph store: GhostMemStore and PostgresStore" in text and run["command"] in text


def test_capture_bench_times_the_three_paths_and_reports_them(server_dsn: str, tmp_path: Path) -> None:
    out = tmp_path / "capture-60.json"
    argv = ["--messages", "60", "--turns", "3", "--model", "hash", "--dsn", server_dsn]
    assert capture.main([*argv, "--json", str(out)]) == 0
    run = json.loads(out.read_text())
    assert run["bench"] == "capture" and run["final_sizes"] == {"append": 66, "sync": 66, "rewrite": 66}
    assert {k: v["n"] for k, v in run["per_turn"].items()} == {"append": 3, "sync": 3, "rewrite": 3}
    text = report.render(tmp_path, tmp_path / "img", with_plots=False)
    assert "## Live capture: one turn at the end of a long conversation" in text and run["command"] in text
