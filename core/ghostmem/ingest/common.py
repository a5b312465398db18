"""What every importer shares: the items a parser yields, time and role normalisation, titles, finishing a record."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

from ghostmem.ingest.reading import Record, read_document, read_lines
from ghostmem.limits import STORED_TITLE_CHARS
from ghostmem.records import (
    TITLE_FROM_PLATFORM,
    TITLE_FROM_PROMPT,
    ConversationRecord,
    MessageRecord,
    Platform,
    Role,
    clip,
)

# What a record of valid JSON in a shape its parser did not foresee raises while it is read: caught per record.
SHAPE_ERRORS = (AttributeError, TypeError, KeyError, ValueError, IndexError)


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


def normalise_role(raw: Any) -> Role | None:
    """One of ghostmem's roles for a platform's role name, or None when it is unknown (or not text)."""
    return _ROLES.get(raw.strip().lower()) if isinstance(raw, str) else None


def make_title(text: str | None) -> str | None:
    """A one-line title from a prompt (whitespace collapsed, bounded)."""
    title = clip(text, STORED_TITLE_CHARS)
    return title or None


def prompt_title(messages: Sequence[MessageRecord]) -> str | None:
    """The title of a conversation its platform did not name: its first user message, as :func:`make_title`."""
    return make_title(next((m.text for m in messages if m.role == "user"), None))


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


def resume_jsonl(fh: IO[bytes], path: str, state: dict[str, Any]) -> Iterator[Record | Problem]:
    """The JSON lines of an append-only file after those its parser's ``state`` records as read.

    Each line is recorded in ``state`` (``offset``, ``line``) as it comes; a line that could not be read comes as
    its :class:`Problem` (so the file's state moves past it and the next run does not meet it again), a line that
    was repaired as its :class:`Problem` followed by the line.
    """
    first_line = int(state.get("line", 0)) + 1
    for line in read_lines(fh, offset=int(state.get("offset", 0)), first_line=first_line):
        line.consume(state)
        if line.warning is not None:
            yield Problem(path, line.number, line.warning)
        yield line if line.error is None else Problem(path, line.number, line.error)


def read_records(
    fh: IO[bytes], path: str, convert: Callable[[Any, int, str], Iterator[Item]]
) -> Iterator[Item]:
    """The items ``convert(value, line, where)`` makes of each record of a JSON document, one record at a time.

    A record that cannot be read, or whose conversion meets a shape it did not foresee, is one problem at its
    line (``where`` names it: ``conversation #N:``); the records after it are read as usual.
    """
    for record in read_document(fh):
        where = f"conversation #{record.index}: "
        if record.warning is not None:
            yield Problem(path, record.number, where + record.warning)
        if record.error is not None:
            yield Problem(path, record.number, where + record.error)
            continue
        try:
            yield from convert(record.value, record.number, where)
        except SHAPE_ERRORS as exc:
            yield shape_problem(path, record.number, exc, where)


def shape_problem(path: str, line: int, exc: Exception, what: str = "") -> Problem:
    """The problem of a record whose JSON is valid but not shaped as its platform writes it (it is skipped)."""
    return Problem(path, line, f"{what}unexpected shape ({type(exc).__name__}: {exc}); skipped")


def finish(
    *,
    conv_id: str,
    platform: Platform,
    messages: list[MessageRecord],
    source: str | None,
    title: Any = None,
    title_rank: int = TITLE_FROM_PLATFORM,
    project: str | None = None,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
    parent_conv_id: str | None = None,
    meta: dict[str, Any] | None = None,
    append: bool = False,
    line_ids: list[str] | None = None,
) -> Parsed | None:
    """A conversation read whole, or None when it has no message (nothing to store: no empty conversations).

    ``title`` is the platform's own (at ``title_rank``) when it is text that is not blank, else the first prompt
    is; the span defaults to the first and last message time.
    """
    if not messages:
        return None
    if isinstance(title, str) and title.strip():
        made, rank = make_title(title), title_rank
    else:
        made, rank = prompt_title(messages), TITLE_FROM_PROMPT
    times = [m.ts for m in messages if m.ts]
    record = ConversationRecord(
        conv_id=conv_id,
        platform=platform,
        messages=messages,
        title=made,
        project=project if isinstance(project, str) and project else None,
        started_at=started_at or (min(times) if times else None),
        ended_at=ended_at or (max(times) if times else None),
        parent_conv_id=parent_conv_id,
        source=source,
        meta={**(meta or {}), "title_rank": rank},
    )
    return Parsed(record, append=append, line_ids=line_ids or [])
