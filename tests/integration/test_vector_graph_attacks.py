"""Attacks on the vector graph per owner (migration 163: ghostmem.message_vectors partitioned by owner, a partition
per owner created by a SECURITY DEFINER function from a trigger on messages): another login trying to create, drop,
detach, empty or shadow an owner's partition; owners named to break the partition's name, its bound or the search's
literal; a creator killed before it commits; a re-embedding to another dimension; TRUNCATE and forget."""

from __future__ import annotations

import hashlib
import random
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder
from ghostmem.capture import append_messages
from ghostmem.db import migrations
from ghostmem.records import MessageRecord
from psycopg import sql
from support.databases import fresh_database

RUNTIME = "ghostmem_runtime"


def _said(owner: str) -> list[MessageRecord]:
    return [
        MessageRecord(native_id="", role="user", text=f"how do I rotate the vault tokens of {owner}"),
        MessageRecord(native_id="", role="assistant", text="run the rotation job, then restart the workers"),
    ]


def _partition_name(owner: str) -> str:
    return "message_vectors_" + hashlib.sha256(owner.encode("utf-8")).hexdigest()[:40]


def _partitions(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """{partition name: its bound} of ghostmem.message_vectors."""
    rows = conn.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'ghostmem.message_vectors'::regclass"
    ).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def _found(gm: GhostMem) -> set[str]:
    rows = gm.search_personal_memory("rotate the vault tokens", mode="vector").data.rows
    return {r.conv_id for r in rows}


@pytest.fixture
def logins(server_dsn: str) -> Iterator[tuple[str, str, str]]:
    """(admin DSN, app DSN, read-only DSN) on a migrated database of their own, the logins granted by grant_app."""
    app, reader = (f"ghostmem_{kind}_{uuid.uuid4().hex[:8]}" for kind in ("app", "reader"))
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        for role in (app, reader):
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        with fresh_database(server_dsn, "ghostmem_graphs") as admin_dsn:
            with psycopg.connect(admin_dsn, autocommit=True) as conn:
                migrations.migrate(conn, 384, "hash", RUNTIME)
                conn.execute("SELECT ghostmem.grant_app(%s, %s, false)", (app, RUNTIME))
                conn.execute("SELECT ghostmem.grant_app(%s, %s, true)", (reader, RUNTIME))
            info = psycopg.conninfo.conninfo_to_dict(admin_dsn)
            yield (
                admin_dsn,
                psycopg.conninfo.make_conninfo(**{**info, "user": app}),
                psycopg.conninfo.make_conninfo(**{**info, "user": reader}),
            )
            with psycopg.connect(admin_dsn, autocommit=True) as conn:
                for role in (app, reader):
                    conn.execute("SELECT ghostmem.revoke_app(%s, %s)", (role, RUNTIME))
                    conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            for role in (app, reader):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_a_login_can_neither_make_nor_unmake_an_owners_partition(logins: tuple[str, str, str]) -> None:
    """An application login writes its owners' messages (their partitions come with them) and nothing else of the
    partitioning: it cannot call the creating function for an owner of its choice, create, drop, detach, attach,
    truncate or re-own a partition, nor make the trigger attach a table of its own; a read-only login cannot write
    a partition directly; temp objects named as ghostmem's (a temp table named as the next owner's partition, temp
    functions named as the catalog functions the definer calls) change nothing of the partition the next owner gets."""
    admin_dsn, app_dsn, reader_dsn = logins
    with GhostMem(dsn=app_dsn, owner="alice", embedder=HashEmbedder()) as alice:
        alice.capture_append("a", _said("alice"), platform="langchain")
    victim = _partition_name("alice")
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        attempts = [
            sql.SQL("SELECT ghostmem.message_vectors_partition({})").format(sql.Literal("mallory")),
            sql.SQL("DROP TABLE ghostmem.{}").format(sql.Identifier(victim)),
            sql.SQL("ALTER TABLE ghostmem.message_vectors DETACH PARTITION ghostmem.{}").format(
                sql.Identifier(victim)
            ),
            sql.SQL("TRUNCATE ghostmem.{}").format(sql.Identifier(victim)),
            sql.SQL("ALTER TABLE ghostmem.{} OWNER TO CURRENT_USER").format(sql.Identifier(victim)),
            sql.SQL("CREATE TABLE ghostmem.{} (LIKE ghostmem.message_vectors)").format(
                sql.Identifier(_partition_name("bob"))
            ),
            sql.SQL("DROP INDEX ghostmem.message_vectors_embedding_hnsw"),
        ]
        for attempt in attempts:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(attempt)
        # shadows in the login's own temp schema: the definer's search_path ends in pg_temp and names ghostmem
        conn.execute(
            sql.SQL("CREATE TEMP TABLE {} (owner text, id bigint)").format(
                sql.Identifier(_partition_name("bob"))
            )
        )
        conn.execute("CREATE TEMP TABLE message_vectors (owner text, id bigint)")
        for fn in ("to_regclass(text)", "format(text, text)", "left(text, integer)", "encode(bytea, text)"):
            conn.execute(f"CREATE FUNCTION pg_temp.{fn} RETURNS text LANGUAGE sql AS $$ SELECT 'x' $$")
        append_messages(conn, "bob", "b", "langchain", _said("bob"), embedder=HashEmbedder())
    with (
        psycopg.connect(reader_dsn, autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute(sql.SQL("DELETE FROM ghostmem.{}").format(sql.Identifier(victim)))
    with psycopg.connect(admin_dsn) as conn:
        parts = _partitions(conn)
        assert parts == {
            victim: "FOR VALUES IN ('alice')",
            _partition_name("bob"): "FOR VALUES IN ('bob')",
        }
        schemas = conn.execute(
            "SELECT DISTINCT relnamespace::regnamespace::text FROM pg_class WHERE relname = ANY(%s)"
            " AND relpersistence = 'p'",
            (list(parts),),
        ).fetchall()
        assert schemas == [("ghostmem",)]
    with GhostMem(dsn=app_dsn, owner="bob", embedder=HashEmbedder()) as bob:
        assert _found(bob) == {"b"}


def test_owners_named_to_break_a_partition_keep_their_own_graph(server_dsn: str) -> None:
    """Owners whose names are quotes, backslashes, SQL, placeholders, the names of ghostmem's relations (and of
    another owner's partition), 256 random bytes: each gets one partition bound to exactly its name, and a search by
    meaning finds its conversation and no one else's."""
    rng = random.Random(24)
    owners = [
        "o'brien",
        "back\\slash\\",
        "x'); DROP TABLE ghostmem.messages; --",
        '"quoted"',
        "messages",
        "message_vectors",
        _partition_name("o'brien"),
        "%_",  # psycopg reads a % in the statement's text as a placeholder, inside a literal too
        "100%",
        "a%%b",  # would become 'a%b', another owner's name
        "a%b",
        "x%(owner)s",
        "%s",
        "".join(chr(rng.randrange(0x80, 0x800)) for _ in range(128)),  # 256 bytes: the longest owner
    ]
    assert len(owners[-1].encode()) == 256
    with fresh_database(server_dsn, "ghostmem_owners") as dsn:
        _write_and_find(dsn, owners)


def _write_and_find(dsn: str, owners: list[str]) -> None:
    for owner in owners:
        with GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder()) as gm:
            gm.capture_append(f"conv of {owner}", _said(owner), platform="langchain")
    with psycopg.connect(dsn) as conn:
        bounds = {
            str(r[0]): str(r[1])
            for r in conn.execute(
                "SELECT c.relname, (SELECT v.owner FROM ghostmem.message_vectors v WHERE v.tableoid = c.oid LIMIT 1)"
                " FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                " WHERE i.inhparent = 'ghostmem.message_vectors'::regclass"
            )
        }
    assert bounds == {_partition_name(owner): owner for owner in owners}
    for owner in owners:
        with GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder()) as gm:
            assert _found(gm) == {f"conv of {owner}"}, owner


def test_a_creator_killed_before_it_commits_leaves_no_partition_and_the_next_write_makes_it(
    pg_dsn: str,
) -> None:
    """A write that created an owner's partition is killed before it commits: nothing of the partition stays (its
    table and its attachment were the transaction's), and meanwhile another new owner's first write waited for it
    and then got its own. The killed owner's next write creates the partition."""
    with GhostMem(dsn=pg_dsn, owner="carol", embedder=HashEmbedder()) as carol:
        carol.connect()
        with psycopg.connect(pg_dsn) as killed, psycopg.connect(pg_dsn, autocommit=True) as admin:
            append_messages(killed, "carol", "c", "langchain", _said("carol"), embedder=carol.embedder)
            assert _partition_name("carol") in _partitions(killed)  # its own, uncommitted
            pid = killed.info.backend_pid
            assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
            with pytest.raises(psycopg.OperationalError):
                killed.execute("SELECT 1")
            assert _partition_name("carol") not in _partitions(admin)
            assert admin.execute(
                "SELECT to_regclass(%s)", (f"ghostmem.{_partition_name('carol')}",)
            ).fetchone() == (None,)
        carol.capture_append("c", _said("carol"), platform="langchain")
        assert _found(carol) == {"c"}


def test_reembedding_to_another_dimension_keeps_a_graph_per_owner(server_dsn: str) -> None:
    """A re-embedding to 64 dimensions retypes every owner's partition and gives each its graph again; an owner that
    comes after gets a partition of the new type with its graph; TRUNCATE of the messages empties the partitions and
    a forget removes its vectors from its owner's partition only."""
    with fresh_database(server_dsn, "ghostmem_reembed") as dsn:
        _reembed_and_truncate(dsn)


def _reembed_and_truncate(pg_dsn: str) -> None:
    for owner in ("dave", "erin"):
        with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder(384)) as gm:
            gm.capture_append("x", _said(owner), platform="langchain")
    with GhostMem(dsn=pg_dsn, owner="dave", embedder=HashEmbedder(384)) as gm:
        gm.reembed(HashEmbedder(64))
    with GhostMem(dsn=pg_dsn, owner="frank", embedder=HashEmbedder(64)) as gm:
        gm.capture_append("x", _said("frank"), platform="langchain")
    with psycopg.connect(pg_dsn) as conn:
        parts = _partitions(conn)
        assert set(parts) == {_partition_name(o) for o in ("dave", "erin", "frank")}
        for part in parts:
            kind = conn.execute(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
                " WHERE attrelid = %s::regclass AND attname = 'embedding'",
                (f"ghostmem.{part}",),
            ).fetchone()
            assert kind == ("halfvec(64)",), part
            graphs = conn.execute(
                "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                " JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = %s::regclass AND a.amname = 'hnsw'",
                (f"ghostmem.{part}",),
            ).fetchone()
            assert graphs == (1,), part
    for owner in ("dave", "erin", "frank"):
        with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder(64)) as gm:
            assert _found(gm) == {"x"}, owner
    with GhostMem(dsn=pg_dsn, owner="erin", embedder=HashEmbedder(64)) as gm:
        gm.forget("x")
        assert _found(gm) == set()
    with psycopg.connect(pg_dsn) as conn:
        counts = dict(
            conn.execute("SELECT owner, count(*) FROM ghostmem.message_vectors GROUP BY owner").fetchall()
        )
        assert counts == {"dave": 2, "frank": 2}
        conn.execute("TRUNCATE ghostmem.messages")
        conn.commit()
        assert conn.execute("SELECT count(*) FROM ghostmem.message_vectors").fetchone() == (0,)
        assert len(_partitions(conn)) == 3
    with GhostMem(dsn=pg_dsn, owner="dave", embedder=HashEmbedder(64)) as gm:
        gm.capture_append("y", _said("dave"), platform="langchain")
        assert _found(gm) == {"y"}
