"""The embedded server's life cycle through the CLI, and the one clear error when no server answers."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import DatabaseUnavailable, GhostMem, HashEmbedder
from ghostmem.db.server import MALLOC_SETTINGS
from support.cli import ghostmem


def _environment(pid: int) -> dict[str, str]:
    """A process's environment as the kernel keeps it (what glibc's malloc read when the process started)."""
    entries = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
    return dict(entry.split("=", 1) for entry in entries if "=" in entry)


def _malloc_settings(status: dict[str, Any]) -> dict[str, str]:
    """The malloc settings of the server's postmaster: its backends are forks of it, with its malloc's state (their
    own /proc environ is overwritten by the title PostgreSQL shows in ps)."""
    return {k: v for k, v in _environment(int(status["pid"])).items() if k.startswith("MALLOC_")}


def test_embedded_server_lifecycle_and_doctor(embedded_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """db start/status/url/stop, then any command brings the server back by itself; doctor reports everything."""
    home = embedded_home
    for name in MALLOC_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    env = {"GHOSTMEM_HOME": str(home), "GHOSTMEM_EMBED_MODEL": "hash", "GHOSTMEM_SHARED_BUFFERS": "160MB"}
    os.environ.pop("GHOSTMEM_DSN", None)
    assert ghostmem("db", "start", env=env).returncode == 0
    status = json.loads(ghostmem("db", "status", "--json", env=env).stdout)
    assert status["running"] and status["dsn"].startswith("postgresql://")
    # the server keeps the memory a statement freed (docs/server.md, "Memory a connection keeps")
    assert (
        _malloc_settings(status)
        == MALLOC_SETTINGS
        == {
            "MALLOC_TRIM_THRESHOLD_": "268435456",
            "MALLOC_TOP_PAD_": "16777216",
            "MALLOC_MMAP_THRESHOLD_": "33554432",
        }
    )
    assert ghostmem("db", "stop", env=env).returncode == 0
    assert json.loads(ghostmem("db", "status", "--json", env=env).stdout)["running"] is False
    # the cache's contents were recorded at shutdown, to be read back when the server starts again
    assert (home / "pgdata" / "autoprewarm.blocks").exists()
    res = ghostmem("doctor", "--json", env=env)
    report = json.loads(res.stdout)
    assert json.loads(ghostmem("db", "status", "--json", env=env).stdout)["running"] is True
    assert report["checks"]["server"]["ok"] and report["checks"]["server"]["version"].startswith("18")
    assert report["checks"]["server"]["shared_buffers"] == "160MB"
    assert report["checks"]["vector"]["ok"] and report["checks"]["pg_trgm"]["ok"]
    assert report["checks"]["model"] == {"ok": True, "name": "hash", "dim": 384}
    assert "applied" in report["checks"]["migrations"]
    # a size set in the server lasts over a restart started without GHOSTMEM_SHARED_BUFFERS (as an MCP client's)
    dsn = json.loads(ghostmem("db", "status", "--json", env=env).stdout)["dsn"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET shared_buffers = '144MB'")
    assert ghostmem("db", "stop", env=env).returncode == 0
    unset = {k: v for k, v in env.items() if k != "GHOSTMEM_SHARED_BUFFERS"}
    assert (
        json.loads(ghostmem("doctor", "--json", env=unset).stdout)["checks"]["server"]["shared_buffers"]
        == "144MB"
    )
    assert ghostmem("db", "stop", env=env).returncode == 0
    assert (
        json.loads(ghostmem("doctor", "--json", env=env).stdout)["checks"]["server"]["shared_buffers"]
        == "160MB"
    )


def test_malloc_settings_of_the_environment_win(embedded_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A malloc setting of the environment that starts the server is the server's, not ghostmem's; the others are
    still set."""
    env = {
        "GHOSTMEM_HOME": str(embedded_home),
        "GHOSTMEM_SHARED_BUFFERS": "128MB",
        "MALLOC_TRIM_THRESHOLD_": "131072",
        "MALLOC_TOP_PAD_": "1048576",
    }
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    os.environ.pop("GHOSTMEM_DSN", None)
    assert ghostmem("db", "start", env=env).returncode == 0
    status = json.loads(ghostmem("db", "status", "--json", env=env).stdout)
    assert _malloc_settings(status) == {
        "MALLOC_TRIM_THRESHOLD_": "131072",
        "MALLOC_TOP_PAD_": "1048576",
        "MALLOC_MMAP_THRESHOLD_": MALLOC_SETTINGS["MALLOC_MMAP_THRESHOLD_"],
    }
    assert ghostmem("db", "stop", env=env).returncode == 0


def test_dead_dsn_in_python_raises_database_unavailable() -> None:
    gm = GhostMem(dsn="postgresql://nobody@127.0.0.1:1/none", embedder=HashEmbedder())
    with pytest.raises(DatabaseUnavailable, match="cannot connect"):
        gm.connect()
