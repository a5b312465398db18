"""bench.reading runs (small sizes: its figures mean nothing here) and docs/benchmarks.md renders what it wrote."""

from __future__ import annotations

import json
from pathlib import Path

from bench import reading, report


def test_reading_bench_runs_and_is_reported(tmp_path: Path) -> None:
    assert (
        reading.main(
            ["--conversations", "40", "--repeat", "1", "--max-string-mb", "4", "--results", str(tmp_path)]
        )
        == 0
    )
    result = json.loads((tmp_path / "reading.json").read_text())
    assert result["bench"] == "reading" and result["export"]["conversations"] == 40
    assert [row["mb"] for row in result["long_string"]] == [4]
    assert [row["depth"] for row in result["deep_nesting"]] == [1_000, 10_000, 100_000]
    doc = report.render(tmp_path, tmp_path, with_plots=False)
    assert "## Reading hostile and large files" in doc and "python -m bench.reading --conversations 40" in doc
