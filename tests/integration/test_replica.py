"""Reads on a real streaming-replication standby, writes on the primary (``read_dsn=`` / ``read_pool=``).

The standby is a ``pg_basebackup`` of the suite's embedded server, started on 127.0.0.1 (or the standby a user names
in ``GHOSTMEM_TEST_READ_DSN``). Which server ran a call is observed, not assumed: the test's own pools record every
statement's server (and ask each server ``pg_is_in_recovery()``), and a standby whose replay is paused shows by the
data it lacks that it answered.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from ghostmem import OPS, AsyncGhostMem, GhostMem, HashEmbedder, InvalidArgument
from ghostmem.ops import Effect
from ghostmem.records import MessageRecord
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from support.adapters import seed_conversations, seed_rule
from support.async_use import SYMPTOMS, run_async_use
from support.cli import ghostmem
from support.connections import tagged, wait_for_backends
from support.standby import Standby


@pytest.fixture(scope="session")
def standby(server_dsn: str) -> Iterator[Standby]:
    given = Standby.given()
    if given is not None:
        yield given
        return
    if os.environ.get("GHOSTMEM_TEST_DSN"):
        pytest.skip("set GHOSTMEM_TEST_READ_DSN to a streaming standby of GHOSTMEM_TEST_DSN's server")
    made = Standby.of(server_dsn)
    try:
        yield made
    finally:
        made.remove()


@pytest.fixture
def read_dsn(standby: Standby, pg_dsn: str) -> str:
    """The standby's DSN of the session database, once the standby holds its schema."""
    GhostMem(dsn=pg_dsn, embedder=HashEmbedder()).migrate()
    standby.catch_up(pg_dsn)
    return standby.dsn(pg_dsn)


class Servers:
    """Which server ran each statement of the pools it made (``primary`` or ``standby``)."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def cursor(self, server: str) -> type[psycopg.Cursor[Any]]:
        log = self.log

        class Recorded(psycopg.Cursor[Any]):
            def execute(self, *args: Any, **kwargs: Any) -> Any:
                log.append(server)
                return super().execute(*args, **kwargs)

        return Recorded

    def async_cursor(self, server: str) -> type[psycopg.AsyncCursor[Any]]:
        log = self.log

        class Recorded(psycopg.AsyncCursor[Any]):
            async def execute(self, *args: Any, **kwargs: Any) -> Any:
                log.append(server)
                return await super().execute(*args, **kwargs)

        return Recorded

    def pool(self, dsn: str, server: str) -> ConnectionPool:
        return ConnectionPool(dsn, kwargs={"cursor_factory": self.cursor(server)}, min_size=1, max_size=2)

    def async_pool(self, dsn: str, server: str) -> AsyncConnectionPool:
        return AsyncConnectionPool(
            dsn, kwargs={"cursor_factory": self.async_cursor(server)}, min_size=1, max_size=2, open=False
        )

    def during(self, call: Any, *args: Any, **kwargs: Any) -> tuple[Any, set[str]]:
        """What ``call(*args, **kwargs)`` returned, and the servers that ran its statements."""
        self.log.clear()
        result = call(*args, **kwargs)
        return result, set(self.log)


def in_recovery(pool: ConnectionPool) -> bool:
    with pool.connection() as conn:
        row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    assert row is not None
    return bool(row[0])


def turn(text: str) -> list[MessageRecord]:
    return [MessageRecord(native_id=uuid.uuid4().hex, role="user", text=text)]


# One call of every operation, on the data seed_conversations and seed_rule store.
CALLS: dict[str, dict[str, Any]] = {
    "search_personal_memory": {"query": "vault tokens staging"},
    "get_conversation": {"conv_id": "conv-vault"},
    "list_recent_conversations": {},
    "list_project_conversations": {"project": "webapp"},
    "get_conversation_summary": {"conv_id": "conv-deploy"},
    "search_ghost_memories": {"query": "migrations"},
    "remember": {"content": "Renew the vault tokens with the periodic role."},
    "give_feedback": {"memory_id": 0, "signal": "endorse"},
    "update_memory": {
        "memory_id": 0,
        "content": "Run the migrations before any integration test.",
        "reason": "r",
    },
    "retire_memory": {"memory_id": 0, "reason": "superseded"},
}


def test_every_operation_runs_where_its_effect_says(pg_dsn: str, read_dsn: str, owner: str) -> None:
    """Only operations that read nothing but stored memory reach the standby; every write, the ghost search (which
    records use), the capture and the maintenance jobs run on the primary."""
    assert set(CALLS) == {spec.name for spec in OPS}, "a new operation needs a call here"
    servers = Servers()
    with servers.pool(pg_dsn, "primary") as primary, servers.pool(read_dsn, "standby") as replica:
        assert (in_recovery(primary), in_recovery(replica)) == (False, True)
        gm = GhostMem(pool=primary, read_pool=replica, owner=owner, embedder=HashEmbedder())
        seed_conversations(gm)
        memory_id = seed_rule(gm)
        for spec in OPS:
            arguments = {k: memory_id if k == "memory_id" else v for k, v in CALLS[spec.name].items()}
            result, ran_on = servers.during(gm.run, spec.name, arguments)
            assert result.op == spec.name
            expected = {"standby"} if spec.effect is Effect.READS else {"primary"}
            assert ran_on == expected, f"{spec.name} ({spec.effect.value}) ran on {ran_on}"

        def raw_connection() -> object:
            with gm.connection() as conn:
                return conn.execute("SELECT 1").fetchone()

        jobs = {
            "capture_append": lambda: gm.capture_append("conv-live", turn("first"), platform="langchain"),
            "capture_messages": lambda: gm.capture_messages("conv-live"),
            "capture_ids": lambda: gm.capture_ids("langchain"),
            "forget": lambda: gm.forget("conv-carbonara"),
            "enrich": gm.enrich,
            "connection": raw_connection,
        }
        for name, job in jobs.items():
            _, ran_on = servers.during(job)
            assert ran_on == {"primary"}, f"{name} ran on {ran_on}"
        gm.close()
        assert not primary.closed and not replica.closed  # borrowed pools stay open


def test_a_read_right_after_a_write_sees_it_on_the_standby(pg_dsn: str, read_dsn: str, owner: str) -> None:
    """Replication running: each read waits for the standby to replay the client's write, then runs there."""
    servers = Servers()
    with servers.pool(pg_dsn, "primary") as primary, servers.pool(read_dsn, "standby") as replica:
        gm = GhostMem(pool=primary, read_pool=replica, owner=owner, embedder=HashEmbedder(), read_wait=30)
        for n in range(5):
            word = f"zebrafinch{n}x{uuid.uuid4().hex[:6]}"
            gm.capture_append(f"conv-{n}", turn(f"the {word} migrates south"), platform="langchain")
            # By its words: the hash embedder gives about one random word in 240 the vector of "the", "migrates"
            # or "south", and a hybrid search then rightly finds every earlier conversation close in meaning (the
            # flake this test had); only conv-n holds the word.
            found, ran_on = servers.during(gm.search_personal_memory, query=word, mode="lexical")
            assert ran_on == {"standby"}
            assert [row.conv_id for row in found.data.rows] == [f"conv-{n}"]
            thread, ran_on = servers.during(gm.get_conversation, conv_id=f"conv-{n}")
            assert ran_on == {"standby"} and word in thread.text


def test_a_lagging_standby_serves_the_writer_from_the_primary_and_others_stale(
    pg_dsn: str, read_dsn: str, standby: Standby, owner: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Replay paused: the writer's read goes to the primary after ``read_wait`` and sees its write; another
    client (same owner, no writes of its own) reads the standby, which does not have it yet (the documented lag),
    and has it once replay resumes."""
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as seeder:
        seed_conversations(seeder)
    # read_wait is long enough that a read on a loaded machine takes less: the second read shows it did not wait.
    writer = GhostMem(dsn=pg_dsn, read_dsn=read_dsn, owner=owner, embedder=HashEmbedder(), read_wait=2)
    reader = GhostMem(dsn=pg_dsn, read_dsn=read_dsn, owner=owner, embedder=HashEmbedder(), read_wait=2)
    before = {row.conv_id for row in reader.list_recent_conversations().data.rows}
    assert before == {"conv-deploy", "conv-vault", "conv-carbonara", "conv-kaiwa"}
    writer.list_recent_conversations()  # connected before the pause
    standby.pause()
    try:
        writer.capture_append("conv-fresh", turn("the okapi hides in the forest"), platform="langchain")
        with caplog.at_level(logging.WARNING, logger="ghostmem.db.replica"):
            started = time.monotonic()
            mine = writer.search_personal_memory(query="okapi forest")
            waited = time.monotonic() - started
            assert [row.conv_id for row in mine.data.rows] == ["conv-fresh"]
            assert waited >= 2  # it waited read_wait for the standby first
            # Left alone for read_retry: the next read goes to the primary at once.
            started = time.monotonic()
            assert writer.get_conversation(conv_id="conv-fresh").data.messages
            assert time.monotonic() - started < 2
        assert [r.getMessage() for r in caplog.records if r.name == "ghostmem.db.replica"] == [
            f"reads go to the primary: the standby at {read_dsn} has not replayed this client's last write "
            "within 2s (trying it again every 5s)"
        ]
        stale = {row.conv_id for row in reader.list_recent_conversations().data.rows}
        assert stale == before  # served by the paused standby: the new conversation is not there
        assert reader.search_personal_memory(query="okapi forest").data.rows == []
    finally:
        standby.resume()
    deadline = time.monotonic() + 30
    while "conv-fresh" not in {row.conv_id for row in reader.list_recent_conversations().data.rows}:
        assert time.monotonic() < deadline, "the standby never showed the write after replay resumed"
        time.sleep(0.05)
    writer.close()
    reader.close()


def test_a_stopped_standby_sends_reads_to_the_primary_until_it_is_back(
    pg_dsn: str, read_dsn: str, standby: Standby, owner: str, caplog: pytest.LogCaptureFixture
) -> None:
    servers = Servers()
    with servers.pool(pg_dsn, "primary") as primary, servers.pool(read_dsn, "standby") as replica:
        gm = GhostMem(
            pool=primary, read_pool=replica, owner=owner, embedder=HashEmbedder(), read_wait=1, read_retry=0.5
        )
        ids = seed_conversations(gm)
        hits, ran_on = servers.during(gm.search_personal_memory, query="carbonara guanciale")
        assert ran_on == {"standby"} and hits.data.rows[0].conv_id == ids["carbonara"]
        standby.stop()
        try:
            with caplog.at_level(logging.WARNING, logger="ghostmem.db.replica"):
                for _ in range(3):
                    started = time.monotonic()
                    hits, ran_on = servers.during(gm.search_personal_memory, query="carbonara guanciale")
                    assert (
                        time.monotonic() - started < 5
                    )  # at most read_wait for the standby, then the primary
                    assert "primary" in ran_on and hits.data.rows[0].conv_id == ids["carbonara"]
            warnings = [r.getMessage() for r in caplog.records if r.name == "ghostmem.db.replica"]
            assert len(warnings) == 1 and "reads go to the primary: the standby of pool" in warnings[0]
        finally:
            standby.start()
        # Back: after read_retry the standby is tried again, and serves once its pool has reconnected.
        deadline = time.monotonic() + 60
        while servers.during(gm.list_recent_conversations)[1] != {"standby"}:
            assert time.monotonic() < deadline, "reads never went back to the restarted standby"
            time.sleep(0.2)
        gm.close()


def _dimensions(text: str) -> set[int]:
    """The dimensions the hash embedder puts a text's words on."""
    return {i for i, x in enumerate(HashEmbedder().embed_query(text)) if x}


async def test_async_client_routes_and_reads_its_writes(pg_dsn: str, read_dsn: str, owner: str) -> None:
    servers = Servers()
    async with (
        servers.async_pool(pg_dsn, "primary") as primary,
        servers.async_pool(read_dsn, "standby") as replica,
    ):
        agm = AsyncGhostMem(
            pool=primary, read_pool=replica, owner=owner, embedder=HashEmbedder(), read_wait=30
        )
        # Each rule's own words on dimensions no other stored text uses: the hash embedder puts two words on one
        # dimension about once in 384 (axolotl2xd73621 beside axolotl0xc963a7's reversal), and the earlier rule, as
        # near the query and already used, then ranks first.
        taken = _dimensions("Feed the twice a week on Sundays")
        for n in range(3):
            while True:
                word = f"axolotl{n}x{uuid.uuid4().hex[:6]}"
                own = _dimensions(f"{word} {word[::-1]}")
                if len(own) == 2 and not own & taken:
                    break
            taken |= own
            servers.log.clear()
            remembered = await agm.remember(content=f"Feed the {word} twice a week, {word[::-1]} on Sundays.")
            assert set(servers.log) == {"primary"} and remembered.data.created
            # The ghost search records use: primary. Personal memory reads: standby, after its replay.
            servers.log.clear()
            rules = await agm.search_ghost_memories(query=word)
            assert set(servers.log) == {"primary"} and word in rules.data.rows[0].content
            await agm.run("list_recent_conversations", {})
            servers.log.clear()
            await agm.list_recent_conversations()
            assert set(servers.log) == {"standby"}
        await agm.close()


async def test_async_client_reads_right_after_its_jobs(pg_dsn: str, read_dsn: str, owner: str) -> None:
    """Over ghostmem's own standby pool (read_dsn): what was there when the client connected is read, and so is
    what its own jobs changed right before (forget runs on a connection of its own, on the primary)."""
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as other:
        ids = seed_conversations(other)
    agm = AsyncGhostMem(dsn=pg_dsn, read_dsn=read_dsn, owner=owner, embedder=HashEmbedder(), read_wait=30)
    left = set(ids.values())
    assert {row.conv_id for row in (await agm.list_recent_conversations()).data.rows} == left
    for conv_id in sorted(ids.values()):
        assert await agm.forget(conv_id) == [conv_id]
        left.remove(conv_id)
        assert {row.conv_id for row in (await agm.list_recent_conversations()).data.rows} == left
    await agm.close()


async def test_the_async_twin_reads_the_same_standby_and_waits_for_both_sides_writes(
    pg_dsn: str, read_dsn: str, standby: Standby, owner: str
) -> None:
    """``gm.aio`` (what every adapter's async call runs on) reads on ``gm``'s standby through a pool of its own
    (opened with the connection parameters of ``gm``'s ``read_pool``) and shares ``gm``'s route: with replay
    paused, a read on one side right after a write on the other still sees the write (it waits ``read_wait`` for
    the standby, then reads the primary); a twin with a route of its own would read the stale standby."""
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as seeder:
        ids = seed_conversations(seeder)
    servers = Servers()
    with servers.pool(pg_dsn, "primary") as primary, servers.pool(read_dsn, "standby") as replica:
        # read_retry short: each read below tries the paused standby first (not left alone from the one before)
        gm = GhostMem(
            pool=primary,
            read_pool=replica,
            owner=owner,
            embedder=HashEmbedder(),
            read_wait=1,
            read_retry=0.01,
        )
        twin = gm.aio
        assert twin is gm.aio and twin._standby is not None
        assert {row.conv_id for row in (await twin.list_recent_conversations()).data.rows} == set(
            ids.values()
        )
        [standby_pool] = twin._standby.pools.opened()  # the twin read on a standby pool of its own
        async with standby_pool.connection(timeout=30) as conn:
            assert await (await conn.execute("SELECT pg_is_in_recovery()")).fetchone() == (True,)
        gm.list_recent_conversations()  # both sides connected before the pause
        standby.pause()
        try:
            gm.capture_append("conv-okapi", turn("the okapi hides in the forest"), platform="langchain")
            hits = await twin.search_personal_memory(query="okapi forest")
            assert [row.conv_id for row in hits.data.rows] == ["conv-okapi"]
            # the other way round: the twin's job forgets, the sync side's next read does not list it
            assert await twin.forget(ids["vault"]) == [ids["vault"]]
            listed, ran_on = servers.during(gm.list_recent_conversations)
            assert ids["vault"] not in {row.conv_id for row in listed.data.rows} and "primary" in ran_on
        finally:
            standby.resume()
        gm.close()
        assert twin._pools.opened() == [] and twin._standby.pools.opened() == []  # closed with the store
        assert not primary.closed and not replica.closed  # the application's pools stay open


@pytest.mark.parametrize("mode", ["run-twice-then-close", "never-closed"])
def test_async_use_with_a_standby_leaves_no_pending_task_and_no_connection(
    pg_dsn: str, read_dsn: str, standby: Standby, mode: str
) -> None:
    """The standby's async pools (one per event loop) are closed like the primary's: on a new loop, by
    ``close()``, at exit."""
    dsn, name = tagged(pg_dsn)
    read_admin = standby.dsn(pg_dsn)
    stderr = run_async_use(mode, dsn, pg_dsn, make_conninfo(read_dsn, application_name=name), read_admin)
    assert not [symptom for symptom in SYMPTOMS if symptom in stderr], stderr
    assert wait_for_backends(pg_dsn, name, 0) == 0 and wait_for_backends(read_admin, name, 0) == 0


def test_doctor_reports_the_read_standby_and_never_its_password(
    pg_dsn: str, read_dsn: str, standby: Standby, owner: str
) -> None:
    secret = "Pw7-kept-out-of-every-report"
    read = make_conninfo(read_dsn, password=secret)  # the standby trusts loopback: the password is never sent

    def doctor(standby_dsn: str, *flags: str) -> Any:
        """The report (``--json``: parsed), once no output showed the password."""
        run = ghostmem(
            "--dsn", pg_dsn, "doctor", "--no-model", *flags,
            env={"GHOSTMEM_READ_DSN": standby_dsn, "GHOSTMEM_EMBED_MODEL": "hash"},
        )  # fmt: skip
        said = run.stdout + run.stderr
        assert secret not in said and "Traceback" not in said, said
        return json.loads(run.stdout) if "--json" in flags else run.stdout

    report = doctor(read, "--json")
    assert report["ok"], report
    check = report["checks"]["read_standby"]
    assert check["ok"] and check["in_recovery"] and check["replay_paused"] is False
    assert "***" in check["dsn"] and check["lag_bytes"] >= 0 and check["lag_seconds"] >= 0
    text = doctor(read)
    assert "[ok  ] read_standby: dsn=" in text and "in_recovery=True" in text
    # replay paused behind a write: the lag shows, with what to do
    standby.pause()
    try:
        with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as writer:
            writer.capture_append("conv-lag", turn("written while replay is paused"), platform="langchain")
        report = doctor(read, "--json")
    finally:
        standby.resume()
    check = report["checks"]["read_standby"]
    assert check["ok"] and check["replay_paused"] is True and check["lag_bytes"] > 0
    assert "pg_wal_replay_resume()" in check["hint"]
    # the primary itself is no standby
    report = doctor(make_conninfo(pg_dsn, password=secret), "--json")
    assert not report["ok"]
    assert "is not a standby (not in recovery)" in report["checks"]["read_standby"]["error"]
    # a standby that is down: one sentence saying what to do; the primary is still fine
    standby.stop()
    try:
        report = doctor(read, "--json")
        text = doctor(read)
    finally:
        standby.start()
    assert not report["ok"] and report["checks"]["server"]["ok"]
    error = report["checks"]["read_standby"]["error"]
    assert error.startswith("cannot connect to Postgres at ") and error.endswith(
        "start the standby or fix GHOSTMEM_READ_DSN (reads go to the primary meanwhile)"
    )
    assert f"[FAIL] read_standby: {error}" in text


def test_read_dsn_and_read_pool_are_checked(pg_dsn: str) -> None:
    with ConnectionPool(pg_dsn, open=False) as pool:
        with pytest.raises(InvalidArgument, match=r"takes read_dsn=\.\.\. or read_pool=\.\.\., not both"):
            GhostMem(dsn=pg_dsn, read_dsn=pg_dsn, read_pool=pool)
        with pytest.raises(
            InvalidArgument, match=r"AsyncGhostMem\(read_pool=\.\.\.\) takes a psycopg_pool\.Async"
        ):
            AsyncGhostMem(dsn=pg_dsn, read_pool=pool)
    with pytest.raises(InvalidArgument, match="malformed DSN"):
        GhostMem(dsn=pg_dsn, read_dsn="host='unclosed", embedder=HashEmbedder()).list_recent_conversations()
