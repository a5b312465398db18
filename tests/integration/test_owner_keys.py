"""The schema is distributable by owner (docs/scaling.md, "Distributing by owner"): in ghostmem's schemas every
primary key, unique constraint or index, exclusion constraint and foreign key includes the owner column, and a
foreign key pairs the owner with the owner of the table it references. A sharded PostgreSQL (Citus) can only enforce
such keys, since each owner's rows live and are checked on one node. Tables without an owner are global by nature,
listed below; on Citus they are reference tables (copied to every node), which may be referenced but may not
reference a table distributed by owner. A later migration that adds a key without the owner fails here."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem.db import migrate as migrations
from ghostmem.db import prepare
from support.databases import fresh_database

SCHEMAS = ("ghostmem", "agent", "ghostmem_migrations")
OWNER = "owner"
# The only tables without an owner, each with why it is global (docs/scaling.md lists the same).
GLOBAL_TABLES = {
    "ghostmem.settings": "the schema's own facts (vector dimension, embedding model)",
    "ghostmem.embedding_cache": "a model's vector of a text, shared by every owner who wrote that text",
    "agent.role_projects": "the operator's map of database roles to the projects they may claim",
    "agent.runtime_roles": "the database roles granted the ghost memory API",
    "agent.runtime_api": "the functions of the ghost memory API a runtime role is granted",
    "ghostmem_migrations.applied": "which migrations ran (read and written by the migrating role only)",
}


def violations(conn: psycopg.Connection[Any]) -> list[str]:
    """Every key of ghostmem's schemas that a distribution by owner could not enforce, one sentence each."""
    found = [
        f"{table} has no {OWNER} column (distribute it by owner or list it as a global table)"
        for (table,) in conn.execute(
            """
            SELECT c.oid::regclass::text FROM pg_class c
             WHERE c.relnamespace::regnamespace::text = ANY(%s) AND c.relkind IN ('r', 'p')
               AND NOT c.oid::regclass::text = ANY(%s)
               AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = %s
                                                             AND a.attnotnull AND NOT a.attisdropped)
             ORDER BY 1
            """,
            (list(SCHEMAS), list(GLOBAL_TABLES), OWNER),
        )
    ]
    found += [
        f"{index} on {table} is a key without {OWNER}"
        for index, table in conn.execute(
            """
            SELECT i.indexrelid::regclass::text, i.indrelid::regclass::text FROM pg_index i
              JOIN pg_class c ON c.oid = i.indrelid
             WHERE c.relnamespace::regnamespace::text = ANY(%s) AND (i.indisunique OR i.indisexclusion)
               AND NOT i.indrelid::regclass::text = ANY(%s)
               AND NOT EXISTS (SELECT 1 FROM pg_attribute a
                                WHERE a.attrelid = i.indrelid AND a.attname = %s
                                  AND a.attnum = ANY((i.indkey::int2[])[0:i.indnkeyatts - 1]))
             ORDER BY 1
            """,
            (list(SCHEMAS), list(GLOBAL_TABLES), OWNER),
        )
    ]
    for name, table, target, pairs in conn.execute(
        """
        SELECT k.conname::text, k.conrelid::regclass::text, k.confrelid::regclass::text,
               array_agg(ARRAY[a.attname::text, fa.attname::text] ORDER BY p.n)
          FROM pg_constraint k
          JOIN pg_class c ON c.oid = k.conrelid
         CROSS JOIN LATERAL unnest(k.conkey, k.confkey) WITH ORDINALITY AS p(col, fcol, n)
          JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = p.col
          JOIN pg_attribute fa ON fa.attrelid = k.confrelid AND fa.attnum = p.fcol
         WHERE k.contype = 'f' AND c.relnamespace::regnamespace::text = ANY(%s)
         GROUP BY 1, 2, 3
         ORDER BY 2, 1
        """,
        (list(SCHEMAS),),
    ):
        if table in GLOBAL_TABLES and target not in GLOBAL_TABLES:
            found.append(f"{name}: global table {table} references {target}, which is distributed by owner")
        elif target not in GLOBAL_TABLES and [OWNER, OWNER] not in pairs:
            found.append(f"{name}: the key from {table} to {target} does not pair {OWNER} with {OWNER}")
    return found


def test_every_key_of_the_current_schema_includes_the_owner(pg_dsn: str) -> None:
    prepare(pg_dsn, 384, "hash")
    with psycopg.connect(pg_dsn) as conn:
        assert violations(conn) == []
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT oid::regclass::text FROM pg_class WHERE relnamespace::regnamespace::text = ANY(%s)"
                " AND relkind IN ('r', 'p')",
                (list(SCHEMAS),),
            )
        }
    # the list of global tables is true: each one exists (a dropped or renamed table leaves no stale exemption)
    assert set(GLOBAL_TABLES) <= tables
    assert len(tables - set(GLOBAL_TABLES)) >= 10  # the owner's tables were really looked at


def test_the_check_catches_each_way_a_key_can_miss_the_owner(pg_dsn: str) -> None:
    """What a careless migration could add: each is reported, and nothing else is."""
    prepare(pg_dsn, 384, "hash")
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("CREATE TABLE ghostmem.probe_no_owner (id bigint)")
        conn.execute(
            "CREATE TABLE ghostmem.probe_keys (id bigint PRIMARY KEY, owner text NOT NULL, tier text)"
        )
        conn.execute("CREATE UNIQUE INDEX probe_keys_lower ON ghostmem.probe_keys (lower(owner), tier)")
        conn.execute("CREATE UNIQUE INDEX probe_keys_include ON ghostmem.probe_keys (tier) INCLUDE (owner)")
        conn.execute(
            "CREATE TABLE agent.probe_refs (owner text NOT NULL, tier text NOT NULL, conv_id text NOT NULL,"
            " memory_id bigint,"
            " CONSTRAINT probe_swapped FOREIGN KEY (tier, owner, conv_id)"
            "   REFERENCES ghostmem.conversations (owner, tier, conv_id),"
            " CONSTRAINT probe_to_global FOREIGN KEY (owner) REFERENCES agent.runtime_roles (role_name))"
        )
        conn.execute(
            "ALTER TABLE agent.role_projects ADD COLUMN memory_id bigint, ADD COLUMN owner text,"
            " ADD CONSTRAINT probe_from_global FOREIGN KEY (memory_id, owner)"
            "   REFERENCES agent.ghost_memories (memory_id, owner)"
        )
        try:
            assert sorted(violations(conn)) == sorted(
                [
                    "ghostmem.probe_no_owner has no owner column (distribute it by owner or list it as a global"
                    " table)",
                    "ghostmem.probe_keys_pkey on ghostmem.probe_keys is a key without owner",
                    "ghostmem.probe_keys_lower on ghostmem.probe_keys is a key without owner",
                    "ghostmem.probe_keys_include on ghostmem.probe_keys is a key without owner",
                    "probe_swapped: the key from agent.probe_refs to ghostmem.conversations does not pair owner"
                    " with owner",
                    "probe_from_global: global table agent.role_projects references agent.ghost_memories, which"
                    " is distributed by owner",
                ]
            )
        finally:
            conn.rollback()


@pytest.fixture
def before_owner_keys(server_dsn: str) -> Iterator[str]:
    with fresh_database(server_dsn, "ghostmem_owner_keys") as dsn:
        yield dsn


def test_the_schema_before_100_lacked_the_owner_in_these_keys(before_owner_keys: str) -> None:
    """The check is not vacuous on real history: the schema as it stood before 100_owner_keys fails it with exactly
    the keys that migration rewrote."""
    with psycopg.connect(before_owner_keys, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", "ghostmem_runtime", upto=91)
        found = violations(conn)
    assert sorted(found) == sorted(
        [
            "agent.ghost_feedback has no owner column (distribute it by owner or list it as a global table)",
            "agent.ghost_feedback_pkey on agent.ghost_feedback is a key without owner",
            "agent.ghost_memories_pkey on agent.ghost_memories is a key without owner",
            "agent.ghost_revisions_pkey on agent.ghost_revisions is a key without owner",
            "ghostmem.messages_pkey on ghostmem.messages is a key without owner",
            "ghost_feedback_memory_id_fkey: the key from agent.ghost_feedback to agent.ghost_memories does not pair"
            " owner with owner",
        ]
    )


def test_the_citus_recipe_in_the_docs_names_every_table(pg_dsn: str) -> None:
    """docs/scaling.md distributes every owner's table by owner and makes exactly the global tables reference
    tables (the migration record stays on the coordinator), so a table added later is not forgotten there (a
    partition, of the compact vectors by owner since migration 163, goes with its table)."""
    prepare(pg_dsn, 384, "hash")
    recipe = (Path(__file__).parents[2] / "docs" / "scaling.md").read_text(encoding="utf-8")
    distributed = set(re.findall(r"create_distributed_table\('([\w.]+)', 'owner'", recipe))
    reference = set(re.findall(r"create_reference_table\('([\w.]+)'\)", recipe))
    with psycopg.connect(pg_dsn) as conn:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT oid::regclass::text FROM pg_class WHERE relnamespace::regnamespace::text = ANY(%s)"
                " AND relkind IN ('r', 'p') AND NOT relispartition",
                (["ghostmem", "agent"],),
            )
        }
    assert reference == set(GLOBAL_TABLES) - {"ghostmem_migrations.applied"}
    assert distributed == tables - reference
