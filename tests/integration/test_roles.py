"""Admin migrates, app connects: two real roles on the test server. The administrator migrates as the schemas'
owner and grants an application's login (``ghostmem grant-app``); the application then runs every operation and
the maintenance commands, may not migrate, and reads no table of agent."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder
from ghostmem.db import migrate as migrations
from ghostmem.db import prepare
from ghostmem.errors import DatabaseUnavailable, SchemaMismatch
from ghostmem.ops import OPS
from ghostmem.records import MessageRecord
from psycopg import sql
from support.cli import ghostmem
from support.conversations import conversation, import_generic
from support.copies import vector_bits, word_counts
from support.databases import fresh_database

RUNTIME = "ghostmem_runtime"
HASH = {"GHOSTMEM_EMBED_MODEL": "hash"}


@pytest.fixture
def roles(server_dsn: str) -> Iterator[tuple[str, str, str]]:
    """(admin DSN, app login name, app DSN) on a database of their own; the app login has no privilege at all."""
    app = f"ghostmem_app_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(app)))
    try:
        with fresh_database(server_dsn, "ghostmem_roles") as admin_dsn:
            info = psycopg.conninfo.conninfo_to_dict(admin_dsn)
            info["user"] = app
            yield admin_dsn, app, psycopg.conninfo.make_conninfo(**info)
    finally:  # its privileges went with the database
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(app)))


def _every_operation(gm: GhostMem) -> dict[str, Any]:
    """Each operation of the contract once, on the data imported before."""
    memory = gm.remember("rotate the staging keys monthly", scope="project", project="alpha").data.memory
    results = {
        "remember": memory,
        "search_personal_memory": gm.search_personal_memory("staging deploy timeout").data.rows,
        "get_conversation": gm.get_conversation("app-1").data.messages,
        "list_recent_conversations": gm.list_recent_conversations(days=30).data.rows,
        "list_project_conversations": gm.list_project_conversations("webshop").data.rows,
        "get_conversation_summary": gm.get_conversation_summary("app-1").data.head,
        "search_ghost_memories": gm.search_ghost_memories("staging keys", current_project="alpha").data.rows,
        "give_feedback": gm.give_feedback(memory.memory_id, "endorse").data.memory,
        "update_memory": gm.update_memory(
            memory.memory_id, "rotate the staging keys every month"
        ).data.memory,
        "retire_memory": gm.retire_memory(
            gm.remember("keep the staging keys forever").data.memory.memory_id,
            reason="keys are short-lived now",
        ).data.memory,
    }
    assert set(results) == {spec.name for spec in OPS}
    return results


def test_an_app_login_uses_what_an_administrator_migrated(
    roles: tuple[str, str, str], tmp_path: Path
) -> None:
    admin_dsn, app, app_dsn = roles
    admin = psycopg.conninfo.conninfo_to_dict(admin_dsn).get("user") or "postgres"
    latest = migrations.available()[-1]

    # an older ghostmem migrated this database: the app finds it behind and says what the administrator runs
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", RUNTIME, upto=latest.version - 1)
    with pytest.raises(SchemaMismatch) as behind:
        GhostMem(dsn=app_dsn, embedder=HashEmbedder()).connect()
    assert f"missing {latest.version:03d}_{latest.name}" in str(behind.value)
    assert f"role {app} may not migrate it" in str(behind.value)
    assert f"`ghostmem migrate` as {admin}" in str(behind.value)
    refused = ghostmem("migrate", "--dsn", app_dsn, env=HASH)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines() == [f"ghostmem: error: {behind.value}"]

    # migrated, but nothing granted yet: the sentence names the grant
    assert prepare(admin_dsn, 384, "hash") == [f"{latest.version:03d}_{latest.name}"]
    with pytest.raises(DatabaseUnavailable, match=f"`ghostmem grant-app {app}`"):
        GhostMem(dsn=app_dsn, embedder=HashEmbedder()).connect()

    granted = ghostmem("grant-app", app, "--dsn", admin_dsn, "--json", env=HASH)
    assert granted.returncode == 0, granted.stderr
    assert json.loads(granted.stdout) == {"role": app, "read_only": False, "runtime_role": RUNTIME}

    owner = f"app-{uuid.uuid4().hex[:8]}"
    with GhostMem(dsn=app_dsn, owner=owner, embedder=HashEmbedder()) as gm:
        assert gm.connect() is gm
        convs = [
            conversation(
                "app-1", "deploy timeout", 1, ["the staging deploy times out", "raise it"], "webshop"
            ),
            conversation("app-2", "lunch", 2, ["where do we eat", "the usual place"]),
        ]
        import_generic(gm, tmp_path / "app.jsonl", convs)
        done = _every_operation(gm)
        assert [r.conv_id for r in done["search_personal_memory"]][:1] == ["app-1"]
        assert [r.memory_id for r in done["search_ghost_memories"]] == [done["remember"].memory_id]
        assert done["give_feedback"].breakdown["endorsement"] > 0
    common = ["--dsn", app_dsn, "--owner", owner, "--json"]
    for command in (["enrich"], ["embed", "--no-progress"], ["forget", "app-2"]):
        res = ghostmem(*command, *common, env=HASH)
        assert res.returncode == 0, (command, res.stderr)
    assert [r["conv_id"] for r in json.loads(ghostmem("recent", *common, env=HASH).stdout)["rows"]] == [
        "app-1"
    ]

    with psycopg.connect(app_dsn, autocommit=True) as conn:
        forbidden = [
            "SELECT * FROM agent.ghost_memories",
            "SELECT * FROM agent.role_projects",
            "UPDATE ghostmem.settings SET value = value",
            "TRUNCATE ghostmem.messages",
            "CREATE TABLE ghostmem.probe (x int)",
            "CREATE SCHEMA probe",
            "DROP TABLE ghostmem.forgotten",
            "ALTER TABLE ghostmem.messages ADD COLUMN probe int",
            f"SELECT ghostmem.grant_app('{app}', '{RUNTIME}', false)",
            "SELECT agent.install_runtime_role('ghostmem_runtime')",
        ]
        for statement in forbidden:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement.encode())

    # read-only: reads work, personal memory cannot be written
    assert ghostmem("grant-app", app, "--read-only", "--dsn", admin_dsn, env=HASH).returncode == 0
    with GhostMem(dsn=app_dsn, owner=owner, embedder=HashEmbedder()) as gm:
        assert [r.conv_id for r in gm.list_recent_conversations(days=30).data.rows] == ["app-1"]
        assert gm.search_ghost_memories("staging keys", current_project="alpha").data.rows
    with psycopg.connect(app_dsn) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("DELETE FROM ghostmem.conversations")

    assert ghostmem("revoke-app", app, "--dsn", admin_dsn, env=HASH).returncode == 0
    with pytest.raises(DatabaseUnavailable, match=f"`ghostmem grant-app {app}`"):
        GhostMem(dsn=app_dsn, embedder=HashEmbedder()).connect()
    with psycopg.connect(admin_dsn) as conn:
        assert conn.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", (app, RUNTIME)).fetchone() == (False,)


def test_an_app_granted_before_the_copies_existed_keeps_them_and_a_read_only_login_cannot_touch_them(
    roles: tuple[str, str, str], tmp_path: Path
) -> None:
    """An application granted on a store at 106, which an administrator then upgrades: the tables search reads
    that later migrations added (word counts 107, vector bits 110) are kept by the application's own writes
    (import, live capture, forgetting), through the grant's default privileges, exactly as recomputed from the
    messages. A read-only login granted then may not write any of them, nor what their triggers follow."""
    admin_dsn, app, app_dsn = roles
    reader = f"ghostmem_reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", RUNTIME, upto=106)
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(reader)))
        conn.execute("SELECT ghostmem.grant_app(%s, %s, false)", (app, RUNTIME))
        conn.execute("SELECT ghostmem.grant_app(%s, %s, true)", (reader, RUNTIME))
    info = psycopg.conninfo.conninfo_to_dict(app_dsn)
    reader_dsn = psycopg.conninfo.make_conninfo(**{**info, "user": reader})
    try:
        assert {"107_message_lengths", "110_message_bits"} <= set(prepare(admin_dsn, 384, "hash"))
        owner = f"app-{uuid.uuid4().hex[:8]}"
        with GhostMem(dsn=app_dsn, owner=owner, embedder=HashEmbedder()) as gm:
            convs = [
                conversation(f"c{i}", f"deploy {i}", i, [f"the staging deploy {i} times out", "raise it"])
                for i in range(4)
            ]
            import_generic(gm, tmp_path / "app.jsonl", convs)
            gm.capture_append(
                "live",
                [MessageRecord(native_id="", role="user", text="a live question about the deploy timeout")],
                platform="langchain",
            )
            gm.forget("c1")
            found = [r.conv_id for r in gm.search_personal_memory("staging deploy times out").data.rows]
        assert "c0" in found and "c1" not in found
        with psycopg.connect(admin_dsn) as conn:
            kept, actual = word_counts(conn)
            assert kept == actual and len(kept) == 7
            kept, actual = vector_bits(conn)
            assert kept == actual and len(kept) == 7

        with GhostMem(dsn=reader_dsn, owner=owner, embedder=HashEmbedder()) as gm:
            assert [
                r.conv_id for r in gm.search_personal_memory("staging deploy times out").data.rows
            ] == found
        with psycopg.connect(reader_dsn, autocommit=True) as conn:
            for table in ("messages", "message_vectors", "message_lengths", "message_bits"):
                for statement in (
                    "DELETE FROM ghostmem.{}",
                    "UPDATE ghostmem.{} SET owner = owner",
                    "INSERT INTO ghostmem.{} OVERRIDING SYSTEM VALUE SELECT * FROM ghostmem.{} LIMIT 1",
                    "TRUNCATE ghostmem.{}",
                ):
                    query = sql.SQL(statement).format(sql.Identifier(table), sql.Identifier(table))
                    with pytest.raises(psycopg.errors.InsufficientPrivilege):
                        conn.execute(query)
        with psycopg.connect(app_dsn, autocommit=True) as conn:
            for table in ("message_lengths", "message_bits"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql.SQL("TRUNCATE ghostmem.{}").format(sql.Identifier(table)))
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute("SELECT ghostmem.revoke_app(%s, %s)", (reader, RUNTIME))
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(reader)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(reader)))
