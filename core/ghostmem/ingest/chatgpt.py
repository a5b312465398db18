"""ChatGPT data exports (docs/platforms.md §2): ``conversations.json`` (alone or in the export zip).

The file is one JSON array, often hundreds of MB on one line, so it is streamed conversation by conversation
(:func:`~ghostmem.ingest.reading.read_document`): memory stays bounded by the largest single conversation. Only the
current branch is kept (``current_node`` up to the root; the newest leaf when ``current_node`` is missing), hidden
and empty messages are dropped, and citation markers are stripped from the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ghostmem.ingest.common import Item, Problem, dumps, finish, parse_time, read_records
from ghostmem.ingest.sources import Source
from ghostmem.records import TITLE_FROM_PLATFORM, MessageRecord, Role

# 【3:0†source】 (2023/24) and U+E200 … U+E201 cite blocks (2025); U+E203/U+E204 only mark spans (text kept).
_CITATIONS = re.compile("【[^】]*†[^】]*】|\ue200[^\ue201]*\ue201|[\ue203\ue204]")
_SKIP_CONTENT = frozenset({"user_editable_context", "model_editable_context"})
_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool"}


def parse(source: Source, state: dict[str, Any]) -> Iterator[Item]:
    with source.open() as fh:
        yield from read_records(
            fh, source.label, lambda conv, line, where: _conversation(conv, source, line, where)
        )


def current_branch(mapping: dict[str, Any], current: Any) -> list[dict[str, Any]]:
    """The displayed thread: ``current`` (else the newest leaf) up to the root, root first; cycles are cut.

    Nodes that are not objects end the thread where they stand.
    """
    nodes = {key: node for key, node in mapping.items() if isinstance(node, dict)}
    if not isinstance(current, str) or current not in nodes:
        leaves = [n for n in nodes.values() if not n.get("children")]
        current = max(leaves, key=_created, default={}).get("id")
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    while isinstance(current, str) and current in nodes and current not in seen:
        seen.add(current)
        node = nodes[current]
        path.append(node)
        current = node.get("parent")
    return path[::-1]


def _created(node: dict[str, Any]) -> float:
    msg = node.get("message")
    value = msg.get("create_time") if isinstance(msg, dict) else None
    return float(value) if isinstance(value, int | float) else 0.0


def _conversation(conv: Any, source: Source, line: int, where: str) -> Iterator[Item]:
    if not isinstance(conv, dict) or not isinstance(conv.get("mapping"), dict):
        yield Problem(source.label, line, f"{where}no mapping; skipped")
        return
    conv_id = conv.get("conversation_id") or conv.get("id")
    if not isinstance(conv_id, str | int) or conv_id == "":
        yield Problem(source.label, line, f"{where}no id; skipped")
        return
    odd = sum(1 for node in conv["mapping"].values() if not isinstance(node, dict))
    if odd:
        yield Problem(source.label, line, f"{where}{odd} nodes of its mapping are not objects; skipped")
    messages: list[MessageRecord] = []
    last_ts: datetime | None = None
    for node in current_branch(conv["mapping"], conv.get("current_node")):
        msg = _message(node, last_ts)
        if msg is not None:
            messages.append(msg)
            last_ts = msg.ts or last_ts
    title = conv.get("title")
    template = conv.get("conversation_template_id") or conv.get("gizmo_id")
    is_project = conv.get("gizmo_type") == "snorlax" or (
        isinstance(template, str) and template.startswith("g-p-")
    )
    parsed = finish(
        conv_id=str(conv_id),
        platform="chatgpt",
        messages=messages,
        source=source.label,
        title=None if title == "New chat" else title,
        title_rank=TITLE_FROM_PLATFORM,
        project=str(template) if is_project else None,
        started_at=parse_time(conv.get("create_time")),
        ended_at=parse_time(conv.get("update_time")),
        meta={"gizmo_id": conv["gizmo_id"]} if conv.get("gizmo_id") else {},
    )
    if parsed is not None:
        yield parsed


def _message(node: dict[str, Any], last_ts: datetime | None) -> MessageRecord | None:
    """The message of one node of the thread, or None for a hidden, empty or missing one."""
    msg = node.get("message")
    if not isinstance(msg, dict):
        return None
    meta = msg.get("metadata") or {}
    content = msg.get("content") or {}
    if meta.get("is_visually_hidden_from_conversation") or content.get("content_type") in _SKIP_CONTENT:
        return None
    author = msg.get("author") or {}
    raw = str(author.get("role") or "")
    name = author.get("name")
    text = _text(content)
    if raw == "assistant":  # in tool output 【0†Title】 is a link label, in answers a citation marker
        text = _CITATIONS.sub("", text)
    text = text.strip()
    if not text:
        return None
    role = _ROLES.get(raw, "meta")
    if role == "assistant" and msg.get("recipient") not in (None, "all"):
        role = "tool_call"
    extra = {"model": meta.get("model_slug"), "recipient": msg.get("recipient")}
    return MessageRecord(
        native_id=str(msg.get("id") or node.get("id")),
        role=role,
        text=text,
        ts=parse_time(msg.get("create_time")) or last_ts,
        raw_role=raw,
        speaker=name if isinstance(name, str) else None,
        meta={k: v for k, v in extra.items() if v not in (None, "all")},
    )


def _text(content: dict[str, Any]) -> str:
    ctype = content.get("content_type")
    if ctype in ("text", "multimodal_text"):
        parts = []
        for part in content.get("parts") or []:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("content_type") == "audio_transcription":
                parts.append(str(part.get("text") or ""))
            elif isinstance(part, dict) and part.get("content_type") == "image_asset_pointer":
                parts.append("[image]")
        return "\n".join(parts)
    if ctype in ("code", "execution_output", "tether_quote", "system_error"):
        return str(content.get("text") or "")
    if ctype == "tether_browsing_display":
        return str(content.get("result") or content.get("summary") or "")
    if ctype == "thoughts":
        return "\n".join(
            str(t.get("content") or t.get("summary") or "") for t in content.get("thoughts") or []
        )
    if ctype == "reasoning_recap":
        return ""
    rest = {k: v for k, v in content.items() if k != "content_type"}
    return dumps(rest) if rest else ""
