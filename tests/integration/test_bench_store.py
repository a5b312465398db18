"""A smoke run of bench.store (fake embedder, few items) and its report section, so the bench cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

from bench import report, store


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
