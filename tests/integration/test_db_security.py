"""The database boundary under attack: SECURITY DEFINER functions against a login granted the runtime role that
shadows type and table names with temporary objects, and the privileges that role ends up with."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder
from ghostmem.config import EMBEDDED_DATABASE, Settings
from ghostmem.doctor import diagnose
from psycopg import sql
from support.copies import partition_name, vector_bits, vector_partitions, word_counts

RUNTIME = "ghostmem_runtime"
# Schemas whose functions the database's own extensions and PostgreSQL provide: everything else is ghostmem's.
SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast")
TAG = "ghostmem-attack"


@pytest.fixture
def admin(gm: GhostMem) -> Iterator[psycopg.Connection[Any]]:
    """The migrating role on a migrated test database, autocommit."""
    gm.connect()
    with psycopg.connect(gm.dsn, autocommit=True) as conn:
        yield conn


def _routines_with_pinned_paths(conn: psycopg.Connection[Any]) -> list[tuple[str, bool, str | None]]:
    """(routine, is SECURITY DEFINER, pinned search_path) of every routine not shipped by PostgreSQL or an
    extension, in every schema, that is a definer or pins a search_path."""
    rows = conn.execute(
        """
        SELECT p.oid::regprocedure::text, p.prosecdef,
               (SELECT substr(c, length('search_path=') + 1) FROM unnest(p.proconfig) c
                 WHERE c LIKE 'search_path=%%')
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname <> ALL (%s) AND n.nspname NOT LIKE 'pg\\_temp\\_%%' AND n.nspname NOT LIKE 'pg\\_toast%%'
           AND NOT EXISTS (SELECT 1 FROM pg_depend d
                            WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
           AND (p.prosecdef OR EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%%'))
         ORDER BY 1
        """,
        (list(SYSTEM_SCHEMAS),),
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def _path(value: str) -> list[str]:
    return [part.strip().strip('"') for part in value.split(",")]


def test_every_definer_function_pins_a_trusted_path_ending_in_pg_temp(admin: psycopg.Connection[Any]) -> None:
    """Any SECURITY DEFINER function (any lane, any schema, present or future) that forgets pg_temp fails here."""
    routines = _routines_with_pinned_paths(admin)
    definers = [name for name, definer, _ in routines if definer]
    assert "agent.search_ghost_ranked(text,text,text,vector,text[],text,integer)" in definers
    for name, _, path in routines:
        assert path is not None, f"{name} is SECURITY DEFINER without SET search_path"
        parts = _path(path)
        assert parts[0] == "pg_catalog" and parts[-1] == "pg_temp", f"{name}: search_path = {path}"
        assert "pg_temp" not in parts[:-1] and "$user" not in parts, f"{name}: search_path = {path}"
        for schema in parts[1:-1]:  # trusted: the runtime role can create nothing there
            has = admin.execute("SELECT has_schema_privilege(%s, %s, 'CREATE')", (RUNTIME, schema)).fetchone()
            assert has == (False,), f"{name}: the runtime role may create objects in {schema}"


def test_no_function_of_agent_is_executable_by_public(admin: psycopg.Connection[Any]) -> None:
    """The runtime role executes the API because it was granted it by name, never through PUBLIC."""
    rows = admin.execute(
        """
        SELECT p.oid::regprocedure::text, p.proacl IS NULL
                   OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) a WHERE a.grantee = 0)
          FROM pg_proc p WHERE p.pronamespace = 'agent'::regnamespace
        """
    ).fetchall()
    assert rows and [name for name, public in rows if public] == []


def test_runtime_role_may_create_nothing(admin: psycopg.Connection[Any]) -> None:
    database = admin.info.dbname
    assert admin.execute(
        "SELECT has_database_privilege(%s, %s, 'CREATE')", (RUNTIME, database)
    ).fetchone() == (False,)
    schemas = [
        r[0] for r in admin.execute("SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%'")
    ]
    assert "agent" in schemas and "public" in schemas
    creatable = [
        s
        for s in schemas
        if admin.execute("SELECT has_schema_privilege(%s, %s, 'CREATE')", (RUNTIME, s)).fetchone() != (False,)
    ]
    assert creatable == []


@pytest.mark.skipif(bool(os.environ.get("GHOSTMEM_TEST_DSN")), reason="the embedded server's own database")
def test_embedded_database_gives_the_runtime_role_no_temp(
    admin: psycopg.Connection[Any], server_dsn: str
) -> None:
    """ghostmem owns the embedded server's database, so it revokes TEMP from PUBLIC there: a login granted the
    runtime role cannot even create the temporary objects the attack below needs."""
    role = f"ghostmem_tmp_{uuid.uuid4().hex[:8]}"
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(RUNTIME), sql.Identifier(role)))
    info = psycopg.conninfo.conninfo_to_dict(server_dsn)
    try:
        with psycopg.connect(psycopg.conninfo.make_conninfo(**{**info, "dbname": EMBEDDED_DATABASE})) as conn:
            assert conn.execute(
                "SELECT has_database_privilege(%s, current_database(), 'TEMP')", (RUNTIME,)
            ).fetchone() == (False,)
        info.update(dbname=EMBEDDED_DATABASE, user=role)
        with (
            psycopg.connect(psycopg.conninfo.make_conninfo(**info)) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege, match="temporary"),
        ):
            conn.execute("CREATE TEMP TABLE text (x int)")
    finally:
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


# -- the attack ---------------------------------------------------------------------------------------------------

# temp table name (its row type shadows the type of that name) -> the real type cast into it by the attacker
SHADOWS = {
    "text": "pg_catalog.text",
    "int4": "pg_catalog.int4",
    "int8": "pg_catalog.int8",
    "float8": "pg_catalog.float8",
    "bool": "pg_catalog.bool",
    "jsonb": "pg_catalog.jsonb",
    "tsquery": "pg_catalog.tsquery",
    "tsvector": "pg_catalog.tsvector",
    "timestamptz": "pg_catalog.timestamptz",
    "regconfig": "pg_catalog.regconfig",
    "vector": "public.vector",
    "ghost_hit": "agent.ghost_hit",
    "ghost_written": "agent.ghost_written",
    "ghost_score": "agent.ghost_score",
    "ghost_memories": "agent.ghost_memories",
}
# temp tables only: names of ghostmem's tables, in case a body named one without its schema
RELATIONS = (
    "ghost_feedback",
    "role_projects",
    "runtime_roles",
    "settings",
    "conversations",
    "messages",
    "ghost_revisions",
    "retired_ghosts",
    "store_items",
)
# one sample value per real type, cast in the attacker's own session to prove the trap is armed
ARMED = {"text": "'x'", "int4": "1", "tsquery": "'x'", "vector": "'[1,2,3]'"}


def _arm(conn: psycopg.Connection[Any]) -> list[str]:
    """Create the shadowing temp objects in the attacker's session; returns the casts that could be created."""
    conn.execute("CREATE TEMP TABLE loot (what pg_catalog.text, who pg_catalog.text, taken pg_catalog.int8)")
    armed = []
    for name in RELATIONS:
        conn.execute(sql.SQL("CREATE TEMP TABLE {} (x pg_catalog.int4)").format(sql.Identifier(name)))
    for name, real in SHADOWS.items():
        conn.execute(sql.SQL("CREATE TEMP TABLE {} (x pg_catalog.int4)").format(sql.Identifier(name)))
        evil = sql.Identifier(f"evil_{name}")
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION pg_temp.{evil}(v {real}) RETURNS pg_temp.{name} LANGUAGE plpgsql AS $f$\n"
                "DECLARE taken pg_catalog.int8;\n"
                "BEGIN\n"
                "  RAISE NOTICE '% ran % as %', {tag}, {name_lit}, current_user;\n"
                "  IF pg_catalog.has_table_privilege('agent.ghost_memories', 'SELECT') THEN\n"
                "    EXECUTE 'SELECT pg_catalog.count(*) FROM agent.ghost_memories' INTO taken;\n"
                "  END IF;\n"
                "  INSERT INTO pg_temp.loot VALUES ({name_lit}, current_user, taken);\n"
                "  RETURN NULL;\n"
                "END $f$"
            ).format(
                evil=evil,
                real=sql.SQL(real),
                name=sql.Identifier(name),
                tag=sql.Literal(TAG),
                name_lit=sql.Literal(name),
            )
        )
        try:
            with conn.transaction():
                conn.execute(
                    sql.SQL(
                        "CREATE CAST ({real} AS pg_temp.{name}) WITH FUNCTION pg_temp.{evil}({real}) AS IMPLICIT"
                    ).format(real=sql.SQL(real), name=sql.Identifier(name), evil=evil)
                )
            armed.append(name)
        except psycopg.Error:
            continue  # e.g. a cast PostgreSQL refuses to create; the temp type still shadows the name
    return armed


class Notices:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.seen: list[str] = []
        conn.add_notice_handler(lambda diag: self.seen.append(diag.message_primary or ""))

    def attack(self) -> list[str]:
        return [n for n in self.seen if TAG in n]


def _api_calls(owner: str, victim_id: int, own_id: int) -> list[tuple[str, str, tuple[Any, ...]]]:
    """Every API function with the arguments that drive it through each of its branches."""
    vec = "[" + ",".join(["0.05"] * 384) + "]"
    search = "SELECT * FROM agent.search_ghost_ranked(%s, %s, %s, %s::public.vector, %s::pg_catalog.text[], %s, %s)"
    remember = (
        "SELECT * FROM agent.remember(%s, %s, %s, %s, %s, %s::pg_catalog.text[], %s::public.vector,"
        " %s::pg_catalog.text[])"
    )
    feedback = "SELECT * FROM agent.give_feedback(%s, %s, %s, %s, %s)"
    update = "SELECT * FROM agent.update_memory(%s, %s, %s, %s, %s::public.vector, %s::pg_catalog.text[], %s)"
    retire = "SELECT * FROM agent.retire_memory(%s, %s, %s, %s)"
    return [
        ("claim_refusal", "SELECT agent.claim_refusal(%s)", (None,)),
        ("claim_refusal", "SELECT agent.claim_refusal(%s)", ("alpha",)),
        ("has_visible_ghosts", "SELECT agent.has_visible_ghosts(%s, %s)", (owner, None)),
        ("has_visible_ghosts", "SELECT agent.has_visible_ghosts(%s, %s)", (owner, "alpha")),
        ("has_visible_ghosts", "SELECT agent.has_visible_ghosts(%s, %s)", ("victim", None)),
        ("search_ghost_ranked", search, (owner, None, "", None, None, "default", 10)),
        ("search_ghost_ranked", search, (owner, "alpha", "deploy the rules", vec, None, "default", 5)),
        (
            "search_ghost_ranked",
            search,
            (owner, "alpha", "本を読んだ", vec, ["ja:本", "ja:読む"], "literal", 5),
        ),
        # words that are tsquery syntax stay words
        ("search_ghost_ranked", search, (owner, None, "x", vec, ["ja:本' | '*", "!", "a & b"], "default", 5)),
        ("search_ghost_ranked", search, ("victim", None, "secret", vec, ["ja:秘密"], "default", 5)),
        ("remember", remember, (owner, "a new global rule", "rule", "global", None, [], vec, None)),
        (
            "remember",
            remember,
            (owner, "a new global rule!", "rule", "global", None, [], vec, None),
        ),  # near-duplicate
        (
            "remember",
            remember,
            (owner, "毎朝本を読みます", "warning", "project", "alpha", [], vec, ["ja:本", "ja:読む"]),
        ),
        (
            "remember",
            remember,
            (owner, "a shared rule", "fact", "shared-restricted", None, ["alpha", "b"], vec, None),
        ),
        ("give_feedback", feedback, (owner, None, own_id, "endorse", "worked")),
        ("give_feedback", feedback, (owner, "alpha", own_id, "correct", None)),
        ("give_feedback", feedback, (owner, None, victim_id, "incident_prevented", "steal")),
        (
            "update_memory",
            update,
            (owner, "alpha", own_id, "火曜日に配備する", vec, ["ja:火曜", "ja:配備"], "moved"),
        ),
        ("update_memory", update, (owner, None, victim_id, "stolen", vec, None, "steal")),
        ("retire_memory", retire, (owner, None, victim_id, "steal")),
        ("retire_memory", retire, (owner, "alpha", own_id, "done")),
    ]


def test_temp_objects_never_run_inside_the_definer_functions(
    admin: psycopg.Connection[Any], pg_dsn: str, owner: str
) -> None:
    """A login granted the runtime role shadows text, int4, text[], vector, tsquery, ghostmem's composite types
    and tables with temp objects, with implicit casts into them that report and record who runs them; then calls
    every function it may execute. None of its code may run (no notice, no row) and it still reads no table."""
    with GhostMem(dsn=pg_dsn, owner="victim", embedder=HashEmbedder()) as victim:
        victim_id = victim.remember("the victim's secret rule").data.memory.memory_id
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as gm:
        own_id = gm.remember(
            "deploy the rules on Mondays", scope="project", project="alpha"
        ).data.memory.memory_id

    role = f"ghostmem_attacker_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(role)
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident))
    admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(RUNTIME), ident))
    # a managed server leaves TEMP to PUBLIC: grant it explicitly, so the attack is possible on any test server
    admin.execute(
        sql.SQL("GRANT TEMPORARY ON DATABASE {} TO {}").format(sql.Identifier(admin.info.dbname), ident)
    )
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    info["user"] = role
    calls = _api_calls(owner, victim_id, own_id)
    try:
        with psycopg.connect(psycopg.conninfo.make_conninfo(**info), autocommit=True) as conn:
            notices = Notices(conn)
            armed = _arm(conn)
            assert {"text", "int4", "tsquery", "vector", "ghost_hit"} <= set(armed), armed
            # the trap is live: in the attacker's own statements the names resolve to its objects and its code runs
            for name, value in ARMED.items():
                conn.execute(
                    sql.SQL("SELECT {value}::{real}::{name}").format(
                        value=sql.SQL(value), real=sql.SQL(SHADOWS[name]), name=sql.Identifier(name)
                    )
                )
            assert len(notices.attack()) == len(ARMED)
            assert conn.execute("SELECT pg_catalog.count(*) FROM pg_temp.loot").fetchone() == (len(ARMED),)
            conn.execute("DELETE FROM pg_temp.loot")
            notices.seen.clear()

            # every definer function the role may execute is called below (a new API function fails here first)
            executable = {
                r[0]
                for r in conn.execute(
                    "SELECT p.proname::pg_catalog.text FROM pg_catalog.pg_proc p"
                    " WHERE p.prosecdef AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')"
                    "   AND p.pronamespace <> 'pg_catalog'::pg_catalog.regnamespace"
                )
            }
            assert executable == {name for name, _, _ in calls}

            for search_path in ("DEFAULT", "pg_temp, public"):
                conn.execute(sql.SQL("SET search_path = {}").format(sql.SQL(search_path)))
                for name, statement, params in calls:
                    conn.execute(statement, params).fetchall()  # every call succeeds ...
                    assert notices.attack() == [], (
                        name,
                        params,
                        notices.attack(),
                    )  # ... running nothing of ours
                looted = conn.execute("SELECT * FROM pg_temp.loot").fetchall()
                assert looted == []

            conn.execute("RESET search_path")
            tables = admin.execute(
                "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables"
                " WHERE schemaname IN ('ghostmem', 'agent') ORDER BY 1"
            ).fetchall()
            assert len(tables) >= 10
            for (table,) in tables:
                for as_runtime in (False, True):
                    with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                        if as_runtime:
                            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(RUNTIME)))
                        conn.execute(sql.SQL("SELECT * FROM {} LIMIT 1").format(sql.SQL(table)))
            conn.execute(
                "DISCARD TEMP"
            )  # its temp objects (and the casts into them), before the role is dropped
    finally:
        admin.execute(sql.SQL("DROP OWNED BY {}").format(ident))
        admin.execute(sql.SQL("DROP ROLE {}").format(ident))


def test_doctor_fails_when_the_runtime_role_may_create_where_the_functions_look(
    admin: psycopg.Connection[Any], pg_dsn: str
) -> None:
    settings = Settings.from_env(dsn=pg_dsn, embed_model="hash")
    check = diagnose(settings, check_model=False)["checks"]["runtime_role"]
    assert check["ok"] and check["create_in"] == [] and check["name"] == RUNTIME
    admin.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(sql.Identifier(RUNTIME)))
    try:
        report = diagnose(settings, check_model=False)
    finally:
        admin.execute(sql.SQL("REVOKE CREATE ON SCHEMA public FROM {}").format(sql.Identifier(RUNTIME)))
    assert not report["ok"]
    assert report["checks"]["runtime_role"]["create_in"] == ["public"]
    assert "REVOKE CREATE ON SCHEMA public" in report["checks"]["runtime_role"]["hint"]


def test_the_copies_kept_by_triggers_ignore_temp_objects_named_as_their_tables(
    admin: psycopg.Connection[Any], pg_dsn: str, owner: str
) -> None:
    """The triggers that keep the word counts (107) and the vector bits (110) run as whoever writes messages, and
    the one that makes an owner's partition of the compact vectors (163) as the schema's owner. An application
    login puts temp tables named as their transition tables (one holding a planted row of another owner), as the
    tables they write and as the partition its first vector will make first on its search path, then writes, moves,
    unembeds and deletes a message: the real copies follow exactly (recomputed from the messages) in the owner's
    partition, made in ghostmem, the temp tables stay empty and the planted row is written nowhere."""
    role = f"ghostmem_app_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(role)
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident))
    admin.execute("SELECT ghostmem.grant_app(%s, %s, false)", (role, RUNTIME))
    admin.execute(
        sql.SQL("GRANT TEMPORARY ON DATABASE {} TO {}").format(sql.Identifier(admin.info.dbname), ident)
    )
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    vec = "[" + ",".join(["0.05"] * 384) + "]"
    try:
        with psycopg.connect(
            psycopg.conninfo.make_conninfo(**{**info, "user": role}), autocommit=True
        ) as conn:
            for name in ("new_rows", "old_rows"):
                conn.execute(
                    sql.SQL("CREATE TEMP TABLE {} AS SELECT * FROM ghostmem.messages LIMIT 0").format(
                        sql.Identifier(name)
                    )
                )
                conn.execute(
                    sql.SQL(
                        "INSERT INTO pg_temp.{} (owner, id, tier, conv_id, seq, native_id, role, text, platform,"
                        " content_hash) VALUES ('planted-victim', -1, 'personal', 'planted', 0, 'p', 'user',"
                        " 'planted words', 'claude_code', '\\x00')"
                    ).format(sql.Identifier(name))
                )
            for name, like in (
                ("message_lengths", "message_lengths"),
                ("message_bits", "message_bits"),
                ("message_vectors", "message_vectors"),
                (partition_name(owner), "message_vectors"),
            ):
                conn.execute(
                    sql.SQL("CREATE TEMP TABLE {} (LIKE ghostmem.{})").format(
                        sql.Identifier(name), sql.Identifier(like)
                    )
                )
            conn.execute("SET search_path = pg_temp, ghostmem, public")
            # the trap is live: in the session's own statements the names are its temp tables
            assert conn.execute("SELECT count(*) FROM new_rows").fetchone() == (1,)
            assert conn.execute("SELECT count(*) FROM message_lengths").fetchone() == (0,)
            conv = f"shadowed-{uuid.uuid4().hex[:6]}"
            conn.execute(
                "INSERT INTO ghostmem.conversations (owner, tier, conv_id, platform, title, msg_count)"
                " VALUES (%s, 'personal', %s, 'claude_code', 'shadowed', 1)",
                (owner, conv),
            )
            for statement, expected in (
                (
                    "INSERT INTO ghostmem.messages (owner, tier, conv_id, seq, native_id, role, text, ts, platform,"
                    " content_hash, embedding) VALUES (%(owner)s, 'personal', %(conv)s, 0, 'm0', 'user',"
                    " 'the deploy words of a shadowed session', now(), 'claude_code', '\\x01', %(vec)s::public.vector)",
                    (1, 1),
                ),
                (
                    "UPDATE ghostmem.messages SET project = 'moved', text = text || ' and more'"
                    " WHERE owner = %(owner)s AND conv_id = %(conv)s",
                    (1, 1),
                ),
                (
                    "UPDATE ghostmem.messages SET embedding = NULL WHERE owner = %(owner)s AND conv_id = %(conv)s",
                    (1, 0),
                ),
                ("DELETE FROM ghostmem.messages WHERE owner = %(owner)s AND conv_id = %(conv)s", (0, 0)),
            ):
                conn.execute(statement, {"owner": owner, "conv": conv, "vec": vec})
                copies = (word_counts(admin), vector_bits(admin))
                for kept, actual in copies:
                    assert kept == actual, statement
                    assert not any(row[0] == "planted-victim" for row in kept), statement
                assert tuple(sum(row[3] == conv for row in kept) for kept, _ in copies) == expected, statement
                shadows = conn.execute(
                    sql.SQL(
                        "SELECT (SELECT count(*) FROM pg_temp.message_lengths), (SELECT count(*) FROM"
                        " pg_temp.message_bits), (SELECT count(*) FROM pg_temp.message_vectors),"
                        " (SELECT count(*) FROM pg_temp.{})"
                    ).format(sql.Identifier(partition_name(owner)))
                ).fetchone()
                assert shadows == (0, 0, 0, 0), statement
                placed = vector_partitions(admin).get(owner, set())
                assert placed == ({f"ghostmem.{partition_name(owner)}"} if expected[1] else set()), statement
            conn.execute("DISCARD TEMP")
    finally:
        admin.execute("SELECT ghostmem.revoke_app(%s, %s)", (role, RUNTIME))
        admin.execute(sql.SQL("DROP OWNED BY {}").format(ident))
        admin.execute(sql.SQL("DROP ROLE {}").format(ident))


def test_the_project_graph_builder_ignores_temp_objects_and_is_the_owners_alone(
    admin: psycopg.Connection[Any], gm: GhostMem, owner: str
) -> None:
    """Migration 155's definer functions build and drop DDL on the compact vectors: no role but the schemas' owner
    may execute them (not PUBLIC, not the runtime role, not an application), and the owner calling them from a
    session whose search path puts temp tables first (a count of 1,000,000 for a planted project, a threshold of
    0, a table named as the compact vectors) builds nothing from them."""
    rows = admin.execute(
        "SELECT p.oid::regprocedure::text, p.proacl FROM pg_proc p WHERE p.proname IN"
        " ('build_project_graphs', 'drop_project_graphs') AND p.pronamespace = 'ghostmem'::regnamespace"
    ).fetchall()
    assert len(rows) == 2
    for name, _ in rows:
        for role in ("public", RUNTIME):
            assert admin.execute(
                "SELECT has_function_privilege(%s, %s, 'EXECUTE')", (role, name)
            ).fetchone() == (False,), (role, name)
    gm.remember("nothing personal yet")  # the owner exists; it has no project of 5,000 messages
    admin.execute("CREATE TEMP TABLE message_counts (LIKE ghostmem.message_counts)")
    admin.execute(
        "INSERT INTO pg_temp.message_counts VALUES (%s, 'personal', 'generic', 'planted', 1000000)", (owner,)
    )
    admin.execute("CREATE TEMP TABLE settings (LIKE ghostmem.settings)")
    admin.execute("INSERT INTO pg_temp.settings VALUES ('project_graph_rows', '0')")
    admin.execute("CREATE TEMP TABLE message_vectors (LIKE ghostmem.message_vectors)")
    try:
        admin.execute("SET search_path = pg_temp, ghostmem, public")
        assert admin.execute("SELECT count(*) FROM message_counts").fetchone() == (1,)  # the trap is live
        assert admin.execute("SELECT ghostmem.build_project_graphs(%s)", (owner,)).fetchone() == (0,)
        name = admin.execute("SELECT ghostmem.project_graph_name(%s, 'planted')", (owner,)).fetchone()
        assert name and admin.execute("SELECT to_regclass('ghostmem.' || %s)", name).fetchone() == (None,)
        assert admin.execute(
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'message_vectors' AND schemaname LIKE 'pg_temp%%'"
        ).fetchone() == (0,)
    finally:
        admin.execute("RESET search_path")
        admin.execute("DISCARD TEMP")
