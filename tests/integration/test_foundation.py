"""The foundation against a real server: migrations, races, the embedded server's life cycle, clear failures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest
from ghostmem import DatabaseUnavailable, GhostMem, HashEmbedder
from ghostmem.db import EmbeddedServer, prepare
from ghostmem.db import migrate as migrations
from ghostmem.program import Query, run_sync

pytestmark = pytest.mark.db


def _ghostmem(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ghostmem.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def test_migrations_apply_once_and_are_recorded(pg_dsn: str) -> None:
    prepare(pg_dsn, 384, "hash")
    assert prepare(pg_dsn, 384, "hash") == []
    with psycopg.connect(pg_dsn) as conn:
        assert migrations.applied(conn) == [m.version for m in migrations.available()]
        dims = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'ghostmem.messages'::regclass AND attname = 'embedding'"
        ).fetchone()
        assert dims == (384,)


def test_two_processes_migrate_at_once(server_dsn: str) -> None:
    """Both succeed, and every migration is applied exactly once."""
    name = "ghostmem_race"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    info = psycopg.conninfo.conninfo_to_dict(server_dsn)
    info["dbname"] = name
    dsn = psycopg.conninfo.make_conninfo(**info)
    env = {**os.environ, "GHOSTMEM_EMBED_MODEL": "hash"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "ghostmem.cli", "migrate", "--json", "--dsn", dsn],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    applied = [json.loads(out)["applied"] for out, _ in outputs]
    shipped = [f"{m.version:03d}_{m.name}" for m in migrations.available()]
    assert sorted(applied[0] + applied[1]) == sorted(shipped)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT version FROM ghostmem_migrations.applied ORDER BY version").fetchall()
        assert [r[0] for r in rows] == [m.version for m in migrations.available()]
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_dimension_mismatch_is_explained(pg_dsn: str) -> None:
    prepare(pg_dsn, 384, "hash")
    with pytest.raises(Exception, match="384-dimensional vectors but the configured model gives 768"):
        prepare(pg_dsn, 768, "other")


def test_dead_port_gives_one_line_and_nonzero_exit() -> None:
    res = _ghostmem(
        "recent", env={"GHOSTMEM_DSN": "postgresql://nobody@127.0.0.1:1/none", "GHOSTMEM_EMBED_MODEL": "hash"}
    )
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(
        "ghostmem: error: cannot connect to Postgres at postgresql://nobody@127.0.0.1:1/none"
    )


def test_dead_dsn_in_python_raises_database_unavailable() -> None:
    gm = GhostMem(dsn="postgresql://nobody@127.0.0.1:1/none", embedder=HashEmbedder())
    with pytest.raises(DatabaseUnavailable, match="cannot connect"):
        gm.connect()


def test_embedded_server_lifecycle_and_doctor() -> None:
    """db start/status/url/stop, then any command brings the server back by itself; doctor reports everything."""
    home = Path(tempfile.mkdtemp(prefix="ghostmem-life-"))
    env = {"GHOSTMEM_HOME": str(home), "GHOSTMEM_EMBED_MODEL": "hash", "GHOSTMEM_SHARED_BUFFERS": "160MB"}
    os.environ.pop("GHOSTMEM_DSN", None)
    try:
        assert _ghostmem("db", "start", env=env).returncode == 0
        status = json.loads(_ghostmem("db", "status", "--json", env=env).stdout)
        assert status["running"] and status["dsn"].startswith("postgresql://")
        assert _ghostmem("db", "stop", env=env).returncode == 0
        assert json.loads(_ghostmem("db", "status", "--json", env=env).stdout)["running"] is False
        # the cache's contents were recorded at shutdown, to be read back when the server starts again
        assert (home / "pgdata" / "autoprewarm.blocks").exists()
        res = _ghostmem("doctor", "--json", env=env)
        report = json.loads(res.stdout)
        assert json.loads(_ghostmem("db", "status", "--json", env=env).stdout)["running"] is True
        assert report["checks"]["server"]["ok"] and report["checks"]["server"]["version"].startswith("18")
        assert report["checks"]["server"]["shared_buffers"] == "160MB"
        assert report["checks"]["vector"]["ok"] and report["checks"]["pg_trgm"]["ok"]
        assert report["checks"]["model"] == {"ok": True, "name": "hash", "dim": 384}
        assert "applied" in report["checks"]["migrations"]
    finally:
        EmbeddedServer(home).stop()


def test_program_driver_runs_queries_in_one_transaction(gm: GhostMem) -> None:
    def program():  # type: ignore[no-untyped-def]
        yield Query("CREATE TEMP TABLE t (x int) ON COMMIT DROP", fetch="none")
        yield Query("INSERT INTO t VALUES (%s), (%s)", (1, 2), fetch="none")
        rows = yield Query("SELECT sum(x) AS s FROM t")
        return rows[0]["s"]

    with gm.connection() as conn:
        assert run_sync(program(), conn, gm.embedder) == 3


def test_current_schema_needs_no_create_rights(pg_dsn: str) -> None:
    """Once migrated, an application may connect with a login role that cannot create anything."""
    prepare(pg_dsn, 384, "hash")
    role = f"ghostmem_app_{os.getpid()}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA ghostmem_migrations, ghostmem TO {role}")
        conn.execute(f"GRANT SELECT ON ghostmem_migrations.applied, ghostmem.settings TO {role}")
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    info["user"] = role
    app_dsn = psycopg.conninfo.make_conninfo(**info)
    try:
        with psycopg.connect(app_dsn) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE SCHEMA ghostmem_probe")
        assert prepare(app_dsn, 384, "hash") == []
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA ghostmem_migrations, ghostmem FROM {role}")
            conn.execute(f"REVOKE ALL ON SCHEMA ghostmem_migrations, ghostmem FROM {role}")
            conn.execute(f"DROP ROLE {role}")
