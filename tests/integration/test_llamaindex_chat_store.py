"""Live capture: LlamaIndex conversations kept through GhostMemChatStore are personal memory at once."""

from __future__ import annotations

from ghostmem import GhostMem
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.memory import ChatMemoryBuffer

from llama_index_ghostmem import GhostMemChatStore


def test_memory_buffer_conversation_is_searchable_right_after(gm: GhostMem) -> None:
    store = GhostMemChatStore(gm, project="/srv/telescope")
    memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="li-session-1")
    memory.put(ChatMessage(role="user", content="The telescope mount drifts east during long exposures."))
    memory.put(
        ChatMessage(role="assistant", content="Recalibrate the polar alignment and check the RA motor.")
    )

    hit = gm.search_personal_memory(query="telescope mount drifts").data.rows[0]
    assert (hit.conv_id, hit.platform) == ("li-session-1", "llamaindex")
    assert [r.conv_id for r in gm.list_recent_conversations(days=1).data.rows] == ["li-session-1"]
    assert [m.content for m in memory.get_all()] == [
        "The telescope mount drifts east during long exposures.",
        "Recalibrate the polar alignment and check the RA motor.",
    ]


def test_store_methods(gm: GhostMem) -> None:
    store = GhostMemChatStore(gm)
    msgs = [
        ChatMessage(role=MessageRole.SYSTEM, content="be brief"),
        ChatMessage(role=MessageRole.USER, content="one"),
        ChatMessage(role=MessageRole.ASSISTANT, content="two", additional_kwargs={"tool_calls": []}),
    ]
    store.set_messages("k1", msgs)
    store.add_message("k2", ChatMessage(role=MessageRole.USER, content="other"))
    assert store.get_keys() == ["k1", "k2"]
    got = store.get_messages("k1")
    assert [(m.role, m.content) for m in got] == [(m.role, m.content) for m in msgs]
    assert got[2].additional_kwargs == {"tool_calls": []}

    assert store.delete_message("k1", 1).content == "one"
    assert [m.content for m in store.get_messages("k1")] == ["be brief", "two"]
    assert store.delete_message("k1", 7) is None
    assert store.delete_last_message("k1").content == "two"
    store.set_messages("k1", [ChatMessage(role="user", content="replaced")])
    assert [m.content for m in store.get_messages("k1")] == ["replaced"]
    assert gm.get_conversation(conv_id="k1").data.total == 1

    assert [m.content for m in store.delete_messages("k2")] == ["other"]
    assert store.delete_messages("k2") is None
    assert store.get_keys() == ["k1"]


async def test_async_methods(gm: GhostMem) -> None:
    store = GhostMemChatStore(gm)
    await store.async_add_message("ak", ChatMessage(role="user", content="async hello"))
    assert [m.content for m in await store.aget_messages("ak")] == ["async hello"]
    assert await store.aget_keys() == ["ak"]
