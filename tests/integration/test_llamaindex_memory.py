"""GhostMemMemoryBlock in LlamaIndex's Memory, and what an LLM reads of the retrievers' nodes."""

from __future__ import annotations

from ghostmem import GhostMem
from llama_index.core.llms import ChatMessage, ImageBlock, TextBlock
from llama_index.core.memory import Memory
from llama_index.core.schema import MetadataMode
from llama_index.core.storage.chat_store.base_db import MessageStatus
from support.adapters import RULE, seed_conversations, seed_rule

from llama_index_ghostmem import (
    GhostMemChatStore,
    GhostMemMemoryBlock,
    GhostMemMemoryStore,
    GhostMemoryRetriever,
    GhostMemRetriever,
)


async def test_memory_block_brings_past_conversations_and_rules_into_memory(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    seed_rule(gm)
    block = GhostMemMemoryBlock(gm, conversations=1, memories=1)
    memory = Memory.from_defaults(session_id="today", memory_blocks=[block], token_limit=4000)
    await memory.aput_messages(
        [
            ChatMessage(role="user", content="Hello"),
            ChatMessage(role="assistant", content="Hi, what are we doing today?"),
            ChatMessage(
                role="user",
                blocks=[
                    TextBlock(text="The webapp deploy broke again:"),
                    TextBlock(text="database migrations"),
                ],
            ),
        ]
    )
    history = await memory.aget()
    system = history[0]
    assert system.role == "system"
    text = system.content or ""
    assert "<ghostmem>" in text and ids["deploy"] in text  # the relevant past conversation ...
    assert ids["carbonara"] not in text and ids["vault"] not in text  # ... and only it
    assert RULE in text  # the learned rule
    assert [m.content for m in history[1:]][-1] == "The webapp deploy broke again:\ndatabase migrations"


async def test_the_block_leaves_out_the_current_session_and_says_nothing_without_words(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    block = GhostMemMemoryBlock(gm, conversations=1, memories=0)
    carbonara = [ChatMessage(role="user", content="guanciale and pecorino carbonara")]
    assert ids["carbonara"] in await block.aget(carbonara)
    assert ids["carbonara"] not in await block.aget(carbonara, session_id=ids["carbonara"])
    assert (
        await block.aget([ChatMessage(role="user", blocks=[ImageBlock(url="https://example.com/a.png")])])
        == ""
    )
    assert await block.aget([]) == ""


async def test_the_block_reads_only_its_owner(gm: GhostMem, pg_dsn: str) -> None:
    seed_conversations(gm)
    with GhostMem(dsn=pg_dsn, owner=gm.owner + "-other", embedder=gm.embedder) as other:
        block = GhostMemMemoryBlock(other, conversations=3, memories=3)
        assert await block.aget([ChatMessage(role="user", content="carbonara guanciale deploy vault")]) == ""


def test_the_llm_reads_when_and_where_not_the_bookkeeping(gm: GhostMem) -> None:
    seed_conversations(gm)
    seed_rule(gm)
    node = GhostMemRetriever(gm, similarity_top_k=1).retrieve("carbonara guanciale")[0].node
    assert {"conv_id", "msg_count", "score", "tier"} <= set(node.metadata)  # code still has them ...
    llm = node.get_content(metadata_mode=MetadataMode.LLM)
    assert (
        "platform: claude_code" in llm and "conv_id" not in llm and "msg_count" not in llm
    )  # ... the LLM not
    assert node.get_content(metadata_mode=MetadataMode.EMBED) == node.get_content()
    rule = GhostMemoryRetriever(gm, similarity_top_k=1).retrieve("migrations before tests")[0].node
    rule_llm = rule.get_content(metadata_mode=MetadataMode.LLM)
    assert RULE in rule_llm and "memory_id" not in rule_llm and "breakdown" not in rule_llm
    assert len(rule_llm) - len(RULE) < 100


async def test_chat_store_and_block_together(gm: GhostMem) -> None:
    """The chat store captures the session; the block finds it from the next one."""
    store = GhostMemChatStore(gm)
    store.add_message("monday", ChatMessage(role="user", content="Our pagerduty rotation moves to Fridays"))
    block = GhostMemMemoryBlock(gm, conversations=2, memories=0)
    found = await block.aget([ChatMessage(role="user", content="when is the pagerduty rotation?")])
    assert "monday" in found and "Fridays" in found


async def test_memory_keeps_its_queue_in_ghostmem_and_archived_messages_stay_searchable(gm: GhostMem) -> None:
    store = GhostMemMemoryStore(gm)
    memory = Memory.from_defaults(
        session_id="li-memory", chat_store=store, token_limit=60, token_flush_size=20
    )
    topics = ["kafka consumer lag", "terraform state lock", "grafana alert routing", "redis eviction policy"]
    for n, topic in enumerate(topics):
        await memory.aput_messages(
            [
                ChatMessage(role="user", content=f"Turn {n}: how do we handle {topic} in production?"),
                ChatMessage(
                    role="assistant", content=f"Turn {n}: we tune {topic} with the runbook, step by step."
                ),
            ]
        )
    active = await store.get_messages("li-memory")
    archived = await store.get_messages("li-memory", status=MessageStatus.ARCHIVED)
    everything = await store.get_messages("li-memory", status=None)
    assert archived and active and len(archived) + len(active) == len(everything) == 8
    assert [m.content for m in everything] == [
        m.content for m in [*archived, *active]
    ]  # the oldest were archived
    assert await store.count_messages("li-memory") == len(active)
    assert [m.content for m in await memory.aget_all(status=MessageStatus.ACTIVE)] == [
        m.content for m in active
    ]
    # flushed out of the short-term queue, still in personal memory and found by meaning and words
    hit = gm.search_personal_memory(query="kafka consumer lag", platform="llamaindex").data.rows[0]
    assert hit.conv_id == "li-memory" and hit.msg_count == 8
    assert await store.get_keys() == ["li-memory"]
    assert [m.content for m in await store.get_messages("li-memory", status=None, limit=2, offset=1)] == [
        m.content for m in everything[1:3]
    ]
    first = await store.delete_message("li-memory", 0)
    assert first is not None and first.content == everything[0].content
    assert await store.delete_message("li-memory", 99) is None
    await store.delete_messages("li-memory", status=MessageStatus.ARCHIVED)
    assert await store.count_messages("li-memory", status=None) == len(active)
    oldest = await store.delete_oldest_messages("li-memory", 1)
    assert [m.content for m in oldest] == [active[0].content]
    await store.set_messages("li-memory", [ChatMessage(role="user", content="a fresh start")])
    assert [m.content for m in await store.get_messages("li-memory")] == ["a fresh start"]
    await store.delete_messages("li-memory")
    assert await store.get_keys() == []
