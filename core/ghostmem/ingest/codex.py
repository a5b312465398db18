"""OpenAI Codex CLI rollouts (FORMATS.md §4): ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<uuid>.jsonl``.

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
    Item,
    Parsed,
    Problem,
    dumps,
    parse_time,
    prompt_title,
    resume_jsonl,
    text_of,
)
from ghostmem.ingest.sources import Source
from ghostmem.records import ConversationRecord, MessageRecord
from ghostmem.store import TITLE_FROM_PROMPT

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
    offset = int(state.get("offset", 0))
    messages: list[MessageRecord] = []
    pending_user: MessageRecord | None = None  # the response_item copy of the next user_message event
    times: list[datetime] = []
    with source.open() as fh:
        for line in resume_jsonl(fh, source.label, state):
            if isinstance(line, Problem):
                yield line
                continue
            obj = line.value
            if not isinstance(obj, dict):
                yield Problem(source.label, line.number, "not a JSON object; skipped")
                continue
            kind, payload = obj.get("type"), obj.get("payload")
            ts = parse_time(obj.get("timestamp"))
            if kind not in _ENVELOPES:  # legacy: bare meta line, bare response items, state records
                if "record_type" in obj:
                    continue
                if kind is None and "id" in obj and "conv_id" not in state:
                    kind, payload = "session_meta", obj
                elif kind in _RESPONSE_ITEMS:
                    kind, payload = "response_item", obj
                else:
                    yield Problem(source.label, line.number, f"unknown record type {kind!r}; skipped")
                    continue
            if not isinstance(payload, dict):
                continue
            if ts:
                times.append(ts)
            native = str(line.number)
            if kind == "session_meta":
                if "conv_id" not in state and payload.get("id"):
                    state["conv_id"] = str(payload["id"])
                    state["cwd"] = payload.get("cwd")
                    state["started"] = payload.get("timestamp") or obj.get("timestamp")
                    git = payload.get("git") or {}
                    state["git"] = {k: git[k] for k in ("branch", "repository_url") if git.get(k)}
                    state["originator"] = payload.get("originator")
            elif kind == "turn_context":
                state["cwd"] = payload.get("cwd") or state.get("cwd")
            elif kind == "compacted":
                text = payload.get("message")
                if isinstance(text, str) and text.strip():
                    messages.append(
                        MessageRecord(native, "system", text, ts, "compacted", meta={"kind": "compacted"})
                    )
            elif kind == "event_msg":
                if payload.get("type") == "user_message" and isinstance(payload.get("message"), str):
                    state["events"] = True
                    if pending_user is not None:  # the same turn, recorded twice
                        messages.remove(pending_user)
                        pending_user = None
                    messages.append(MessageRecord(native, "user", payload["message"], ts, "user_message"))
            else:
                msg = _response_item(payload, native, ts)
                if msg is None:
                    continue
                if msg.raw_role == "user":
                    pending_user = msg
                messages.append(msg)
    conv_id = state.get("conv_id")
    if conv_id is None:
        if messages:
            yield Problem(source.label, 0, "no session_meta line: cannot tell which session this is")
        return
    if not messages and offset > 0:
        return
    for msg in messages:
        # With user_message events, every response_item "user" message left is injected context; legacy files
        # have no events, so only the recognisable injections are context there.
        if msg.raw_role == "user" and (state.get("events") or _INJECTED.match(msg.text)):
            msg.role, msg.meta = "meta", {"kind": "injected_context"}
    yield Parsed(
        ConversationRecord(
            conv_id=str(conv_id),
            platform="codex",
            messages=messages,
            title=prompt_title(messages),
            project=state.get("cwd"),
            started_at=parse_time(state.get("started")) or (min(times) if times else None),
            ended_at=max(times) if times else None,
            source=source.label,
            meta={"title_rank": TITLE_FROM_PROMPT, **({"git": state["git"]} if state.get("git") else {})},
        ),
        append=offset > 0,
    )


def _response_item(payload: dict[str, Any], native: str, ts: datetime | None) -> MessageRecord | None:
    ptype = payload.get("type")
    if ptype == "message":
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
                native, "assistant", text, ts, "assistant", meta={"phase": payload.get("phase")}
            )
        if role == "user":
            return MessageRecord(native, "user", text, ts, "user")
        return MessageRecord(native, "system", text, ts, str(role), meta={"kind": "instructions"})
    if ptype == "reasoning":
        text = "\n".join(
            str(s.get("text") or "") for s in payload.get("summary") or [] if isinstance(s, dict)
        ) or text_of(payload.get("content"))
        return MessageRecord(native, "thinking", text, ts, "reasoning") if text.strip() else None
    if ptype in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
        name = str(payload.get("name") or ptype)
        args = payload.get("arguments") or payload.get("input") or payload.get("action") or {}
        text = f"{name} {args if isinstance(args, str) else dumps(args)}"
        return MessageRecord(
            native, "tool_call", text, ts, ptype, speaker=name, meta={"call_id": payload.get("call_id")}
        )
    if ptype in ("function_call_output", "custom_tool_call_output"):
        output = payload.get("output")
        text = output if isinstance(output, str) else text_of(output) or dumps(output)
        return MessageRecord(native, "tool", text, ts, ptype, meta={"call_id": payload.get("call_id")})
    return None
