"""Secrets planted in every field of every format never reach any column of any table.

Each field gets its own freshly generated secrets (so a leak names its field); after the import (embedded, enriched)
every text, jsonb and text-array column of every table in ghostmem's schemas is read back and searched for them.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import string
from pathlib import Path

from ghostmem import GhostMem
from psycopg import sql
from support.transcripts import cc, jsonl, node

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


def rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


class Planted:
    """Fresh secrets per field, in the shapes the redactor must know (and that the review found leaking)."""

    def __init__(self) -> None:
        self.all: dict[str, str] = {}

    def token(self, field: str) -> str:
        value = "ghp_" + rand(36)
        self.all[value] = field
        return value

    def text(self, field: str) -> str:
        """A text holding one secret of each hard shape: a Slack app token, a Sentry DSN key, a URL password with @."""
        xapp = f"xapp-1-A{rand(10).upper()}-{rand(13, '0123456789')}-{rand(64, HEX)}"
        sentry = rand(32, HEX)
        password = f"pw@{rand(10)}"
        for value in (xapp, sentry, password):
            self.all[value] = field
        return (
            f"SLACK_APP_TOKEN={xapp} SENTRY_DSN=https://{sentry}@o4504.ingest.us.sentry.io/45 "
            f"DATABASE_URL=postgres://admin:{password}@db.internal:5432/app and {self.token(field)}"
        )


def write_every_format(root: Path, s: Planted) -> None:
    generic = {
        "conv_id": "gen-1", "title": s.text("generic title"), "project": f"/home/u/{s.token('generic project')}/app",
        "meta": {"deploy": s.text("generic meta"), "nested": [{"k": s.token("generic nested meta")}]},
        "messages": [
            {"id": "1", "role": "user", "text": s.text("generic text"), "speaker": s.token("generic speaker"),
             "meta": {"v": s.token("generic message meta")}},
            {"id": "2", "role": "tool_call", "text": f'shell {{"cmd": "{s.text("generic tool args")}"}}'},
        ],
    }  # fmt: skip
    (root / "generic.jsonl").write_text(json.dumps(generic) + "\n")

    project = root / "claude" / f"-home-u-{s.token('claude project folder (source, import_state)')}-app"
    cwd = f"/home/u/{s.token('claude cwd')}/app"
    jsonl(project / "s1.jsonl", [
        cc("user", "u1", None, s.text("claude prompt"), cwd=cwd, gitBranch=f"fix/{s.token('claude gitBranch')}"),
        cc("assistant", "a1", "u1", [
            {"type": "text", "text": s.text("claude answer")},
            {"type": "tool_use", "name": "Bash", "id": "t1", "input": {"command": s.text("claude tool input")}},
            {"type": "thinking", "thinking": s.text("claude thinking")},
        ], cwd=cwd),
        cc("user", "u2", "a1", [{"type": "tool_result", "tool_use_id": "t1", "content": s.text("claude tool out")}],
           cwd=cwd),
        {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": "u2", "sessionId": "s1",
         "compactMetadata": {"trigger": s.token("claude compaction meta")}},
        {"type": "custom-title", "customTitle": s.text("claude custom title"), "sessionId": "s1"},
        {"type": "summary", "summary": s.text("claude summary"), "leafUuid": "u1"},
    ])  # fmt: skip

    jsonl(root / "codex" / "rollout-2025-01-01-x.jsonl", [
        {"type": "session_meta", "payload": {"id": "cx-1", "cwd": f"/srv/{s.token('codex cwd')}",
                                             "git": {"branch": s.token("codex branch"),
                                                     "repository_url": f"https://x:{s.token('codex repo')}@github.com/o/r"},
                                             "originator": s.token("codex originator")}},
        {"type": "event_msg", "payload": {"type": "user_message", "message": s.text("codex prompt")}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "shell",
                                              "arguments": json.dumps({"cmd": s.text("codex args")})}},
        {"type": "response_item", "payload": {"type": "message", "role": "assistant",
                                              "content": [{"type": "output_text", "text": s.text("codex answer")}]}},
    ])  # fmt: skip

    gemini = {"sessionId": "gm-1", "projectHash": s.token("gemini project hash"), "summary": s.text("gemini summary"),
              "messages": [{"id": "1", "type": "user", "content": s.text("gemini prompt")},
                           {"id": "2", "type": "gemini", "content": s.text("gemini answer"),
                            "toolCalls": [{"name": "shell", "args": {"c": s.text("gemini args")},
                                           "result": [{"functionResponse": {"response": {"output": s.text("gemini out")}}}]}]}]}  # fmt: skip
    (root / "gemini" / "chats").mkdir(parents=True)
    (root / "gemini" / "chats" / "session-1.json").write_text(json.dumps(gemini))

    mapping = {"r": node("r", None, ["u"], None), "u": node("u", "r", ["a"], "user", s.text("chatgpt prompt")),
               "a": node("a", "u", [], "assistant", s.text("chatgpt answer"))}  # fmt: skip
    mapping["u"]["message"]["author"]["name"] = s.token("chatgpt author")
    chatgpt = {"id": "cg-1", "title": s.text("chatgpt title"), "mapping": mapping, "current_node": "a",
               "gizmo_id": f"g-p-{s.token('chatgpt gizmo')}", "gizmo_type": "snorlax"}  # fmt: skip
    (root / "chatgpt").mkdir()
    (root / "chatgpt" / "conversations.json").write_text(json.dumps([chatgpt]))

    claude_ai = {"uuid": "ca-1", "name": s.text("claude.ai name"), "project_uuid": "p1", "chat_messages": [
        {"uuid": "m1", "sender": "human", "text": s.text("claude.ai prompt"),
         "attachments": [{"file_name": s.token("claude.ai file name"), "extracted_content": s.text("claude.ai file")}]},
    ]}  # fmt: skip
    (root / "claude_ai").mkdir()
    (root / "claude_ai" / "conversations.json").write_text(json.dumps([claude_ai]))
    (root / "claude_ai" / "projects.json").write_text(
        json.dumps([{"uuid": "p1", "name": s.text("claude.ai project")}])
    )

    user = root / "cursor" / "User"
    (user / "globalStorage").mkdir(parents=True)
    with sqlite3.connect(user / "globalStorage" / "state.vscdb") as db:
        db.execute("CREATE TABLE cursorDiskKV (key TEXT PRIMARY KEY, value BLOB)")
        composer = {"composerId": "cu-1", "name": s.text("cursor name"),
                    "conversation": [{"type": 1, "text": s.text("cursor prompt")},
                                     {"type": 2, "text": s.text("cursor answer"), "thinking": {"text": s.text("cursor thinking")}}]}  # fmt: skip
        db.execute("INSERT INTO cursorDiskKV VALUES (?, ?)", ("composerData:cu-1", json.dumps(composer)))
    db.close()


def every_text_column(gm: GhostMem) -> str:
    """Every text, varchar, text[] and jsonb value of every table in ghostmem's schemas, as one string."""
    with gm.connection() as conn:
        columns = conn.execute(
            """
            SELECT table_schema, table_name, column_name FROM information_schema.columns
            WHERE table_schema IN ('ghostmem', 'agent')
              AND (data_type IN ('text', 'character varying', 'jsonb', 'json') OR udt_name IN ('_text', '_varchar'))
              AND table_name IN (SELECT table_name FROM information_schema.tables
                                 WHERE table_schema IN ('ghostmem', 'agent') AND table_type = 'BASE TABLE')
            """
        ).fetchall()
        assert len(columns) > 20
        parts = []
        for schema, table, column in columns:
            query = sql.SQL("SELECT {}::text FROM {}").format(
                sql.Identifier(column), sql.Identifier(schema, table)
            )
            parts += [r[0] for r in conn.execute(query) if r[0] is not None]
    return "\n".join(parts)


def test_secrets_in_every_field_of_every_format_reach_no_column(gm: GhostMem, tmp_path: Path) -> None:
    planted = Planted()
    write_every_format(tmp_path, planted)
    report = gm.import_paths([tmp_path], embed=True)
    assert report.ok and not report.problems, report.problems
    assert report.conversations_new == 7
    dump = every_text_column(gm)
    assert dump.count("[REDACTED:") >= 40
    leaks = sorted({field for secret, field in planted.all.items() if secret in dump})
    assert leaks == []
    for kind in ("slack_token", "sentry_dsn", "url_password", "github_token"):
        assert f"[REDACTED:{kind}]" in dump
