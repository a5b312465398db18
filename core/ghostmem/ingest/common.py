"""What every importer shares: the items a parser yields, time and role normalisation, titles, line reading."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

from ghostmem.records import ConversationRecord, MessageRecord, Role
from ghostmem.render import clip
from ghostmem.store import TITLE_FROM_PLATFORM, TITLE_FROM_PROMPT

TITLE_CHARS = 200


@dataclass(frozen=True, slots=True)
class Problem:
    """Input that could not be read, reported as ``file:line: reason`` (line 0 = the file as a whole)."""

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}" if self.line else f"{self.path}: {self.reason}"


@dataclass(frozen=True, slots=True)
class TitleHint:
    """A title for whichever conversation holds the message ``leaf_id`` (Claude Code ``summary`` lines)."""

    leaf_id: str
    title: str


@dataclass(slots=True)
class Parsed:
    """A conversation read from a source, and whether it continues what an earlier run stored (appended lines)."""

    record: ConversationRecord
    append: bool = False
    # native ids of every line of the conversation seen in this chunk (for title hints of other files)
    line_ids: list[str] = field(default_factory=list)


Item = Parsed | Problem | TitleHint


def parse_time(value: Any) -> datetime | None:
    """An aware UTC datetime from ISO-8601 text or an epoch number (seconds, or milliseconds when huge)."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            seconds = float(value)
            if seconds > 1e11:  # epoch milliseconds
                seconds /= 1000.0
            return datetime.fromtimestamp(seconds, UTC)
        if isinstance(value, str):
            text = value.strip()
            if re.fullmatch(r"\d+(\.\d+)?", text):
                return parse_time(float(text))
            ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
            return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None


_ROLES: dict[str, Role] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "bot": "assistant",
    "model": "assistant",
    "gemini": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
    "tool_call": "tool_call",
    "thinking": "thinking",
    "meta": "meta",
}


def normalise_role(raw: str | None) -> Role | None:
    """One of ghostmem's roles for a platform's role name, or None when it is unknown."""
    return _ROLES.get((raw or "").strip().lower())


def make_title(text: str | None) -> str | None:
    """A one-line title from a prompt (whitespace collapsed, bounded)."""
    title = clip(text, TITLE_CHARS)
    return title or None


def prompt_title(messages: Sequence[MessageRecord]) -> str | None:
    """The title of a conversation its platform did not name: its first user message, as :func:`make_title`."""
    return make_title(next((m.text for m in messages if m.role == "user"), None))


def platform_title(name: Any, messages: Sequence[MessageRecord]) -> tuple[str | None, int]:
    """A conversation's title and its rank (``ghostmem.store.TITLE_FROM_*``).

    The platform's own ``name`` (as :func:`make_title`) when it is text that is not blank, else the first prompt.
    """
    if isinstance(name, str) and name.strip():
        return make_title(name), TITLE_FROM_PLATFORM
    return prompt_title(messages), TITLE_FROM_PROMPT


def text_of(value: Any) -> str:
    """Text from the shapes platforms use: a string, a list of strings or ``{"text": ...}`` parts, else ""."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (text_of(v) for v in value) if t)
    if isinstance(value, dict):
        for key in ("text", "content"):
            if isinstance(value.get(key), str | list):
                return text_of(value[key])
    return ""


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


@dataclass(slots=True)
class Line:
    number: int  # 1-based line number in the file
    end: int  # byte offset just after this line
    value: Any = None  # the decoded JSON value, when it decoded
    error: str | None = None
    partial: bool = False  # the last line, still without its newline: not consumed, read again next time

    def consume(self, state: dict[str, Any]) -> None:
        """Record in a parser's state that the file was read up to and including this line."""
        if not self.partial:
            state["offset"], state["line"] = self.end, self.number


def read_jsonl(fh: IO[bytes], path: str, *, offset: int = 0, first_line: int = 1) -> Iterator[Line]:
    """JSON lines from ``offset`` on; a final line without a newline comes as a ``partial`` error (retried later).

    Bytes that are not UTF-8 are replaced rather than failing the line; a line that is not JSON is yielded with
    its error so the caller reports it and goes on.
    """
    fh.seek(offset)
    number = first_line - 1
    pos = offset
    for raw in fh:
        if not raw.endswith(b"\n"):  # a live session is still writing it, or the file was cut short
            if raw.strip():
                yield Line(
                    number + 1,
                    pos,
                    error="incomplete last line; read again once it is complete",
                    partial=True,
                )
            return
        number += 1
        pos += len(raw)
        stripped = raw.strip()
        if not stripped:
            continue
        text = stripped.decode("utf-8", errors="replace")
        try:
            yield Line(number, pos, json.loads(text))
        except json.JSONDecodeError as exc:
            yield Line(number, pos, error=f"malformed JSON ({exc.msg})")


def resume_jsonl(fh: IO[bytes], path: str, state: dict[str, Any]) -> Iterator[Line | Problem]:
    """The JSON lines of an append-only file after those its parser's ``state`` records as read.

    Each line is recorded in ``state`` (``offset``, ``line``) as it comes; a line that could not be read comes as
    its :class:`Problem`.
    """
    first_line = int(state.get("line", 0)) + 1
    for line in read_jsonl(fh, path, offset=int(state.get("offset", 0)), first_line=first_line):
        line.consume(state)
        yield line if line.error is None else Problem(path, line.number, line.error)
