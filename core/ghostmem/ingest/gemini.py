"""Gemini CLI sessions (docs/platforms.md §5): ``~/.gemini/tmp/<sha256(project)>/chats/session-….json``.

One JSON document per session, rewritten in place (so it is read whole whenever it changed). User content is a
string or a Part list; ``gemini`` (or ``model``) messages carry the answer, ``thoughts`` and ``toolCalls`` with their
results; ``info``/``error``/``warning`` messages are the CLI's own. The project is only a hash of its root path.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ghostmem.ingest.common import (
    SHAPE_ERRORS,
    Item,
    Problem,
    dumps,
    finish,
    parse_time,
    read_records,
    shape_problem,
    text_of,
)
from ghostmem.ingest.sources import Source
from ghostmem.records import MessageRecord

_CLI_KINDS = frozenset({"info", "error", "warning"})


def parse(source: Source, state: dict[str, Any]) -> Iterator[Item]:
    with source.open() as fh:
        # one session object (an array of them is read too)
        yield from read_records(fh, source.label, lambda doc, line, _where: _session(doc, source, line))


def _session(doc: Any, source: Source, line: int) -> Iterator[Item]:
    if not isinstance(doc, dict) or not doc.get("sessionId") or not isinstance(doc.get("messages"), list):
        yield Problem(source.label, line, "not a Gemini CLI session (needs sessionId and messages)")
        return
    messages: list[MessageRecord] = []
    for index, msg in enumerate(doc["messages"]):
        try:
            messages += _message(msg, index)
        except _UnknownType as exc:
            yield Problem(source.label, line, f"message #{index} has {exc}; skipped")
        except SHAPE_ERRORS as exc:
            yield shape_problem(source.label, line, exc, f"message #{index}: ")
    parsed = finish(
        conv_id=str(doc["sessionId"]),
        platform="gemini",
        messages=messages,
        source=source.label,
        title=doc.get("summary"),
        project=str(doc["projectHash"]) if doc.get("projectHash") else None,
        started_at=parse_time(doc.get("startTime")),
        ended_at=parse_time(doc.get("lastUpdated")),
    )
    if parsed is not None:
        yield parsed


class _UnknownType(Exception):
    """A message of a type this reader does not know (reported, skipped)."""


def _message(msg: Any, index: int) -> list[MessageRecord]:
    if not isinstance(msg, dict):
        raise TypeError("not an object")
    native = str(msg.get("id") or index)
    ts = parse_time(msg.get("timestamp"))
    kind = msg.get("type")
    text = text_of(msg.get("content"))
    if kind == "user":
        return (
            [MessageRecord(native_id=native, role="user", text=text, ts=ts, raw_role="user")]
            if text.strip()
            else []
        )
    if kind in ("gemini", "model"):
        return _model(msg, native, str(kind), text, ts)
    if kind in _CLI_KINDS:
        return (
            [MessageRecord(native_id=native, role="system", text=text, ts=ts, raw_role=kind)]
            if text.strip()
            else []
        )
    raise _UnknownType(f"unknown type {kind!r}")


def _model(
    msg: dict[str, Any], native: str, kind: str, text: str, ts: datetime | None
) -> list[MessageRecord]:
    """An answer: its thoughts, its text, then each tool call with its result."""
    out: list[MessageRecord] = []
    for n, thought in enumerate(msg.get("thoughts") or []):
        if isinstance(thought, dict):
            body = "\n".join(str(thought.get(k) or "") for k in ("subject", "description")).strip()
            if body:
                out.append(MessageRecord(native_id=f"{native}#thought{n}", role="thinking", text=body, ts=ts,
                                         raw_role="thought"))  # fmt: skip
    if text.strip():
        out.append(MessageRecord(native_id=native, role="assistant", text=text, ts=ts, raw_role=kind,
                                 meta={"model": msg.get("model")}))  # fmt: skip
    for n, call in enumerate(msg.get("toolCalls") or []):
        if not isinstance(call, dict):
            continue
        name = str(call.get("name") or "tool")
        call_ts = parse_time(call.get("timestamp")) or ts
        out.append(MessageRecord(native_id=f"{native}#call{n}", role="tool_call",
                                 text=f"{name} {dumps(call.get('args') or {})}", ts=call_ts, raw_role="toolCall",
                                 speaker=name, meta={"status": call.get("status")}))  # fmt: skip
        result = _tool_result(call.get("result"))
        if result:
            out.append(MessageRecord(native_id=f"{native}#result{n}", role="tool", text=result, ts=call_ts,
                                     raw_role="toolResult"))  # fmt: skip
    return out


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
