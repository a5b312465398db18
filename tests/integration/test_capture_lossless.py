"""Live capture keeps every message a LangChain or LlamaIndex app can hold: blocks in order, tool calls, tool
artifacts with datetimes, images as references — and the text search reads is the text parts, one per line."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

from ghostmem import GhostMem
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from llama_index.core.llms import ChatMessage, ImageBlock, TextBlock
from support.adapters import seed_conversations

from langchain_ghostmem import GhostMemChatMessageHistory, GhostMemTool
from llama_index_ghostmem import GhostMemChatStore

PNG = base64.b64encode(b"\x89PNG" + bytes(range(256)) * 40).decode()


def _stored_meta(gm: GhostMem, conv_id: str) -> list[dict[str, object]]:
    with gm.connection() as conn:
        rows = conn.execute(
            "SELECT meta FROM ghostmem.messages WHERE owner = %s AND conv_id = %s ORDER BY seq",
            (gm.owner, conv_id),
        ).fetchall()
    return [r[0] for r in rows]


def test_an_agent_that_used_ghostmem_is_captured_by_ghostmem(gm: GhostMem) -> None:
    seed_conversations(gm)
    # the very message the issue reported: a ToolMessage whose artifact (a pydantic model with datetimes) came
    # from ghostmem's own list tool
    call = {"name": "list_recent_conversations", "args": {"days": 7}, "id": "call-1", "type": "tool_call"}
    tool_message = GhostMemTool("list_recent_conversations", gm).invoke(call)
    assert isinstance(tool_message, ToolMessage) and isinstance(
        tool_message.artifact.rows[0].ended_at, datetime
    )
    sent = [
        HumanMessage(
            [
                {"type": "text", "text": "What did we discuss this week?"},
                {"type": "image", "base64": PNG, "mime_type": "image/png"},
                {"type": "image", "url": "https://example.com/whiteboard.png"},
                {"type": "text", "text": "The whiteboard photo is attached."},
            ],
            id="h1",
        ),
        AIMessage(
            "",
            tool_calls=[call],
            id="a1",
            usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
        ),
        tool_message,
        AIMessage(
            [{"type": "text", "text": "We talked about"}, {"type": "text", "text": "deploys and vault."}],
            id="a2",
        ),
    ]
    history = GhostMemChatMessageHistory("lc-lossless", gm)
    history.add_messages(sent)
    back = history.messages
    assert [type(m) for m in back] == [type(m) for m in sent]
    human = back[0].content
    assert isinstance(human, list) and [b["type"] for b in human] == ["text", "image", "image", "text"]  # type: ignore[index]
    assert human[2] == {
        "type": "image",
        "url": "https://example.com/whiteboard.png",
    }  # a URL is the reference
    assert human[1]["base64"]["omitted"] == "inline media" and human[1]["base64"]["mime_type"] == "image/png"  # type: ignore[index]
    assert back[1].tool_calls == [call] and back[1].usage_metadata["total_tokens"] == 4  # type: ignore[attr-defined,index]
    assert back[2].artifact == tool_message.artifact.model_dump(mode="json")  # type: ignore[attr-defined]
    assert back[2].tool_call_id == "call-1" and back[2].content == tool_message.content  # type: ignore[attr-defined]
    assert back[3].content == sent[3].content and [m.id for m in back] == ["h1", "a1", tool_message.id, "a2"]
    # search reads the text parts, one per line, and nothing of the image bytes is stored
    with gm.connection() as conn:
        texts = [r[0] for r in conn.execute(
            "SELECT text FROM ghostmem.messages WHERE owner = %s AND conv_id = 'lc-lossless' ORDER BY seq", (gm.owner,)
        )]  # fmt: skip
    assert texts[0] == "What did we discuss this week?\nThe whiteboard photo is attached."
    assert texts[3] == "We talked about\ndeploys and vault."
    assert PNG[:200] not in json.dumps(_stored_meta(gm, "lc-lossless"))
    assert gm.search_personal_memory(query="whiteboard photo").data.rows[0].conv_id == "lc-lossless"


def test_llamaindex_blocks_round_trip_with_media_as_references(gm: GhostMem) -> None:
    store = GhostMemChatStore(gm)
    when = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    sent = ChatMessage(
        role="user",
        blocks=[
            TextBlock(text="Compare these two charts"),
            ImageBlock(image=PNG.encode(), image_mimetype="image/png"),
            ImageBlock(url="https://example.com/chart-b.png"),
            TextBlock(text="which quarter grew faster?"),
        ],
        additional_kwargs={"sent_at": when, "tags": {"team"}},
    )
    store.add_message("li-lossless", sent)
    store.add_message("li-lossless", ChatMessage(role="assistant", content="Q3 grew faster."))
    back = store.get_messages("li-lossless")
    first = back[0]
    assert [b.block_type for b in first.blocks] == ["text", "text", "image", "text"]
    assert "[image not kept: image/png, sha256" in first.blocks[1].text  # type: ignore[union-attr]
    assert str(first.blocks[2].url) == "https://example.com/chart-b.png"  # type: ignore[union-attr]
    assert first.additional_kwargs == {"sent_at": "2026-11-30T12:00:00Z", "tags": ["team"]}
    assert (
        back[1].content == "Q3 grew faster."
        and "blocks" not in _stored_meta(gm, "li-lossless")[1]["llamaindex"]
    )  # type: ignore[operator]
    assert gm.search_personal_memory(query="which quarter grew faster").data.rows[0].conv_id == "li-lossless"
    assert PNG[:200] not in json.dumps(_stored_meta(gm, "li-lossless"))
