"""Where conversations come from: default locations, folders walked, zips opened, formats detected by content.

A :class:`Source` is one readable unit — a file, or one member of an export zip — with the platform its content
was recognised as. Detection never trusts a file name alone: it reads the first JSON line or the first object.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

import ijson

from ghostmem.ingest.common import Problem

Kind = Literal["append", "snapshot"]
SUFFIXES = (".jsonl", ".json", ".zip", ".vscdb")
_SKIP_NAMES = (
    "sessions-index.json",
    "history.jsonl",
    "logs.json",
    "projects.json",
    "users.json",
    "memories.json",
)
# Claude Code line types: a file whose first line has one of them is a session transcript.
CLAUDE_CODE_TYPES = frozenset(
    {
        "user", "assistant", "system", "summary", "custom-title", "agent-name", "file-history-snapshot",
        "progress", "queue-operation", "attachment", "pr-link", "agent-setting", "ai-title", "last-prompt",
    }
)  # fmt: skip
_DETECT_EVENTS = 20_000


@dataclass(frozen=True, slots=True)
class Source:
    """One readable unit: ``key`` identifies it in ``ghostmem.import_state`` (a path, or ``zip!member``)."""

    key: str
    platform: str
    kind: Kind
    path: Path  # the file on disk (the zip itself for a member)
    member: str | None = None

    def open(self) -> AbstractContextManager[IO[bytes]]:
        if self.member is None:
            return self.path.open("rb")
        return _ZipMember(self.path, self.member)

    @property
    def label(self) -> str:
        return f"{self.path}!{self.member}" if self.member else str(self.path)


class _ZipMember(AbstractContextManager[IO[bytes]]):
    def __init__(self, path: Path, member: str) -> None:
        self._zip = zipfile.ZipFile(path)
        self._fh = self._zip.open(member)

    def __enter__(self) -> IO[bytes]:
        return self._fh

    def __exit__(self, *exc: object) -> None:
        self._fh.close()
        self._zip.close()


def default_locations() -> list[Path]:
    """Every platform's usual place on this machine that exists (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME`` honoured)."""
    home = Path.home()
    claude = Path(os.environ.get("CLAUDE_CONFIG_DIR") or home / ".claude").expanduser()
    codex = Path(os.environ.get("CODEX_HOME") or home / ".codex").expanduser()
    candidates = [
        claude / "projects",
        codex / "sessions",
        codex / "archived_sessions",
        home / ".gemini" / "tmp",
    ]
    cursor_roots = [
        home / ".config" / "Cursor" / "User",
        home / "Library" / "Application Support" / "Cursor" / "User",
    ]
    if os.environ.get("APPDATA"):
        cursor_roots.append(Path(os.environ["APPDATA"]) / "Cursor" / "User")
    for root in cursor_roots:
        candidates += [root / "globalStorage", root / "workspaceStorage"]
    return [p for p in candidates if p.exists()]


def iter_sources(
    paths: list[Path], problem: Callable[[Problem], None], unchanged: Callable[[str, int, int], bool]
) -> Iterator[Source]:
    """Sources under ``paths``; files named explicitly that are not recognised are reported, walked ones skipped.

    ``unchanged(key, size, mtime_ns)`` is asked first, so a file already imported and not modified since costs one
    ``stat`` (what makes ``--watch`` polling cheap).
    """
    for path in paths:
        if not path.exists():
            problem(Problem(str(path), 0, "no such file or directory"))
        elif path.is_dir():
            for file in _walk(path):
                yield from _sources_of(file, problem, unchanged, explicit=False)
        else:
            yield from _sources_of(path, problem, unchanged, explicit=True)


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "tool-results")
        wanted = [
            Path(dirpath) / name
            for name in filenames
            if name.endswith(SUFFIXES) and not name.endswith(".meta.json") and name not in _SKIP_NAMES
        ]
        # oldest first: a resumed session is read after the one it continues (and keeps out its replayed lines)
        yield from sorted(wanted, key=lambda p: (_mtime(p), p.name))


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _sources_of(
    path: Path,
    problem: Callable[[Problem], None],
    unchanged: Callable[[str, int, int], bool],
    *,
    explicit: bool,
) -> Iterator[Source]:
    try:
        if path.suffix == ".zip":
            yield from _zip_sources(path, problem)
            return
        st = path.stat()
        if unchanged(str(path.resolve()), st.st_size, st.st_mtime_ns):
            return
        with path.open("rb") as fh:
            platform, kind = detect(fh, path.name)
    except (OSError, zipfile.BadZipFile) as exc:
        problem(Problem(str(path), 0, f"cannot read: {exc}"))
        return
    if platform is None:
        if explicit:
            problem(Problem(str(path), 0, "not a conversation file of any known format"))
        return
    yield Source(str(path.resolve()), platform, kind, path)


def _zip_sources(path: Path, problem: Callable[[Problem], None]) -> Iterator[Source]:
    with zipfile.ZipFile(path) as zf:
        names = [n for n in zf.namelist() if n.endswith(".json") and Path(n).name.startswith("conversations")]
        found = False
        for name in names:
            with zf.open(name) as fh:
                platform, kind = detect(fh, Path(name).name)
            if platform is not None:
                found = True
                yield Source(f"{path.resolve()}!{name}", platform, kind, path, member=name)
    if not found:
        problem(Problem(str(path), 0, "export zip without a recognised conversations*.json"))


def detect(fh: IO[bytes], name: str) -> tuple[str | None, Kind]:
    """(platform, kind) of an open file from its first bytes, or (None, ...) when it is nothing we read."""
    head = fh.read(16)
    fh.seek(0)
    if head.startswith(b"SQLite format 3\x00"):
        return ("cursor", "snapshot") if name.endswith(".vscdb") else (None, "snapshot")
    first = head.lstrip()[:1]
    if name.endswith(".jsonl"):
        return _detect_jsonl(fh), "append"
    if first in (b"{", b"["):
        return _detect_json(fh), "snapshot"
    return None, "snapshot"


def _detect_jsonl(fh: IO[bytes]) -> str | None:
    for _ in range(50):
        raw = fh.readline()
        if not raw:
            return None
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8", errors="replace"))
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            return None
        if "conv_id" in obj and "messages" in obj:
            return "generic"
        if obj.get("type") in (
            "session_meta",
            "response_item",
            "event_msg",
            "turn_context",
            "compacted",
        ) and ("payload" in obj):
            return "codex"
        if "record_type" in obj or ("id" in obj and "instructions" in obj and "type" not in obj):
            return "codex"
        if obj.get("type") in CLAUDE_CODE_TYPES:
            return "claude_code"
        return None
    return None


def _detect_json(fh: IO[bytes]) -> str | None:
    keys = first_object_keys(fh)
    fh.seek(0)
    if {"conv_id", "messages"} <= keys:
        return "generic"
    if "mapping" in keys and ("conversation_id" in keys or "id" in keys):
        return "chatgpt"
    if "chat_messages" in keys:
        return "claude_ai"
    if {"sessionId", "messages"} <= keys:
        return "gemini"
    return None


def first_object_keys(fh: IO[bytes]) -> set[str]:
    """Top-level keys of the root object, or of the first element of a root array (read lazily)."""
    keys: set[str] = set()
    depth_of_object: int | None = None
    depth = 0
    try:
        for count, (_prefix, event, value) in enumerate(ijson.parse(fh)):
            if event in ("start_map", "start_array"):
                depth += 1
                if event == "start_map" and depth_of_object is None:
                    depth_of_object = depth
            elif event in ("end_map", "end_array"):
                if depth == depth_of_object:
                    break
                depth -= 1
            elif event == "map_key" and depth == depth_of_object:
                keys.add(str(value))
            if (depth_of_object is None and depth > 1) or count > _DETECT_EVENTS:
                break
    except (ijson.JSONError, UnicodeDecodeError, ValueError):
        pass
    return keys


def stat_of(source: Source) -> tuple[int, int]:
    """(size, mtime_ns) of a source; for a zip member, the member's size and the zip's mtime."""
    st = source.path.stat()
    if source.member is None:
        return st.st_size, st.st_mtime_ns
    with zipfile.ZipFile(source.path) as zf:
        info = zf.getinfo(source.member)
        return info.file_size, st.st_mtime_ns + info.CRC
