"""Hostile and broken files, written here: nothing stops the parsers, exhausts memory or loses a good record.

Each test builds the attack the way it would arrive (a deeply nested line, a wrongly shaped record, a FIFO named like
a transcript, a zip bomb, bytes that are not UTF-8) and checks that it is one problem at its file:line while every
good record around it is read.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from typing import Any

import pytest
from ghostmem.ingest import reading
from ghostmem.ingest.common import Parsed, Problem
from ghostmem.ingest.sources import iter_sources
from support.transcripts import cc, jsonl, node, parse_path, records

DEEP = 100_000


def problems(items: list[Any]) -> list[str]:
    return [f"{p.line}: {p.reason}" for p in items if isinstance(p, Problem)]


def texts(items: list[Any], conv_id: str) -> list[str]:
    (rec,) = [i.record for i in items if isinstance(i, Parsed) and i.record.conv_id == conv_id]
    return [m.text for m in rec.messages]


def test_a_deeply_nested_line_is_one_problem_and_the_next_lines_are_read(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "s1.jsonl", [cc("user", "u1", None, "before")])
    with path.open("ab") as fh:
        fh.write(b'{"type": "user", "uuid": "x", "message": ' + b"[" * DEEP + b"]" * DEEP + b"}\n")
        fh.write(json.dumps(cc("user", "u2", "u1", "after")).encode() + b"\n")
    items = parse_path(path)
    assert problems(items) == ["2: nested more than 100 levels deep; skipped"]
    assert texts(items, "s1") == ["before", "after"]


def test_nesting_just_under_the_interpreter_limit_is_refused_too(tmp_path: Path) -> None:
    # 900 levels decode (json's own limit is ~1000) but would make the parsers' recursion run away
    path = tmp_path / "g.jsonl"
    deep = {"conv_id": "deep", "messages": [{"role": "user", "text": "x", "meta": {}}]}
    inner: Any = "bottom"
    for _ in range(900):
        inner = [inner]
    deep["messages"][0]["meta"] = {"nest": inner}  # type: ignore[index]
    good = {"conv_id": "good", "messages": [{"role": "user", "text": "kept"}]}
    path.write_text(json.dumps(deep) + "\n" + json.dumps(good) + "\n")
    items = parse_path(path)
    assert problems(items) == ["1: nested more than 100 levels deep; skipped"]
    assert texts(items, "good") == ["kept"]


def test_a_deep_element_of_an_export_array_is_skipped_and_the_others_read(tmp_path: Path) -> None:
    good = {"conv_id": "c2", "messages": [{"role": "user", "text": "second"}]}
    body = (
        b'[{"conv_id": "c1", "messages": [{"role": "user", "text": "first"}]},\n'
        + b'{"conv_id": "deep", "messages": '
        + b"[" * DEEP
        + b"]" * DEEP
        + b"},\n"
        + json.dumps(good).encode()
        + b"]"
    )
    path = tmp_path / "export.json"
    path.write_bytes(body)
    items = parse_path(path)
    assert problems(items) == ["2: conversation #1: nested more than 100 levels deep; skipped"]
    assert texts(items, "c1") == ["first"] and texts(items, "c2") == ["second"]


def test_wrongly_shaped_lines_are_one_problem_each_with_their_line(tmp_path: Path) -> None:
    cc_path = jsonl(tmp_path / "cc" / "s1.jsonl", [
        cc("user", "u1", None, "first prompt"),
        {**cc("assistant", "a1", "u1", "x"), "message": 5},  # a number where the message object belongs
        {**cc("user", "u2", "a1", "y"), "message": {"content": {"not": "a list"}}},
        cc("user", "u3", "u2", "still read"),
    ])  # fmt: skip
    items = parse_path(cc_path)
    assert [p.split(":")[0] for p in problems(items)] == ["2"]
    assert "unexpected shape" in problems(items)[0]
    assert texts(items, "s1") == ["first prompt", "still read"]

    codex_path = jsonl(tmp_path / "cx" / "rollout-1.jsonl", [
        {"type": "session_meta", "payload": {"id": "cx1", "cwd": {"a": 1}, "git": "main"}},
        {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": 7}},
        {"type": "event_msg", "payload": {"type": "user_message", "message": "after the bad line"}},
        {"type": "response_item", "payload": {"type": "reasoning", "summary": "not a list", "content": None}},
    ])  # fmt: skip
    items = parse_path(codex_path)
    assert [p.split(":")[0] for p in problems(items)] == ["2"]
    (rec,) = [i.record for i in items if isinstance(i, Parsed)]
    assert [m.text for m in rec.messages] == ["after the bad line"] and rec.project is None


def test_wrongly_shaped_exports_are_reported_and_never_stored_empty(tmp_path: Path) -> None:
    good = {
        "id": "g",
        "title": "good",
        "mapping": {"r": node("r", None, [], "user", "hello")},
        "current_node": "r",
    }
    bad = [
        {"id": "b1", "mapping": {"r": 5, "s": "x"}},  # nodes that are not objects
        {
            "id": "b2",
            "mapping": {"r": {"id": "r", "message": {"content": {"content_type": "text", "parts": 9}}}},
        },
        {"id": "b3", "mapping": {}},  # truly empty: not stored, nothing to report
        {"id": {"nested": "id"}, "mapping": {}},
    ]
    path = tmp_path / "chatgpt" / "conversations.json"
    path.parent.mkdir()
    path.write_text(json.dumps([*bad, good]))
    items = parse_path(path)
    assert {i.record.conv_id for i in items if isinstance(i, Parsed)} == {"g"}
    assert problems(items) == [
        "1: conversation #0: 2 nodes of its mapping are not objects; skipped",
        "1: conversation #1: unexpected shape (TypeError: 'int' object is not iterable); skipped",
        "1: conversation #3: no id; skipped",
    ]

    claude = tmp_path / "claude" / "conversations.json"
    claude.parent.mkdir()
    claude.write_text(json.dumps([
        {"uuid": "a", "chat_messages": "not a list"},
        {"uuid": "b", "chat_messages": [1, 2, {"uuid": "m", "sender": "human", "text": "real"}]},
        {"uuid": "c", "chat_messages": [5]},
        {"uuid": "d", "chat_messages": []},
    ]))  # fmt: skip
    items = parse_path(claude)
    assert {i.record.conv_id for i in items if isinstance(i, Parsed)} == {"b"}
    assert problems(items) == [
        "1: conversation #0: chat_messages is not a list; skipped",
        "1: conversation #1: 2 of its messages are not objects; skipped",
        "1: conversation #2: 1 of its messages are not objects; skipped",
    ]


def test_bytes_that_are_not_utf8_are_reported_with_their_line(tmp_path: Path) -> None:
    path = tmp_path / "gen.json"
    path.write_bytes(b'[\n{"conv_id": "c", "messages": [{"role": "user", "text": "caf\xe9"}]}\n]')
    items = parse_path(path)
    assert problems(items) == [
        "2: conversation #0: bytes that are not UTF-8 (the first at byte 59 of the record) replaced by U+FFFD"
    ]
    assert texts(items, "c") == ["caf\ufffd"]


def test_records_over_the_size_limit_are_skipped_without_being_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "MAX_RECORD_BYTES", 1000)
    big = {"conv_id": "big", "messages": [{"role": "user", "text": "x" * 5000}]}
    small = {"conv_id": "small", "messages": [{"role": "user", "text": "fits"}]}
    lines = tmp_path / "g.jsonl"
    lines.write_text(json.dumps(big) + "\n" + json.dumps(small) + "\n")
    items = parse_path(lines)
    assert problems(items) == ["1: record of 0 MB is larger than the 0 MB limit; skipped"]
    assert texts(items, "small") == ["fits"]
    doc = tmp_path / "g.json"
    doc.write_text(json.dumps([big, small]))
    items = parse_path(doc)
    assert problems(items) == ["1: conversation #0: record of 0 MB is larger than the 0 MB limit; skipped"]
    assert texts(items, "small") == ["fits"]


def test_a_truncated_export_keeps_every_conversation_before_the_cut(tmp_path: Path) -> None:
    convs = [{"conv_id": f"c{i}", "messages": [{"role": "user", "text": f"t{i}"}]} for i in range(3)]
    path = tmp_path / "g.json"
    path.write_text(json.dumps(convs)[:-30])
    items = parse_path(path)
    assert {i.record.conv_id for i in items if isinstance(i, Parsed)} == {"c0", "c1"}
    assert problems(items) == ["1: conversation #2: the document ends inside this record (truncated?)"]


def _sources_in_thread(path: Path) -> tuple[list[Problem], list[Any], bool]:
    """iter_sources + parse in a thread, so a file that blocks shows as a thread still running (not a hung test)."""
    found: list[Problem] = []
    items: list[Any] = []

    def run() -> None:
        items.extend(parse_path(path))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=30)
    found = [i for i in items if isinstance(i, Problem)]
    return found, items, thread.is_alive()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifos_and_devices_named_like_transcripts_are_skipped_never_opened(tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    jsonl(folder / "good.jsonl", [cc("user", "u1", None, "a real session", sessionId="good")])
    for name in ("s1.jsonl", "conversations.json", "export.zip", "state.vscdb"):
        os.mkfifo(folder / name)
    os.symlink("/dev/zero", folder / "zero.jsonl")
    walked, items, blocked = _sources_in_thread(folder)
    assert not blocked, "a FIFO or device was opened for reading"
    assert texts(items, "good") == ["a real session"]
    reasons = sorted(p.reason for p in walked)
    assert reasons == ["a FIFO, not a regular file; skipped"] * 4 + [
        "a character device, not a regular file; skipped"
    ]
    named, _, blocked = _sources_in_thread(folder / "s1.jsonl")
    assert not blocked and [p.reason for p in named] == ["a FIFO, not a regular file; skipped"]


def test_a_zip_bomb_member_is_refused_before_it_is_inflated(tmp_path: Path) -> None:
    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("conversations.json", "w") as fh:
        fh.write(b'[{"conv_id": "bomb", "messages": [{"role": "user", "text": "')
        for _ in range(300):
            fh.write(b"a" * (1 << 20))
        fh.write(b'"}]}]')
    assert path.stat().st_size < 1_000_000
    found: list[Problem] = []
    assert list(iter_sources([path], found.append, lambda *_: False)) == []
    assert "conversations.json would inflate" in found[0].reason and "zip bomb" in found[0].reason


_MEMORY_CHILD = r"""
import json, resource, sys, zipfile
from pathlib import Path
cap = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
from ghostmem.ingest.common import Parsed, Problem
from ghostmem.ingest.runner import PARSERS
from ghostmem.ingest.sources import iter_sources
found, seen = [], []
for source in iter_sources([Path(sys.argv[1])], found.append, lambda *_: False):
    for item in PARSERS[source.platform](source, {}):
        (found if isinstance(item, Problem) else seen).append(item)
print(json.dumps({"problems": [p.reason for p in found],
                  "convs": sorted(i.record.conv_id for i in seen if isinstance(i, Parsed))}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is what bounds the child here")
def test_hostile_files_parse_within_a_memory_cap(tmp_path: Path) -> None:
    """Under a 1 GB address-space cap (the import once took 20.9 GB on the first of these), every file parses."""
    folder = tmp_path / "in"
    folder.mkdir()
    deep = b"[" * DEEP + b"]" * DEEP
    (folder / "deep.json").write_bytes(b'[{"conv_id": "ok0", "messages": [{"role": "user", "text": "first"}]},'
                                       b'{"conv_id": "d", "messages": [{"role": "user", "text": "x", "meta": '
                                       + b"{\"a\": " * DEEP + b"1" + b"}" * DEEP + b"}]}]")  # fmt: skip
    (folder / "deep.jsonl").write_bytes(b'{"conv_id": "dl", "messages": ' + deep + b"}\n"
                                        + b'{"conv_id": "ok1", "messages": [{"role": "user", "text": "fine"}]}\n')  # fmt: skip
    big = b"z" * (60 << 20)
    (folder / "bigstring.json").write_bytes(
        b'[{"conv_id": "ok2", "messages": [{"role": "user", "text": "' + big[: 1 << 20] + b'"}]},'
        b'{"conv_id": "huge", "messages": [{"role": "user", "text": "' + big + big + b'"}]},'
        b'{"conv_id": "ok3", "messages": [{"role": "user", "text": "after"}]}]'
    )
    limit = 1 << 30
    child = subprocess.run(
        [sys.executable, "-c", _MEMORY_CHILD, str(folder), str(limit)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-2000:]
    out = json.loads(child.stdout)
    assert out["convs"] == ["ok0", "ok1", "ok2", "ok3"]
    assert sorted(out["problems"]) == [
        "conversation #1: nested more than 100 levels deep; skipped",
        "conversation #1: record of 120 MB is larger than the 64 MB limit; skipped",
        "nested more than 100 levels deep; skipped",
    ]
    assert resource.getrlimit(resource.RLIMIT_AS)[0] != limit  # the cap stayed in the child


def test_gemini_session_whose_messages_are_wrongly_shaped(tmp_path: Path) -> None:
    doc = {"sessionId": "g1", "messages": [5, {"type": "user", "content": "kept"}, {"type": "mystery"},
                                           {"type": "gemini", "content": "answer", "thoughts": 3}]}  # fmt: skip
    path = tmp_path / "chats" / "session-1.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))
    items = parse_path(path)
    assert problems(items) == [
        "1: message #0: unexpected shape (TypeError: not an object); skipped",
        "1: message #2 has unknown type 'mystery'; skipped",
        "1: message #3: unexpected shape (TypeError: 'int' object is not iterable); skipped",
    ]
    assert records(path)["g1"].messages[0].text == "kept"


def test_a_huge_claude_code_file_is_read_in_bounded_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ghostmem.ingest import claude_code

    monkeypatch.setattr(claude_code, "CHUNK_BYTES", 400)  # two lines a chunk instead of 32 MB
    lines = [cc("user", "u0", None, "line 0")] + [
        cc("user", f"u{i}", f"u{i - 1}", f"line {i}") for i in range(1, 12)
    ]
    items = parse_path(jsonl(tmp_path / "s1.jsonl", [*lines, {"type": "custom-title", "customTitle": "Named",
                                                               "sessionId": "s1"}]))  # fmt: skip
    chunks = [i for i in items if isinstance(i, Parsed)]
    assert len(chunks) > 3 and not chunks[0].append and all(c.append for c in chunks[1:])
    assert [m.text for c in chunks[:-1] for m in c.record.messages] == [f"line {i}" for i in range(12)]
    # the rename came after the last chunk: it is carried by the last line again (stored already, appended as no-op)
    assert chunks[-1].record.title == "Named" and [m.native_id for m in chunks[-1].record.messages] == ["u11"]
