"""ChatGPT data exports (FORMATS.md §2): ``conversations.json`` (alone or in the export zip).

The file is one JSON array, often hundreds of MB on one line, so it is streamed conversation by conversation
(ijson): memory stays bounded by the largest single conversation. Only the current branch is kept (``current_node``
up to the root; the newest leaf when ``current_node`` is missing), hidden and empty messages are dropped, and
citation markers are stripped from the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import ijson

from ghostmem.ingest.common import Item, Parsed, Problem, dumps, make_title, parse_time
from ghostmem.ingest.sources import Source
from ghostmem.records import ConversationRecord, MessageRecord, Role
from ghostmem.store import TITLE_FROM_PLATFORM, TITLE_FROM_PROMPT

# 【3:0†source】 (2023/24) and U+E200 … U+E201 cite blocks (2025); U+E203/U+E204 only mark spans (text kept).
_CITATIONS = re.compile("【[^】]*†[^】]*】|\ue200[^\ue201]*\ue201|[\ue203\ue204]")
_SKIP_CONTENT = frozenset({"user_editable_context", "model_editable_context"})


def parse(source: Source, state: dict[str, Any]) -> Iterator[Item]:
    with source.open() as fh:
        start = fh.read(4096).lstrip()[:1]
        fh.seek(0)
        try:
            for index, conv in enumerate(ijson.items(fh, "item" if start == b"[" else "", use_float=True)):
                if not isinstance(conv, dict) or not isinstance(conv.get("mapping"), dict):
                    yield Problem(source.label, 0, f"conversation #{index}: no mapping; skipped")
                    continue
                yield from _conversation(conv, source, index)
        except (ijson.JSONError, ijson.IncompleteJSONError, UnicodeDecodeError) as exc:
            yield Problem(source.label, 0, f"malformed JSON ({exc}); conversations before it were imported")


def current_branch(mapping: dict[str, Any], current: str | None) -> list[dict[str, Any]]:
    """The displayed thread: ``current`` (else the newest leaf) up to the root, root first; cycles are cut."""
    if current not in mapping:
        leaves = [n for n in mapping.values() if isinstance(n, dict) and not n.get("children")]
        current = max(leaves, key=lambda n: (n.get("message") or {}).get("create_time") or 0, default={}).get(
            "id"
        )
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    while current in mapping and current not in seen:
        seen.add(current)
        node = mapping[current]
        path.append(node)
        current = node.get("parent")
    return path[::-1]


def _conversation(conv: dict[str, Any], source: Source, index: int) -> Iterator[Item]:
    conv_id = conv.get("conversation_id") or conv.get("id")
    if not conv_id:
        yield Problem(source.label, 0, f"conversation #{index}: no id; skipped")
        return
    messages: list[MessageRecord] = []
    last_ts: datetime | None = None
    for node in current_branch(conv["mapping"], conv.get("current_node")):
        msg = node.get("message")
        if not isinstance(msg, dict):
            continue
        meta = msg.get("metadata") or {}
        content = msg.get("content") or {}
        if meta.get("is_visually_hidden_from_conversation") or content.get("content_type") in _SKIP_CONTENT:
            continue
        author = msg.get("author") or {}
        raw = str(author.get("role") or "")
        text = _text(content)
        if raw == "assistant":  # in tool output 【0†Title】 is a link label, in answers a citation marker
            text = _CITATIONS.sub("", text)
        text = text.strip()
        if not text:
            continue
        ts = parse_time(msg.get("create_time")) or last_ts
        last_ts = ts or last_ts
        role: Role = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool"}.get(
            raw, "meta"
        )  # type: ignore[assignment]
        if role == "assistant" and msg.get("recipient") not in (None, "all"):
            role = "tool_call"
        messages.append(
            MessageRecord(str(msg.get("id") or node.get("id")), role, text, ts, raw, speaker=author.get("name"),
                          meta={k: v for k, v in (("model", meta.get("model_slug")),
                                                  ("recipient", msg.get("recipient"))) if v not in (None, "all")})
        )  # fmt: skip
    title = conv.get("title") if isinstance(conv.get("title"), str) and conv["title"].strip() else None
    rank = TITLE_FROM_PLATFORM
    if title is None or title == "New chat":
        title, rank = next((m.text for m in messages if m.role == "user"), title), TITLE_FROM_PROMPT
    project = None
    template = conv.get("conversation_template_id") or conv.get("gizmo_id")
    if conv.get("gizmo_type") == "snorlax" or (isinstance(template, str) and template.startswith("g-p-")):
        project = template
    yield Parsed(
        ConversationRecord(
            conv_id=str(conv_id),
            platform="chatgpt",
            messages=messages,
            title=make_title(title),
            project=project,
            started_at=parse_time(conv.get("create_time")),
            ended_at=parse_time(conv.get("update_time")),
            source=source.label,
            meta={"title_rank": rank, **({"gizmo_id": conv["gizmo_id"]} if conv.get("gizmo_id") else {})},
        )
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
