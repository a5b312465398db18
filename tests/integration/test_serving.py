"""One process serving many users: one toolkit (one store, one sync and one async pool) for every owner, the owner
of each call taken from its config, connections within the pool, each owner seeing only its own memory."""

from __future__ import annotations

import asyncio
import gc
import uuid
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypedDict

import pytest
from ghostmem import GhostMem, HashEmbedder
from ghostmem.errors import InvalidArgument
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph import START, StateGraph
from support.adapters import ScriptedChatModel, call, seed_conversations
from support.connections import peak_backends, tagged

from langchain_ghostmem import GhostMemChatMessageHistory, GhostMemRetriever, GhostMemToolkit

POOL = 4


def tool_call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"c-{uuid.uuid4().hex[:6]}", "type": "tool_call"}


def user(owner: str) -> dict[str, Any]:
    return {"configurable": {"user_id": owner}}


@pytest.mark.slow
def test_one_toolkit_serves_300_owners_from_16_threads(pg_dsn: str) -> None:
    dsn, name = tagged(pg_dsn)
    gm = GhostMem(dsn=dsn, owner="nobody", embedder=HashEmbedder(), pool_max_size=POOL)
    toolkit = GhostMemToolkit(gm, ops=["remember", "search_ghost_memories"])
    remember, search = toolkit.get_tools()
    owners = [f"serve-{uuid.uuid4().hex[:8]}-{i}" for i in range(300)]

    def serve(owner: str) -> tuple[str, list[str]]:
        stored = remember.invoke(tool_call("remember", content=f"The rule of {owner}."), config=user(owner))
        assert stored.status == "success", stored.content
        seen = search.invoke(tool_call("search_ghost_memories", query=""), config=user(owner))
        assert seen.status == "success", seen.content
        return owner, [row.content for row in seen.artifact.rows]

    # Earlier tests' garbage is collected first: llama-index's default Memory leaves its in-memory aiosqlite
    # connections to the collector, whose "deleted before being closed" warning would otherwise land here.
    gc.collect()
    with warnings.catch_warnings(record=True) as caught, peak_backends(pg_dsn, name) as peak:
        warnings.simplefilter("always")
        with ThreadPoolExecutor(16) as workers:
            results = list(workers.map(serve, owners))
    for owner, contents in results:
        assert contents == [f"The rule of {owner}."], owner
    assert 1 <= peak[0] <= POOL
    assert [str(w.message) for w in caught] == []
    # The fallback owner wrote nothing: every call went to the owner its config named.
    assert gm.search_ghost_memories(query="").data.rows == []
    gm.close()


@pytest.mark.slow
async def test_one_toolkit_serves_300_owners_concurrently_on_its_async_pool(pg_dsn: str) -> None:
    dsn, name = tagged(pg_dsn)
    gm = GhostMem(dsn=dsn, owner="nobody", embedder=HashEmbedder(), pool_max_size=POOL)
    toolkit = GhostMemToolkit(gm, ops=["remember", "search_ghost_memories"])
    remember, search = toolkit.get_tools()
    owners = [f"aserve-{uuid.uuid4().hex[:8]}-{i}" for i in range(300)]

    async def serve(owner: str) -> list[str]:
        await remember.ainvoke(tool_call("remember", content=f"The rule of {owner}."), config=user(owner))
        seen = await search.ainvoke(tool_call("search_ghost_memories", query=""), config=user(owner))
        return [row.content for row in seen.artifact.rows]

    with peak_backends(pg_dsn, name) as peak:
        seen = await asyncio.gather(*(serve(owner) for owner in owners))
    assert seen == [[f"The rule of {owner}."] for owner in owners]
    assert 1 <= peak[0] <= POOL
    await toolkit.aclose()
    gm.close()


def recall_script(messages: Sequence[BaseMessage]) -> AIMessage:
    done = [m for m in messages if isinstance(m, ToolMessage)]
    if not done:
        return call("search_personal_memory", 0, query="vault tokens staging")
    return AIMessage(str(done[-1].content))


async def test_one_agent_answers_each_user_from_their_own_memory(pg_dsn: str) -> None:
    """LangGraph passes the agent's config on to its tools: the same compiled agent serves alice and bob."""
    alice, bob = (f"{who}-{uuid.uuid4().hex[:8]}" for who in ("alice", "bob"))
    gm = GhostMem(dsn=pg_dsn, owner=alice, embedder=HashEmbedder())
    ids = seed_conversations(gm)  # alice's conversations; bob has none
    toolkit = GhostMemToolkit(gm, owner="nobody")
    agent = create_agent(ScriptedChatModel(script=recall_script), tools=toolkit.get_tools())
    question = {"messages": [HumanMessage("How did we rotate the vault tokens?")]}

    for_alice = agent.invoke(question, config=user(alice))["messages"][-1].content
    for_bob = (await agent.ainvoke(question, config=user(bob)))["messages"][-1].content
    assert ids["vault"] in for_alice
    assert for_bob.startswith("Nothing relevant to ") and ids["vault"] not in for_bob

    retriever = GhostMemRetriever(gm, owner="nobody")
    assert retriever.invoke("vault tokens", config=user(alice))[0].id == ids["vault"]
    assert await retriever.ainvoke("vault tokens", config=user(bob)) == []
    assert retriever.invoke("vault tokens") == []  # the fallback owner
    await toolkit.aclose()
    gm.close()


@dataclass
class UserContext:
    """An application's LangGraph runtime context (``create_agent(..., context_schema=UserContext)``)."""

    user_id: str
    project_id: str | None = None


async def test_langgraph_runtime_context_names_the_owner_of_tools_and_retrievers(pg_dsn: str) -> None:
    """LangGraph v1's ``context=``: a compiled agent's tools and a retriever inside a graph node read the owner (and
    the project, with project_key) from it; a call's configurable comes first; without either, the built owner."""
    alice, bob = (f"{who}-{uuid.uuid4().hex[:8]}" for who in ("alice", "bob"))
    gm = GhostMem(dsn=pg_dsn, owner=alice, embedder=HashEmbedder())
    ids = seed_conversations(gm)  # alice's conversations; bob has none
    toolkit = GhostMemToolkit(gm, owner="nobody", project_key="project_id")
    agent = create_agent(
        ScriptedChatModel(script=recall_script), tools=toolkit.get_tools(), context_schema=UserContext
    )
    question = {"messages": [HumanMessage("How did we rotate the vault tokens?")]}

    def answer(result: dict[str, Any]) -> str:
        return str(result["messages"][-1].content)

    assert ids["vault"] in answer(agent.invoke(question, context=UserContext(alice)))
    assert ids["vault"] not in answer(await agent.ainvoke(question, context=UserContext(bob)))
    # both named: the call's configurable wins (the documented order)
    both = agent.invoke(question, config=user(bob), context=UserContext(alice))
    assert ids["vault"] not in answer(both)
    assert ids["vault"] not in answer(agent.invoke(question))  # the built owner, "nobody"

    def remember_script(messages: Sequence[BaseMessage]) -> AIMessage:
        if not any(isinstance(m, ToolMessage) for m in messages):
            return call("remember", 0, content="Deploys wait for the canary.")
        return AIMessage("noted")

    writer = create_agent(
        ScriptedChatModel(script=remember_script), tools=toolkit.get_tools(), context_schema=UserContext
    )
    writer.invoke({"messages": [HumanMessage("remember this")]}, context=UserContext(bob, "billing"))
    with GhostMem(dsn=pg_dsn, owner=bob, embedder=gm.embedder) as bobs:
        rows = bobs.search_ghost_memories(query="", current_project="billing").data.rows
    assert [(r.content, r.project) for r in rows] == [("Deploys wait for the canary.", "billing")]

    retriever = GhostMemRetriever(gm, owner="nobody")

    class State(TypedDict):
        query: str
        found: list[str]

    def recall(state: State) -> dict[str, Any]:
        return {"found": [d.id for d in retriever.invoke(state["query"])]}

    async def arecall(state: State) -> dict[str, Any]:
        return {"found": [d.id for d in await retriever.ainvoke(state["query"])]}

    for node in (recall, arecall):
        graph = StateGraph(State, context_schema=UserContext).add_node("recall", node)
        compiled = graph.add_edge(START, "recall").compile()
        asked: State = {"query": "vault tokens", "found": []}
        assert (await compiled.ainvoke(asked, context=UserContext(alice)))["found"][0] == ids["vault"]
        assert (await compiled.ainvoke(asked, context=UserContext(bob)))["found"] == []
        if node is recall:  # a mapping as the context works too; a bad owner is one sentence
            assert compiled.invoke(asked, context={"user_id": alice})["found"][0] == ids["vault"]
            with pytest.raises(InvalidArgument, match="'user_id' must be a non-empty string"):
                compiled.invoke(asked, context={"user_id": ""})
    await toolkit.aclose()
    gm.close()


def test_chat_histories_of_many_owners_share_one_store(pg_dsn: str) -> None:
    """A history per session and owner (what RunnableWithMessageHistory's factory builds) opens no pool of its own."""
    gm = GhostMem(dsn=pg_dsn, owner="nobody", embedder=HashEmbedder())
    owners = [f"hist-{uuid.uuid4().hex[:8]}-{i}" for i in range(3)]
    for owner in owners:
        GhostMemChatMessageHistory("session-1", gm, owner=owner).add_user_message(f"I am {owner}")
    pool = gm.pool
    for owner in owners:
        history = GhostMemChatMessageHistory("session-1", gm, owner=owner)
        assert [m.content for m in history.messages] == [f"I am {owner}"]
        assert history.binding.store is gm
    assert gm.pool is pool
    gm.close()
