"""Cursor chats (FORMATS.md §6): SQLite ``state.vscdb`` files, global and per workspace, with JSON values.

Cursor keeps the databases open, so each is copied (with its ``-wal``) to a temporary directory and read from the
copy. Modern composer chats live in the global database (``cursorDiskKV``: ``composerData:<id>`` with the bubble
order, ``bubbleId:<id>:<bubble>`` per message, or an inline ``conversation`` in older composers); the workspace
databases say which composer belongs to which folder (``composer.composerData``) and hold the legacy chat panel
(``workbench.panel.aichat.view.aichat.chatdata``). Per-message times are unreliable: the composer's are used.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ghostmem.ingest.common import Item, Parsed, Problem, parse_time, platform_title
from ghostmem.ingest.sources import Source
from ghostmem.records import ConversationRecord, MessageRecord, Role

LEGACY_CHAT_KEY = "workbench.panel.aichat.view.aichat.chatdata"
COMPOSER_INDEX_KEY = "composer.composerData"


def parse(source: Source, state: dict[str, Any]) -> Iterator[Item]:
    try:
        with _CopiedDatabase(source.path) as db:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "cursorDiskKV" in tables:
                folders = _workspace_folders(source.path)
                yield from _composers(db, source, folders)
            if "ItemTable" in tables:
                folder = _folder_of(source.path.parent)
                yield from _legacy_chats(db, source, folder)
    except sqlite3.Error as exc:
        yield Problem(source.label, 0, f"cannot read the Cursor database: {exc}")


class _CopiedDatabase:
    """A read-only connection to a private copy of a live SQLite database."""

    def __init__(self, path: Path) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="ghostmem-cursor-"))
        for suffix in ("", "-wal", "-shm"):
            src = Path(f"{path}{suffix}")
            if src.exists():
                shutil.copyfile(src, self._dir / f"state.vscdb{suffix}")
        self._conn = sqlite3.connect(self._dir / "state.vscdb")

    def __enter__(self) -> sqlite3.Connection:
        return self._conn

    def __exit__(self, *exc: object) -> None:
        self._conn.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def _json(value: Any) -> Any:
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    try:
        return json.loads(value) if isinstance(value, str) else None
    except json.JSONDecodeError:
        return None


def _folder_of(workspace_dir: Path) -> str | None:
    """The folder a workspace storage dir belongs to, from its ``workspace.json``."""
    try:
        data = json.loads((workspace_dir / "workspace.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    uri = data.get("folder") or data.get("workspace") if isinstance(data, dict) else None
    if not isinstance(uri, str):
        return None
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _workspace_folders(global_db: Path) -> dict[str, str]:
    """composerId → workspace folder, from the workspace databases next to the global one."""
    folders: dict[str, str] = {}
    root = global_db.parent.parent / "workspaceStorage"
    if not root.is_dir():
        return folders
    for ws_db in sorted(root.glob("*/state.vscdb")):
        folder = _folder_of(ws_db.parent)
        if folder is None:
            continue
        try:
            with _CopiedDatabase(ws_db) as db:
                row = db.execute(
                    "SELECT value FROM ItemTable WHERE key = ?", (COMPOSER_INDEX_KEY,)
                ).fetchone()
        except sqlite3.Error:
            continue
        index = _json(row[0]) if row else None
        for composer in (index or {}).get("allComposers") or []:
            if isinstance(composer, dict) and composer.get("composerId"):
                folders[str(composer["composerId"])] = folder
    return folders


def _composers(db: sqlite3.Connection, source: Source, folders: dict[str, str]) -> Iterator[Item]:
    rows = db.execute("SELECT key, value FROM cursorDiskKV WHERE key LIKE 'composerData:%' ORDER BY key")
    for key, value in rows.fetchall():
        data = _json(value)
        if not isinstance(data, dict):
            yield Problem(source.label, 0, f"{key}: not JSON; skipped")
            continue
        composer_id = str(data.get("composerId") or key.split(":", 1)[1])
        bubbles: list[dict[str, Any]] = []
        for header in data.get("fullConversationHeadersOnly") or []:
            if not isinstance(header, dict) or not header.get("bubbleId"):
                continue
            row = db.execute(
                "SELECT value FROM cursorDiskKV WHERE key = ?",
                (f"bubbleId:{composer_id}:{header['bubbleId']}",),
            ).fetchone()
            bubble = _json(row[0]) if row else None
            if isinstance(bubble, dict):
                bubbles.append({"type": header.get("type"), **bubble})
        if not bubbles:
            bubbles = [b for b in data.get("conversation") or [] if isinstance(b, dict)]
        started = parse_time(data.get("createdAt"))
        messages = []
        for index, bubble in enumerate(bubbles):
            role: Role = "user" if bubble.get("type") in (1, "user") else "assistant"
            native = str(bubble.get("bubbleId") or index)
            ts = parse_time(bubble.get("createdAt")) or started
            thinking = bubble.get("thinking")
            if isinstance(thinking, dict) and str(thinking.get("text") or "").strip():
                messages.append(
                    MessageRecord(f"{native}#thinking", "thinking", thinking["text"], ts, "thinking")
                )
            text = str(bubble.get("text") or "")
            if text.strip():
                messages.append(MessageRecord(native, role, text, ts, str(bubble.get("type"))))
        if not messages:
            continue  # an empty composer tab
        yield _parsed(composer_id, data.get("name"), messages, folders.get(composer_id), started,
                      parse_time(data.get("lastUpdatedAt")), source)  # fmt: skip


def _legacy_chats(db: sqlite3.Connection, source: Source, folder: str | None) -> Iterator[Item]:
    row = db.execute("SELECT value FROM ItemTable WHERE key = ?", (LEGACY_CHAT_KEY,)).fetchone()
    data = _json(row[0]) if row else None
    for tab in (data or {}).get("tabs") or []:
        if not isinstance(tab, dict) or not tab.get("tabId"):
            continue
        last = parse_time(tab.get("lastSendTime"))
        messages = []
        for index, bubble in enumerate(tab.get("bubbles") or []):
            if not isinstance(bubble, dict):
                continue
            text = str(bubble.get("text") or bubble.get("rawText") or "")
            if text.strip():
                role: Role = "user" if bubble.get("type") == "user" else "assistant"
                messages.append(
                    MessageRecord(str(bubble.get("id") or index), role, text, last, str(bubble.get("type")))
                )
        if messages:
            yield _parsed(str(tab["tabId"]), tab.get("chatTitle"), messages, folder, last, last, source)


def _parsed(
    conv_id: str, name: Any, messages: list[MessageRecord], project: str | None, started: Any, ended: Any,
    source: Source,
) -> Parsed:  # fmt: skip
    title, rank = platform_title(name, messages)
    return Parsed(
        ConversationRecord(
            conv_id=conv_id,
            platform="cursor",
            messages=messages,
            title=title,
            project=project,
            started_at=started,
            ended_at=ended,
            source=source.label,
            meta={"title_rank": rank},
        )
    )
