"""What every importer produces: one :class:`ConversationRecord` with its :class:`MessageRecord` list.

Importers are pure parsers from a platform's files to these records; :mod:`ghostmem.store` writes them.
"""

from __future__ import annotations

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
    "generic",
]
PLATFORMS: tuple[str, ...] = get_args(Platform)

Role = Literal["user", "assistant", "system", "tool", "tool_call", "thinking", "meta"]
ROLES: tuple[str, ...] = get_args(Role)
# Roles whose text is what a person said or was told: indexed and embedded by default.
CONVERSATIONAL_ROLES: frozenset[str] = frozenset({"user", "assistant"})

Tier = Literal["personal", "library"]
TIERS: tuple[str, ...] = get_args(Tier)


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
