"""Statistics after a first import (migration 177): the tables an import filled that were never analyzed and are
past the setting ``analyze_new_pages`` are analyzed by the schema owner's function, small ones are left to
autovacuum, and a role that may not run the function cannot, while its imports still succeed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder, maintenance
from psycopg import sql
from support.conversations import conversation, import_generic
from support.databases import app_login, fresh_database

FILLED = ("messages", "conversations", "message_lengths", "message_bits", "message_counts", "message_days")


def _convs(tag: str, n: int) -> list[dict[str, Any]]:
    return [
        conversation(
            f"{tag}{i}", f"talk {tag}{i}", 1 + i, [f"deploy step {tag} {i}", "the plan is ready"], "alpha"
        )
        for i in range(n)
    ]


def _tuples(conn: psycopg.Connection[Any]) -> dict[str, float]:
    """reltuples of each table of the schema, and of the owner partitions of the compact vectors as 'partition'."""
    rows = conn.execute(
        "SELECT c.relname, c.reltuples FROM pg_class c WHERE c.relnamespace = 'ghostmem'::regnamespace"
        " AND c.relkind = 'r'"
    ).fetchall()
    return {("partition" if r[0].startswith("message_vectors_") else r[0]): float(r[1]) for r in rows}


@pytest.fixture
def store(server_dsn: str) -> Iterator[str]:
    with fresh_database(server_dsn, "ghostmem_analyze") as dsn:
        with GhostMem(dsn=dsn, owner="setup", embedder=HashEmbedder()) as gm:
            gm.connect()
        yield dsn


def _pages(dsn: str, pages: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE ghostmem.settings SET value = %s WHERE key = 'analyze_new_pages'", (str(pages),))


def test_a_first_import_analyzes_the_tables_it_filled(store: str, tmp_path: Path) -> None:
    """With the size bound at one page, a first import leaves statistics on every table it wrote (never analyzed
    before, reltuples -1, or counted empty by a migration), the owner's vector partition among them, and none on a
    table it did not write."""
    _pages(store, 1)
    with psycopg.connect(store) as conn:
        before = _tuples(conn)
    assert {t: before[t] for t in FILLED if before[t] > 0} == {} and "partition" not in before
    with GhostMem(dsn=store, owner="ann", embedder=HashEmbedder()) as gm:
        import_generic(gm, tmp_path / "a.jsonl", _convs("a", 30))
    with psycopg.connect(store) as conn:
        after = _tuples(conn)
        items = conn.execute("SELECT count(*) FROM ghostmem.store_items").fetchone()
    assert {t: after[t] for t in FILLED if after[t] <= 0} == {} and after["partition"] > 0
    assert (
        items == (0,) and after["store_items"] == before["store_items"] <= 0
    )  # an empty table is left as it was


def test_small_tables_are_left_to_autovacuum(store: str, tmp_path: Path) -> None:
    """At the shipped bound (128 pages) an import of a few conversations analyzes nothing, so the plans of a small
    store do not change; a later store past the bound is analyzed by the next import."""
    with GhostMem(dsn=store, owner="ann", embedder=HashEmbedder()) as gm:
        import_generic(gm, tmp_path / "a.jsonl", _convs("a", 30))
        with psycopg.connect(store) as conn:
            assert _tuples(conn)["messages"] < 0
        _pages(store, 1)
        import_generic(gm, tmp_path / "b.jsonl", _convs("b", 2))
    with psycopg.connect(store) as conn:
        assert _tuples(conn)["messages"] > 0


def test_a_role_that_may_not_analyze_cannot_and_its_import_still_succeeds(store: str, tmp_path: Path) -> None:
    """An application's login (`grant-app`) and one granted the runtime role may not run the function, and their
    own ANALYZE of a table is skipped (not its owner); the login's import succeeds without the step and leaves the
    statistics to autovacuum."""
    _pages(store, 1)
    with app_login(store) as app_dsn:
        with psycopg.connect(app_dsn, autocommit=True) as conn:
            conn.execute("ANALYZE ghostmem.messages")  # PostgreSQL skips it with a warning: not the owner
            for role in (None, "ghostmem_runtime"):
                if role:
                    conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute("SELECT ghostmem.analyze_new_tables()")
            conn.execute("RESET ROLE")
            assert maintenance.analyze_new_tables(conn) == 0
        with GhostMem(dsn=app_dsn, owner="ann", embedder=HashEmbedder()) as gm:
            import_generic(gm, tmp_path / "a.jsonl", _convs("a", 30))
    with psycopg.connect(store) as conn:
        assert _tuples(conn)["messages"] < 0


def test_a_callers_temporary_tables_are_never_analyzed(store: str) -> None:
    """A session's temporary tables named as ghostmem's (and a search_path that puts them first) do not redirect
    the function: it names the schema's own relations only."""
    _pages(store, 0)
    with psycopg.connect(store, autocommit=True) as conn:
        conn.execute("CREATE TEMP TABLE messages (x int)")
        conn.execute("CREATE TEMP TABLE settings (key text, value text)")
        conn.execute("INSERT INTO settings VALUES ('analyze_new_pages', '100000')")
        conn.execute("SET search_path = pg_temp, ghostmem, public")
        analyzed = maintenance.analyze_new_tables(conn)
        temp = conn.execute(
            "SELECT c.reltuples FROM pg_class c WHERE c.oid = 'pg_temp.messages'::regclass"
        ).fetchone()
        assert analyzed > 0 and temp == (-1,)
        assert _tuples(conn)["settings"] >= 0
