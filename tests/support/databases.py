"""Databases of their own on the test server: created empty, dropped afterwards even when the test failed."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql


@contextmanager
def fresh_database(server_dsn: str, prefix: str = "ghostmem_test") -> Iterator[str]:
    """The DSN of a new, empty database on ``server_dsn``'s server (named ``prefix`` and a random suffix)."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    info = psycopg.conninfo.conninfo_to_dict(server_dsn)
    info["dbname"] = name
    try:
        yield psycopg.conninfo.make_conninfo(**info)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextmanager
def app_login(dsn: str) -> Iterator[str]:
    """The DSN of a new login granted an application's rights (`ghostmem grant-app`, read-write, with the runtime
    role) on the migrated database at ``dsn``; the login and what it owns are dropped afterwards."""
    app = f"ghostmem_app_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(app)))
        admin.execute("SELECT ghostmem.grant_app(%s, 'ghostmem_runtime')", (app,))
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info["user"] = app
    try:
        yield psycopg.conninfo.make_conninfo(**info)
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(app)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(app)))


def wait_until_blocked(dsn: str, application_name: str) -> None:
    """Return once the session named ``application_name`` waits for a lock (a process to be killed there); fail
    the test if it does not within a minute."""
    with psycopg.connect(dsn, autocommit=True) as watch:
        for _ in range(600):
            waiting = watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                " AND wait_event_type = 'Lock' AND state = 'active'",
                (application_name,),
            ).fetchone()
            if waiting == (1,):
                return
            time.sleep(0.1)
    raise AssertionError(f"{application_name} never waited for a lock")


@contextmanager
def graph_store(server_dsn: str, prefix: str, setting: str, value: int) -> Iterator[str]:
    """A database of its own, migrated, whose graphs' size setting ``setting`` (``project_graph_rows``, migration
    155; ``recent_graph_rows``, 210) is ``value``."""
    from ghostmem import GhostMem, HashEmbedder

    with fresh_database(server_dsn, prefix) as dsn:
        with GhostMem(dsn=dsn, owner="setup", embedder=HashEmbedder()) as gm:
            gm.connect()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("UPDATE ghostmem.settings SET value = %s WHERE key = %s", (str(value), setting))
        yield dsn


def vector_graphs(conn: psycopg.Connection[Any]) -> dict[str, tuple[str, str | None]]:
    """Each graph of the compact vectors (on its owner's partition of them, migration 163; a project's, 155, or the
    recent messages', 210): name -> (its predicate, its comment)."""
    rows = conn.execute(
        "SELECT c.relname, pg_get_expr(i.indpred, i.indrelid), obj_description(c.oid, 'pg_class')"
        " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE i.indrelid IN (SELECT t.relid FROM pg_partition_tree('ghostmem.message_vectors') t)"
        " AND c.relname LIKE 'message\\_vectors\\_graph\\_%'"
    ).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def graphs_where(conn: psycopg.Connection[Any], predicate: str) -> dict[str, tuple[str, str | None]]:
    """The graphs of :func:`vector_graphs` whose predicate begins with ``predicate`` (``(ts >=``: the recent
    messages', migration 210; ``(platform =``: a platform's, 230)."""
    return {name: graph for name, graph in vector_graphs(conn).items() if graph[0].startswith(predicate)}


def index_refused_to_the_application(
    conn: psycopg.Connection[Any], build: str, index: str, comment: str
) -> None:
    """The maintenance statement ``build`` and a DROP, an ALTER and a COMMENT (as ``comment``) of the index
    ghostmem.``index`` each fail for lack of privilege on ``conn`` (an application's login, :func:`app_login`,
    autocommit) as the login and as the runtime role it may take (left set on ``conn``)."""
    import pytest

    statements = [
        build,
        f"COMMENT ON INDEX ghostmem.{index} IS '{comment}'",
        f"ALTER INDEX ghostmem.{index} SET (gin_pending_list_limit = 4096)",
        f"DROP INDEX ghostmem.{index}",
    ]
    for role in (None, "ghostmem_runtime"):
        if role:
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        for statement in statements:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement.replace("%", "%%").encode())
