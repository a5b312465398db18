"""OpenAI Codex CLI rollouts (docs/platforms.md §4): ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<uuid>.jsonl``.

Both envelope generations are read: the current ``{"timestamp", "type", "payload"}`` lines and the legacy bare
response items after a bare ``{id, timestamp, instructions}`` first line. Every turn is recorded twice; one copy is
kept: the human's words come from ``event_msg user_message`` (the ``response_item`` copy just before it is dropped,
and the other ``response_item`` user/developer messages are injected context, kept as ``meta``/``system``), answers
and reasoning from ``response_item``. The first ``session_meta`` owns the identity (a resume repeats it).
"""

from __future__ import annotations

import re
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
    resume_jsonl,
    shape_problem,
    text_of,
)
from ghostmem.ingest.sources import Source
from ghostmem.records import TITLE_FROM_PROMPT, MessageRecord

_RESPONSE_ITEMS = frozenset(
    {
        "message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
        "custom_tool_call_output", "local_shell_call", "web_search_call",
    }
)  # fmt: skip
_ENVELOPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
# Context Codex injects as "user" messages (legacy files have no user_message events to tell them apart).
_INJECTED = re.compile(
    r"^\s*(<environment_context>|<user_instructions>|<permissions|<INSTRUCTIONS>|# AGENTS\.md|<user_shell_command>)"
)


def parse(source: Source, state: dict[str, Any]) -> Iterator[Item]:
    rollout = _Rollout(state)
    with source.open() as fh:
        for line in resume_jsonl(fh, source.label, state):
            if isinstance(line, Problem):
                yield line
                continue
            try:
                problem = rollout.read(line.value, str(line.number))
            except SHAPE_ERRORS as exc:
                problem = shape_problem(source.label, line.number, exc).reason
            if problem is not None:
                yield Problem(source.label, line.number, problem)
    conv_id = state.get("conv_id")
    if conv_id is None:
        if rollout.messages:
            yield Problem(source.label, 0, "no session_meta line: cannot tell which session this is")
        return
    rollout.mark_injected()
    parsed = finish(
        conv_id=str(conv_id),
        platform="codex",
        messages=rollout.messages,
        source=source.label,
        title_rank=TITLE_FROM_PROMPT,
        project=state["cwd"] if isinstance(state.get("cwd"), str) else None,
        started_at=parse_time(state.get("started")),
        ended_at=max(rollout.times) if rollout.times else None,
        meta={"git": state["git"]} if state.get("git") else {},
        append=rollout.first_offset > 0,
    )
    if parsed is not None:
        yield parsed


class _Rollout:
    """What the lines of one rollout (or of its new lines) add up to; the session identity lives in ``state``."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state
        self.first_offset = int(state.get("offset", 0))
        self.messages: list[MessageRecord] = []
        self.times: list[datetime] = []
        self.pending_user: MessageRecord | None = (
            None  # the response_item copy of the next user_message event
        )

    def read(self, obj: Any, native: str) -> str | None:
        """Take in one line; returns the problem to report when it is not one Codex writes."""
        if not isinstance(obj, dict):
            return "not a JSON object; skipped"
        kind, payload = obj.get("type"), obj.get("payload")
        if kind not in _ENVELOPES:  # legacy: bare meta line, bare response items, state records
            if "record_type" in obj:
                return None
            if kind is None and "id" in obj and "conv_id" not in self.state:
                kind, payload = "session_meta", obj
            elif kind in _RESPONSE_ITEMS:
                kind, payload = "response_item", obj
            else:
                return f"unknown record type {kind!r}; skipped"
        if not isinstance(payload, dict):
            return None
        ts = parse_time(obj.get("timestamp"))
        if ts:
            self.times.append(ts)
        if kind == "session_meta":
            self.session_meta(payload, obj.get("timestamp"))
        elif kind == "turn_context":
            self.state["cwd"] = payload.get("cwd") or self.state.get("cwd")
        elif kind == "compacted":
            self.compacted(payload, native, ts)
        elif kind == "event_msg":
            self.event(payload, native, ts)
        else:
            self.response(payload, native, ts)
        return None

    def session_meta(self, payload: dict[str, Any], line_ts: Any) -> None:
        """The first ``session_meta`` owns the identity (a resumed session repeats it)."""
        if "conv_id" in self.state or not payload.get("id"):
            return
        git: dict[str, Any] = payload["git"] if isinstance(payload.get("git"), dict) else {}
        self.state.update(
            conv_id=str(payload["id"]),
            cwd=payload.get("cwd"),
            started=payload.get("timestamp") or line_ts,
            git={k: git[k] for k in ("branch", "repository_url") if git.get(k)},
            originator=payload.get("originator"),
        )

    def compacted(self, payload: dict[str, Any], native: str, ts: datetime | None) -> None:
        text = payload.get("message")
        if isinstance(text, str) and text.strip():
            self.messages.append(MessageRecord(native_id=native, role="system", text=text, ts=ts,
                                               raw_role="compacted", meta={"kind": "compacted"}))  # fmt: skip

    def event(self, payload: dict[str, Any], native: str, ts: datetime | None) -> None:
        if payload.get("type") != "user_message" or not isinstance(payload.get("message"), str):
            return
        self.state["events"] = True
        if self.pending_user is not None:  # the same turn, recorded twice
            self.messages.remove(self.pending_user)
            self.pending_user = None
        self.messages.append(MessageRecord(native_id=native, role="user", text=payload["message"], ts=ts,
                                           raw_role="user_message"))  # fmt: skip

    def response(self, payload: dict[str, Any], native: str, ts: datetime | None) -> None:
        msg = _response_item(payload, native, ts)
        if msg is not None:
            if msg.raw_role == "user":
                self.pending_user = msg
            self.messages.append(msg)

    def mark_injected(self) -> None:
        """With user_message events, every response_item "user" message left is injected context; legacy files
        have no events, so only the recognisable injections are context there."""
        for msg in self.messages:
            if msg.raw_role == "user" and (self.state.get("events") or _INJECTED.match(msg.text)):
                msg.role, msg.meta = "meta", {"kind": "injected_context"}


def _response_item(payload: dict[str, Any], native: str, ts: datetime | None) -> MessageRecord | None:
    ptype = payload.get("type")
    if ptype == "message":
        return _message_item(payload, native, ts)
    if ptype == "reasoning":
        text = "\n".join(
            str(s.get("text") or "") for s in payload.get("summary") or [] if isinstance(s, dict)
        ) or text_of(payload.get("content"))
        return (
            MessageRecord(native_id=native, role="thinking", text=text, ts=ts, raw_role="reasoning")
            if text.strip()
            else None
        )
    if ptype in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
        name = str(payload.get("name") or ptype)
        args = payload.get("arguments") or payload.get("input") or payload.get("action") or {}
        text = f"{name} {args if isinstance(args, str) else dumps(args)}"
        return MessageRecord(
            native_id=native,
            role="tool_call",
            text=text,
            ts=ts,
            raw_role=ptype,
            speaker=name,
            meta={"call_id": payload.get("call_id")},
        )
    if ptype in ("function_call_output", "custom_tool_call_output"):
        output = payload.get("output")
        text = output if isinstance(output, str) else text_of(output) or dumps(output)
        return MessageRecord(
            native_id=native,
            role="tool",
            text=text,
            ts=ts,
            raw_role=ptype,
            meta={"call_id": payload.get("call_id")},
        )
    return None


def _message_item(payload: dict[str, Any], native: str, ts: datetime | None) -> MessageRecord | None:
    role = payload.get("role")
    text = "\n".join(
        str(c.get("text") or "")
        for c in payload.get("content") or []
        if isinstance(c, dict) and c.get("type") in ("input_text", "output_text", "text")
    )
    if not text.strip():
        return None
    if role == "assistant":
        return MessageRecord(
            native_id=native,
            role="assistant",
            text=text,
            ts=ts,
            raw_role="assistant",
            meta={"phase": payload.get("phase")},
        )
    if role == "user":
        return MessageRecord(native_id=native, role="user", text=text, ts=ts, raw_role="user")
    return MessageRecord(
        native_id=native, role="system", text=text, ts=ts, raw_role=str(role), meta={"kind": "instructions"}
    )
