"""Claude.ai data exports (docs/platforms.md §3): ``conversations.json`` (alone, in a folder or in the export zip).

Both shapes are read: the 2024 one (``text``, ``sender``, no parent pointer) and the 2025+ one (``content`` blocks,
``parent_message_uuid``). Exports flatten every branch and their array order is not chronological: with parent
pointers the chain to the newest leaf (or ``current_leaf_message_uuid``) is kept; without, messages are sorted by
``(created_at, human first, array index)``. Attachments' extracted text is kept with its message; project names
come from ``projects.json`` next to the conversations (same folder or zip).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ghostmem.ingest.common import (
    Item,
    Problem,
    dumps,
    finish,
    normalise_role,
    parse_time,
    read_records,
)
from ghostmem.ingest.reading import MAX_RECORD_BYTES
from ghostmem.ingest.sources import Source, open_regular, zip_member_problem
from ghostmem.records import MessageRecord

ROOT_PARENT = "00000000-0000-4000-8000-000000000000"


def parse(source: Source, state: dict[str, Any]) -> Iterator[Item]:
    projects = _project_names(source)
    with source.open() as fh:
        yield from read_records(
            fh, source.label, lambda conv, line, where: _conversation(conv, source, projects, line, where)
        )


def _project_names(source: Source) -> dict[str, str]:
    """Project uuid → name from the export's ``projects.json`` (read only when it is a plain, bounded file)."""
    try:
        if source.member is not None:
            name = str(Path(source.member).with_name("projects.json"))
            with zipfile.ZipFile(open_regular(source.path)) as zf:
                if name not in zf.namelist() or zip_member_problem(zf.getinfo(name)):
                    return {}
                with zf.open(name) as fh:
                    raw = fh.read(MAX_RECORD_BYTES + 1)
        else:
            path = source.path.with_name("projects.json")
            if not path.exists():
                return {}
            with open_regular(path) as fh:
                raw = fh.read(MAX_RECORD_BYTES + 1)
        if len(raw) > MAX_RECORD_BYTES:
            return {}
        data = json.loads(raw.decode("utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError, zipfile.BadZipFile):
        return {}
    if not isinstance(data, list):
        return {}
    return {
        str(p["uuid"]): str(p["name"])
        for p in data
        if isinstance(p, dict) and p.get("uuid") and isinstance(p.get("name"), str)
    }


def ordered_messages(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation's messages in reading order, one branch (see the module docstring)."""
    raw = [m for m in conv.get("chat_messages") or [] if isinstance(m, dict)]
    by_id = {str(m.get("uuid")): m for m in raw}
    if any(m.get("parent_message_uuid") for m in raw):
        leaf = conv.get("current_leaf_message_uuid")
        if not isinstance(leaf, str) or leaf not in by_id:
            parents = {str(m.get("parent_message_uuid")) for m in raw}
            leaves = [m for m in raw if str(m.get("uuid")) not in parents] or raw
            leaf = str(max(leaves, key=lambda m: str(m.get("created_at") or "")).get("uuid"))
        chain: list[dict[str, Any]] = []
        seen: set[str] = set()
        current: str | None = leaf
        while current in by_id and current not in seen and current != ROOT_PARENT:
            seen.add(current)
            chain.append(by_id[current])
            parent = by_id[current].get("parent_message_uuid")
            current = None if parent is None else str(parent)
        return chain[::-1]
    indexed = list(enumerate(raw))
    indexed.sort(key=lambda p: (str(p[1].get("created_at") or ""), p[1].get("sender") != "human", p[0]))
    return [m for _, m in indexed]


def _conversation(
    conv: Any, source: Source, projects: dict[str, str], line: int, where: str
) -> Iterator[Item]:
    if not isinstance(conv, dict) or not isinstance(conv.get("uuid"), str | int) or conv["uuid"] == "":
        yield Problem(source.label, line, f"{where}no uuid; skipped")
        return
    listed = conv.get("chat_messages")
    if not isinstance(listed, list | None):
        yield Problem(source.label, line, f"{where}chat_messages is not a list; skipped")
        return
    odd = sum(1 for m in listed or [] if not isinstance(m, dict))
    if odd:
        yield Problem(source.label, line, f"{where}{odd} of its messages are not objects; skipped")
    messages: list[MessageRecord] = []
    for msg in ordered_messages(conv):
        text = _text(msg)
        if not text.strip():
            continue  # hollow messages occur
        sender = str(msg.get("sender") or "")
        messages.append(
            MessageRecord(
                native_id=str(msg.get("uuid")),
                role=normalise_role(sender) or "meta",
                text=text,
                ts=parse_time(msg.get("created_at")),
                raw_role=sender,
            )
        )
    project_id = conv.get("project_uuid")
    parsed = finish(
        conv_id=str(conv["uuid"]),
        platform="claude_ai",
        messages=messages,
        source=source.label,
        title=conv.get("name"),
        project=projects.get(str(project_id), str(project_id)) if project_id else None,
        started_at=parse_time(conv.get("created_at")),
        ended_at=parse_time(conv.get("updated_at")),
        meta={"project_uuid": project_id} if project_id else {},
    )
    if parsed is not None:
        yield parsed


def _text(msg: dict[str, Any]) -> str:
    parts: list[str] = []
    if isinstance(msg.get("text"), str) and msg["text"].strip():
        parts.append(msg["text"])
    else:
        for block in msg.get("content") or []:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif btype == "voice_note" and isinstance(block.get("transcript"), str):
                parts.append(block["transcript"])
            elif (
                btype == "tool_use"
                and block.get("name") == "artifacts"
                and isinstance(block.get("input"), dict)
            ):
                artifact = block["input"]
                parts.append(
                    f"[artifact: {artifact.get('title') or artifact.get('id') or ''}]\n{artifact.get('content') or ''}"
                )
            elif btype == "tool_use":
                parts.append(f"[{block.get('name')}] {dumps(block.get('input') or {})}")
    for attachment in msg.get("attachments") or []:
        if isinstance(attachment, dict) and str(attachment.get("extracted_content") or "").strip():
            parts.append(
                f"[attachment: {attachment.get('file_name') or ''}]\n{attachment['extracted_content']}"
            )
    return "\n\n".join(parts)
