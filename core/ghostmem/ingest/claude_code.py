"""Claude Code session transcripts (FORMATS.md §1): ``~/.claude/projects/<enc-cwd>/<sessionId>.jsonl``.

One JSON object per line, appended while a session runs. What this module does with them:

* conversations: one per ``sessionId``; subagent turns (inline ``isSidechain`` lines, 2.0.x ``agent-<id>.jsonl``
  siblings, 2.1.x ``<sessionId>/subagents/agent-<id>.jsonl``) become ``<sessionId>:agent-<agentId>`` with the session
  as parent; the compaction agent (``agent-acompact-*``) is the summariser's own prompt and is left out;
* order: by position in the ``parentUuid`` chain (compaction boundaries continue it through
  ``logicalParentUuid``), then time — timestamps alone are wrong after ``/compact``;
* one API response written as several lines (one block each, shared ``message.id``) gives one assistant message;
  thinking, tool calls and tool results are kept under their own roles; meta lines, slash commands, interrupts and
  the compaction summary are kept as ``meta``/``system``, never taken for the human;
* title (§1.6): the last ``custom-title`` line, else a ``summary`` line naming a leaf of the session (possibly
  written in another file: summaries are yielded as :class:`TitleHint` and matched in the database), else the first
  human prompt, or the command's arguments when the session opens with a slash command.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ghostmem.ingest.common import (
    Item,
    Parsed,
    Problem,
    TitleHint,
    dumps,
    make_title,
    parse_time,
    resume_jsonl,
)
from ghostmem.ingest.sources import CLAUDE_CODE_TYPES, Source
from ghostmem.records import ConversationRecord, MessageRecord, Role
from ghostmem.store import TITLE_FROM_PLATFORM, TITLE_FROM_PROMPT

_MESSAGE_TYPES = frozenset({"user", "assistant", "system"})
# Tags of slash commands, shell mode and injected context: kept searchable, never the human's prompt.
_COMMAND_TAGS = re.compile(
    r"^\s*<(command-name|command-message|command-args|local-command-stdout|local-command-stderr|"
    r"local-command-caveat|bash-input|bash-stdout|bash-stderr|system-reminder|task-notification|"
    r"user-memory-input|ide_opened_file|ide_selection|user-prompt-submit-hook)>"
)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)
_COMMAND_NAME = re.compile(r"<command-name>(.*?)</command-name>", re.S)
_INTERRUPT = re.compile(r"^\[Request interrupted by user[^\]]*\]$")


@dataclass(slots=True)
class _Conversation:
    conv_id: str
    parent: str | None
    agent: str | None
    lines: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    custom_title: str | None = None
    cwd: str | None = None
    branch: str | None = None
    version: str | None = None


def parse(source: Source, state: dict[str, Any]) -> Iterator[Item]:
    name = source.path.name
    if name.startswith("agent-acompact"):
        return  # the compaction agent: the summariser's prompt and answer, not a conversation
    offset = int(state.get("offset", 0))
    file_agent = name[len("agent-") : -len(".jsonl")] if name.startswith("agent-") else None
    default_session = source.path.stem if file_agent is None else source.path.parent.parent.name
    convs: dict[str, _Conversation] = {}
    with source.open() as fh:
        for line in resume_jsonl(fh, source.label, state):
            if isinstance(line, Problem):
                yield line
                continue
            obj = line.value
            kind = obj.get("type") if isinstance(obj, dict) else None
            if kind not in CLAUDE_CODE_TYPES:
                yield Problem(source.label, line.number, f"unknown record type {kind!r}; skipped")
                continue
            if kind == "summary":
                if obj.get("leafUuid") and isinstance(obj.get("summary"), str) and obj["summary"].strip():
                    yield TitleHint(str(obj["leafUuid"]), obj["summary"])
                continue
            if "uuid" not in obj and kind not in ("custom-title",):
                continue  # snapshots, queue operations: no place in the thread
            session = str(obj.get("sessionId") or default_session)
            agent = (obj.get("agentId") or file_agent) if (obj.get("isSidechain") or file_agent) else None
            if agent is None and obj.get("isSidechain"):
                agent = "sidechain"
            conv_id = f"{session}:agent-{agent}" if agent else session
            conv = convs.get(conv_id)
            if conv is None:
                conv = convs[conv_id] = _Conversation(conv_id, session if agent else None, agent)
            if kind == "custom-title":
                if isinstance(obj.get("customTitle"), str) and obj["customTitle"].strip():
                    conv.custom_title = obj["customTitle"]
                continue
            conv.lines.append((line.number, obj))
            conv.cwd = obj.get("cwd") or conv.cwd
            conv.branch = obj.get("gitBranch") or conv.branch
            conv.version = obj.get("version") or conv.version
    for conv in convs.values():
        if conv.agent is not None and conv.agent.startswith("acompact"):
            continue
        parsed = _record(conv, source, append=offset > 0)
        if parsed is not None:
            yield parsed


def _record(conv: _Conversation, source: Source, *, append: bool) -> Parsed | None:
    ordered = _chain_order(conv.lines)
    messages: list[MessageRecord] = []
    text_of_response: dict[str, MessageRecord] = {}  # message.id → its assistant text message
    times: list[datetime] = []
    title: str | None = None
    opening_args: str | None = None  # a session that opens with `/cmd args` is titled by the args
    command_name: str | None = None
    for obj in ordered:
        ts = parse_time(obj.get("timestamp"))
        kind = obj["type"]
        if kind in ("user", "assistant") and ts:
            times.append(ts)
        if kind == "assistant":
            _assistant(obj, ts, messages, text_of_response)
        elif kind == "user":
            for msg in _user(obj, ts):
                messages.append(msg)
                if title is None and msg.role == "user":
                    title = msg.text
                if title is None and msg.meta.get("kind") == "command":
                    args = _COMMAND_ARGS.search(msg.text)
                    name = _COMMAND_NAME.search(msg.text)
                    if opening_args is None and args and args.group(1).strip():
                        opening_args = args.group(1).strip()
                    if command_name is None and name:
                        command_name = name.group(1).strip()
        elif obj.get("subtype") == "compact_boundary":
            messages.append(
                MessageRecord(str(obj["uuid"]), "system", "Conversation compacted", ts, "compact_boundary",
                              meta={"kind": "compact_boundary", **(obj.get("compactMetadata") or {})})
            )  # fmt: skip
        elif obj.get("subtype") == "local_command" and isinstance(obj.get("content"), str):
            messages.append(MessageRecord(str(obj["uuid"]), "meta", obj["content"], ts, "local_command",
                                          meta={"kind": "command"}))  # fmt: skip
    if not messages:
        return None
    rank = TITLE_FROM_PROMPT
    if conv.custom_title:
        title, rank = conv.custom_title, TITLE_FROM_PLATFORM
    elif opening_args is not None:
        title = opening_args
    elif title is None:
        title = command_name
    record = ConversationRecord(
        conv_id=conv.conv_id,
        platform="claude_code",
        messages=messages,
        title=make_title(title),
        project=conv.cwd,
        started_at=min(times) if times else None,
        ended_at=max(times) if times else None,
        parent_conv_id=conv.parent,
        source=source.label,
        meta={
            "title_rank": rank,
            **({"git_branch": conv.branch} if conv.branch else {}),
            **({"cli_version": conv.version} if conv.version else {}),
            **({"agent_id": conv.agent} if conv.agent else {}),
        },
    )
    return Parsed(record, append=append, line_ids=[str(obj["uuid"]) for obj in ordered if obj.get("uuid")])


def _chain_order(lines: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Message lines (deduplicated by uuid, first wins) by (depth in the parent chain, timestamp, file order)."""
    by_uuid: dict[str, tuple[int, dict[str, Any]]] = {}
    for number, obj in lines:
        by_uuid.setdefault(str(obj.get("uuid")), (number, obj))
    depth: dict[str, int] = {}

    def depth_of(uuid: str) -> int:
        path = []
        current: str | None = uuid
        while current is not None and current in by_uuid and current not in depth and current not in path:
            path.append(current)
            obj = by_uuid[current][1]
            current = obj.get("parentUuid") or obj.get("logicalParentUuid")
        base = depth.get(current, -1) if current is not None else -1
        for node in reversed(path):
            base += 1
            depth[node] = base
        return depth[uuid]

    keyed = [
        (depth_of(uuid), str(obj.get("timestamp") or ""), number, obj)
        for uuid, (number, obj) in by_uuid.items()
        if obj.get("type") in _MESSAGE_TYPES
    ]
    keyed.sort(key=lambda k: (k[0], k[1], k[2]))
    return [k[3] for k in keyed]


def _assistant(
    obj: dict[str, Any],
    ts: datetime | None,
    messages: list[MessageRecord],
    text_of_response: dict[str, MessageRecord],
) -> None:
    message = obj.get("message") or {}
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    response_id = str(message.get("id") or obj["uuid"])
    error = bool(obj.get("isApiErrorMessage"))
    for index, block in enumerate(blocks):
        if not isinstance(block, dict):
            continue
        native = str(obj["uuid"]) if index == 0 else f"{obj['uuid']}#{index}"
        meta: dict[str, Any] = {"message_id": response_id}
        btype = block.get("type")
        if btype == "text":
            text = block.get("text") or ""
            if not text.strip():
                continue
            if error:
                messages.append(
                    MessageRecord(native, "meta", text, ts, "api_error", meta={"kind": "api_error"})
                )
                continue
            earlier = text_of_response.get(response_id)
            if earlier is not None:  # one API response split over several lines: one message
                earlier.text = f"{earlier.text}\n\n{text}"
                continue
            msg = MessageRecord(native, "assistant", text, ts, "assistant", meta=meta)
            text_of_response[response_id] = msg
            messages.append(msg)
        elif btype == "thinking" and (block.get("thinking") or "").strip():
            messages.append(MessageRecord(native, "thinking", block["thinking"], ts, "thinking", meta=meta))
        elif btype in ("tool_use", "server_tool_use"):
            name = str(block.get("name") or "tool")
            text = f"{name} {dumps(block.get('input') or {})}"
            meta = {**meta, "tool": name, "tool_use_id": block.get("id")}
            messages.append(MessageRecord(native, "tool_call", text, ts, btype, speaker=name, meta=meta))
        elif btype == "web_search_tool_result":
            messages.append(MessageRecord(native, "tool", dumps(block.get("content")), ts, btype, meta=meta))


def _user(obj: dict[str, Any], ts: datetime | None) -> Iterator[MessageRecord]:
    content = (obj.get("message") or {}).get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    uuid = str(obj["uuid"])
    texts: list[str] = []
    for index, block in enumerate(blocks):
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype == "tool_result":
            text = _tool_result_text(block.get("content"))
            meta = {
                "tool_use_id": block.get("tool_use_id"),
                **({"is_error": True} if block.get("is_error") else {}),
            }
            yield MessageRecord(
                uuid if index == 0 else f"{uuid}#{index}", "tool", text, ts, "tool_result", meta=meta
            )
        elif btype == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif btype == "image":
            texts.append("[image]")
        elif btype == "document":
            texts.append("[document]")
    text = "\n\n".join(t for t in texts if t.strip())
    if not text.strip():
        return
    role: Role = "user"
    raw = "user"
    kind = None
    if obj.get("isCompactSummary"):
        role, raw, kind = "system", "compact_summary", "compact_summary"
    elif obj.get("isMeta"):
        role, raw, kind = "meta", "meta", "meta"
    elif _COMMAND_TAGS.match(text):
        role, raw, kind = "meta", "command", "command"
    elif _INTERRUPT.match(text.strip()):
        role, raw, kind = "meta", "interrupt", "interrupt"
    yield MessageRecord(uuid, role, text, ts, raw, meta={"kind": kind} if kind else {})


def _tool_result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text") or ""))
            elif isinstance(part, dict) and part.get("type") == "image":
                parts.append("[image]")
        return "\n".join(parts)
    return "" if content is None else dumps(content)
