"""Result models of the operations: what code reads (tool artifacts, ``raw_output``, ``--json``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MessageView(_Model):
    """One message as shown to a reader: its position, role, time and (possibly bounded) text."""

    seq: int
    role: str
    ts: datetime | None = None
    speaker: str | None = None
    text: str
    truncated: bool = False


def unnamed_cluster_topic(cluster: int) -> str:
    """The topic of a cluster whose conversations share no words worth naming it by (enrich.recluster): its number,
    which a conversation's row then need not show again."""
    return f"cluster {cluster}"


class ConversationRow(_Model):
    """The fields of a row header ``[conv_id | platform | started→ended | title | topic | cluster | messages |
    intensity]`` plus where it lives and the first message's snippet."""

    conv_id: str
    tier: str
    platform: str
    started_at: datetime | None = None
    ended_at: datetime | None = None
    title: str | None = None
    project: str | None = None
    topic: str | None = None
    cluster: int | None = None
    msg_count: int = 0
    intensity: float | None = None
    snippet: str | None = None


class SearchHit(ConversationRow):
    """A conversation found by a search: its score and the best-matching messages.

    ``score`` is how much of the query it holds, from 0 to 1: the idf-weighted share of the query's words in its best
    messages and their cosine to the query (from the floor 0.2 = none to 0.6 = full), capped by the score of the hit
    ranked before it, so the order stays the search's (docs/search.md, "What a score means").
    """

    score: float
    matches: list[MessageView] = Field(default_factory=list)
    explain: dict[str, Any] | None = None


class ConversationList(_Model):
    """Conversations active in the last ``days``. When none is, ``before`` holds the most recent ones before that
    window, then those without a time, and ``widen_to`` the window that would list those with one (None when none
    has): history imported from long ago, or without times, is not hidden."""

    rows: list[ConversationRow]
    days: int | None = None
    before: list[ConversationRow] = Field(default_factory=list)
    widen_to: int | None = None
    nothing_stored: bool = (
        False  # no filter and not one conversation in personal memory: nothing imported yet
    )


class SearchResult(_Model):
    query: str
    rows: list[SearchHit]
    # the owner holds no message in the tiers searched: no filter or other words would find anything
    nothing_stored: bool = False


class Thread(_Model):
    """A page of a conversation's messages, in thread order."""

    conversation: ConversationRow
    messages: list[MessageView]
    offset: int
    total: int
    next_offset: int | None = None


class ConversationSummary(_Model):
    """Metadata and the first and last messages of a conversation, never the full transcript."""

    conversation: ConversationRow
    head: list[MessageView]
    tail: list[MessageView]
    omitted: int


class GhostMemoryRow(_Model):
    """A ghost memory with its signals, its score and the per-term breakdown of that score."""

    memory_id: int
    content: str
    kind: str
    scope: str
    project: str | None = None
    allowlist: list[str] = Field(default_factory=list)
    score: float | None = None
    breakdown: dict[str, float] = Field(default_factory=dict)
    created_at: datetime | None = None
    last_activated_at: datetime | None = Field(
        default=None, description="When a search last returned it (any return, overviews included)"
    )
    last_used_at: datetime | None = Field(
        default=None,
        description="When it was last used: returned for a query that explains it, endorsed, prevented an incident",
    )


class GhostList(_Model):
    query: str
    current_project: str | None = None
    rows: list[GhostMemoryRow]
    # no memory of the owner applies here at all (none stored, or only other projects'): no words would find one
    none_visible: bool = False


class RememberResult(_Model):
    memory: GhostMemoryRow
    created: bool = Field(description="False when a near-duplicate was strengthened instead of adding a copy")


class FeedbackResult(_Model):
    memory: GhostMemoryRow
    signal: str


class MemoryChange(_Model):
    """What update_memory or retire_memory did to a memory (``memory`` as it is now, or as it was when retired)."""

    memory: GhostMemoryRow
    action: Literal["updated", "retired"]
