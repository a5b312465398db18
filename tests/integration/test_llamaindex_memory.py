"""GhostMemMemoryBlock in LlamaIndex's Memory, and what an LLM reads of the retrievers' nodes."""

from __future__ import annotations

from ghostmem import GhostMem
from llama_index.core.llms import ChatMessage, ImageBlock, TextBlock
from llama_index.core.memory import Memory
from llama_index.core.schema import MetadataMode
from support.adapters import RULE, seed_conversations, seed_rule

from llama_index_ghostmem import (
    GhostMemChatStore,
    GhostMemMemoryBlock,
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
