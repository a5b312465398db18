"""Claude Code session transcripts (docs/platforms.md §1): ``~/.claude/projects/<enc-cwd>/<sessionId>.jsonl``.

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
    SHAPE_ERRORS,
    Item,
    Problem,
    TitleHint,
    dumps,
    finish,
    parse_time,
    resume_jsonl,
    shape_problem,
)
from ghostmem.ingest.sources import CLAUDE_CODE_TYPES, Source
from ghostmem.limits import STORED_ID_BYTES, utf8_bytes
from ghostmem.records import TITLE_FROM_PLATFORM, TITLE_FROM_PROMPT, MessageRecord, Role

_MESSAGE_TYPES = frozenset({"user", "assistant", "system"})
# Tags of slash commands, shell mode and injected context: kept searchable, never the human's prompt.
_COMMAND_TAGS = re.compile(
    r"^\s*<(command-name|command-message|command-args|local-command-stdout|local-command-stderr|"
    r"local-command-caveat|bash-input|bash-stdout|bash-stderr|system-reminder|task-notification|"
    r"user-memory-input|ide_opened_file|ide_selection|user-prompt-submit-hook)>"
)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)
_COMMAND_NAME = re.compile(r"<command-name>(.*?)</command-name>", re.S)
# A file's lines are ordered by their parent chain, so they are held until the file ends — up to this many bytes:
# a longer file is stored in chunks, each appended after the one before (memory stays bounded whatever its size).
CHUNK_BYTES = 32 << 20
_INTERRUPT = re.compile(r"^\[Request interrupted by user[^\]]*\]$")


@dataclass(slots=True)
class _Conversation:
    conv_id: str
    parent: str | None
    agent: str | None
    lines: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    custom_title: str | None = None
    flushed_title: str | None = None  # the custom title when the last chunk was stored
    last_line: tuple[int, dict[str, Any]] | None = None  # the last line of the chunks stored so far
    cwd: str | None = None
    branch: str | None = None
    version: str | None = None


@dataclass(slots=True)
class _File:
    """What a transcript's name says: the session it belongs to, and the subagent it is (``agent-<id>.jsonl``)."""

    label: str
    session: str
    agent: str | None

    @classmethod
    def of(cls, source: Source) -> _File:
        name = source.path.name
        agent = name[len("agent-") : -len(".jsonl")] if name.startswith("agent-") else None
        session = source.path.stem if agent is None else source.path.parent.parent.name
        return cls(source.label, session, agent)


def parse(source: Source, state: dict[str, Any]) -> Iterator[Item]:
    if source.path.name.startswith("agent-acompact"):
        return  # the compaction agent: the summariser's prompt and answer, not a conversation
    chunk_start = int(state.get("offset", 0))
    append = chunk_start > 0
    file = _File.of(source)
    convs: dict[str, _Conversation] = {}
    with source.open() as fh:
        for line in resume_jsonl(fh, source.label, state):
            if isinstance(line, Problem):
                yield line
                continue
            try:
                item = _line(line.number, line.value, file, convs)
            except SHAPE_ERRORS as exc:
                item = shape_problem(source.label, line.number, exc)
            if item is not None:
                yield item
            if (
                line.end - chunk_start > CHUNK_BYTES
            ):  # a huge file: what is held so far is stored, then appended to
                yield from _flush(convs, source, append=append)
                append, chunk_start = True, line.end
    yield from _flush(convs, source, append=append)


def _flush(convs: dict[str, _Conversation], source: Source, *, append: bool) -> Iterator[Item]:
    """The conversations of the lines held, which are then let go (titles, cwd and branch are kept)."""
    for conv in convs.values():
        if not conv.lines and conv.last_line is not None and conv.custom_title != conv.flushed_title:
            conv.lines.append(
                conv.last_line
            )  # a rename after the last chunk: carried by a line already stored
        if conv.agent is None or not conv.agent.startswith("acompact"):
            yield from _conversation(conv, source, append=append)
        if conv.lines:
            conv.last_line = conv.lines[-1]
        conv.flushed_title = conv.custom_title
        conv.lines.clear()


def _line(number: int, obj: Any, file: _File, convs: dict[str, _Conversation]) -> Item | None:
    """Take in one line: a title hint or a problem to yield, or None (kept with its conversation, or not needed)."""
    kind = obj.get("type") if isinstance(obj, dict) else None
    if kind not in CLAUDE_CODE_TYPES:
        return Problem(file.label, number, f"unknown record type {kind!r}; skipped")
    if kind == "summary":
        summary, leaf = obj.get("summary"), obj.get("leafUuid")
        if leaf and isinstance(leaf, str | int) and isinstance(summary, str) and summary.strip():
            if (size := utf8_bytes(str(leaf))) > STORED_ID_BYTES:  # names no stored message
                return Problem(file.label, number, f"a summary names its message by an id of {size:,} bytes, longer"
                               f" than the {STORED_ID_BYTES:,} bytes ghostmem keeps of an id; skipped")  # fmt: skip
            return TitleHint(str(leaf), summary)
        return None
    if "uuid" not in obj and kind != "custom-title":
        return None  # snapshots, queue operations: no place in the thread
    conv = _conversation_of(obj, file, convs)
    if kind == "custom-title":
        if isinstance(obj.get("customTitle"), str) and obj["customTitle"].strip():
            conv.custom_title = obj["customTitle"]
        return None
    conv.lines.append((number, obj))
    for key, attr in (("cwd", "cwd"), ("gitBranch", "branch"), ("version", "version")):
        if isinstance(obj.get(key), str) and obj[key]:
            setattr(conv, attr, obj[key])
    return None


def _conversation_of(obj: dict[str, Any], file: _File, convs: dict[str, _Conversation]) -> _Conversation:
    """The conversation a line belongs to: its session, or the subagent (sidechain) of that session."""
    session = str(obj.get("sessionId") or file.session)
    agent = (obj.get("agentId") or file.agent) if (obj.get("isSidechain") or file.agent) else None
    if agent is None and obj.get("isSidechain"):
        agent = "sidechain"
    conv_id = f"{session}:agent-{agent}" if agent else session
    conv = convs.get(conv_id)
    if conv is None:
        conv = convs[conv_id] = _Conversation(
            conv_id, session if agent else None, str(agent) if agent else None
        )
    return conv


@dataclass(slots=True)
class _Thread:
    """The messages of a conversation as its lines are turned into them, and what titles it."""

    messages: list[MessageRecord] = field(default_factory=list)
    text_of_response: dict[str, MessageRecord] = field(
        default_factory=dict
    )  # message.id → its assistant text
    times: list[datetime] = field(default_factory=list)
    prompt: str | None = None  # the first human prompt
    opening_args: str | None = None  # a session that opens with `/cmd args` is titled by the args
    command_name: str | None = None

    def add_user(self, msg: MessageRecord) -> None:
        self.messages.append(msg)
        if self.prompt is not None:
            return
        if msg.role == "user":
            self.prompt = msg.text
        elif msg.meta.get("kind") == "command":
            args = _COMMAND_ARGS.search(msg.text)
            name = _COMMAND_NAME.search(msg.text)
            if self.opening_args is None and args and args.group(1).strip():
                self.opening_args = args.group(1).strip()
            if self.command_name is None and name:
                self.command_name = name.group(1).strip()

    def title(self, custom_title: str | None) -> tuple[str | None, int]:
        if custom_title:
            return custom_title, TITLE_FROM_PLATFORM
        if self.opening_args is not None:
            return self.opening_args, TITLE_FROM_PROMPT
        return self.prompt or self.command_name, TITLE_FROM_PROMPT


def _conversation(conv: _Conversation, source: Source, *, append: bool) -> Iterator[Item]:
    ordered = _chain_order(conv.lines)
    thread = _Thread()
    for number, obj in ordered:
        try:
            _message_line(obj, thread)
        except SHAPE_ERRORS as exc:
            yield shape_problem(source.label, number, exc)
    title, rank = thread.title(conv.custom_title)
    parsed = finish(
        conv_id=conv.conv_id,
        platform="claude_code",
        messages=thread.messages,
        source=source.label,
        title=title,
        title_rank=rank,
        project=conv.cwd,
        started_at=min(thread.times) if thread.times else None,
        ended_at=max(thread.times) if thread.times else None,
        parent_conv_id=conv.parent,
        meta={
            **({"git_branch": conv.branch} if conv.branch else {}),
            **({"cli_version": conv.version} if conv.version else {}),
            **({"agent_id": conv.agent} if conv.agent else {}),
        },
        append=append,
        line_ids=[str(obj["uuid"]) for _, obj in ordered if obj.get("uuid")],
    )
    if parsed is not None:
        yield parsed


def _message_line(obj: dict[str, Any], thread: _Thread) -> None:
    """Turn one user, assistant or system line into its messages."""
    ts = parse_time(obj.get("timestamp"))
    kind = obj["type"]
    if kind in ("user", "assistant") and ts:
        thread.times.append(ts)
    if kind == "assistant":
        _assistant(obj, ts, thread.messages, thread.text_of_response)
    elif kind == "user":
        for msg in _user(obj, ts):
            thread.add_user(msg)
    else:
        thread.messages += _system(obj, ts)


def _system(obj: dict[str, Any], ts: datetime | None) -> list[MessageRecord]:
    uuid = str(obj["uuid"])
    if obj.get("subtype") == "compact_boundary":
        extra = obj.get("compactMetadata")
        return [MessageRecord(native_id=uuid, role="system", text="Conversation compacted", ts=ts,
                              raw_role="compact_boundary",
                              meta={"kind": "compact_boundary", **(extra if isinstance(extra, dict) else {})})]  # fmt: skip
    if obj.get("subtype") == "local_command" and isinstance(obj.get("content"), str):
        return [MessageRecord(native_id=uuid, role="meta", text=obj["content"], ts=ts, raw_role="local_command",
                              meta={"kind": "command"})]  # fmt: skip
    return []


def _chain_order(lines: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """Message lines (deduplicated by uuid, first wins) by (depth in the parent chain, timestamp, file order)."""
    by_uuid: dict[str, tuple[int, dict[str, Any]]] = {}
    for number, obj in lines:
        by_uuid.setdefault(str(obj.get("uuid")), (number, obj))
    depth: dict[str, int] = {}

    def parent_of(obj: dict[str, Any]) -> str | None:
        parent = obj.get("parentUuid") or obj.get("logicalParentUuid")
        return parent if isinstance(parent, str) else None

    def depth_of(uuid: str) -> int:
        path: list[str] = []
        on_path: set[str] = set()
        current: str | None = uuid
        while current is not None and current in by_uuid and current not in depth and current not in on_path:
            path.append(current)
            on_path.add(current)
            current = parent_of(by_uuid[current][1])
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
    return [(k[2], k[3]) for k in keyed]


def _blocks(content: Any) -> list[Any]:
    """A message's content as a block list (a plain string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _assistant(
    obj: dict[str, Any],
    ts: datetime | None,
    messages: list[MessageRecord],
    text_of_response: dict[str, MessageRecord],
) -> None:
    message = obj.get("message") or {}
    response_id = str(message.get("id") or obj["uuid"])
    error = bool(obj.get("isApiErrorMessage"))
    for index, block in enumerate(_blocks(message.get("content"))):
        if not isinstance(block, dict):
            continue
        native = str(obj["uuid"]) if index == 0 else f"{obj['uuid']}#{index}"
        meta: dict[str, Any] = {"message_id": response_id}
        btype = block.get("type")
        if btype == "text":
            text = block.get("text") or ""
            if not isinstance(text, str) or not text.strip():
                continue
            if error:
                messages.append(MessageRecord(native_id=native, role="meta", text=text, ts=ts, raw_role="api_error",
                                              meta={"kind": "api_error"}))  # fmt: skip
                continue
            earlier = text_of_response.get(response_id)
            if earlier is not None:  # one API response split over several lines: one message
                earlier.text = f"{earlier.text}\n\n{text}"
                continue
            msg = MessageRecord(
                native_id=native, role="assistant", text=text, ts=ts, raw_role="assistant", meta=meta
            )
            text_of_response[response_id] = msg
            messages.append(msg)
        elif btype == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"].strip():
            messages.append(MessageRecord(native_id=native, role="thinking", text=block["thinking"], ts=ts,
                                          raw_role="thinking", meta=meta))  # fmt: skip
        elif btype in ("tool_use", "server_tool_use"):
            name = str(block.get("name") or "tool")
            messages.append(MessageRecord(native_id=native, role="tool_call",
                                          text=f"{name} {dumps(block.get('input') or {})}", ts=ts, raw_role=btype,
                                          speaker=name, meta={**meta, "tool": name, "tool_use_id": block.get("id")}))  # fmt: skip
        elif btype == "web_search_tool_result":
            messages.append(MessageRecord(native_id=native, role="tool", text=dumps(block.get("content")), ts=ts,
                                          raw_role=btype, meta=meta))  # fmt: skip


def _user(obj: dict[str, Any], ts: datetime | None) -> Iterator[MessageRecord]:
    uuid = str(obj["uuid"])
    texts: list[str] = []
    for index, block in enumerate(_blocks((obj.get("message") or {}).get("content"))):
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype == "tool_result":
            yield MessageRecord(
                native_id=uuid if index == 0 else f"{uuid}#{index}",
                role="tool",
                text=_tool_result_text(block.get("content")),
                ts=ts,
                raw_role="tool_result",
                meta={
                    "tool_use_id": block.get("tool_use_id"),
                    **({"is_error": True} if block.get("is_error") else {}),
                },
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
    yield MessageRecord(
        native_id=uuid, role=role, text=text, ts=ts, raw_role=raw, meta={"kind": kind} if kind else {}
    )


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
