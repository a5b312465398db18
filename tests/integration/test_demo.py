"""`ghostmem demo`, the README's first command: real sample exports in, real conversations out — under their own
owner, never in the user's memory, and it says where they are, that a server runs, and how to stop and remove."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.cli import ghostmem


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
    assert (
        out["owner"] == owner
        and out["server"] is None
        and out["remove"] == f"ghostmem demo --remove --owner {owner}"
    )

    second = _demo(pg_dsn, owner)["import"]
    assert second["conversations_new"] == 0 and second["messages_new"] == 0


def _recent(env: dict[str, str], *owner: str) -> list[str]:
    res = ghostmem(*owner, "recent", "--days", "36500", "--json", env=env)
    assert res.returncode == 0, res.stderr
    return [row["conv_id"] for row in json.loads(res.stdout)["rows"]]


def test_demo_stays_out_of_the_users_memory(embedded_home: Path, tmp_path: Path) -> None:
    """A user with their own memory (GHOSTMEM_OWNER) runs the demo on the embedded server, then removes it."""
    env = {"GHOSTMEM_HOME": str(embedded_home), "GHOSTMEM_EMBED_MODEL": "hash", "GHOSTMEM_OWNER": "marco"}
    os.environ.pop("GHOSTMEM_DSN", None)
    mine = tmp_path / "mine.jsonl"
    message = {"role": "user", "text": "my own words", "ts": "2026-01-05T10:00:00Z"}
    mine.write_text(json.dumps({"conv_id": "my-own", "messages": [message]}) + "\n")
    assert ghostmem("import", str(mine), "--no-progress", env=env).returncode == 0

    res = ghostmem("demo", env=env)
    assert res.returncode == 0, res.stderr
    assert _recent(env) == ["my-own"]  # the user's memory: only their own conversation
    demo = _recent(env, "--owner", "demo")
    assert len(demo) == 11 and "my-own" not in demo
    # it ends by saying where the data is, that the server runs and how to stop it, and how to remove the demo
    tail = res.stdout[res.stdout.index("The demo's conversations") :]
    assert f"under owner 'demo' in the embedded server's data directory {embedded_home / 'pgdata'}" in tail
    assert "your own memory (owner 'marco') holds none of them" in tail
    assert "The embedded server is still running (pid " in tail and "`ghostmem db stop` stops it" in tail
    assert tail.rstrip().endswith("Remove the demo's data: `ghostmem demo --remove`.")
    status = json.loads(ghostmem("db", "status", "--json", env=env).stdout)
    assert status["running"] and f"(pid {status['pid']})" in tail

    removed = ghostmem("demo", "--remove", "--json", env=env)
    assert removed.returncode == 0 and len(json.loads(removed.stdout)["removed"]) == 11
    assert _recent(env, "--owner", "demo") == [] and _recent(env) == ["my-own"]
    # removed whole: importing the demo again brings every conversation back (nothing remembered as forgotten)
    again = json.loads(ghostmem("demo", "--json", env=env).stdout)
    assert again["import"]["conversations_new"] == 11
