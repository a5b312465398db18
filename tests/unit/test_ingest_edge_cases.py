"""Documented edge cases the shipped samples lack, on small synthetic files written here."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from ghostmem.ingest.common import Parsed, Problem, TitleHint, parse_time
from ghostmem.records import ConversationRecord
from support.transcripts import T0, cc, jsonl, node, parse_path, records


def only(path: Path) -> ConversationRecord:
    (rec,) = records(path).values()
    return rec


# -- Claude Code ----------------------------------------------------------------------------------------------------


def test_session_opening_with_a_command_is_titled_by_its_arguments(tmp_path: Path) -> None:
    cmd = "<command-message>x:create</command-message>\n<command-name>/x:create</command-name>\n<command-args>websearch to learn how to</command-args>"
    rec = only(jsonl(tmp_path / "s1.jsonl", [
        cc("user", "u1", None, cmd),
        cc("user", "u2", "u1", [{"type": "text", "text": "expanded command body"}], isMeta=True),
        cc("user", "u3", "u2", [{"type": "text", "text": "[Request interrupted by user]"}]),
        cc("user", "u4", "u3", "create the beads"),
    ]))  # fmt: skip
    assert rec.title == "websearch to learn how to"
    assert [m.role for m in rec.messages] == ["meta", "meta", "meta", "user"]


def test_custom_title_wins_and_summary_is_a_hint(tmp_path: Path) -> None:
    items = parse_path(jsonl(tmp_path / "s1.jsonl", [
        {"type": "summary", "summary": "Summarised elsewhere", "leafUuid": "other-leaf"},
        cc("user", "u1", None, "first prompt"),
        {"type": "custom-title", "customTitle": "My renamed session", "sessionId": "s1"},
        {"type": "custom-title", "customTitle": "Renamed again", "sessionId": "s1"},
    ]))  # fmt: skip
    hints = [i for i in items if isinstance(i, TitleHint)]
    assert hints == [TitleHint("other-leaf", "Summarised elsewhere")]
    (parsed,) = [i for i in items if isinstance(i, Parsed)]
    assert parsed.record.title == "Renamed again"


def test_summary_only_file_yields_only_hints(tmp_path: Path) -> None:
    items = parse_path(jsonl(tmp_path / "p" / "s9.jsonl", [
        {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}},
        {"type": "summary", "summary": "Fix the login bug", "leafUuid": "leaf-1"},
    ]))  # fmt: skip
    assert items == [TitleHint("leaf-1", "Fix the login bug")]


def test_compaction_agent_excluded_and_nested_subagents_kept(tmp_path: Path) -> None:
    base = tmp_path / "proj" / "s1" / "subagents"
    jsonl(base / "agent-acompact-1234.jsonl", [cc("user", "c1", None, "summarise this", isSidechain=True)])
    jsonl(base / "workflows" / "wf1" / "agent-beef.jsonl",
          [cc("user", "w1", None, "deep task", isSidechain=True, agentId="beef")])  # fmt: skip
    found = records(tmp_path / "proj")
    assert list(found) == ["s1:agent-beef"]
    assert found["s1:agent-beef"].parent_conv_id == "s1"


def test_inline_sidechain_resume_duplicates_and_several_sessions(tmp_path: Path) -> None:
    found = records(jsonl(tmp_path / "s2.jsonl", [
        cc("user", "u1", None, "main prompt", sessionId="s1"),
        cc("user", "u1", None, "main prompt", sessionId="s1"),  # replayed on resume: same uuid
        cc("user", "x1", "u1", "task for the agent", sessionId="s1", isSidechain=True),
        cc("user", "v1", None, "prompt of the resumed session", sessionId="s2"),
    ]))  # fmt: skip
    assert set(found) == {"s1", "s1:agent-sidechain", "s2"}
    assert [m.text for m in found["s1"].messages] == ["main prompt"]


def test_bad_lines_are_reported_and_the_rest_read(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    jsonl(path, [cc("user", "u1", None, "good prompt")])
    with path.open("ab") as fh:
        fh.write(b"{not json\n")
        fh.write(json.dumps({"type": "brand-new-type", "uuid": "z"}).encode() + b"\n")
        fh.write(
            json.dumps(cc("user", "u2", "u1", "caf\u00e9")).encode().replace(b"caf\\u00e9", b"caf\xe9")
            + b"\n"
        )
        fh.write(b'{"type": "user", "uuid": "u3"')  # a live session's partial last line
    items = parse_path(path)
    problems = [str(p) for p in items if isinstance(p, Problem)]
    assert problems == [f"{path.resolve()}:2: malformed JSON (Expecting property name enclosed in double quotes)",
                        f"{path.resolve()}:3: unknown record type 'brand-new-type'; skipped",
                        f"{path.resolve()}:4: bytes that are not UTF-8 (the first at byte 170 of the record) replaced by U+FFFD",
                        f"{path.resolve()}:5: incomplete last line; read again once it is complete"]  # fmt: skip
    (parsed,) = [i for i in items if isinstance(i, Parsed)]
    assert [m.text for m in parsed.record.messages] == ["good prompt", "caf\ufffd"]


def test_api_errors_and_images_are_not_prompts(tmp_path: Path) -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 50},
    }
    rec = only(jsonl(tmp_path / "s1.jsonl", [
        cc("user", "u1", None, [image, {"type": "text", "text": "what is in this picture"}]),
        cc("assistant", "a1", "u1", [{"type": "text", "text": "API Error: overloaded"}], isApiErrorMessage=True),
    ]))  # fmt: skip
    assert [(m.role, m.text) for m in rec.messages] == [
        ("user", "[image]\n\nwhat is in this picture"), ("meta", "API Error: overloaded")
    ]  # fmt: skip


# -- ChatGPT --------------------------------------------------------------------------------------------------------


def test_chatgpt_dangling_current_node_citations_and_projects(tmp_path: Path) -> None:
    mapping = {
        "root": node("root", None, ["sys"], None),
        "sys": node(
            "sys", "root", ["u1"], "system", "", metadata={"is_visually_hidden_from_conversation": True}
        ),
        "u1": node("u1", "sys", ["a1", "a2"], "user", "compare the two"),
        "a1": node("a1", "u1", [], "assistant", "old answer", t=1700000001.0),
        "a2": node("a2", "u1", ["c"], "assistant", "search('x')", t=1700000002.0, recipient="browser"),
        "c": node("c", "a2", ["a3"], "tool", "results 【0†Page title】"),
        "a3": node(
            "a3",
            "c",
            [],
            "assistant",
            "It is faster\ue200cite\ue202turn0search1\ue201 【3:0†source】.",
            t=1700000009.0,
        ),
    }
    conv = {"id": "cg1", "conversation_id": "cg1", "title": None, "create_time": 1700000000.0,
            "update_time": 1700000010.0, "mapping": mapping, "current_node": "missing",
            "gizmo_type": "snorlax", "gizmo_id": "g-p-abc", "conversation_template_id": "g-p-abc"}  # fmt: skip
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([conv], separators=(",", ":")))
    rec = only(path)
    assert [(m.role, m.text) for m in rec.messages] == [
        ("user", "compare the two"),
        ("tool_call", "search('x')"),
        ("tool", "results 【0†Page title】"),
        ("assistant", "It is faster ."),
    ]
    assert rec.title == "compare the two" and rec.project == "g-p-abc"


def test_chatgpt_zip_export_is_streamed_from_the_zip(tmp_path: Path) -> None:
    import zipfile

    conv = {"id": "z1", "title": "Zipped", "create_time": 1.7e9, "update_time": 1.7e9 + 5,
            "mapping": {"r": node("r", None, ["u"], None), "u": node("u", "r", [], "user", "hello zip")},
            "current_node": "u"}  # fmt: skip
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("conversations.json", json.dumps([conv]))
        zf.writestr("chat.html", "<html></html>")
    rec = only(archive)
    assert (rec.conv_id, rec.title, [m.text for m in rec.messages]) == ("z1", "Zipped", ["hello zip"])


# -- Claude.ai ------------------------------------------------------------------------------------------------------


def test_claude_ai_unordered_2024_messages_and_attachments(tmp_path: Path) -> None:
    msgs = [
        {"uuid": "m3", "text": "second answer", "sender": "assistant", "created_at": "2024-10-17T03:40:00Z"},
        {"uuid": "m2", "text": "first answer", "sender": "assistant", "created_at": "2024-10-17T03:28:33Z"},
        {"uuid": "m1", "text": "first question", "sender": "human", "created_at": "2024-10-17T03:28:33Z",
         "attachments": [{"file_name": "notes.txt", "extracted_content": "pasted build log"}]},
        {"uuid": "m0", "text": "", "sender": "human", "created_at": "2024-10-17T03:50:00Z", "content": []},
    ]  # fmt: skip
    conv = {"uuid": "ca1", "name": "", "created_at": "2024-10-17T03:28:33Z", "updated_at": "2024-10-17T03:47:12Z",
            "chat_messages": msgs, "project_uuid": "p1"}  # fmt: skip
    (tmp_path / "conversations.json").write_text(
        json.dumps([conv, {**conv, "uuid": "ca2", "chat_messages": []}])
    )
    (tmp_path / "projects.json").write_text(json.dumps([{"uuid": "p1", "name": "Pricing site"}]))
    found = records(tmp_path)
    rec = found["ca1"]
    assert [m.native_id for m in rec.messages] == ["m1", "m2", "m3"]
    assert "pasted build log" in rec.messages[0].text
    assert rec.title and rec.title.startswith("first question") and rec.project == "Pricing site"
    assert "ca2" not in found  # a conversation without messages is not stored


def test_claude_ai_2025_blocks_follow_the_current_branch(tmp_path: Path) -> None:
    root = "00000000-0000-4000-8000-000000000000"

    def msg(uuid: str, parent: str, sender: str, blocks: list[dict[str, Any]], at: str) -> dict[str, Any]:
        return {"uuid": uuid, "parent_message_uuid": parent, "sender": sender, "text": "", "content": blocks,
                "created_at": at}  # fmt: skip

    text = lambda t: {"type": "text", "text": t}  # noqa: E731
    conv = {"uuid": "ca3", "name": "Branches", "created_at": "2025-05-01T00:00:00Z",
            "updated_at": "2025-05-01T00:10:00Z", "current_leaf_message_uuid": "a2",
            "chat_messages": [
                msg("h1", root, "human", [text("question")], "2025-05-01T00:00:00Z"),
                msg("a1", "h1", "assistant", [text("regenerated away")], "2025-05-01T00:01:00Z"),
                msg("a2", "h1", "assistant", [{"type": "thinking", "thinking": "hmm"}, text("kept answer"),
                     {"type": "tool_use", "name": "artifacts", "input": {"title": "Calc", "content": "<html>"}}],
                    "2025-05-01T00:02:00Z"),
            ]}  # fmt: skip
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([conv]))
    rec = only(path)
    assert [m.native_id for m in rec.messages] == ["h1", "a2"]
    assert "kept answer" in rec.messages[1].text and "[artifact: Calc]" in rec.messages[1].text


# -- Codex, Gemini, generic, Cursor ---------------------------------------------------------------------------------


def test_codex_legacy_envelope(tmp_path: Path) -> None:
    rec = only(jsonl(tmp_path / "rollout-2025-06-01T10-00-00-abc.jsonl", [
        {"id": "legacy-1", "timestamp": "2025-06-01T10:00:00Z", "instructions": "be brief", "git": {"branch": "main"}},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>cwd</environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "rename the module"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
    ]))  # fmt: skip
    assert rec.conv_id == "legacy-1"
    assert [(m.role, m.text) for m in rec.messages][1:] == [
        ("user", "rename the module"),
        ("assistant", "Done."),
    ]
    assert rec.messages[0].role == "meta" and rec.title == "rename the module"


def test_gemini_tool_calls_and_summary(tmp_path: Path) -> None:
    doc = {"sessionId": "g1", "projectHash": "ab", "startTime": T0, "lastUpdated": T0, "summary": "Read a file",
           "messages": [
               {"id": "1", "timestamp": T0, "type": "user", "content": "read setup.py"},
               {"id": "2", "timestamp": T0, "type": "gemini", "content": "",
                "toolCalls": [{"name": "read_file", "args": {"path": "setup.py"},
                               "result": [{"functionResponse": {"id": "x", "name": "read_file",
                                                                "response": {"output": "import setuptools"}}}]}]},
               {"id": "3", "timestamp": T0, "type": "info", "content": "model switched"},
           ]}  # fmt: skip
    path = tmp_path / "chats" / "session-2026-01-01T10-00-g1.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))
    rec = only(path)
    assert [m.role for m in rec.messages] == ["user", "tool_call", "tool", "system"]
    assert rec.messages[2].text == "import setuptools" and rec.title == "Read a file"


def test_generic_json_object_array_and_epoch_times(tmp_path: Path) -> None:
    one = {"conv_id": 7, "meta": {"split": "dev"},
           "messages": [{"id": "a", "role": "human", "text": "hello", "ts": 1700000000000, "meta": {"dia_id": "D1:3"}}]}  # fmt: skip
    (tmp_path / "one.json").write_text(json.dumps(one))
    rec = only(tmp_path / "one.json")
    assert rec.conv_id == "7" and rec.messages[0].role == "user"
    assert rec.meta["split"] == "dev" and rec.messages[0].meta == {"dia_id": "D1:3"}
    assert rec.messages[0].ts == parse_time("2023-11-14T22:13:20Z") and rec.title == "hello"


def test_cursor_databases_built_here(tmp_path: Path) -> None:
    user = tmp_path / "Cursor" / "User"
    (user / "globalStorage").mkdir(parents=True)
    ws = user / "workspaceStorage" / "h1"
    ws.mkdir(parents=True)
    (ws / "workspace.json").write_text(json.dumps({"folder": "file:///home/me/shop%20app"}))

    def kv(path: Path, table: str, rows: dict[str, Any]) -> None:
        with sqlite3.connect(path) as db:
            db.execute(f"CREATE TABLE {table} (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)")
            db.executemany(
                f"INSERT INTO {table} VALUES (?, ?)", [(k, json.dumps(v)) for k, v in rows.items()]
            )

    kv(user / "globalStorage" / "state.vscdb", "cursorDiskKV", {
        "composerData:c1": {"composerId": "c1", "name": "Fix checkout", "createdAt": 1735689600000,
                            "lastUpdatedAt": 1735693200000,
                            "fullConversationHeadersOnly": [{"bubbleId": "b1", "type": 1}, {"bubbleId": "b2", "type": 2}]},
        "bubbleId:c1:b1": {"bubbleId": "b1", "type": 1, "text": "checkout total is wrong"},
        "bubbleId:c1:b2": {"bubbleId": "b2", "type": 2, "text": "Rounding happens twice.", "thinking": {"text": "look"}},
        "composerData:empty": {"composerId": "empty", "fullConversationHeadersOnly": []},
    })  # fmt: skip
    kv(ws / "state.vscdb", "ItemTable", {
        "composer.composerData": {"allComposers": [{"composerId": "c1"}]},
        "workbench.panel.aichat.view.aichat.chatdata": {"tabs": [{"tabId": "t1", "chatTitle": "Old chat",
            "lastSendTime": 1700000000000, "bubbles": [{"type": "user", "text": "legacy q"}, {"type": "ai", "text": "legacy a"}]}]},
    })  # fmt: skip
    found = records(user)
    assert set(found) == {"c1", "t1"}
    c1 = found["c1"]
    assert (c1.title, c1.project) == ("Fix checkout", "/home/me/shop app")
    assert [m.role for m in c1.messages] == ["user", "thinking", "assistant"]
    assert c1.started_at == parse_time(1735689600000) and c1.ended_at == parse_time(1735693200000)
    assert [m.text for m in found["t1"].messages] == ["legacy q", "legacy a"] and found[
        "t1"
    ].project == "/home/me/shop app"


def test_chatgpt_export_streams_in_bounded_memory(tmp_path: Path) -> None:
    import tracemalloc

    from ghostmem.ingest import chatgpt
    from ghostmem.ingest.sources import Source

    path = tmp_path / "conversations.json"
    filler = "lorem ipsum dolor sit amet " * 40
    with path.open("w") as fh:  # ~20 MB on one line, like a real export
        fh.write("[")
        for i in range(2000):
            mapping = {"r": node("r", None, ["u0"], None)}
            for m in range(8):
                mapping[f"u{m}"] = node(f"u{m}", "r" if m == 0 else f"u{m - 1}", [f"u{m + 1}"] if m < 7 else [],
                                        "user" if m % 2 == 0 else "assistant", f"{i} {m} {filler}")  # fmt: skip
            conv = {"id": f"c{i}", "title": f"t{i}", "create_time": 1.7e9, "update_time": 1.7e9, "mapping": mapping,
                    "current_node": "u7"}  # fmt: skip
            fh.write(("," if i else "") + json.dumps(conv, separators=(",", ":")))
        fh.write("]")
    assert path.stat().st_size > 15_000_000
    tracemalloc.start()
    try:
        seen = sum(
            1
            for item in chatgpt.parse(Source(str(path), "chatgpt", "snapshot", path), {})
            if isinstance(item, Parsed)
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == 2000
    assert peak < 3_000_000  # one conversation at a time, not the 20 MB document
