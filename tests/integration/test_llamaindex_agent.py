"""A LlamaIndex FunctionAgent calling the tools over several turns (scripted LLM), and a query engine on the
retriever."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ghostmem import GhostMem
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import MockLLM
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.query_engine import RetrieverQueryEngine
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
