"""`ghostmem demo`, the README's first command: real sample exports in, real conversations out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any


def _demo(dsn: str, owner: str) -> dict[str, Any]:
    res = subprocess.run(
        [sys.executable, "-m", "ghostmem.cli", "demo", "--json", "--dsn", dsn, "--owner", owner],
        capture_output=True,
        text=True,
        env={**os.environ, "GHOSTMEM_EMBED_MODEL": "hash"},
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def test_demo_imports_the_samples_and_finds_them(pg_dsn: str, owner: str) -> None:
    out = _demo(pg_dsn, owner)
    platforms = {row["platform"] for row in out["recent"]["rows"]}
    assert platforms == {"claude_code", "codex", "gemini", "chatgpt", "claude_ai"}
    ids = {row["conv_id"] for row in out["recent"]["rows"]}
    assert {"55604662-cf2a-4331-851a-ec234028f8ca", "c45af7b1-cb7c-4e51-93db-8cbb250a877a"} <= ids
    assert out["search"]["rows"][0]["conv_id"] == "55604662-cf2a-4331-851a-ec234028f8ca"
    assert out["import"]["problems"] == []
    assert out["import"]["conversations_new"] == 11 and out["import"]["files_read"] == 10

    second = _demo(pg_dsn, owner)["import"]
    assert second["conversations_new"] == 0 and second["messages_new"] == 0
