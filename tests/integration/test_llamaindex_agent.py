"""A LlamaIndex FunctionAgent calling the tools over several turns (scripted LLM), and a query engine on the
retriever."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from ghostmem import GhostMem, InvalidArgument
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import MockLLM
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.workflow import Context
from support.adapters import seed_conversations

from llama_index_ghostmem import GhostMemRetriever, GhostMemToolSpec


def _call(name: str, n: int, **kwargs: Any) -> ChatMessage:
    block = ToolCallBlock(tool_call_id=f"call-{n}", tool_name=name, tool_kwargs=kwargs)
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])


def script(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    """List recent work, open the deploy conversation's summary, give feedback on a rule, answer."""
    results = [m for m in messages if m.role == MessageRole.TOOL]
    step = len(results)
    if step == 0:
        return _call("list_project_conversations", step, project="webapp", days=7)
    if step == 1:
        conv_id = re.match(r"\[([^ |]+) \|", results[-1].content or "")
        assert conv_id, results[-1].content
        return _call("get_conversation", step, conv_id=conv_id.group(1), limit=2)
    if step == 2:
        return _call("remember", step, content="Migrate before testing in CI.", kind="rule")
    if step == 3:
        memory_id = re.search(r"memory_id (\d+)", results[-1].content or "")
        assert memory_id, results[-1].content
        return _call("give_feedback", step, memory_id=int(memory_id.group(1)), signal="incident_prevented")
    return ChatMessage(role=MessageRole.ASSISTANT, content=f"Done. Thread said: {results[1].content}")


async def test_function_agent_multi_turn(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    spec = GhostMemToolSpec(gm)
    agent = FunctionAgent(tools=spec.to_tool_list(), llm=MockFunctionCallingLLM(response_generator=script))
    handler = agent.run(user_msg="What went wrong with the webapp deploy?")
    calls = [event async for event in handler.stream_events() if isinstance(event, ToolCallResult)]
    response = await handler

    assert [c.tool_name for c in calls] == [
        "list_project_conversations",
        "get_conversation",
        "remember",
        "give_feedback",
    ]
    assert not any(c.tool_output.is_error for c in calls)
    assert calls[0].tool_output.raw_output.rows[0].conv_id == ids["deploy"]
    assert calls[1].tool_output.raw_output.next_offset == 2
    assert calls[3].tool_output.raw_output.signal == "incident_prevented"
    assert "Move the migrate step before the test step" in str(response)
    await spec.aclose()


async def test_agent_sees_a_bad_argument_as_a_tool_error(gm: GhostMem) -> None:
    def once(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        results = [m for m in messages if m.role == MessageRole.TOOL]
        if not results:
            return _call("list_recent_conversations", 0, days=0)
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"error seen: {results[0].content}")

    spec = GhostMemToolSpec(gm)
    agent = FunctionAgent(tools=spec.to_tool_list(), llm=MockFunctionCallingLLM(response_generator=once))
    response = await agent.run(user_msg="recent?")
    assert "days: Input should be greater than or equal to 1" in str(response)
    await spec.aclose()


def test_query_engine_on_the_retriever(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    engine = RetrieverQueryEngine.from_args(GhostMemRetriever(gm, similarity_top_k=2), llm=MockLLM())
    response = engine.query("vault tokens staging cluster")
    assert response.source_nodes[0].node.node_id == ids["vault"]
    # MockLLM answers with its prompt: the retrieved conversation is in the context it was given.
    assert "restart the vault agents afterwards" in str(response)


async def test_query_engine_async(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    retriever = GhostMemRetriever(gm, similarity_top_k=1)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = await engine.aquery("carbonara guanciale")
    assert [n.node.node_id for n in response.source_nodes] == [ids["carbonara"]]
    await retriever.binding.aclose()


def owner_script(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    """Remember a rule naming the user it was asked by, then list the rules it finds, then answer with them."""
    results = [m for m in messages if m.role == MessageRole.TOOL]
    asked = next(m.content for m in messages if m.role == MessageRole.USER) or ""
    if not results:
        return _call("remember", 0, content=f"The rule of {asked}.")
    if len(results) == 1:
        return _call("search_ghost_memories", 1, query="")
    return ChatMessage(role=MessageRole.ASSISTANT, content=results[-1].content or "")


async def test_one_spec_serves_many_owners_in_parallel_by_the_runs_context(gm: GhostMem) -> None:
    """One spec and one agent: each run's workflow Context names its owner; runs in parallel each see only their
    own memory, on one async pool; a model that names an owner in its arguments is refused."""
    spec = GhostMemToolSpec(gm, owner="nobody", project_key="project_id")
    agent = FunctionAgent(
        tools=spec.to_tool_list(), llm=MockFunctionCallingLLM(response_generator=owner_script)
    )
    owners = [f"li-{uuid.uuid4().hex[:8]}-{i}" for i in range(8)]

    async def run(owner: str) -> str:
        ctx = Context(agent)
        await ctx.store.set("user_id", owner)
        await ctx.store.set("project_id", f"project-of-{owner}")
        return str(await agent.run(user_msg=owner, ctx=ctx))

    answers = await asyncio.gather(*(run(owner) for owner in owners))
    for owner, answer in zip(owners, answers, strict=True):
        assert f"The rule of {owner}." in answer, answer
        assert sum(other in answer for other in owners) == 1, answer
    [pool] = spec.binding.astore._pools.opened()  # one pool: one loop, one store
    assert pool.get_stats()["pool_size"] <= gm.settings.pool_max_size
    with GhostMem(dsn=gm.dsn, owner=owners[0], embedder=gm.embedder) as first:
        rows = first.search_ghost_memories(query="", current_project=f"project-of-{owners[0]}").data.rows
    assert [(r.content, r.project) for r in rows] == [
        (f"The rule of {owners[0]}.", f"project-of-{owners[0]}")
    ]
    # a run whose context names nobody is the spec's owner's; a tool called outside an agent too
    anyone = str(await agent.run(user_msg="anyone"))
    assert not any(owner in anyone for owner in owners), anyone
    search = next(t for t in spec.to_tool_list() if t.metadata.name == "search_ghost_memories")
    assert [r.content for r in search.call(query="").raw_output.rows] == []  # "nobody" has only project rules
    assert "ctx" not in search.metadata.get_parameters_dict()["properties"]
    # the model cannot name an owner: no such argument
    claimed = await search.acall(query="", user_id=owners[0])
    assert claimed.is_error and "user_id: Extra inputs are not permitted" in claimed.content
    # nor hand a context of its own: a model's argument named ctx (passed on as it came, outside an agent) is
    # refused as any other; it reached ctx.store and raised AttributeError (test_fuzz found it)
    for forged in ("x", {"store": {"user_id": owners[0]}}, [owners[0]]):
        for output in (search.call(query="", ctx=forged), await search.acall(query="", ctx=forged)):
            assert output.is_error and output.raw_output is None, output
            assert output.content.startswith("invalid arguments for search_ghost_memories: ctx: Extra inputs")
    bad = Context(agent)
    await bad.store.set("user_id", ["not", "an", "id"])
    refused = await search.acall(query="", ctx=bad)
    assert refused.is_error and "'user_id' must be a non-empty string" in refused.content
    await spec.aclose()


async def test_a_retriever_for_one_caller_shares_the_pools(gm: GhostMem) -> None:
    ids = seed_conversations(gm)  # gm's owner's; bob has none
    retriever = GhostMemRetriever(gm, owner="bob")
    assert await retriever.aretrieve("vault tokens") == []
    mine = retriever.for_call(gm.owner)
    assert (await mine.aretrieve("vault tokens"))[0].node.id_ == ids["vault"]
    assert mine.binding.store is retriever.binding.store and mine.binding.astore is retriever.binding.astore
    await mine.aclose()  # closes nothing of the shared binding
    assert (
        retriever.retrieve("vault tokens") == [] and mine.retrieve("vault tokens")[0].node.id_ == ids["vault"]
    )
    with pytest.raises(InvalidArgument, match="must be a non-empty string"):
        retriever.for_call(" ")
    await retriever.aclose()
