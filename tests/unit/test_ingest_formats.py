"""Every shipped sample parses to what docs/platforms.md predicts (conv ids, titles, projects, spans, message counts)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from ghostmem.cli import sample_exports
from ghostmem.ingest.chatgpt import current_branch
from ghostmem.ingest.common import Problem
from ghostmem.ingest.sources import iter_sources
from ghostmem.records import ConversationRecord
from support.transcripts import records

FIXTURES = sample_exports()
CC = FIXTURES / "claude_code" / "projects"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def roles(record: ConversationRecord, role: str) -> list[str]:
    return [m.text for m in record.messages if m.role == role]


def api_messages(record: ConversationRecord) -> set[str]:
    return {m.meta["message_id"] for m in record.messages if "message_id" in m.meta}


def test_claude_code_spotter_session() -> None:
    rec = records(CC / "-home-marco-projects-spotter")["55604662-cf2a-4331-851a-ec234028f8ca"]
    assert rec.platform == "claude_code"
    assert roles(rec, "user") == ["mix phx.server doesnt seem to start"]
    assert rec.title == "mix phx.server doesnt seem to start"
    assert len(api_messages(rec)) == 1
    assert len(roles(rec, "thinking")) == 1
    assert len(roles(rec, "tool_call")) == 2 and len(roles(rec, "tool")) == 2
    assert (rec.started_at, rec.ended_at) == (
        utc("2026-02-10T21:11:56.846Z"),
        utc("2026-02-10T21:12:02.480Z"),
    )
    assert rec.project == "/home/marco/projects/spotter"
    # the interrupt is kept, but as meta, never as the human's prompt
    assert any("[Request interrupted by user for tool use]" in t for t in roles(rec, "meta"))
    # the whitespace-only block of the split response is dropped; its text lines become one assistant message
    assert len(roles(rec, "assistant")) == 1 and roles(rec, "assistant")[0].startswith("Let me check")


def test_claude_code_workspace_session_with_compaction() -> None:
    found = records(CC / "-workspace")
    rec = found["c45af7b1-cb7c-4e51-93db-8cbb250a877a"]
    assert len(roles(rec, "user")) == 5 and roles(rec, "user")[0].strip() == "can you run a command ls -la"
    assert rec.title == "can you run a command ls -la"
    assert len(api_messages(rec)) == 12
    assert len(roles(rec, "thinking")) == 12
    assert len(roles(rec, "tool_call")) == 10 and len(roles(rec, "tool")) == 10
    boundaries = [m for m in rec.messages if m.meta.get("kind") == "compact_boundary"]
    assert len(boundaries) == 1
    assert (rec.started_at, rec.ended_at) == (
        utc("2026-01-02T19:18:31.028Z"),
        utc("2026-01-02T19:21:02.108Z"),
    )
    assert rec.project == "/workspace" and "git_branch" not in rec.meta
    # chain order, not timestamps: the boundary, then the summary, then the /compact lines stamped earlier
    kinds = [m.meta.get("kind") for m in rec.messages]
    at = kinds.index("compact_boundary")
    assert kinds[at + 1] == "compact_summary"
    assert rec.messages[at + 2].ts is not None and rec.messages[at + 2].ts < boundaries[0].ts  # type: ignore[operator]
    assert all(m.role != "user" for m in rec.messages[at:])
    # the 2.0.x sibling agent file is its own conversation under the session
    agent = found["c45af7b1-cb7c-4e51-93db-8cbb250a877a:agent-af1ff21"]
    assert agent.parent_conv_id == "c45af7b1-cb7c-4e51-93db-8cbb250a877a"


def test_claude_code_old_and_subagent_layouts() -> None:
    old = records(CC / "-Users-testuser-Documents-GitHub-projects-example-project--worktrees-streaming")
    rec = old["67a8478e-78dc-44ab-82ea-f65c8ead85f6"]
    assert rec.project == "/Users/testuser/Documents/GitHub/projects/example-project/.worktrees/streaming"
    assert rec.title and rec.title.startswith("Lately, I've noticed you being very tentative.")
    assert any("mcp__private-journal__process_thoughts" in t for t in roles(rec, "tool_call"))
    sub = records(CC / "-home-USER-projects-spotter-worktrees-spotter-4te")
    (conv_id,) = sub
    assert conv_id == "ae4a77f8-aedd-4bc1-888f-c94edc91af04:agent-aac57f5"
    assert sub[conv_id].parent_conv_id == "ae4a77f8-aedd-4bc1-888f-c94edc91af04"
    assert sub[conv_id].title and sub[conv_id].title.startswith("Search hex.pm")


def test_chatgpt_tree_current_branch() -> None:
    path = FIXTURES / "chatgpt" / "chatgpt-tree.json"
    (rec,) = records(path).values()
    assert rec.conv_id.startswith("d5dc5307-")
    assert rec.title == "Assist user with summary"
    assert len(rec.messages) == 6
    conv = json.loads(path.read_text())[0]
    assert len(conv["mapping"]) == 13
    assert len(current_branch(conv["mapping"], conv["current_node"])) == 8
    assert (rec.started_at, rec.ended_at) == (
        utc("2024-05-01T17:37:11.148505Z"),
        utc("2024-05-01T17:37:40.879308Z"),
    )
    assert [m.text for m in rec.messages[:2]] == ["hi there", "Hello! How can I assist you today?"]
    assert "tell me a story" not in [m.text for m in rec.messages]  # an abandoned branch


def test_chatgpt_export_pretty_and_minified_agree(tmp_path: Path) -> None:
    path = FIXTURES / "chatgpt" / "chatgpt-export.json"
    pretty = records(path)
    assert len(pretty) == 2 and any(c.startswith("d6523d1e-") for c in pretty)
    minified = tmp_path / "conversations.json"
    minified.write_text(json.dumps(json.loads(path.read_text()), separators=(",", ":")))
    assert records(minified).keys() == pretty.keys()
    for conv_id, rec in records(minified).items():
        assert [m.text for m in rec.messages] == [m.text for m in pretty[conv_id].messages]
    answers = [m.text for r in pretty.values() for m in r.messages if m.role == "assistant"]
    assert answers and not any("【" in text for text in answers)
    assert any(m.role == "tool_call" for r in pretty.values() for m in r.messages)


def test_claude_ai_example() -> None:
    (rec,) = records(FIXTURES / "claude_ai" / "example.json").values()
    assert rec.conv_id.startswith("1db4c66e-") and rec.title == "Bash Command for OpenAI API"
    assert [m.role for m in rec.messages] == ["user", "assistant"]
    assert rec.started_at == utc("2024-10-18T05:30:10.325754Z")


def test_codex_rollout() -> None:
    (rec,) = records(FIXTURES / "codex").values()
    assert rec.conv_id == "019c8bfe-ec25-79e0-97d7-bda6a9c575ff"
    assert rec.project == "/redacted/path/ea96e59ed9"
    assert rec.started_at == utc("2026-02-23T19:34:25.573Z") and rec.ended_at == utc(
        "2026-02-23T19:36:02.635Z"
    )
    # one copy of the typed turn (from user_message), injected context not taken for the human
    assert roles(rec, "user") == ["[REDACTED_MESSAGE len=98 sha=c002ff99]"]
    assert rec.title == "[REDACTED_MESSAGE len=98 sha=c002ff99]"
    assert len(roles(rec, "meta")) == 2 and len(roles(rec, "system")) == 4
    assert len(roles(rec, "assistant")) == 6  # response_item answers only, not the agent_message copies
    assert len(roles(rec, "tool_call")) == 5 and len(roles(rec, "tool")) == 5


def test_gemini_session() -> None:
    (rec,) = records(FIXTURES / "gemini").values()
    assert rec.conv_id == "dcbe78d3-ea75-4786-929e-d6cff0fc00ed"
    assert [m.role for m in rec.messages] == ["user", "thinking", "assistant"]
    assert rec.title == "[REDACTED_PROMPT]"
    assert (rec.started_at, rec.ended_at) == (
        utc("2026-06-05T04:59:39.932Z"),
        utc("2026-06-05T04:59:44.839Z"),
    )
    assert rec.project == "d30f91067027d10192e4aed3e7b03fecf08089dd3370f047f14f38b1845c8042"


@pytest.mark.parametrize("platform", ["claude_code", "chatgpt", "claude_ai", "codex", "gemini"])
def test_every_sample_is_detected_by_content(platform: str) -> None:
    problems: list[Problem] = []
    sources = list(iter_sources([FIXTURES / platform], problems.append, lambda *_: False))
    assert sources and {s.platform for s in sources} == {platform} and not problems
