"""Pools you can trust: one pool however many first calls race for it, sizes from arguments, connections checked
on checkout (a restarted server costs no error once it is back), an application's own pool borrowed as it is
configured and never closed, SQLAlchemy-style URLs and engines."""

from __future__ import annotations

import asyncio
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode

import pytest
import sqlalchemy
from ghostmem import AsyncGhostMem, DatabaseUnavailable, GhostMem, HashEmbedder, InvalidArgument
from ghostmem.cli import sample_exports
from ghostmem.db import EmbeddedServer
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from support.adapters import ScriptedChatModel, call, seed_conversations
from support.async_use import ASYNC_USES, SYMPTOMS, run_async_use
from support.connections import backends, tagged, wait_for_backends

from langchain_ghostmem import GhostMemTool, GhostMemToolkit

# What LangGraph's PostgresSaver documentation tells its users to pass to their pool.
LANGGRAPH_POOL_KWARGS = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


def test_racing_first_calls_open_one_pool(pg_dsn: str, owner: str) -> None:
    dsn, name = tagged(pg_dsn)
    gm = GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder(), pool_max_size=3)
    start = threading.Barrier(8)

    def first_call(_: int) -> int:
        start.wait()
        return len(gm.run("list_recent_conversations", {}).data.rows)

    with ThreadPoolExecutor(8) as workers:
        assert list(workers.map(first_call, range(8))) == [0] * 8
    # One pool of at most 3: eight pools would hold at least eight connections.
    assert backends(pg_dsn, name) <= 3
    gm.close()
    assert wait_for_backends(pg_dsn, name, 0) == 0


async def test_racing_first_async_calls_open_one_pool(pg_dsn: str, owner: str) -> None:
    dsn, name = tagged(pg_dsn)
    agm = AsyncGhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder(), pool_max_size=3)
    results = await asyncio.gather(*(agm.run("list_recent_conversations", {}) for _ in range(8)))
    assert [len(r.data.rows) for r in results] == [0] * 8
    assert backends(pg_dsn, name) <= 3
    pool = await agm.apool()
    await agm.close()
    # Closed with its worker tasks ended, so none is left pending ("Task was destroyed but it is pending!").
    assert pool.closed and all(task.done() for task in pool._workers)
    assert wait_for_backends(pg_dsn, name, 0) == 0


def test_pool_size_from_arguments(pg_dsn: str, owner: str) -> None:
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder(), pool_min_size=0, pool_max_size=2) as gm:
        assert (gm.pool.min_size, gm.pool.max_size) == (0, 2)


def test_borrowed_langgraph_style_pool_is_used_as_configured_and_left_open(pg_dsn: str, owner: str) -> None:
    with ConnectionPool(pg_dsn, kwargs=LANGGRAPH_POOL_KWARGS, min_size=1, max_size=1) as pool:
        gm = GhostMem(pool=pool, owner=owner, embedder=HashEmbedder())
        ids = seed_conversations(gm)
        hits = gm.run("search_personal_memory", {"query": "vault tokens staging"}).data.rows
        assert hits[0].conv_id == ids["vault"]
        # remember runs as the runtime role with SET LOCAL: only inside a transaction, not in autocommit.
        gm.run("remember", {"content": "Rotate the vault tokens before Friday."})
        assert (
            gm.run("search_ghost_memories", {"query": "vault tokens"})
            .data.rows[0]
            .content.startswith("Rotate")
        )
        with gm.connection() as conn:
            conn.execute("SET LOCAL statement_timeout = '1234ms'")
            assert conn.execute("SHOW statement_timeout").fetchone() == ("1234ms",)
        # One connection, so the next block gets the same one: a failed block's work is rolled back.
        with pytest.raises(RuntimeError), gm.connection() as conn:
            conn.execute("CREATE TEMP TABLE rolled_back (x int)")
            raise RuntimeError("boom")
        with gm.connection() as conn:
            assert conn.execute("SELECT to_regclass('pg_temp.rolled_back')").fetchone() == (None,)
        gm.close()
        assert not pool.closed
        with pool.connection() as conn:
            assert conn.autocommit is True
            assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}


def test_borrowed_pool_imports(pg_dsn: str, owner: str) -> None:
    """The importer switches its connection to autocommit (a commit per conversation) on a borrowed one too."""
    with ConnectionPool(pg_dsn, kwargs=LANGGRAPH_POOL_KWARGS, min_size=1, max_size=2) as pool:
        gm = GhostMem(pool=pool, owner=owner, embedder=HashEmbedder(), home=tempfile.mkdtemp())
        report = gm.import_paths([sample_exports() / "claude_code"])
        assert report.conversations_new > 0 and report.messages_embedded > 0
        listed = gm.run("list_recent_conversations", {"days": 36500, "limit": 100}).data.rows
        assert {row.conv_id for row in listed} == report.conv_ids
        gm.close()
        assert not pool.closed


async def test_borrowed_async_pool(pg_dsn: str, owner: str) -> None:
    async with AsyncConnectionPool(pg_dsn, kwargs=LANGGRAPH_POOL_KWARGS, min_size=1, max_size=2) as pool:
        with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as gm:
            ids = seed_conversations(gm)
        agm = AsyncGhostMem(pool=pool, owner=owner, embedder=HashEmbedder())
        hits = (await agm.run("search_personal_memory", {"query": "carbonara guanciale"})).data.rows
        assert hits[0].conv_id == ids["carbonara"]
        await agm.close()
        assert not pool.closed
        async with pool.connection() as conn:
            assert conn.autocommit is True
            assert await (await conn.execute("SELECT 1 AS one")).fetchone() == {"one": 1}


def test_a_pool_of_the_wrong_kind_is_one_sentence(pg_dsn: str) -> None:
    pool = AsyncConnectionPool(pg_dsn, open=False)
    with pytest.raises(
        InvalidArgument, match=r"takes a psycopg_pool\.ConnectionPool \(got a AsyncConnectionPool\)"
    ):
        GhostMem(pool=pool)


def libpq_url(dsn: str, scheme: str) -> str:
    """``dsn`` as a URL of ``scheme`` with every parameter in the query string (works for sockets and hosts)."""
    params = conninfo_to_dict(dsn)
    database = params.pop("dbname")
    return f"{scheme}:///{database}?{urlencode(params)}"


@pytest.mark.parametrize("scheme", ["postgresql+psycopg", "postgresql+psycopg2", "postgres", "postgresql"])
def test_sqlalchemy_style_urls(pg_dsn: str, owner: str, scheme: str) -> None:
    with GhostMem(dsn=libpq_url(pg_dsn, scheme), owner=owner, embedder=HashEmbedder()) as gm:
        seed_conversations(gm)
        assert len(gm.run("list_recent_conversations", {}).data.rows) == 4


def test_sqlalchemy_engine(pg_dsn: str, owner: str) -> None:
    engine = sqlalchemy.create_engine(libpq_url(pg_dsn, "postgresql+psycopg"))
    with GhostMem(engine, owner=owner, embedder=HashEmbedder()) as gm:
        seed_conversations(gm)
        assert len(gm.run("list_recent_conversations", {}).data.rows) == 4
    engine.dispose()


# --- a server of our own, stopped and started under a running application ------------------------------------


@pytest.fixture
def own_server(embedded_home: Path) -> tuple[EmbeddedServer, str]:
    server = EmbeddedServer(embedded_home)
    dsn = server.start().dsn()
    assert dsn is not None
    return server, dsn


def restart(server: EmbeddedServer) -> None:
    assert server.stop()
    server.start()


def tool_messages(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


@pytest.mark.slow
async def test_server_restart_between_two_tool_calls_of_one_agent(
    own_server: tuple[EmbeddedServer, str], owner: str
) -> None:
    server, dsn = own_server
    gm = GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder())
    ids = seed_conversations(gm)

    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        done = tool_messages(messages)
        if not done:
            return call("search_personal_memory", 0, query="vault tokens staging")
        if len(done) == 1:
            restart(server)  # every pooled connection is now terminated
            return call("search_personal_memory", 1, query="carbonara guanciale")
        return AIMessage("done")

    toolkit = GhostMemToolkit(gm)
    agent = create_agent(ScriptedChatModel(script=script), tools=toolkit.get_tools())
    question = {"messages": [HumanMessage("What do I know?")]}
    for result in (agent.invoke(question), await agent.ainvoke(question)):  # sync tools, then async ones
        first, second = tool_messages(result["messages"])
        assert (first.status, second.status) == ("success", "success"), second.content
        assert first.artifact.rows[0].conv_id == ids["vault"]
        assert second.artifact.rows[0].conv_id == ids["carbonara"]
    await toolkit.aclose()
    gm.close()


@pytest.mark.slow
async def test_calls_during_an_outage_fail_with_one_sentence_and_later_ones_succeed(
    own_server: tuple[EmbeddedServer, str], owner: str
) -> None:
    server, dsn = own_server
    gm = GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder(), pool_timeout=1.5)
    tool = GhostMemTool("list_recent_conversations", gm)
    request = {"name": tool.name, "args": {}, "id": "c1", "type": "tool_call"}
    assert tool.invoke(request).status == "success"
    assert (await tool.ainvoke(request)).status == "success"
    assert server.stop()
    try:
        for answer in (tool.invoke(request), await tool.ainvoke(request)):
            assert answer.status == "error"
            assert answer.content.startswith("no database connection within 1.5s"), answer.content
            assert "\n" not in answer.content
        with pytest.raises(DatabaseUnavailable):
            gm.run("list_recent_conversations", {})
    finally:
        server.start()
    assert tool.invoke(request).status == "success"
    assert (await tool.ainvoke(request)).status == "success"
    await tool.aclose()
    gm.close()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_the_first_call_after_a_restart_does_not_wait_for_a_reconnect_schedule(
    own_server: tuple[EmbeddedServer, str], owner: str, kind: str
) -> None:
    """The pool finds its connection dead while the server is down and fails to replace it; once the server is
    back, the next call opens a connection at once. (psycopg_pool used to retry on a schedule of 1, 2, 4, 8 s and
    open nothing else meanwhile: that call waited for the next try, about 3 s here, or timed out.)"""
    server, dsn = own_server
    gm = GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder(), pool_timeout=30)
    agm = gm.aio

    async def call() -> None:
        if kind == "sync":
            await asyncio.to_thread(gm.list_recent_conversations)
        else:
            await agm.list_recent_conversations()

    await call()
    pool = gm.pool if kind == "sync" else await agm.apool()
    assert server.stop()
    # the pool tries to replace its dead connection while the server is down
    await (asyncio.to_thread(pool.check) if isinstance(pool, ConnectionPool) else pool.check())
    await asyncio.sleep(3.3)  # past the second try of the old schedule (1 s, then 2 s later)
    server.start()
    started = time.monotonic()
    await call()
    assert time.monotonic() - started < 2, "the call waited for the pool's reconnect schedule"
    await gm.aclose()


@pytest.mark.parametrize("mode", ASYNC_USES)
def test_async_use_leaves_no_pending_task_and_no_connection(pg_dsn: str, mode: str) -> None:
    dsn, name = tagged(pg_dsn)
    stderr = run_async_use(mode, dsn, pg_dsn)
    assert not [symptom for symptom in SYMPTOMS if symptom in stderr], stderr
    assert wait_for_backends(pg_dsn, name, 0) == 0
