"""Cursor chats (docs/platforms.md §6): SQLite ``state.vscdb`` files, global and per workspace, with JSON values.

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

from ghostmem.ingest.common import SHAPE_ERRORS, Item, Parsed, Problem, finish, parse_time, shape_problem
from ghostmem.ingest.reading import decode
from ghostmem.ingest.sources import Source
from ghostmem.records import MessageRecord, Role

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
    """A stored JSON value, within the readers' size and depth limits; None when it is not one."""
    raw = value.encode("utf-8", errors="replace") if isinstance(value, str) else value
    if not isinstance(raw, bytes):
        return None
    decoded, error, _ = decode(raw)
    return decoded if error is None else None


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
        except (sqlite3.Error, OSError):
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
        try:
            yield from _composer(db, source, str(key), data, folders)
        except SHAPE_ERRORS as exc:
            yield shape_problem(source.label, 0, exc, f"{key}: ")


def _composer(
    db: sqlite3.Connection, source: Source, key: str, data: dict[str, Any], folders: dict[str, str]
) -> Iterator[Item]:
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
        if isinstance(thinking, dict) and isinstance(thinking.get("text"), str) and thinking["text"].strip():
            messages.append(MessageRecord(native_id=f"{native}#thinking", role="thinking",
                                          text=thinking["text"], ts=ts, raw_role="thinking"))  # fmt: skip
        text = str(bubble.get("text") or "")
        if text.strip():
            messages.append(MessageRecord(native_id=native, role=role, text=text, ts=ts,
                                          raw_role=str(bubble.get("type"))))  # fmt: skip
    yield from _parsed(composer_id, data.get("name"), messages, folders.get(composer_id), started,
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
                messages.append(MessageRecord(native_id=str(bubble.get("id") or index), role=role, text=text,
                                              ts=last, raw_role=str(bubble.get("type"))))  # fmt: skip
        if messages:
            yield from _parsed(str(tab["tabId"]), tab.get("chatTitle"), messages, folder, last, last, source)


def _parsed(
    conv_id: str, name: Any, messages: list[MessageRecord], project: str | None, started: Any, ended: Any,
    source: Source,
) -> Iterator[Parsed]:  # fmt: skip
    parsed = finish(conv_id=conv_id, platform="cursor", messages=messages, source=source.label, title=name,
                    project=project, started_at=started, ended_at=ended)  # fmt: skip
    if parsed is not None:
        yield parsed
