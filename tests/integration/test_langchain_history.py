"""Live capture: a LangChain conversation recorded by GhostMemChatMessageHistory is memory at once."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from ghostmem import Embedder, GhostMem
from ghostmem.capture import append_messages
from ghostmem.records import MessageRecord
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.history import RunnableWithMessageHistory
from support.adapters import seed_conversations

from langchain_ghostmem import GhostMemChatMessageHistory, GhostMemTool


def test_recorded_conversation_is_searchable_and_listed_right_after(gm: GhostMem) -> None:
    history = GhostMemChatMessageHistory("lc-session-1", gm, project="/srv/billing")
    history.add_user_message(
        "Our invoice generator crashes on leap years, February 29 breaks the date parser."
    )
    history.add_ai_message("Use a calendar-aware date library instead of splitting the string by hand.")

    found = gm.search_personal_memory(query="invoice leap year date parser")
    assert found.data.rows[0].conv_id == "lc-session-1"
    assert found.data.rows[0].platform == "langchain"
    recent = gm.list_recent_conversations(days=1)
    assert [r.conv_id for r in recent.data.rows] == ["lc-session-1"]
    assert recent.data.rows[0].msg_count == 2
    assert gm.list_project_conversations(project="billing").data.rows[0].conv_id == "lc-session-1"
    # The model-facing tools see it too.
    text = GhostMemTool("search_personal_memory", gm).invoke({"query": "leap years"})
    assert "[lc-session-1 | langchain |" in text


def test_messages_round_trip_in_order_with_their_types(gm: GhostMem) -> None:
    history = GhostMemChatMessageHistory("lc-session-2", gm)
    sent = [
        SystemMessage("You are terse."),
        HumanMessage("What is 2+2?", name="ana"),
        AIMessage("", tool_calls=[{"name": "calc", "args": {"expr": "2+2"}, "id": "t1"}]),
        ToolMessage("4", tool_call_id="t1"),
        AIMessage("4"),
    ]
    history.add_messages(sent[:2])
    history.add_messages(sent[2:])
    got = history.messages
    assert [type(m) for m in got] == [type(m) for m in sent]
    assert [m.content for m in got] == [m.content for m in sent]
    assert got[1].name == "ana"
    assert got[2].tool_calls[0]["args"] == {"expr": "2+2"}
    assert got[3].tool_call_id == "t1"
    # A second history on the same session reads what the first wrote (state lives in Postgres).
    assert len(GhostMemChatMessageHistory("lc-session-2", gm).messages) == 5


def test_clear_removes_the_conversation(gm: GhostMem) -> None:
    history = GhostMemChatMessageHistory("lc-session-3", gm)
    history.add_user_message("remember the blue whale")
    history.clear()
    assert history.messages == []
    assert gm.list_recent_conversations(days=1).data.rows == []


def test_ignore_marker_keeps_a_conversation_out(gm: GhostMem) -> None:
    history = GhostMemChatMessageHistory("lc-private", gm)
    history.add_user_message("ghostmem:ignore this one is private")
    assert history.messages == []
    assert gm.list_recent_conversations(days=1).data.rows == []


async def test_async_methods(gm: GhostMem) -> None:
    history = GhostMemChatMessageHistory("lc-session-4", gm)
    await history.aadd_messages([HumanMessage("async hello"), AIMessage("async hi")])
    assert [m.content for m in await history.aget_messages()] == ["async hello", "async hi"]
    await history.aclear()
    assert await history.aget_messages() == []


def test_empty_session_id_is_refused(gm: GhostMem) -> None:
    with pytest.raises(ValueError, match="session_id"):
        GhostMemChatMessageHistory("  ", gm)


def test_a_second_writer_waits_instead_of_overwriting(gm: GhostMem, pg_dsn: str) -> None:
    """Writer 2 starts while writer 1's append is uncommitted: it must wait and append after it, not reuse
    position 0 (each process would otherwise read the same length and write the same message slot)."""
    gm.connect()  # migrated
    first = [MessageRecord(native_id="", role="user", text="first writer")]
    second = [MessageRecord(native_id="", role="user", text="second writer")]

    def append_and_commit() -> None:
        with psycopg.connect(pg_dsn) as conn:
            append_messages(conn, gm.owner, "lc-shared", "langchain", second, embedder=None)

    with psycopg.connect(pg_dsn) as conn, ThreadPoolExecutor(1) as pool:
        append_messages(conn, gm.owner, "lc-shared", "langchain", first, embedder=None)
        waiting = pool.submit(append_and_commit)
        time.sleep(0.5)  # writer 2 is now inside its transaction
        conn.commit()
        waiting.result(timeout=30)
    texts = [m.content for m in GhostMemChatMessageHistory("lc-shared", gm).messages]
    assert texts == ["first writer", "second writer"]


def test_recorded_conversation_is_found_by_meaning_with_the_real_model(
    pg_dsn: str, owner: str, real_embedder: Embedder
) -> None:
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=real_embedder) as store:
        seed_conversations(store)
        history = GhostMemChatMessageHistory("lc-meaning", store)
        history.add_user_message("My sourdough starter smells like nail polish remover and barely rises.")
        history.add_ai_message("It is hungry: feed it twice a day with equal weights of flour and water.")
        # No word in common with the conversation: only the embedding can connect them.
        hits = store.search_personal_memory(query="fermented bread culture problems", limit=3).data.rows
        assert hits[0].conv_id == "lc-meaning"


# Deprecated by langchain-core 1.x in favour of LangGraph persistence, yet still the way many apps wire a history.
@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_runnable_with_message_history_records_each_turn(gm: GhostMem) -> None:
    model = FakeListChatModel(
        responses=["Check the cron timezone: it runs in UTC.", "Yes, set TZ in the unit."]
    )
    chain = RunnableWithMessageHistory(model, lambda session_id: GhostMemChatMessageHistory(session_id, gm))
    config: RunnableConfig = {"configurable": {"session_id": "lc-cron"}}
    chain.invoke("Why does my nightly cron job run at 2am instead of midnight?", config=config)
    chain.invoke("Can I fix it in the systemd unit?", config=config)

    thread = gm.get_conversation(conv_id="lc-cron").data
    assert [m.role for m in thread.messages] == ["user", "assistant", "user", "assistant"]
    assert thread.messages[3].text == "Yes, set TZ in the unit."
    assert gm.search_personal_memory(query="nightly cron timezone").data.rows[0].conv_id == "lc-cron"
