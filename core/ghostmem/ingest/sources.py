"""Where conversations come from: default locations, folders walked, zips opened, formats detected by content.

A :class:`Source` is one readable unit — a file, or one member of an export zip — with the platform its content
was recognised as. Detection never trusts a file name alone: it reads the first JSON line or the first object.
Only regular files are opened: a FIFO, device or socket (whatever its name) is skipped with its reason, never read,
and a zip member is read only when its size is within :data:`MAX_MEMBER_BYTES` and its compression ratio within
:data:`MAX_ZIP_RATIO` (``zipfile`` never inflates a member past the size its header declares).
"""

from __future__ import annotations

import os
import stat
import zipfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from ghostmem.ingest.common import Problem
from ghostmem.ingest.reading import MAX_RECORD_BYTES, read_document, read_lines

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
_DETECT_RECORDS = 3
_DETECT_LINES = 50
_CODEX_ENVELOPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
# Export JSON deflates 5-20x; a member inflating far more than that, or past this size, is a zip bomb.
MAX_ZIP_RATIO = 100
MAX_MEMBER_BYTES = 16 << 30


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
            return open_regular(self.path)
        return _ZipMember(self.path, self.member)

    @property
    def label(self) -> str:
        return f"{self.path}!{self.member}" if self.member else str(self.path)


def special_file(st: os.stat_result) -> str | None:
    """Why a file must not be read (a FIFO would block forever, a device never end), or None for a regular file."""
    if stat.S_ISREG(st.st_mode):
        return None
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(st.st_mode):
            return f"{kind}, not a regular file; skipped"
    return "not a regular file; skipped"


def open_regular(path: Path) -> IO[bytes]:
    """``path`` opened for reading when it is a regular file (checked before opening, and again on what was opened,
    without blocking: the name may have been swapped for a FIFO in between)."""
    reason = special_file(path.stat())
    if reason is not None:
        raise OSError(f"{path}: {reason}")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        reason = special_file(os.fstat(fd))
        if reason is not None:
            raise OSError(f"{path}: {reason}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def zip_member_problem(info: zipfile.ZipInfo) -> str | None:
    """Why a zip member is not inflated (a zip bomb's shape), or None."""
    if info.file_size > MAX_MEMBER_BYTES:
        return f"{info.filename} would inflate to {info.file_size >> 20} MB, more than the {MAX_MEMBER_BYTES >> 30} GB limit; skipped"
    if info.file_size > MAX_RECORD_BYTES and info.file_size > MAX_ZIP_RATIO * max(info.compress_size, 1):
        return (f"{info.filename} would inflate {info.file_size // max(info.compress_size, 1)}-fold, more than "
                f"{MAX_ZIP_RATIO}-fold (a zip bomb?); skipped")  # fmt: skip
    return None


class _ZipMember(AbstractContextManager[IO[bytes]]):
    def __init__(self, path: Path, member: str) -> None:
        self._zip = zipfile.ZipFile(open_regular(path))
        try:
            reason = zip_member_problem(self._zip.getinfo(member))
            if reason is not None:
                raise OSError(reason)
            self._fh = self._zip.open(member)
        except BaseException:
            self._zip.close()
            raise

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
        st = path.stat()
        reason = special_file(st)
        if reason is not None:
            problem(Problem(str(path), 0, reason))
            return
        if path.suffix == ".zip":
            yield from _zip_sources(path, problem)
            return
        if unchanged(str(path.resolve()), st.st_size, st.st_mtime_ns):
            return
        with open_regular(path) as fh:
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
    with zipfile.ZipFile(open_regular(path)) as zf:
        names = [n for n in zf.namelist() if n.endswith(".json") and Path(n).name.startswith("conversations")]
        found = False
        for name in names:
            reason = zip_member_problem(zf.getinfo(name))
            if reason is not None:
                problem(Problem(str(path), 0, reason))
                continue
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
    """The platform of the first recognisable line among the first 50 (a broken first line hides nothing)."""
    for count, line in enumerate(read_lines(fh)):
        if count >= _DETECT_LINES:
            return None
        platform = _platform_of_line(line.value) if line.error is None else None
        if platform is not None:
            return platform
    return None


def _platform_of_line(obj: object) -> str | None:
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type")
    if not isinstance(kind, str | None):
        return None
    if "conv_id" in obj and "messages" in obj:
        return "generic"
    if kind in _CODEX_ENVELOPES and "payload" in obj:
        return "codex"
    if "record_type" in obj or ("id" in obj and "instructions" in obj and kind is None):
        return "codex"
    if kind in CLAUDE_CODE_TYPES:
        return "claude_code"
    return None


def _detect_json(fh: IO[bytes]) -> str | None:
    """The platform of the first recognisable object among the first elements (or of the root object)."""
    try:
        for count, record in enumerate(read_document(fh, budget=MAX_RECORD_BYTES + (1 << 20))):
            if isinstance(record.value, dict):
                platform = _platform_of_keys(set(record.value))
                if platform is not None:
                    return platform
            if count + 1 >= _DETECT_RECORDS:
                break
        return None
    finally:
        fh.seek(0)


def _platform_of_keys(keys: set[str]) -> str | None:
    if {"conv_id", "messages"} <= keys:
        return "generic"
    if "mapping" in keys and ("conversation_id" in keys or "id" in keys):
        return "chatgpt"
    if "chat_messages" in keys:
        return "claude_ai"
    if {"sessionId", "messages"} <= keys:
        return "gemini"
    return None


def stat_of(source: Source) -> tuple[int, int]:
    """(size, mtime_ns) of a source; for a zip member, the member's size and the zip's mtime."""
    st = source.path.stat()
    if source.member is None:
        return st.st_size, st.st_mtime_ns
    with zipfile.ZipFile(source.path) as zf:
        info = zf.getinfo(source.member)
        return info.file_size, st.st_mtime_ns + info.CRC
