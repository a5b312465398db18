"""Gemini CLI sessions (FORMATS.md §5): ``~/.gemini/tmp/<sha256(project)>/chats/session-….json``.

One JSON document per session, rewritten in place (so it is read whole whenever it changed). User content is a
string or a Part list; ``gemini`` (or ``model``) messages carry the answer, ``thoughts`` and ``toolCalls`` with their
results; ``info``/``error``/``warning`` messages are the CLI's own. The project is only a hash of its root path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ghostmem.ingest.common import Item, Parsed, Problem, dumps, parse_time, platform_title, text_of
from ghostmem.ingest.sources import Source
from ghostmem.records import ConversationRecord, MessageRecord


def parse(source: Source, state: dict[str, Any]) -> Iterator[Item]:
    with source.open() as fh:
        raw = fh.read().decode("utf-8", errors="replace")
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        yield Problem(source.label, exc.lineno, f"malformed JSON ({exc.msg})")
        return
    if not isinstance(doc, dict) or not doc.get("sessionId") or not isinstance(doc.get("messages"), list):
        yield Problem(source.label, 0, "not a Gemini CLI session (needs sessionId and messages)")
        return
    messages: list[MessageRecord] = []
    for index, msg in enumerate(doc["messages"]):
        if not isinstance(msg, dict):
            continue
        native = str(msg.get("id") or index)
        ts = parse_time(msg.get("timestamp"))
        kind = msg.get("type")
        text = text_of(msg.get("content"))
        if kind == "user":
            if text.strip():
                messages.append(MessageRecord(native, "user", text, ts, "user"))
        elif kind in ("gemini", "model"):
            for n, thought in enumerate(msg.get("thoughts") or []):
                if isinstance(thought, dict):
                    body = "\n".join(str(thought.get(k) or "") for k in ("subject", "description")).strip()
                    if body:
                        messages.append(
                            MessageRecord(f"{native}#thought{n}", "thinking", body, ts, "thought")
                        )
            if text.strip():
                messages.append(
                    MessageRecord(native, "assistant", text, ts, str(kind), meta={"model": msg.get("model")})
                )
            for n, call in enumerate(msg.get("toolCalls") or []):
                if not isinstance(call, dict):
                    continue
                name = str(call.get("name") or "tool")
                call_ts = parse_time(call.get("timestamp")) or ts
                messages.append(
                    MessageRecord(f"{native}#call{n}", "tool_call", f"{name} {dumps(call.get('args') or {})}",
                                  call_ts, "toolCall", speaker=name, meta={"status": call.get("status")})
                )  # fmt: skip
                result = _tool_result(call.get("result"))
                if result:
                    messages.append(
                        MessageRecord(f"{native}#result{n}", "tool", result, call_ts, "toolResult")
                    )
        elif kind in ("info", "error", "warning") and text.strip():
            messages.append(MessageRecord(native, "system", text, ts, str(kind)))
        elif kind not in ("info", "error", "warning"):
            yield Problem(source.label, 0, f"message #{index} has unknown type {kind!r}; skipped")
    title, rank = platform_title(doc.get("summary"), messages)
    times = [m.ts for m in messages if m.ts]
    yield Parsed(
        ConversationRecord(
            conv_id=str(doc["sessionId"]),
            platform="gemini",
            messages=messages,
            title=title,
            project=str(doc["projectHash"]) if doc.get("projectHash") else None,
            started_at=parse_time(doc.get("startTime")) or (min(times) if times else None),
            ended_at=parse_time(doc.get("lastUpdated")) or (max(times) if times else None),
            source=source.label,
            meta={"title_rank": rank},
        )
    )


def _tool_result(result: Any) -> str:
    parts = []
    for part in result if isinstance(result, list) else [result]:
        if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
            response = part["functionResponse"].get("response")
            output = response.get("output") if isinstance(response, dict) else response
            parts.append(output if isinstance(output, str) else dumps(output))
        elif isinstance(part, dict | str):
            parts.append(text_of(part))
    return "\n".join(p for p in parts if p)
