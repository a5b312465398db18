"""Small synthetic transcript files written by the tests, and the parsers run on them without a database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ghostmem.ingest.common import Item, Parsed, Problem
from ghostmem.ingest.runner import PARSERS
from ghostmem.ingest.sources import iter_sources
from ghostmem.records import ConversationRecord

T0 = "2026-01-01T10:00:00.000Z"


def parse_path(path: Path) -> list[Item]:
    problems: list[Problem] = []
    items: list[Item] = []
    for source in iter_sources([path], problems.append, lambda *_: False):
        items += PARSERS[source.platform](source, {})
    return problems + items


def records(path: Path) -> dict[str, ConversationRecord]:
    return {i.record.conv_id: i.record for i in parse_path(path) if isinstance(i, Parsed)}


def jsonl(path: Path, lines: list[dict[str, Any]], tail: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in lines) + tail)
    return path


def cc(kind: str, uuid: str, parent: str | None, content: Any, ts: str = T0, **extra: Any) -> dict[str, Any]:
    """One Claude Code transcript line."""
    role = "assistant" if kind == "assistant" else "user"
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": extra.pop("sessionId", "s1"),
            "timestamp": ts, "cwd": extra.pop("cwd", "/repo"), "message": {"role": role, "content": content}, **extra}  # fmt: skip


def node(
    node_id: str, parent: str | None, children: list[str], role: str | None, text: str = "", **msg: Any
) -> dict[str, Any]:
    message = None
    if role is not None:
        message = {"id": node_id, "author": {"role": role}, "create_time": msg.pop("t", 1700000000.0),
                   "content": {"content_type": "text", "parts": [text]}, "recipient": msg.pop("recipient", "all"),
                   "metadata": msg.pop("metadata", {})}  # fmt: skip
    return {"id": node_id, "parent": parent, "children": children, "message": message}
