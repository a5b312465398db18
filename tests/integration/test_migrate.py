"""Migrations against a real server: applied once and recorded, by two processes at once, a dimension mismatch
explained, and nothing to create once the schema is current."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psycopg
import pytest
from ghostmem.db import migrate as migrations
from ghostmem.db import prepare


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
