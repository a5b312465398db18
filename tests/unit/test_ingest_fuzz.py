"""Hypothesis fuzzes every format's parser: valid records with random parts replaced by any JSON, or by bytes.

Whatever a record turns into, no exception escapes a parser, what it yields is well typed (and survives the write
path's scrub pass, so it reaches Postgres), and a valid record next to the broken one is never lost.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path
from typing import Any

from ghostmem.ingest.common import Parsed, Problem, TitleHint
from ghostmem.records import CONVERSATIONAL_ROLES, ConversationRecord
from ghostmem.store import _scrubbed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.transcripts import cc, node, parse_path

KEPT = "kept-7f3c9a"  # the valid record's text: no mutation produces it
ROLES = {"user", "assistant", "system", "tool", "tool_call", "thinking", "meta"}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["", "user", "assistant", "\x00", "\ud800", "ghostmem:ignore", "1e309", "2025-13-45"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += paths(child, (*prefix, index))
    return out


def mutate(value: Any, data: st.DataObject) -> Any:
    """``value`` with one to three of its parts (the whole included) replaced by any JSON value."""
    value = copy.deepcopy(value)
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(paths(value)))
        new = data.draw(json_values)
        if not where:
            value = new
            continue
        parent = value
        try:
            for step in where[:-1]:
                parent = parent[step]
            parent[where[-1]] = new
        except (KeyError, IndexError, TypeError):
            continue  # an earlier replacement removed this path
    return value


def check(items: list[Any], kept_conv: str) -> None:
    for item in items:
        assert isinstance(item, Parsed | Problem | TitleHint), item
        if isinstance(item, Parsed):
            well_typed(item.record)
    kept = [i.record for i in items if isinstance(i, Parsed) and i.record.conv_id == kept_conv]
    assert kept, f"the valid conversation {kept_conv} was lost: {items}"
    assert any(m.text == KEPT for rec in kept for m in rec.messages)


def well_typed(rec: ConversationRecord) -> None:
    assert isinstance(rec.conv_id, str) and rec.messages
    for field in (rec.title, rec.project, rec.parent_conv_id):
        assert field is None or isinstance(field, str)
    for m in rec.messages:
        assert isinstance(m.native_id, str) and isinstance(m.text, str) and m.role in ROLES
        assert m.speaker is None or isinstance(m.speaker, str)
        assert m.raw_role is None or isinstance(m.raw_role, str)
    scrubbed = _scrubbed(rec)  # what reaches Postgres: encodable text, JSON meta
    for m in scrubbed.messages:
        m.text.encode("utf-8")
        json.dumps(m.meta, allow_nan=False)
    json.dumps(scrubbed.meta, allow_nan=False)
    assert any(m.role in CONVERSATIONAL_ROLES or m.role for m in rec.messages)


def write_lines(path: Path, lines: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


fuzz = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@fuzz
@given(data=st.data())
def test_claude_code_lines(tmp_path_factory: Any, data: st.DataObject) -> None:
    base = [
        cc("user", "u1", None, "first"),
        cc("assistant", "a1", "u1", [{"type": "text", "text": "answer"}, {"type": "tool_use", "name": "Bash",
                                                                            "input": {"command": "ls"}}]),
        {"type": "summary", "summary": "a title", "leafUuid": "a1"},
        {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": "a1", "sessionId": "s1",
         "compactMetadata": {"trigger": "auto"}},
    ]  # fmt: skip
    broken = mutate(data.draw(st.sampled_from(base)), data)
    kept = cc("user", "valid-uuid-1", None, KEPT, sessionId="kept")
    path = write_lines(tmp_path_factory.mktemp("cc") / "s1.jsonl", [broken, kept])
    check(parse_path(path), "kept")


@fuzz
@given(data=st.data())
def test_codex_lines(tmp_path_factory: Any, data: st.DataObject) -> None:
    meta = {"type": "session_meta", "payload": {"id": "cx", "cwd": "/repo", "git": {"branch": "main"}}}
    base = [
        {"type": "response_item", "payload": {"type": "message", "role": "assistant",
                                              "content": [{"type": "output_text", "text": "done"}]}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": "{}"}},
        {"type": "event_msg", "payload": {"type": "user_message", "message": "hi"}},
        {"type": "turn_context", "payload": {"cwd": "/elsewhere"}},
        {"type": "compacted", "payload": {"message": "summary"}},
    ]  # fmt: skip
    broken = mutate(data.draw(st.sampled_from(base)), data)
    kept = {"type": "event_msg", "payload": {"type": "user_message", "message": KEPT}}
    path = write_lines(tmp_path_factory.mktemp("cx") / "rollout-1.jsonl", [meta, broken, kept])
    check(parse_path(path), "cx")


@fuzz
@given(data=st.data(), as_lines=st.booleans())
def test_generic_records(tmp_path_factory: Any, data: st.DataObject, as_lines: bool) -> None:
    base = {"conv_id": "c1", "title": "t", "project": "p", "started_at": "2025-01-01T00:00:00Z", "meta": {"k": 1},
            "messages": [{"id": "m1", "role": "user", "text": "hi", "ts": 1740820380, "speaker": "Ann",
                          "meta": {"x": [1]}}]}  # fmt: skip
    kept = {"conv_id": "kept", "messages": [{"role": "user", "text": KEPT}]}
    folder = tmp_path_factory.mktemp("gen")
    convs = [mutate(base, data), kept]
    if as_lines:
        path = write_lines(folder / "g.jsonl", convs)
    else:
        path = folder / "g.json"
        path.write_text(json.dumps(convs))
    check(parse_path(path), "kept")


@fuzz
@given(data=st.data())
def test_chatgpt_conversations(tmp_path_factory: Any, data: st.DataObject) -> None:
    mapping = {"r": node("r", None, ["u"], None), "u": node("u", "r", ["a"], "user", "q"),
               "a": node("a", "u", [], "assistant", "a 【1†x】")}  # fmt: skip
    base = {"id": "c1", "title": "t", "create_time": 1.7e9, "mapping": mapping, "current_node": "a",
            "gizmo_id": "g-p-1", "gizmo_type": "snorlax"}  # fmt: skip
    kept = {
        "id": "kept",
        "title": "k",
        "mapping": {"k": node("k", None, [], "user", KEPT)},
        "current_node": "k",
    }
    path = tmp_path_factory.mktemp("cg") / "conversations.json"
    path.write_text(json.dumps([base, mutate(base, data), kept]))
    check(parse_path(path), "kept")


@fuzz
@given(data=st.data())
def test_claude_ai_conversations(tmp_path_factory: Any, data: st.DataObject) -> None:
    base = {"uuid": "c1", "name": "n", "project_uuid": "p", "chat_messages": [
        {"uuid": "m1", "sender": "human", "text": "q", "created_at": "2025-01-01T00:00:00Z",
         "attachments": [{"file_name": "f", "extracted_content": "e"}]},
        {"uuid": "m2", "sender": "assistant", "parent_message_uuid": "m1", "created_at": "2025-01-01T00:01:00Z",
         "content": [{"type": "text", "text": "a"}, {"type": "tool_use", "name": "artifacts", "input": {"id": "x"}}]},
    ]}  # fmt: skip
    kept = {"uuid": "kept", "chat_messages": [{"uuid": "k", "sender": "human", "text": KEPT}]}
    path = tmp_path_factory.mktemp("ca") / "conversations.json"
    path.write_text(json.dumps([base, mutate(base, data), kept]))
    check(parse_path(path), "kept")


@fuzz
@given(data=st.data())
def test_gemini_sessions(tmp_path_factory: Any, data: st.DataObject) -> None:
    broken = mutate({"id": "2", "type": "gemini", "content": "a", "thoughts": [{"subject": "s"}],
                     "toolCalls": [{"name": "read", "args": {"p": 1}, "result": [{"functionResponse": {
                         "response": {"output": "o"}}}]}]}, data)  # fmt: skip
    doc = {"sessionId": "kept", "summary": "s", "startTime": "2025-01-01T00:00:00Z",
           "messages": [broken, {"id": "k", "type": "user", "content": KEPT}]}  # fmt: skip
    path = tmp_path_factory.mktemp("gm") / "chats" / "session-1.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))
    check(parse_path(path), "kept")


@fuzz
@given(data=st.data())
def test_cursor_composers(tmp_path_factory: Any, data: st.DataObject) -> None:
    composer = {"composerId": "c1", "name": "n", "createdAt": 1735689600000,
                "fullConversationHeadersOnly": [{"bubbleId": "b1", "type": 1}]}  # fmt: skip
    bubble = {"bubbleId": "b1", "type": 1, "text": "q", "thinking": {"text": "t"}}
    folder = tmp_path_factory.mktemp("cu") / "User" / "globalStorage"
    folder.mkdir(parents=True)
    with sqlite3.connect(folder / "state.vscdb") as db:
        db.execute("CREATE TABLE cursorDiskKV (key TEXT PRIMARY KEY, value BLOB)")
        rows = {
            "composerData:c1": mutate(composer, data),
            "bubbleId:c1:b1": mutate(bubble, data),
            "composerData:kept": {"composerId": "kept", "conversation": [{"type": 1, "text": KEPT}]},
        }
        db.executemany(
            "INSERT INTO cursorDiskKV VALUES (?, ?)", [(k, json.dumps(v)) for k, v in rows.items()]
        )
    db.close()
    check(parse_path(folder / "state.vscdb"), "kept")


@fuzz
@given(raw=st.binary(max_size=200), as_lines=st.booleans())
def test_any_bytes_before_a_valid_record(tmp_path_factory: Any, raw: bytes, as_lines: bool) -> None:
    kept = json.dumps({"conv_id": "kept", "messages": [{"role": "user", "text": KEPT}]}).encode()
    folder = tmp_path_factory.mktemp("raw")
    if as_lines:
        path = folder / "g.jsonl"
        path.write_bytes(kept + b"\n" + raw.replace(b"\n", b" ") + b"\n" + kept + b"\n")
        check(parse_path(path), "kept")
    else:  # in a document, junk may end it: every conversation before the junk is read
        path = folder / "g.json"
        path.write_bytes(b"[" + kept + b"," + raw + b"]")
        items = parse_path(path)
        assert all(isinstance(i, Parsed | Problem) for i in items)
        assert any(isinstance(i, Parsed) and i.record.conv_id == "kept" for i in items)
