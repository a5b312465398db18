"""bench.serve on a small load: its invariants hold (the figures themselves are the bench's, not the test's)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import serve


def test_serve_survives_a_restart_within_its_pool(embedded_home: Path, tmp_path: Path) -> None:
    out = tmp_path / "serve.json"
    # The pool timeout is how long a call waits for a connection, in the outage and after it alike. Right after the
    # restart, 32 parallel calls wait for 3 connections opened one at a time on a cold server (about 0.15 s for the
    # last one on a quiet machine); they also waited for the pool's schedule of retries, which ghostmem no longer
    # keeps (db._RECONNECT). With 1 s, the run failed 2 calls after the restart once on a loaded machine.
    argv = ["--owners", "40", "--turns", "8", "--outage-turns", "2", "--pool", "3", "--pool-timeout", "5"]
    assert serve.main([*argv, "--home", str(embedded_home), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    before, outage, after = (result["phases"][name] for name in ("before", "outage", "after"))
    assert before["tool_calls"] == after["tool_calls"] == 8 * 4 and before["errors"] == after["errors"] == 0
    assert outage["tool_calls"] == outage["errors"] == 2 * 4 and outage["errors_one_line"]
    assert outage["error_sentences"][0].startswith("no database connection within 5s")
    assert 1 <= result["peak_connections"] <= 3
