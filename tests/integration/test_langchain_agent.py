"""A LangChain tool-calling loop over several turns, driven by a scripted chat model (no LLM is reachable)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ghostmem import GhostMem
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from support.adapters import ScriptedChatModel, call, seed_conversations

from langchain_ghostmem import GhostMemToolkit


def first_conv_id(message: BaseMessage) -> str:
    found = re.match(r"\[([^ |]+) \|", str(message.content))
    assert found, message.content
    return found.group(1)


def research_script(messages: Sequence[BaseMessage]) -> AIMessage:
    """Search (first with a bad argument, then fixed), read the hit's summary, store a rule, recall it, answer."""
    results = [m for m in messages if isinstance(m, ToolMessage)]
    step = len(results)
    if step == 0:
        return call("search_personal_memory", step, query="vault tokens staging", days=-1)
    if step == 1:
        assert results[-1].status == "error"
        return call("search_personal_memory", step, query="vault tokens staging", days=30)
    if step == 2:
        return call("get_conversation_summary", step, conv_id=first_conv_id(results[-1]))
    if step == 3:
        return call("remember", step, content="Restart the vault agents after renewing the tokens.")
    if step == 4:
        return call("search_ghost_memories", step, query="vault agents tokens")
    return AIMessage(f"From memory: {results[2].content.splitlines()[-1]} | rule: {results[-1].content}")


def run_agent(
    model: BaseChatModel, tools: list[BaseTool], question: str, max_turns: int = 10
) -> list[BaseMessage]:
    """The classic tool-calling loop: call the model, run the tools it asks for, feed the results back."""
    by_name = {t.name: t for t in tools}
    bound = model.bind_tools(tools)
    messages: list[BaseMessage] = [HumanMessage(question)]
    for _ in range(max_turns):
        reply = bound.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return messages
        messages += [by_name[tool_call["name"]].invoke(tool_call) for tool_call in reply.tool_calls]
    raise AssertionError("the agent did not finish")


async def arun_agent(model: BaseChatModel, tools: list[BaseTool], question: str) -> list[BaseMessage]:
    by_name = {t.name: t for t in tools}
    bound = model.bind_tools(tools)
    messages: list[BaseMessage] = [HumanMessage(question)]
    while True:
        reply = await bound.ainvoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return messages
        messages += [await by_name[tc["name"]].ainvoke(tc) for tc in reply.tool_calls]


def test_agent_recalls_a_conversation_and_learns_a_rule(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    tools = GhostMemToolkit(gm).get_tools()
    messages = run_agent(
        ScriptedChatModel(script=research_script), tools, "How did we rotate the vault tokens?"
    )

    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert [r.name for r in results] == [
        "search_personal_memory",
        "search_personal_memory",
        "get_conversation_summary",
        "remember",
        "search_ghost_memories",
    ]
    assert "days: Input should be greater than or equal to 1" in results[0].content
    assert [r.status for r in results[1:]] == ["success"] * 4
    assert results[1].artifact.rows[0].conv_id == ids["vault"]
    assert results[2].artifact.conversation.conv_id == ids["vault"]
    assert results[4].artifact.rows[0].content == "Restart the vault agents after renewing the tokens."
    answer = messages[-1].content
    assert "restart the vault agents afterwards" in answer
    assert "Restart the vault agents after renewing the tokens." in answer


async def test_async_agent_loop(gm: GhostMem) -> None:
    seed_conversations(gm)
    toolkit = GhostMemToolkit(gm)
    messages = await arun_agent(ScriptedChatModel(script=research_script), toolkit.get_tools(), "vault?")
    assert "restart the vault agents afterwards" in messages[-1].content
    await toolkit.aclose()
