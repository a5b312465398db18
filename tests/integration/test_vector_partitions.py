"""A vector graph per owner (migration 163): the compact vectors partitioned by owner, an HNSW graph each. A small
owner beside a large one walks its own graph under the generic plan, and the model costs that graph; an owner moved
to a new name gets a partition of its own; and the partitions' boundary holds under attack: hostile owner names,
other roles, a temp table named as the partition a write is about to create, a process killed while it creates one,
two creators of one owner's partition at once."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder, search
from ghostmem.args import SearchPersonalMemoryArgs
from ghostmem.program import run_sync
from ghostmem.search import search_messages
from psycopg import sql
from support.conversations import conversation, import_generic
from support.copies import owner_index, partition_name, vector_bits, vector_partitions
from support.databases import fresh_database, wait_until_blocked
from support.statements import generic_plan, recording

RUNTIME = "ghostmem_runtime"
VEC = "[" + ",".join(["0.05"] * 383 + ["0.5"]) + "]"


_WRITER = """
import psycopg
with psycopg.connect({dsn!r}) as conn:  # one transaction, as an import writes
    conn.execute({conversation!r}, ({owner!r}, "k1"))
    conn.execute({message!r}, ({owner!r}, "k1", "deploy notes", {vec!r}))
"""
_CONVERSATION = (
    "INSERT INTO ghostmem.conversations (owner, tier, conv_id, platform, title, msg_count)"
    " VALUES (%s, 'personal', %s, 'generic', 't', 1)"
)
_MESSAGE = (
    "INSERT INTO ghostmem.messages (owner, tier, conv_id, seq, native_id, role, text, ts, platform,"
    " content_hash, embedding) VALUES (%s, 'personal', %s, 0, 'm0', 'user', %s, now(), 'generic', '\\x01',"
    " %s::public.vector)"
)


def _write(conn: psycopg.Connection[Any], owner: str, conv: str, text: str = "deploy notes") -> None:
    """One conversation of one message with a vector, written as an application writes it."""
    conn.execute(_CONVERSATION, (owner, conv))
    conn.execute(_MESSAGE, (owner, conv, text, VEC))


@pytest.fixture
def own_dsn(server_dsn: str) -> Iterator[str]:
    with fresh_database(server_dsn, "ghostmem_graphs") as dsn:
        with GhostMem(dsn=dsn, owner="setup", embedder=HashEmbedder()) as gm:
            gm.connect()  # migrated
        yield dsn


def test_a_small_owner_walks_its_own_graph_beside_others(
    own_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside an owner of 600 messages and 20 others: the model costs the HNSW walk on the small owner's own
    messages (not the database's), the generic plan of its search holds its partition alone (pruned when planned,
    the owner a constant) and walks that partition's graph, and the walk finds what an exact scan finds."""
    big = [conversation(f"b{i}", f"b {i}", i % 30, [f"routine deploy log {i}", "fine"]) for i in range(300)]
    small = [conversation(f"s{i}", f"s {i}", 1, [f"deploy of tiny {i}", "all went well"]) for i in range(5)]
    owners = {"big": big, "small": small} | {
        f"o{i}": [conversation("x", "x", 1, ["other words"])] for i in range(20)
    }
    for owner, convs in owners.items():
        with GhostMem(dsn=own_dsn, owner=owner, embedder=HashEmbedder()) as gm:
            import_generic(gm, tmp_path / f"{owner}.jsonl", convs)
    chosen: list[tuple[Any, ...]] = []

    def hnsw(*args: Any) -> search.Scan:
        chosen.append(args)
        return "hnsw"

    monkeypatch.setattr(search, "vector_scan", hnsw)
    args = SearchPersonalMemoryArgs(query="tiny deploy", mode="vector")
    with GhostMem(dsn=own_dsn, owner="small", embedder=HashEmbedder()) as gm, gm.connection() as conn:
        total = conn.execute("SELECT count(*) FROM ghostmem.messages WHERE owner = 'small'").fetchone()
        assert chosen == [] and total is not None
        seen: list[tuple[str, Any]] = []
        walked = run_sync(recording(search_messages(gm.context, args, 10, -1), conn, seen), conn, gm.embedder)
        assert chosen[0][2] == total[0] == 10  # the graph: its own 10 messages, not the database's 650
        conn.execute("SET LOCAL enable_sort = off")  # at this size a sort of 10 rows beats any index
        plan = generic_plan(conn, seen[-1][0])
        graph = owner_index(conn, "message_vectors_embedding_hnsw", "small")
        vec_scan = plan.split("CTE vec_scan", 1)[1].split("\n  CTE ", 1)[0]
        assert f"Index Scan using {graph} on {partition_name('small')}" in vec_scan, plan
        assert vec_scan.count("message_vectors_") == 2 and "Subplans Removed" not in plan, plan
    monkeypatch.setattr(search, "vector_scan", lambda *_: "exact")
    with GhostMem(dsn=own_dsn, owner="small", embedder=HashEmbedder()) as gm, gm.connection() as conn:
        exact = run_sync(search_messages(gm.context, args, 10, -1), conn, gm.embedder)
    assert [r["id"] for r in walked] == [r["id"] for r in exact] and len(exact) == 10
    assert all(abs(a["vec_dist"] - b["vec_dist"]) < 1e-9 for a, b in zip(walked, exact, strict=True))


def test_an_owner_moved_to_a_new_name_gets_a_partition_of_its_own(own_dsn: str) -> None:
    """A conversation's messages moved to an owner that has no vector yet (an update of messages): the update's
    trigger creates that owner's partition before the vectors are copied, and they leave the old one."""
    with psycopg.connect(own_dsn, autocommit=True) as conn:
        _write(conn, "ann", "c1")
        _write(conn, "ann", "c2")
        conn.execute(
            "INSERT INTO ghostmem.conversations (owner, tier, conv_id, platform, title, msg_count)"
            " VALUES ('ann-work', 'personal', 'c1', 'generic', 't', 1)"
        )
        assert conn.execute(
            "SELECT to_regclass(%s)", (f"ghostmem.{partition_name('ann-work')}",)
        ).fetchone() == (None,)
        conn.execute("UPDATE ghostmem.messages SET owner = 'ann-work' WHERE owner = 'ann' AND conv_id = 'c1'")
        assert vector_partitions(conn) == {
            "ann": {f"ghostmem.{partition_name('ann')}"},
            "ann-work": {f"ghostmem.{partition_name('ann-work')}"},
        }
        kept, actual = vector_bits(conn)
        assert kept == actual and {(r[0], r[3]) for r in kept} == {("ann", "c2"), ("ann-work", "c1")}


def _hostile_owners() -> list[str]:
    rng = random.Random(139)
    noise = ""
    while len((noise + "x").encode()) <= 256:  # 256 bytes of random characters (no NUL, no lone surrogate)
        c = chr(
            rng.choice([rng.randrange(1, 0x80), rng.randrange(0x80, 0xD800), rng.randrange(0xE000, 0x110000)])
        )
        if len((noise + c).encode()) <= 256:
            noise += c
        else:
            break
    return [
        "o'brien\"; DROP TABLE ghostmem.message_vectors; --",
        "back\\slash'",
        noise,
        "100%",  # placeholders to psycopg, were the constant's % not doubled
        "%_",
        "me%%",
        "me%",
        "x%(owner)s",
        "message_vectors",  # the partitioned table's own name
        "messages",
        partition_name("victim"),  # another owner's partition's name
    ]


def test_hostile_owner_names_get_their_own_partitions_and_find_only_their_own(
    own_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Quotes, SQL, placeholders, 256 random bytes, names of existing relations (the table, another owner's partition): each
    owner's vectors go to a partition named by its digest, nothing else is created or dropped, and each finds its
    own message by every scan of the vector leg and nobody else's."""
    owners = ["victim", *_hostile_owners()]
    assert len(owners[3].encode()) >= 250
    with psycopg.connect(own_dsn, autocommit=True) as conn:
        for i, owner in enumerate(owners):
            _write(conn, owner, f"c{i}", f"deploy notes number {i}")
        placed = vector_partitions(conn)
        assert placed == {o: {f"ghostmem.{partition_name(o)}"} for o in owners}
        tables = {
            r[0] for r in conn.execute("SELECT tablename::text FROM pg_tables WHERE schemaname = 'ghostmem'")
        }
        assert {"message_vectors", "messages", partition_name("victim")} <= tables
    args = SearchPersonalMemoryArgs(query="deploy notes", mode="vector")
    for scan in ("hnsw", "exact", "quantized"):
        monkeypatch.setattr(search, "vector_scan", lambda *_, scan=scan: scan)
        for i, owner in enumerate(owners):
            with GhostMem(dsn=own_dsn, owner=owner, embedder=HashEmbedder()) as gm, gm.connection() as conn:
                rows = run_sync(search_messages(gm.context, args, 10, -1), conn, gm.embedder)
            assert [r["conv_id"] for r in rows] == [f"c{i}"], (scan, owner)


def _app_role(admin: psycopg.Connection[Any], read_only: bool = False) -> str:
    role = f"ghostmem_app_{uuid.uuid4().hex[:8]}"
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    admin.execute("SELECT ghostmem.grant_app(%s, %s, %s)", (role, RUNTIME, read_only))
    admin.execute(
        sql.SQL("GRANT TEMPORARY ON DATABASE {} TO {}").format(
            sql.Identifier(admin.info.dbname), sql.Identifier(role)
        )
    )
    return role


def _drop_role(admin: psycopg.Connection[Any], role: str) -> None:
    admin.execute("SELECT ghostmem.revoke_app(%s, %s)", (role, RUNTIME))
    admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
    admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _as(dsn: str, role: str) -> psycopg.Connection[Any]:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    return psycopg.connect(psycopg.conninfo.make_conninfo(**{**info, "user": role}), autocommit=True)


def test_other_roles_can_neither_make_nor_unmake_a_partition(own_dsn: str) -> None:
    """An application login (writer or reader) and the runtime role: neither may call the function that creates
    partitions, the trigger function, create a table in ghostmem, or drop, detach, alter or attach to another
    owner's partition; the runtime role may not read one. The writer still writes a new owner's vectors (its
    partition made by the trigger) and reads them through the table."""
    with psycopg.connect(own_dsn, autocommit=True) as admin:
        _write(admin, "victim", "v1")
        victim = partition_name("victim")
        writer, reader = _app_role(admin), _app_role(admin, read_only=True)
        try:
            attempts = [
                "SELECT ghostmem.message_vectors_partition('mallory')",
                "SELECT ghostmem.message_vectors_attach()",
                f"DROP TABLE ghostmem.{victim}",
                f"ALTER TABLE ghostmem.message_vectors DETACH PARTITION ghostmem.{victim}",
                f"ALTER TABLE ghostmem.{victim} ADD COLUMN x int",
                f"TRUNCATE ghostmem.{victim}",
                "CREATE TABLE ghostmem.message_vectors_mallory (LIKE ghostmem.message_vectors)",
                "CREATE TABLE ghostmem.message_vectors_mallory PARTITION OF ghostmem.message_vectors"
                " FOR VALUES IN ('mallory')",
            ]
            for role in (writer, reader):
                with _as(own_dsn, role) as conn:
                    for statement in attempts:
                        with pytest.raises(psycopg.errors.InsufficientPrivilege):
                            conn.execute(statement.encode())
                    with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(RUNTIME)))
                        conn.execute(f"SELECT * FROM ghostmem.{victim}".encode())
            with _as(own_dsn, writer) as conn:
                _write(conn, "mallory", "m1")
                assert conn.execute(
                    "SELECT count(*) FROM ghostmem.message_vectors WHERE owner = 'mallory'"
                ).fetchone() == (1,)
            assert vector_partitions(admin) == {
                o: {f"ghostmem.{partition_name(o)}"} for o in ("victim", "mallory")
            }
            assert admin.execute(f"SELECT count(*) FROM ghostmem.{victim}".encode()).fetchone() == (1,)
        finally:
            for role in (writer, reader):
                _drop_role(admin, role)


def test_a_temp_table_named_as_the_partition_to_be_made_is_ignored(own_dsn: str) -> None:
    """A writer puts a temp table named as the partition its next write will create first on its search path: the
    partition is made in ghostmem, the vector goes there, the temp table stays empty."""
    with psycopg.connect(own_dsn, autocommit=True) as admin:
        writer = _app_role(admin)
        try:
            with _as(own_dsn, writer) as conn:
                part = partition_name("newcomer")
                conn.execute(
                    sql.SQL("CREATE TEMP TABLE {} (LIKE ghostmem.message_vectors)").format(
                        sql.Identifier(part)
                    )
                )
                conn.execute("SET search_path = pg_temp, ghostmem, public")
                _write(conn, "newcomer", "n1")
                assert conn.execute(
                    sql.SQL("SELECT count(*) FROM pg_temp.{}").format(sql.Identifier(part))
                ).fetchone() == (0,)
                conn.execute("DISCARD TEMP")
            assert vector_partitions(admin) == {"newcomer": {f"ghostmem.{part}"}}
        finally:
            _drop_role(admin, writer)


def test_a_process_killed_while_it_makes_a_partition_leaves_nothing(own_dsn: str) -> None:
    """A writer of a new owner's first vector (in a transaction, as an import writes) is SIGKILLed while its trigger
    waits to make the owner's partition (an administrator holds the table's lock): once its server process has gone,
    no table and no row is left, and the next write makes the partition."""
    owner = f"killed-{uuid.uuid4().hex[:8]}"
    tag = f"ghostmem-partition-{uuid.uuid4().hex[:8]}"
    info = {**psycopg.conninfo.conninfo_to_dict(own_dsn), "application_name": tag}
    script = _WRITER.format(
        dsn=psycopg.conninfo.make_conninfo(**info),
        conversation=_CONVERSATION,
        message=_MESSAGE,
        owner=owner,
        vec=VEC,
    )
    with psycopg.connect(own_dsn) as holder:
        holder.execute("LOCK TABLE ghostmem.message_vectors IN SHARE UPDATE EXCLUSIVE MODE")
        proc = subprocess.Popen([sys.executable, "-c", script], env=os.environ.copy())
        try:
            wait_until_blocked(own_dsn, tag)
        finally:
            proc.kill()
            proc.wait(timeout=60)
        holder.rollback()
    with psycopg.connect(own_dsn, autocommit=True) as conn:
        for _ in range(100):  # until the killed backend has gone
            if conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (tag,)
            ).fetchone() == (0,):
                break
            time.sleep(0.1)
        assert conn.execute("SELECT to_regclass(%s)", (f"ghostmem.{partition_name(owner)}",)).fetchone() == (
            None,
        )
        assert conn.execute(
            "SELECT count(*) FROM ghostmem.messages WHERE owner = %s", (owner,)
        ).fetchone() == (0,)
        _write(conn, owner, "k1")
        assert vector_partitions(conn)[owner] == {f"ghostmem.{partition_name(owner)}"}


def test_two_first_writers_of_one_owner_make_one_partition(own_dsn: str) -> None:
    """Two transactions write a new owner's first vectors at once: the second waits for the first's partition,
    then finds it; both rows are kept in the one partition."""
    owner = f"twice-{uuid.uuid4().hex[:8]}"
    errors: list[BaseException] = []
    with psycopg.connect(own_dsn) as first:
        _write(first, owner, "a")  # in its open transaction: the partition is made, not committed

        def second() -> None:
            try:
                with psycopg.connect(own_dsn, autocommit=True) as conn:
                    _write(conn, owner, "b")
            except BaseException as exc:  # reported below
                errors.append(exc)

        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(1.0)  # the second waits for the first's lock
        assert thread.is_alive()
        first.commit()
        thread.join(timeout=60)
    assert errors == []
    with psycopg.connect(own_dsn, autocommit=True) as conn:
        assert vector_partitions(conn) == {owner: {f"ghostmem.{partition_name(owner)}"}}
        assert conn.execute(
            "SELECT count(*) FROM ghostmem.message_vectors WHERE owner = %s", (owner,)
        ).fetchone() == (2,)
