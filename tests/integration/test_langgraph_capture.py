"""GhostMemCaptureMiddleware: an agent's threads become personal memory, turn by turn, for the call's owner."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from ghostmem import OPS, GhostMem
from ghostmem.errors import InvalidArgument
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime
from support.adapters import ScriptedChatModel, call, seed_conversations

from langchain_ghostmem import GhostMemCaptureMiddleware, GhostMemTool, GhostMemToolkit


def every_tool_script(conv_id: str) -> ScriptedChatModel:
    """Calls every ghostmem operation once, in OPS order, then answers."""
    steps = {
        "search_personal_memory": {"query": "vault tokens staging"},
        "get_conversation": {"conv_id": conv_id},
        "list_recent_conversations": {"days": 7},
        "list_project_conversations": {"project": "infra"},
        "get_conversation_summary": {"conv_id": conv_id},
        "search_ghost_memories": {"query": "vault agents"},
        "remember": {"content": "Restart the vault agents after renewing the staging tokens."},
    }

    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        done = [m for m in messages if isinstance(m, ToolMessage)]
        turn = [m for m in messages if isinstance(m, HumanMessage)]
        if len(turn) > 1:  # a later turn: answer at once
            return AIMessage("Still the vault token rotation, nothing new.")
        if len(done) < len(steps):
            name = list(steps)[len(done)]
            return call(name, len(done), **steps[name])
        # then the memory just remembered: feedback, a better wording, and its retirement
        memory_id = done[len(steps) - 1].artifact.memory.memory_id  # type: ignore[attr-defined]
        lifecycle = [
            ("give_feedback", {"memory_id": memory_id, "signal": "endorse"}),
            (
                "update_memory",
                {"memory_id": memory_id, "content": "Restart the vault agents after a token renewal."},
            ),
            (
                "retire_memory",
                {"memory_id": memory_id, "reason": "the agents reload tokens on their own now"},
            ),
        ]
        if len(done) < len(steps) + len(lifecycle):
            name, args = lifecycle[len(done) - len(steps)]
            return call(name, len(done), **args)
        return AIMessage(
            "Rotated the staging vault tokens: renew with the periodic role, then restart the agents."
        )

    return ScriptedChatModel(script=script)


def test_an_agent_that_used_every_tool_is_captured_and_found(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    owner = f"alice-{uuid.uuid4().hex[:6]}"
    with GhostMem(dsn=gm.dsn, owner=owner, embedder=gm.embedder) as alice:
        seed_conversations(alice)
        tools = GhostMemToolkit(alice).get_tools()
        assert {t.name for t in tools} == {s.name for s in OPS}
        capture = GhostMemCaptureMiddleware(gm)  # built for gm's owner; the call names alice
        agent = create_agent(
            every_tool_script(ids["vault"]), tools=tools, middleware=[capture], checkpointer=InMemorySaver()
        )
        config = {"configurable": {"thread_id": "thread-vault", "user_id": owner}}
        out = agent.invoke({"messages": [HumanMessage("How did we rotate the vault tokens?")]}, config)
        used = {m.name for m in out["messages"] if isinstance(m, ToolMessage)}
        assert used == {s.name for s in OPS} and not any(
            m.status == "error" for m in out["messages"] if isinstance(m, ToolMessage)
        )
        # found and listed right after the turn, in alice's memory (not in the middleware's default owner's)
        hit = alice.search_personal_memory(
            query="periodic role restart agents", platform="langgraph"
        ).data.rows
        assert hit and hit[0].conv_id == "thread-vault" and hit[0].platform == "langgraph"
        recent = alice.list_recent_conversations(days=1, platform="langgraph").data.rows
        assert [r.conv_id for r in recent] == ["thread-vault"] and recent[
            0
        ].title == "How did we rotate the vault tokens?"
        assert gm.list_recent_conversations(days=1, platform="langgraph").data.rows == []
        with alice.connection() as conn:
            n, artifacts = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE meta->'langchain'->'data' ? 'artifact') FROM ghostmem.messages"
                " WHERE owner = %s AND conv_id = 'thread-vault'",
                (owner,),
            ).fetchone()  # type: ignore[misc]
        assert n == len(out["messages"]) and artifacts == len(OPS)

        # a second turn appends its two messages; syncing the same state again writes nothing
        agent.invoke({"messages": [HumanMessage("Anything new on the vault?")]}, config)
        state = agent.get_state(config).values["messages"]
        with alice.connection() as conn:
            rows = conn.execute(
                "SELECT native_id FROM ghostmem.messages WHERE owner = %s AND conv_id = 'thread-vault' ORDER BY seq",
                (owner,),
            ).fetchall()
        assert [r[0] for r in rows] == [m.id for m in state]
        again = _in_a_call(capture, state, {"thread_id": "thread-vault", "user_id": owner})
        assert again.messages_new == 0 and not again.updated


def _in_a_call(
    capture: GhostMemCaptureMiddleware, messages: list[BaseMessage], configurable: dict[str, str]
) -> Any:
    """Run the middleware's capture inside a call with this config (what a graph node sees)."""
    config: RunnableConfig = {"configurable": configurable}
    return RunnableLambda(lambda _: capture.capture(messages)).invoke(None, config)


def test_a_rewritten_history_is_stored_as_it_now_is(gm: GhostMem) -> None:
    capture = GhostMemCaptureMiddleware(gm)
    where = {"thread_id": "t-rewrite"}
    first = [HumanMessage("one", id="m1"), AIMessage("two", id="m2"), HumanMessage("three", id="m3")]
    assert _in_a_call(capture, first, where).messages_new == 3
    # a summarising middleware replaced the first two messages with a summary
    rewritten = [
        HumanMessage("summary: one, two", id="s1"),
        HumanMessage("three", id="m3"),
        AIMessage("four", id="m4"),
    ]
    _in_a_call(capture, rewritten, where)
    with gm.connection() as conn:
        rows = conn.execute(
            "SELECT native_id, text FROM ghostmem.messages WHERE owner = %s AND conv_id = 't-rewrite' ORDER BY seq",
            (gm.owner,),
        ).fetchall()
    assert rows == [("s1", "summary: one, two"), ("m3", "three"), ("m4", "four")]


def test_owner_comes_from_the_context_and_a_thread_less_run_gets_its_own_id(gm: GhostMem) -> None:
    capture = GhostMemCaptureMiddleware(gm, owner_key="tenant")
    other = f"tenant-{uuid.uuid4().hex[:6]}"

    class Ctx:
        tenant = other

    runtime = Runtime(context=Ctx())
    config: RunnableConfig = {"configurable": {}}
    messages = [HumanMessage("kubernetes ingress certificates expire tomorrow", id="q1")]
    RunnableLambda(lambda _: capture.capture(messages, runtime)).invoke(None, config)
    with GhostMem(dsn=gm.dsn, owner=other, embedder=gm.embedder) as tenant:
        rows = tenant.list_recent_conversations(days=1).data.rows
    assert [r.conv_id for r in rows] == ["run-q1"]
    assert gm.list_recent_conversations(days=1).data.rows == []
    for bad in ({"user_id": ""}, {"user_id": ["alice"]}):
        with pytest.raises(InvalidArgument, match="must be a non-empty string or an integer id"):
            _in_a_call(GhostMemCaptureMiddleware(gm), messages, {"thread_id": "t", **bad})  # type: ignore[dict-item]


def test_threads_a_postgres_saver_holds_are_imported_incrementally(gm: GhostMem, server_dsn: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    from bench.common import throwaway_database
    from langchain_ghostmem.checkpoints import import_langgraph_checkpoints

    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"

    def answer(messages: Sequence[BaseMessage]) -> AIMessage:
        return AIMessage(f"Noted: {messages[-1].text}")

    with (
        throwaway_database(server_dsn, "ghostmem_test_saver") as saver_dsn,
        PostgresSaver.from_conn_string(saver_dsn) as saver,
    ):
        saver.setup()
        tools = [GhostMemTool("list_recent_conversations", gm)]
        agent = create_agent(ScriptedChatModel(script=answer), tools=tools, checkpointer=saver)
        for thread, user, text in (
            ("t-alice", alice, "the staging certificates expire on Friday"),
            ("t-bob", bob, "lunch order: ramen for the team"),
            ("t-nobody", None, "a thread without a user id"),
            ("t-huge", "x" * 300, "a user id longer than ghostmem keeps of an owner"),
        ):
            configurable = {"thread_id": thread, **({"user_id": user} if user else {})}
            agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": configurable})
        first = import_langgraph_checkpoints(gm, saver_dsn)
        assert (first.threads, first.conversations_new, first.messages_new) == (4, 3, 6)
        assert first.owners == {alice, bob, gm.owner}
        assert [p.split(":")[0] for p in first.problems] == ["thread t-huge"]  # reported; the rest imported
        assert "is 300 bytes, longer than the 256 bytes ghostmem keeps of an owner" in first.problems[0]
        again = import_langgraph_checkpoints(gm, saver_dsn)
        assert (again.conversations_new, again.messages_new) == (0, 0)  # incremental: nothing new
        agent.invoke(
            {"messages": [HumanMessage("and the prod ones in May")]},
            {"configurable": {"thread_id": "t-alice", "user_id": alice}},
        )
        assert import_langgraph_checkpoints(gm, saver_dsn).messages_new == 2
    with GhostMem(dsn=gm.dsn, owner=alice, embedder=gm.embedder) as mine:
        rows = mine.search_personal_memory(
            query="staging certificates expire", platform="langgraph"
        ).data.rows
        assert [r.conv_id for r in rows] == ["t-alice"] and rows[0].msg_count == 4
        found = {r.conv_id for r in mine.search_personal_memory(query="ramen lunch order").data.rows}
        assert "t-bob" not in found  # bob's thread is bob's
