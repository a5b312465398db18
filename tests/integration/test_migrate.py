"""Migrations against a real server: applied once and recorded, by two processes at once, a dimension mismatch
explained, nothing to create once the schema is current, and an existing store (migrated to 050, or to the last
version before 100_owner_keys rewrote the keys, holding data of two owners) upgraded with its data and its rankings
unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import random
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder
from ghostmem.db import migrate as migrations
from ghostmem.db import prepare
from ghostmem.errors import SchemaMismatch
from ghostmem.limits import STORED_ID_BYTES
from ghostmem.records import MessageRecord
from psycopg import sql
from psycopg.rows import dict_row
from support.conversations import conversation, stored
from support.copies import partition_name, vector_bits, vector_partitions, word_counts
from support.databases import fresh_database, wait_until_blocked
from support.statements import (
    ITEM_FETCH,
    PENDING_LIST_OPTIONS,
    PENDING_LIST_PAGES,
    PROJECT_FETCH,
    SEARCHED_GIN,
    STORE_GIN,
    TITLE_FETCH,
    WORD_FETCH,
    check_short_pending_lists,
    gin_options,
    index_pages,
)

RUNTIME = "ghostmem_runtime"
LANDED = 50  # the last migration of the first release: stores in the wild are at least this far
BEFORE_OWNER_KEYS = 99  # everything before 100_owner_keys, which puts the owner into every key
BEFORE_GHOST_WORDS = (
    100  # everything before 105_ghost_words, which gave the ghost functions the words argument
)
BEFORE_WORD_COUNTS = 106  # everything before 107_message_lengths, which copies each message's word count
BEFORE_MESSAGE_BITS = 109  # everything before 110_message_bits, which quantizes the compact vectors
BEFORE_SHORT_PENDING_LIST = 115  # everything before 116_gin_short_pending_list (PostgreSQL's 4 MB GIN queues)
BEFORE_PLATFORM_SCOPE = 119  # everything before 120_vector_platform_scope, which indexes them by platform
BEFORE_STORE_PENDING_LIST = (
    129  # everything before 130_store_items_short_pending_list (the store's 4 MB GIN queue)
)
BEFORE_RUNTIME_API = (
    137  # everything before 138_runtime_api, whose table lists the functions a runtime role runs
)
BEFORE_PROJECT_GRAPHS = (
    154  # everything before 155_project_graphs, which builds the large projects' own graphs
)
BEFORE_VECTOR_GRAPHS = 162  # everything before 163_vector_graph_per_owner (155 and 159 among them)
BEFORE_BITS_COVERING = 163  # everything before 164_message_bits_covering
T0 = datetime(2026, 1, 1, tzinfo=UTC)


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


# -- upgrading an existing store ----------------------------------------------------------------------------------


@pytest.fixture
def empty_dsn(server_dsn: str) -> Iterator[str]:
    """A database of its own, with nothing in it."""
    with fresh_database(server_dsn, "ghostmem_upgrade") as dsn:
        yield dsn


def _vec(text: str) -> str:
    return str(HashEmbedder().embed_query(text))


def _fill_a_conversation(conn: psycopg.Connection[Any], owner: str) -> None:
    """A conversation of two messages with their vectors, written through the SQL of 050 (valid since)."""
    conn.execute(
        "INSERT INTO ghostmem.conversations (owner, tier, conv_id, platform, title, started_at, ended_at, msg_count)"
        " VALUES (%s, 'personal', 'conv-1', 'claude_code', 'fixing the flaky deploy', %s, %s, 2)",
        (owner, T0, T0 + timedelta(minutes=5)),
    )
    for seq, (role, text) in enumerate(
        [("user", "the deploy script times out on the staging cluster"), ("assistant", "raise the timeout")]
    ):
        conn.execute(
            "INSERT INTO ghostmem.messages (owner, tier, conv_id, seq, native_id, role, text, ts, platform,"
            " content_hash, embedding) VALUES (%s, 'personal', 'conv-1', %s, %s, %s, %s, %s, 'claude_code',"
            " sha256(convert_to(%s, 'UTF8')), %s::vector)",
            (owner, seq, f"m{seq}", role, text, T0 + timedelta(minutes=seq), text, _vec(text)),
        )


def _fill_a_landed_store(conn: psycopg.Connection[Any], owner: str) -> list[int]:
    """What a store at 050 holds: a conversation with messages, ghost memories with feedback and activations,
    written through the SQL of that version only (today's Python may need later migrations)."""
    _fill_a_conversation(conn, owner)
    ids = []
    for i, (content, scope, project, allowlist) in enumerate(
        [
            ("always drain the node before a kubernetes upgrade", "global", None, []),
            ("deploy staging before production", "project", "alpha", []),
            ("the billing export runs at midnight", "shared-restricted", None, ["alpha", "beta"]),
            ("never deploy on a friday", "global", "alpha", []),
        ]
    ):
        row = conn.execute(
            "SELECT (agent.remember_at(%s, %s, %s, 'rule', %s, %s, %s, %s::vector, NULL)).memory_id",
            (T0 + timedelta(days=i), owner, content, scope, project, allowlist, _vec(content)),
        ).fetchone()
        assert row is not None
        ids.append(int(row[0]))
    for day, (memory, signal) in enumerate([(0, "endorse"), (1, "correct"), (3, "incident_prevented")]):
        conn.execute(
            "SELECT agent.give_feedback_at(%s, %s, 'alpha', %s, %s, 'why')",
            (T0 + timedelta(days=10 + day), owner, ids[memory], signal),
        )
    for day in range(3):
        conn.execute(
            "SELECT count(*) FROM agent.search_ghost_ranked_at(%s, %s, 'alpha', %s, %s::vector, 'default', 2)",
            (T0 + timedelta(days=20 + day), owner, "deploy", _vec("deploy")),
        )
    return ids


def _rankings(conn: psycopg.Connection[Any], owner: str) -> list[list[tuple[int, float, dict[str, float]]]]:
    """Each formula's ranking (overview and a query, with and without a claim) at a fixed moment, through the
    signature of the schema's version (105 added the query's words, none for these English queries)."""
    words = max(migrations.applied(conn)) >= 105
    call = "%s, %s::vector, %s::text[]" if words else "%s, %s::vector"
    out = []
    with conn.cursor(row_factory=dict_row) as cur:
        for formula in ("default", "literal"):
            for claimed in (None, "alpha", "beta"):
                for query in ("", "deploy production", "kubernetes"):
                    vector = _vec(query) if query else None
                    cur.execute(
                        "SELECT memory_id, score, breakdown FROM agent.rank_ghosts_at(%s, %s, %s, "
                        + call
                        + ", %s, 10)",
                        (
                            T0 + timedelta(days=40),
                            owner,
                            claimed,
                            query,
                            vector,
                            *([None] if words else []),
                            formula,
                        ),
                    )
                    out.append([(r["memory_id"], r["score"], r["breakdown"]) for r in cur.fetchall()])
    return out


def _counts(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    row = conn.execute(
        "SELECT (SELECT count(*) FROM ghostmem.messages), (SELECT count(*) FROM ghostmem.conversations),"
        " (SELECT count(*) FROM agent.ghost_memories), (SELECT count(*) FROM agent.ghost_feedback),"
        " (SELECT sum(activation_count + overview_count) FROM agent.ghost_memories)"
    ).fetchone()
    assert row is not None
    return tuple(row)


@pytest.mark.parametrize("landed", [LANDED, BEFORE_OWNER_KEYS, BEFORE_GHOST_WORDS])
def test_a_landed_store_with_data_upgrades_to_the_current_schema(empty_dsn: str, landed: int) -> None:
    owner, other = f"upgrade-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        done = migrations.migrate(conn, 384, "hash", RUNTIME, upto=landed)
        assert int(done[-1][:3]) <= landed
        ids = _fill_a_landed_store(conn, owner)
        _fill_a_landed_store(conn, other)  # same texts, ids of its own: the upgrade must not mix the two
        retired = None
        # a retired memory keeps its feedback as JSON (081), written here before feedback had an owner
        if landed >= 81:
            retired = ids[1]
            conn.execute(
                "SELECT agent.retire_memory_at(%s, %s, 'alpha', %s, 'superseded')",
                (T0 + timedelta(days=30), owner, retired),
            )
        before = {o: _rankings(conn, o) for o in (owner, other)}
        counts = _counts(conn)

        upgraded = migrations.migrate(conn, 384, "hash", RUNTIME)
        assert upgraded == [f"{m.version:03d}_{m.name}" for m in migrations.available() if m.version > landed]
        assert upgraded, "nothing to upgrade: this test would prove nothing"
        assert migrations.is_current(conn)
        after = {o: _rankings(conn, o) for o in (owner, other)}
        assert _counts(conn) == counts
        # every feedback row belongs to its memory's owner (100 filled the column it added)
        assert conn.execute(
            "SELECT count(*) FILTER (WHERE f.owner = m.owner), count(*) FROM agent.ghost_feedback f"
            " JOIN agent.ghost_memories m USING (memory_id)"
        ).fetchone() == (counts[3], counts[3])
        if retired is not None:  # the operator brings it back with its feedback, retired before the upgrade
            feedback = conn.execute(
                "SELECT jsonb_array_length(feedback) FROM agent.retired_ghosts WHERE owner = %s AND memory_id = %s",
                (owner, retired),
            ).fetchone()
            assert feedback is not None and feedback[0] > 0
            conn.execute(
                "SELECT agent.restore_memory(%s, %s, %s::vector, NULL)", (owner, retired, _vec("restored"))
            )
            assert conn.execute(
                "SELECT count(*), min(owner), max(owner) FROM agent.ghost_feedback WHERE memory_id = %s",
                (retired,),
            ).fetchone() == (feedback[0], owner, owner)

    for o in (owner, other):
        assert len(after[o]) == len(before[o]) and any(len(r) > 1 for r in before[o])
        for old, new in zip(before[o], after[o], strict=True):
            assert [m for m, _, _ in new] == [m for m, _, _ in old]
            for (_, old_score, old_terms), (_, new_score, new_terms) in zip(old, new, strict=True):
                assert new_score == pytest.approx(old_score, abs=1e-12)
                assert new_terms.keys() == old_terms.keys()
                assert all(new_terms[k] == pytest.approx(old_terms[k], abs=1e-12) for k in old_terms)

    with psycopg.connect(
        empty_dsn
    ) as conn:  # the compact copies of 101 hold every message's vector, no other
        copies, vectors = (
            set(conn.execute(q).fetchall())
            for q in (
                "SELECT owner, id, conv_id, ts, embedding::text FROM ghostmem.message_vectors",
                "SELECT owner, id, conv_id, ts, embedding::halfvec::text FROM ghostmem.messages"
                " WHERE embedding IS NOT NULL",
            )
        )
    assert len(vectors) == 4 and copies == vectors
    with psycopg.connect(empty_dsn) as conn:  # and the word counts of 107 every message's with words
        kept, actual = word_counts(conn)
        assert len(actual) == 4 and kept == actual
        kept, actual = vector_bits(conn)  # and the bits of 110, one a dimension of each compact vector
        assert len(actual) == 4 and kept == actual
    # the upgraded store serves every surface as it did
    with GhostMem(dsn=empty_dsn, owner=owner, embedder=HashEmbedder(), current_project="alpha") as gm:
        assert [h.conv_id for h in gm.search_personal_memory("deploy staging cluster timeout").data.rows] == [
            "conv-1"
        ]
        assert ids[1] in {r.memory_id for r in gm.search_ghost_memories("deploy").data.rows}
        assert gm.give_feedback(ids[0], "endorse").data.memory.memory_id == ids[0]
        assert gm.remember("rotate the staging keys").data.created


# -- the API's signatures and grants across 105 -----------------------------------------------------------------


def _grants(conn: psycopg.Connection[Any]) -> dict[str, set[str]]:
    """Function name of agent -> the roles that may execute it by a grant (PUBLIC included), whatever signature."""
    grants: dict[str, set[str]] = {}
    for name, grantee in conn.execute(
        "SELECT p.proname::text, CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END"
        "  FROM pg_proc p CROSS JOIN LATERAL aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a"
        " WHERE p.pronamespace = 'agent'::regnamespace AND a.privilege_type = 'EXECUTE'"
        "   AND a.grantee <> p.proowner"
    ):
        grants.setdefault(name, set()).add(grantee)
    return grants


def test_105_drops_the_old_ghost_signatures_and_grants_the_new_ones_to_the_same_roles(empty_dsn: str) -> None:
    """A store at 100 with a second runtime role installed: after the upgrade no function of the old signatures is
    left in any schema (nobody can write a memory without its words), and each API function is executable by
    exactly the roles that could execute it before, no more (PUBLIC never)."""
    second = f"ghostmem_rt_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", RUNTIME, upto=BEFORE_GHOST_WORDS)
        conn.execute("SELECT agent.install_runtime_role(%s)", (second,))
        old = [
            r[0]
            for r in conn.execute(
                "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'agent'::regnamespace"
                " AND p.proname IN ('remember', 'remember_at', 'update_memory', 'update_memory_at',"
                "  'search_ghost_ranked', 'search_ghost_ranked_at', 'rank_ghosts_at', 'rank_ghosts_explained',"
                "  'query_legs', 'restore_memory')"
            )
        ]
        before = _grants(conn)
        try:
            migrations.migrate(conn, 384, "hash", RUNTIME)
            after = _grants(conn)
            left = [
                sig for sig in old if conn.execute("SELECT to_regprocedure(%s)", (sig,)).fetchone() != (None,)
            ]
            same_args = conn.execute(
                "SELECT count(*) FROM pg_proc p WHERE p.oid::regprocedure::text LIKE ANY(%s)",
                (["%." + sig.split(".", 1)[1] for sig in old],),
            ).fetchone()
        finally:
            conn.execute("DROP OWNED BY " + second)
            conn.execute("DROP ROLE " + second)
    assert len(old) == 10 and left == [] and same_args == (0,)
    assert before["remember"] == {RUNTIME, second} and "PUBLIC" not in set().union(*after.values())
    # later API functions (127's has_visible_ghosts) go to the same roles
    assert after == {**before, "has_visible_ghosts": {RUNTIME, second}}


def test_the_runtime_api_is_granted_from_one_list(empty_dsn: str) -> None:
    """138: an upgrade with a second runtime role installed keeps every grant as it was, and agent.runtime_api lists
    exactly what they are granted. A function a later migration adds to the list is granted to every installed
    runtime role by agent.grant_runtime_api() and to a role installed afterwards, never to PUBLIC; a row whose
    function was dropped grants nothing and breaks no install. The runtime role may neither write the list nor run
    the functions that grant it."""
    second, third = (f"ghostmem_rt_{uuid.uuid4().hex[:8]}" for _ in range(2))
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", RUNTIME, upto=BEFORE_RUNTIME_API)
        conn.execute("SELECT agent.install_runtime_role(%s)", (second,))
        before = _grants(conn)
        try:
            migrations.migrate(conn, 384, "hash", RUNTIME)
            assert _grants(conn) == before
            listed = {r[0] for r in conn.execute("SELECT (fn::oid::regproc)::text FROM agent.runtime_api")}
            assert {f"agent.{name}" for name in before} == listed and len(listed) == 7
            # what a later migration adding an API function does
            conn.execute(
                "CREATE FUNCTION agent.later_api(p_owner text) RETURNS integer LANGUAGE sql SECURITY DEFINER"
                " SET search_path = pg_catalog, agent, pg_temp AS 'SELECT 1'"
            )
            conn.execute("REVOKE ALL ON FUNCTION agent.later_api(text) FROM PUBLIC")
            conn.execute("INSERT INTO agent.runtime_api VALUES ('agent.later_api(text)')")
            conn.execute("SELECT agent.grant_runtime_api()")
            conn.execute("SELECT agent.install_runtime_role(%s)", (third,))
            grants = _grants(conn)
            assert grants["later_api"] == {RUNTIME, second, third}
            assert grants == {
                **{name: roles | {third} for name, roles in before.items()},
                "later_api": grants["later_api"],
            }
            # a dropped function's row grants nothing and breaks nothing
            conn.execute("DROP FUNCTION agent.later_api(text)")
            conn.execute("SELECT agent.grant_runtime_api()")
            # the runtime role may not write the list, nor grant it
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(RUNTIME)))
            for attempt in (
                "INSERT INTO agent.runtime_api VALUES ('agent.install_runtime_role(text)')",
                "DELETE FROM agent.runtime_api",
                "SELECT agent.grant_runtime_api()",
                f"SELECT agent.install_runtime_role('{RUNTIME}')",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(attempt)
            conn.execute("RESET ROLE")
        finally:
            conn.execute("RESET ROLE")
            for role in (second, third):
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.mark.parametrize(
    ("start", "held"),
    [
        (BEFORE_GHOST_WORDS, "LOCK TABLE ghostmem.messages IN ACCESS EXCLUSIVE MODE"),
        (BEFORE_WORD_COUNTS, "LOCK TABLE ghostmem.messages IN ACCESS EXCLUSIVE MODE"),
        (BEFORE_MESSAGE_BITS, "LOCK TABLE ghostmem.message_vectors IN ACCESS EXCLUSIVE MODE"),
        # an index cannot be locked by LOCK TABLE; a REINDEX in an open transaction holds it
        (BEFORE_SHORT_PENDING_LIST, "REINDEX INDEX ghostmem.conversations_project_trgm"),
        (BEFORE_PLATFORM_SCOPE, "LOCK TABLE ghostmem.message_vectors IN ACCESS EXCLUSIVE MODE"),
        (BEFORE_STORE_PENDING_LIST, "REINDEX INDEX ghostmem.store_items_tsv"),
        (BEFORE_PROJECT_GRAPHS, "LOCK TABLE ghostmem.message_vectors IN ACCESS EXCLUSIVE MODE"),
        (BEFORE_VECTOR_GRAPHS, "LOCK TABLE ghostmem.message_vectors IN ACCESS EXCLUSIVE MODE"),
        (BEFORE_BITS_COVERING, "LOCK TABLE ghostmem.message_bits IN ACCESS EXCLUSIVE MODE"),
    ],
)
def test_an_upgrade_killed_in_the_middle_of_a_migration_resumes(
    empty_dsn: str, start: int, held: str
) -> None:
    """A store at 100 (or 106, 109, 115, 119, 129, 154, 162, 163) with data (a word of 2,040 bytes and a message of
    ~57,000 distinct CJK pairs among it, too long for 102's owner-keyed words if they were keyed whole), upgraded by
    a process SIGKILLed while 101 (or 107, 110, 116, 120, 130, 155, 163, 164) is running (it waits for the table it
    copies or indexes, or the index it sets, which an administrator holds): nothing of it is left, and the next
    upgrade applies every migration with the data kept, the compact vectors (in the owner's partition), their bits
    and the word counts complete, the indexes built and set and the odd messages found."""
    owner = f"killed-{uuid.uuid4().hex[:8]}"
    rng = random.Random(7)
    cjk = " ".join("".join(chr(0x4E00 + rng.randrange(3000)) for _ in range(20)) for _ in range(3000))
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", RUNTIME, upto=start)
        if start < 105:  # its ghost memories are written through the functions of 050, which 105 re-signed
            _fill_a_landed_store(conn, owner)
        else:
            _fill_a_conversation(conn, owner)
        conn.execute(
            "INSERT INTO ghostmem.conversations (owner, tier, conv_id, platform, msg_count)"
            " VALUES (%s, 'personal', 'odd', 'generic', 2)",
            (owner,),
        )
        for seq, text in enumerate([f"zebrafinch {'ж' * 1020}", f"narwhal {cjk}"]):
            conn.execute(
                "INSERT INTO ghostmem.messages (owner, tier, conv_id, seq, native_id, role, text, platform,"
                " content_hash) VALUES (%s, 'personal', 'odd', %s, %s, 'user', %s, 'generic',"
                " sha256(convert_to(%s, 'UTF8')))",
                (owner, seq, f"o{seq}", text, text),
            )
        counts = _counts(conn)
    tag = f"ghostmem-killed-{uuid.uuid4().hex[:8]}"
    info = {**psycopg.conninfo.conninfo_to_dict(empty_dsn), "application_name": tag}
    with psycopg.connect(empty_dsn) as holder:
        holder.execute(held.encode())
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ghostmem.cli",
                "migrate",
                "--dsn",
                psycopg.conninfo.make_conninfo(**info),
            ],
            env={**os.environ, "GHOSTMEM_EMBED_MODEL": "hash"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:  # until the migration waits for the lock, inside 101's (107's, ..., 155's, 163's) transaction
            wait_until_blocked(empty_dsn, tag)
        finally:
            proc.kill()
            proc.wait(timeout=60)
        holder.rollback()
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        applied = migrations.migrate(conn, 384, "hash", RUNTIME)  # waits for the killed one's lock to go
        assert applied == [f"{m.version:03d}_{m.name}" for m in migrations.available() if m.version > start]
        assert _counts(conn) == counts
        assert conn.execute(
            "SELECT (SELECT count(*) FROM ghostmem.message_vectors),"
            " (SELECT count(*) FROM ghostmem.messages WHERE embedding IS NOT NULL)"
        ).fetchone() == (2, 2)
        # in the owner's partition (163), with its graph, the shared graph of messages gone
        assert vector_partitions(conn) == {owner: {f"ghostmem.{partition_name(owner)}"}}
        assert conn.execute(
            "SELECT to_regclass('ghostmem.messages_embedding_hnsw'),"
            " (SELECT count(*) FROM pg_index WHERE indisvalid AND indrelid = %s::regclass)",
            (f"ghostmem.{partition_name(owner)}",),
        ).fetchone() == (None, 6)
        kept, actual = vector_bits(conn)
        assert len(actual) == 2 and kept == actual
        kept, actual = word_counts(conn)
        assert len(actual) == 4 and kept == actual
        # a killed 120 (164) left none of its indexes half built (invalid); the rerun built them, the bits' time
        # and platform indexes holding the id and the bits (164)
        valid = conn.execute(
            "SELECT count(*) FILTER (WHERE indisvalid) FROM pg_index WHERE indexrelid IN"
            " ('ghostmem.message_vectors_owner_platform_ts'::regclass,"
            " 'ghostmem.message_bits_owner_platform_ts'::regclass)"
        ).fetchone()
        assert valid == (2,)
        assert conn.execute(
            "SELECT array_agg(pg_get_indexdef(indexrelid) ORDER BY pg_get_indexdef(indexrelid)) FROM pg_index WHERE indisvalid"
            " AND indexrelid IN ('ghostmem.message_bits_owner_ts'::regclass,"
            " 'ghostmem.message_bits_owner_platform_ts'::regclass)"
        ).fetchone() == (
            [
                "CREATE INDEX message_bits_owner_platform_ts ON ghostmem.message_bits USING btree"
                " (owner, tier, platform, ts) INCLUDE (id, bits)",
                "CREATE INDEX message_bits_owner_ts ON ghostmem.message_bits USING btree (owner, tier, ts)"
                " INCLUDE (id, bits)",
            ],
        )
        short = (*SEARCHED_GIN, STORE_GIN)
        assert gin_options(conn, short) == dict.fromkeys(short, PENDING_LIST_OPTIONS)
    with GhostMem(dsn=empty_dsn, owner=owner, embedder=HashEmbedder()) as gm:
        for word in ("zebrafinch", "narwhal"):
            assert [r.conv_id for r in gm.search_personal_memory(word, mode="lexical").data.rows] == ["odd"]


# -- the owner's word key without md5 (114) ------------------------------------------------------------------------

BEFORE_SHA256_KEY = 106  # the owner's words keyed by md5 (102) up to here
HOSTILE_OWNERS = ("default", "a\\b", "\\x41", "\\123", "o'brien", "日本語", "émoji 🎉", "tab\tnew\nline")


def _found_by_words(conn: psycopg.Connection[Any], owner: str, word: str, *, index: bool) -> list[int]:
    """The ids of ``owner``'s messages holding ``word``, read through the owner-keyed GIN index (``index``) or by
    checking every row, as the lexical leg asks (ghostmem.owner_word_query against ghostmem.owner_words)."""
    for setting in ("enable_seqscan", "enable_indexscan"):
        conn.execute(
            sql.SQL("SET {} = {}").format(sql.Identifier(setting), sql.SQL("off" if index else "on"))
        )
    conn.execute(sql.SQL("SET enable_bitmapscan = {}").format(sql.SQL("on" if index else "off")))
    (lexeme,) = conn.execute("SELECT tsvector_to_array(ghostmem.lexemes(%s, true))", (word,)).fetchone() or [
        []
    ]
    # the owner compared as an expression, as the search does: no btree of the owner's rows stands in for the index
    statement = (
        "SELECT m.id FROM ghostmem.messages m WHERE ghostmem.owner_words(m.owner, m.tsv)"
        " @@ ghostmem.owner_word_query(%(owner)s, %(lexeme)s) AND (m.owner || '') = %(owner)s ORDER BY m.id"
    )
    values = {"owner": owner, "lexeme": lexeme[0]}
    plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + statement, values))
    assert ("messages_owner_words" in plan) == index, plan
    return [r[0] for r in conn.execute(statement, values)]


def test_114_keys_the_owners_words_by_sha256_and_finds_what_102_found(empty_dsn: str) -> None:
    """A store whose words are keyed by md5 upgrades: every owner's key becomes 16 hex digits of sha256 of its
    UTF-8 bytes (checked against Python's hashlib for owners with backslashes, quotes, CJK, emoji, control
    characters), the index is rebuilt with it in the same transaction, and each owner's messages are found by
    their words, through the index and row by row alike, exactly as before."""
    owners = [f"{o}-{uuid.uuid4().hex[:6]}" for o in HOSTILE_OWNERS]
    words = ("deploy", "staging", "timeout", "cluster")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", RUNTIME, upto=BEFORE_SHA256_KEY)
        for o in owners:
            _fill_a_conversation(conn, o)
        md5_keys = {o: conn.execute("SELECT ghostmem.owner_key(%s)", (o,)).fetchone() for o in owners}
        assert all(k == (hashlib.md5(o.encode()).hexdigest()[:16] + ":",) for o, k in md5_keys.items())
        before = {(o, w): _found_by_words(conn, o, w, index=True) for o in owners for w in words}
        assert all(len(found) >= 1 for found in before.values())

        applied = migrations.migrate(conn, 384, "hash", RUNTIME)
        assert "114_owner_key_sha256" in applied
        for o in owners:
            key = conn.execute("SELECT ghostmem.owner_key(%s)", (o,)).fetchone()
            assert key == (hashlib.sha256(o.encode()).hexdigest()[:16] + ":",)
        after = {(o, w): _found_by_words(conn, o, w, index=True) for o in owners for w in words}
        checked = {(o, w): _found_by_words(conn, o, w, index=False) for o in owners for w in words}
        assert after == before == checked
        # the index holds the new keys only: an old md5 key finds nothing through it
        stale = conn.execute(
            "SELECT count(*) FROM ghostmem.messages m WHERE ghostmem.owner_words(m.owner, m.tsv)"
            " @@ ghostmem.lexeme_query(%s || 'deploy')",
            (md5_keys[owners[0]][0],),
        ).fetchone()
        assert stale == (0,)


def test_a_server_that_refuses_md5_stores_and_finds_words(empty_dsn: str) -> None:
    """A server in FIPS mode refuses md5() ("could not compute MD5 hash: unsupported"). Played here by an md5 that
    raises exactly that, found before pg_catalog's on the connection's search path (which the index expression's
    functions use): an import and a search by words of every surface's path work, as they did not under 102's
    md5 key (the same statements fail with the old key function put back)."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", RUNTIME)
        conn.execute("CREATE SCHEMA fips")
        for arg in ("text", "bytea"):
            conn.execute(
                sql.SQL(
                    "CREATE FUNCTION fips.md5({}) RETURNS text LANGUAGE plpgsql AS"
                    " $$BEGIN RAISE EXCEPTION 'could not compute MD5 hash: unsupported'; END$$"
                ).format(sql.SQL(arg))
            )
        conn.execute("GRANT USAGE ON SCHEMA fips TO PUBLIC")
    info = psycopg.conninfo.conninfo_to_dict(empty_dsn)
    fips = psycopg.conninfo.make_conninfo(**{**info, "options": "-c search_path=fips,pg_catalog,public"})
    refused = pytest.raises(psycopg.errors.RaiseException, match="could not compute MD5 hash")
    with psycopg.connect(fips, autocommit=True) as conn, refused:  # the stand-in refuses md5 as FIPS does
        conn.execute("SELECT md5('x')")
    owner = "fips-user"
    with GhostMem(dsn=fips, owner=owner, embedder=HashEmbedder()) as gm:
        texts = [
            ("user", "the deploy script times out on the staging cluster"),
            ("assistant", "raise the timeout"),
        ]
        gm.capture_append(  # the client's write path: the index expression is computed on insert
            "conv-1",
            [MessageRecord(f"m{n}", role, text) for n, (role, text) in enumerate(texts)],
            platform="langchain",
        )
        found = gm.search_personal_memory("staging timeout", mode="lexical").data.rows
        assert [h.conv_id for h in found] == ["conv-1"]
    with psycopg.connect(fips) as conn:  # the attack is real: with 102's key the same write is refused
        conn.execute(
            "CREATE OR REPLACE FUNCTION ghostmem.owner_key(owner text) RETURNS text LANGUAGE sql IMMUTABLE STRICT"
            " AS $$ SELECT left(md5(owner), 16) || ':' $$"
        )
        with pytest.raises(psycopg.errors.RaiseException, match="could not compute MD5 hash"):
            conn.execute("SELECT ghostmem.owner_words(%s, to_tsvector('simple', 'staging'))", (owner,))
        conn.rollback()


# -- long names across 107 ------------------------------------------------------------------------------------------


def test_a_conversation_with_a_long_id_and_a_long_project_upgrades_and_is_stored_again(
    empty_dsn: str, tmp_path: Path
) -> None:
    """A conversation id of 1,000 bytes (the longest ghostmem keeps) and a project of 1,800 bytes (random: they do
    not compress) fit every index of 106, but not one btree entry together: 107's window index first held both (it
    failed 'index row size ... exceeds btree version 4 maximum 2704', so no migration after 106 could be applied),
    and an import or a live capture of such a conversation was refused. The store upgrades, the conversation is
    found by its words and by a piece of its project, and more like it are imported and captured."""
    owner = f"long-{uuid.uuid4().hex[:6]}"
    conv_id, project = secrets.token_hex(STORED_ID_BYTES // 2), secrets.token_hex(900)
    text = "the deploy script times out on the staging cluster"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", RUNTIME, upto=BEFORE_WORD_COUNTS)
        conn.execute(
            "INSERT INTO ghostmem.conversations (owner, tier, conv_id, platform, title, project, msg_count)"
            " VALUES (%s, 'personal', %s, 'claude_code', 'the flaky deploy', %s, 1)",
            (owner, conv_id, project),
        )
        conn.execute(
            "INSERT INTO ghostmem.messages (owner, tier, conv_id, seq, native_id, role, text, ts, platform, project,"
            " content_hash, embedding) VALUES (%s, 'personal', %s, 0, 'm0', 'user', %s, %s, 'claude_code', %s,"
            " sha256(convert_to(%s, 'UTF8')), %s::vector)",
            (owner, conv_id, text, datetime.now(UTC), project, text, _vec(text)),
        )
        applied = migrations.migrate(conn, 384, "hash", RUNTIME)
        assert "107_message_lengths" in applied and applied[-1].startswith(
            f"{migrations.available()[-1].version}"
        )

    with GhostMem(dsn=empty_dsn, owner=owner, embedder=HashEmbedder()) as gm:
        again, live = secrets.token_hex(STORED_ID_BYTES // 2), secrets.token_hex(STORED_ID_BYTES // 2)
        other_project = secrets.token_hex(900)
        path = tmp_path / "long.jsonl"
        record = conversation(
            again, "longer", 1, ["the staging deploy needs a longer timeout"], other_project
        )
        record["messages"][0]["id"] = "m0"  # not the conversation's id again: the message's key holds both
        path.write_text(json.dumps(record) + "\n", encoding="utf-8")
        report = gm.import_paths([path])
        assert report.problems == [] and stored(gm)[again] == 1, report.render()
        gm.capture_append(
            live,
            [MessageRecord(native_id="", role="user", text="a live question on the staging deploy timeout")],
            platform="langchain",
            project=other_project,
        )
        for query, where in (
            ("staging deploy timeout", {}),
            ("staging deploy", {"project": project[1200:1240]}),
        ):
            for mode in ("hybrid", "lexical", "vector"):
                found = [h.conv_id for h in gm.search_personal_memory(query, mode=mode, **where).data.rows]
                assert conv_id in found, (query, where, mode)
                assert (again in found and live in found) == (where == {}), (query, where, mode, found)
        assert {
            h.conv_id for h in gm.search_personal_memory("timeout", project=other_project[:30]).data.rows
        } == {
            again,
            live,
        }
    with psycopg.connect(empty_dsn) as conn:
        kept, actual = word_counts(conn)
        assert len(actual) == 3 and kept == actual


def test_115_rebuilds_the_window_index_of_107_as_it_was_first_landed(empty_dsn: str) -> None:
    """A store that applied 107 before it was amended has the project in its window index: 115 rebuilds it without,
    and on a store whose 107 made it so already, leaves it as it is. (Migration 190 replaces the index: the store is
    built up to 115.)"""
    shape = (
        "SELECT i.indexrelid::oid, i.indnatts, pg_get_indexdef(i.indexrelid) FROM pg_index i"
        " WHERE i.indexrelid = 'ghostmem.message_lengths_place'::regclass"
    )
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", RUNTIME, upto=115)
        fresh = conn.execute(shape).fetchone()
        assert fresh is not None and fresh[1] == 8 and "project" not in fresh[2]
        conn.execute("DELETE FROM ghostmem_migrations.applied WHERE version = 115")
        assert migrations.migrate(conn, 384, "hash", RUNTIME, upto=115) == ["115_message_lengths_place"]
        assert conn.execute(shape).fetchone() == fresh  # the same index: nothing was rebuilt

        conn.execute("DROP INDEX ghostmem.message_lengths_place")  # as 107 first made it
        conn.execute(
            "CREATE INDEX message_lengths_place ON ghostmem.message_lengths (owner, tier, conv_id, seq)"
            " INCLUDE (id, lexemes, ts, platform, project)"
        )
        conn.execute("DELETE FROM ghostmem_migrations.applied WHERE version = 115")
        assert migrations.migrate(conn, 384, "hash", RUNTIME, upto=115) == ["115_message_lengths_place"]
        rebuilt = conn.execute(shape).fetchone()
        assert rebuilt is not None and rebuilt[1:] == fresh[1:] and rebuilt[0] != fresh[0]


def test_a_store_holding_an_id_longer_than_ghostmem_keeps_is_told_how_to_upgrade(empty_dsn: str) -> None:
    """A store at 106 holding a conversation whose id is 2,660 random bytes (it fitted every index of 106; an import
    refuses such ids now) cannot apply 107, whose window index has no room for it. The upgrade stops with one
    sentence naming the conversation, its owner and the statement that removes it, nothing of 107 applied; the
    statement run, the store upgrades to the last migration and keeps its other conversations, one with an id of
    exactly the limit among them."""
    owner = f"long-{uuid.uuid4().hex[:6]}"
    too_long, at_limit = secrets.token_urlsafe(2_000)[:2_660], secrets.token_hex(STORED_ID_BYTES // 2)
    text = "the deploy script times out on the staging cluster"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", RUNTIME, upto=BEFORE_WORD_COUNTS)
        for conv_id in (too_long, at_limit):
            conn.execute(
                "INSERT INTO ghostmem.conversations (owner, tier, conv_id, platform, title, msg_count)"
                " VALUES (%s, 'personal', %s, 'claude_code', 'the flaky deploy', 1)",
                (owner, conv_id),
            )
            conn.execute(
                "INSERT INTO ghostmem.messages (owner, tier, conv_id, seq, native_id, role, text, ts, platform,"
                " content_hash, embedding) VALUES (%s, 'personal', %s, 0, 'm0', 'user', %s, %s, 'claude_code',"
                " sha256(convert_to(%s, 'UTF8')), %s::vector)",
                (owner, conv_id, text, datetime.now(UTC), text, _vec(text)),
            )
        with pytest.raises(SchemaMismatch) as refused:
            migrations.migrate(conn, 384, "hash", RUNTIME)
        said = str(refused.value)
        assert said.startswith(
            "migration 107_message_lengths cannot index this store, which holds 1 conversation"
        )
        assert f"{too_long[:40]!r}…, 2,660 bytes, owner {owner!r}" in said and "index row size" not in said
        assert max(migrations.applied(conn)) == BEFORE_WORD_COUNTS
        fix = said.split("`")[1]
        assert fix == f"DELETE FROM ghostmem.conversations WHERE octet_length(conv_id) > {STORED_ID_BYTES}"
        conn.execute(fix)
        migrations.migrate(conn, 384, "hash", RUNTIME)
        assert max(migrations.applied(conn)) == migrations.available()[-1].version
    with GhostMem(dsn=empty_dsn, owner=owner, embedder=HashEmbedder()) as gm:
        assert [h.conv_id for h in gm.search_personal_memory("staging deploy timeout").data.rows] == [
            at_limit
        ]


def test_a_store_of_more_owners_than_the_lock_table_holds_is_told_how_to_upgrade(empty_dsn: str) -> None:
    """163 makes every owner's partition of the compact vectors in one transaction, about 15 locks each: a store at
    162 with one owner more than the server's lock table holds for that is refused before anything is done (not
    'out of shared memory' part way, after minutes), in one sentence naming the setting and the value it needs;
    with fewer owners the same store upgrades, each owner in its own partition."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", RUNTIME, upto=BEFORE_VECTOR_GRAPHS)
        locks, backends = conn.execute(
            "SELECT current_setting('max_locks_per_transaction')::int,"
            " current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int"
        ).fetchone() or (0, 0)
        owners = locks * backends // 15 + 1
        conn.execute(
            "INSERT INTO ghostmem.message_vectors (owner, id, tier, conv_id, ts, platform, project, embedding)"
            " SELECT 'crowd-' || i, i, 'personal', 'c', now(), 'generic', '', %s::vector::halfvec"
            " FROM generate_series(1, %s) AS i",
            (_vec("a crowd of owners"), owners),
        )
        with pytest.raises(SchemaMismatch) as refused:
            migrations.migrate(conn, 384, "hash", RUNTIME)
        needed = -(-owners * 15 // backends)
        assert str(refused.value) == (
            "migration 163_vector_graph_per_owner cannot run on this server: the vector graph of each of this"
            f" store's {owners} owners is made in one transaction, which needs max_locks_per_transaction of at"
            f" least {needed} on this server (it is {locks}): raise it, restart the server and upgrade again"
        )
        assert 163 not in migrations.applied(conn)
        assert conn.execute("SELECT count(*) FROM ghostmem.message_vectors").fetchone() == (owners,)
        conn.execute("DELETE FROM ghostmem.message_vectors WHERE id > 3")
        migrations.migrate(conn, 384, "hash", RUNTIME)
        assert set(vector_partitions(conn)) == {"crowd-1", "crowd-2", "crowd-3"}


def _queue_words(conn: psycopg.Connection[Any], owner: str, n: int, word: str) -> None:
    """``n`` conversations of ``owner`` of one message each, their words, titles and projects made of ``word`` and a
    number, written in one statement each."""
    conn.execute(
        "INSERT INTO ghostmem.conversations (owner, tier, conv_id, platform, title, project, msg_count)"
        " SELECT %(owner)s, 'personal', 'q' || i, 'generic', %(word)s || ' topic ' || i, %(word)s || 'shelf' || i %% 5,"
        " 1 FROM generate_series(1, %(n)s) AS i",
        {"owner": owner, "word": word, "n": n},
    )
    conn.execute(
        "INSERT INTO ghostmem.messages (owner, tier, conv_id, seq, native_id, role, text, platform, content_hash)"
        " SELECT %(owner)s, 'personal', 'q' || i, 0, 'n' || i, 'user', %(word)s || i || ' fig' || i %% 9 || ' entry',"
        " 'generic', sha256(convert_to('q' || i, 'UTF8')) FROM generate_series(1, %(n)s) AS i",
        {"owner": owner, "word": word, "n": n},
    )


def _runtime_cannot_lengthen(conn: psycopg.Connection[Any], names: Sequence[str]) -> None:
    """The role the application runs as can neither set nor reset the pending list limit of the GIN indexes
    ``names``: they keep 256 kB."""
    conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(RUNTIME)))
    try:
        for name in names:
            for change in ("SET (gin_pending_list_limit = 4096)", "RESET (gin_pending_list_limit)"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql.SQL("ALTER INDEX ghostmem.{} " + change).format(sql.Identifier(name)))
    finally:
        conn.execute("RESET ROLE")
    assert gin_options(conn, names) == dict.fromkeys(names, PENDING_LIST_OPTIONS)


def test_116_merges_what_the_searched_indexes_queued_and_keeps_their_lists_short(empty_dsn: str) -> None:
    """A store at 115 whose GIN indexes queued the words, titles and projects of 4,000 conversations in pending lists
    of PostgreSQL's size (each fetch below read them whole) upgrades: 116 merges them, the same messages are found,
    and the 4,000 conversations written after it leave at most 32 pages in each list. The role the application runs
    as cannot give the indexes their long lists back."""
    owner = f"gin-{uuid.uuid4().hex[:8]}"
    fetches = [
        (WORD_FETCH, {"owner": owner, "lexeme": "quince7"}, SEARCHED_GIN[0]),
        (TITLE_FETCH, {"pattern": "%quince topic 7%"}, SEARCHED_GIN[1]),
        (PROJECT_FETCH, {"pattern": "%quinceshelf3%"}, SEARCHED_GIN[2]),
    ]
    found = (
        "SELECT array_agg(m.conv_id ORDER BY m.conv_id) FROM ({}) f JOIN ghostmem.messages m ON m.id = f.id"
    )
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", RUNTIME, upto=BEFORE_SHORT_PENDING_LIST)
        _queue_words(conn, owner, 4000, "quince")
        queued = [index_pages(conn, *fetch) for fetch in fetches]
        before = conn.execute(found.format(WORD_FETCH), fetches[0][1]).fetchone()
        assert before == (["q7"],)

        assert "116_gin_short_pending_list" in migrations.migrate(conn, 384, "hash", RUNTIME)
        assert gin_options(conn) == dict.fromkeys(SEARCHED_GIN, PENDING_LIST_OPTIONS)
        merged = [index_pages(conn, *fetch) for fetch in fetches]
        assert all(m + PENDING_LIST_PAGES < q for m, q in zip(merged, queued, strict=True)), (queued, merged)
        assert conn.execute(found.format(WORD_FETCH), fetches[0][1]).fetchone() == before

        _queue_words(conn, f"{owner}-later", 4000, "plum")
        check_short_pending_lists(conn, fetches)

        _runtime_cannot_lengthen(conn, SEARCHED_GIN)


def _queue_items(conn: psycopg.Connection[Any], owner: str, n: int, word: str) -> None:
    """``n`` LangGraph store items of ``owner`` of eight words each, made of ``word`` and numbers, written in one
    statement as ghostmem.items writes them (their vectors aside)."""
    conn.execute(
        "INSERT INTO ghostmem.store_items (owner, namespace, key, value, text, tsv)"
        " SELECT %(owner)s, '{memories}', 'k' || i, '{}', t, ghostmem.lexemes(t) FROM generate_series(1, %(n)s) AS i,"
        " LATERAL (SELECT concat_ws(' ', %(word)s || i, 'fig' || i %% 9, 'entry', 'user' || i %% 97, 'likes' || i %% 89,"
        " 'tag' || i %% 31, 'note' || i %% 53, 'week' || i %% 52)) AS w(t)",
        {"owner": owner, "word": word, "n": n},
    )


def test_130_merges_what_the_store_index_queued_and_keeps_its_list_short(empty_dsn: str) -> None:
    """A store at 129 whose LangGraph store queued the words of 4,000 items in a pending list of PostgreSQL's size
    (the store search's word fetch read it whole) upgrades: 130 merges it, the same item is found, and the 4,000
    items written after it leave at most 32 pages in the list. The role the application runs as cannot give the
    index its long list back."""
    owner = f"store-gin-{uuid.uuid4().hex[:8]}"
    fetches = [(ITEM_FETCH, {"owner": owner, "lexeme": "quince7"}, STORE_GIN)]
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", RUNTIME, upto=BEFORE_STORE_PENDING_LIST)
        _queue_items(conn, owner, 4000, "quince")
        (queued,) = (index_pages(conn, *fetch) for fetch in fetches)
        before = conn.execute(ITEM_FETCH, fetches[0][1]).fetchall()
        assert before == [("k7",)]

        assert "130_store_items_short_pending_list" in migrations.migrate(conn, 384, "hash", RUNTIME)
        assert gin_options(conn, [STORE_GIN]) == {STORE_GIN: PENDING_LIST_OPTIONS}
        merged = index_pages(conn, *fetches[0])
        assert merged + PENDING_LIST_PAGES < queued, (queued, merged)
        assert conn.execute(ITEM_FETCH, fetches[0][1]).fetchall() == before

        _queue_items(conn, f"{owner}-later", 4000, "plum")
        check_short_pending_lists(conn, fetches)

        _runtime_cannot_lengthen(conn, [STORE_GIN])
