"""What every importer produces: one :class:`ConversationRecord` with its :class:`MessageRecord` list.

Importers are pure parsers from a platform's files to these records; :mod:`ghostmem.store` writes them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

Platform = Literal[
    "claude_code",
    "codex",
    "gemini",
    "chatgpt",
    "claude_ai",
    "cursor",
    "langchain",
    "llamaindex",
    "langgraph",
    "generic",
]

PLATFORMS: tuple[str, ...] = get_args(Platform)

Role = Literal["user", "assistant", "system", "tool", "tool_call", "thinking", "meta"]
# Roles whose text is what a person said or was told: indexed and embedded by default.
CONVERSATIONAL_ROLES: frozenset[str] = frozenset({"user", "assistant"})

Tier = Literal["personal", "library"]
TIERS: tuple[str, ...] = get_args(Tier)

# How sure an importer is of a title (``ConversationRecord.meta["title_rank"]``): a better source replaces a worse
# one; among equals a platform title or a summary is replaced by a newer one, a first-prompt title never is.
TITLE_FROM_PROMPT = 1
TITLE_FROM_SUMMARY = 2
TITLE_FROM_PLATFORM = 3


def clip(text: str | None, limit: int) -> str:
    """One line of at most ``limit`` characters (whitespace collapsed, an ellipsis when cut).

    Reads only a start of the text long enough for the line (four times longer each time the collapsed start is
    still short), so a huge text costs no more than a short one. A start cut inside a word ends in part of it,
    which is what the whole text's line holds there: if that start is already longer than the line, the line is
    cut within it, as it would be within the whole text.
    """
    if not text:
        return ""
    read = limit + 1
    while True:
        flat = " ".join(text[:read].split())
        if len(flat) > limit or read >= len(text):
            break
        read *= 4
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def shortened(text: str, limit: int) -> str:
    """``text`` when it is at most ``limit`` bytes (UTF-8); else its start and its end around a digest of the whole,
    ``start…<16 hex digits>…end``, in at most ``limit`` bytes, cut at character boundaries.

    The same text is always shortened the same way (a re-import finds the same value), two texts that differ
    anywhere stay apart (the digest), and a substring still finds it by its start or its end (a path's root, its
    last folders).
    """
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    mark = f"…{hashlib.sha256(data).hexdigest()[:16]}…"
    room = limit - len(mark.encode("utf-8"))
    start = data[: room - room // 2].decode("utf-8", "ignore")
    end = data[len(data) - room // 2 :].decode("utf-8", "ignore")
    return start + mark + end


@dataclass(slots=True)
class MessageRecord:
    """One message of a conversation, in thread order.

    ``native_id`` is the platform's own id (plus a block index when one native message was split), so a re-import
    updates instead of duplicating.
    """

    native_id: str
    role: Role
    text: str
    ts: datetime | None = None
    raw_role: str | None = None
    speaker: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ConversationRecord:
    """A conversation as an importer read it, before enrichment and storage."""

    conv_id: str
    platform: Platform
    messages: list[MessageRecord]
    title: str | None = None
    project: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    parent_conv_id: str | None = None
    source: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
