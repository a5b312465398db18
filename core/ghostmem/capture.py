"""Live capture: a running LangChain or LlamaIndex conversation kept in personal memory as it happens.

A captured conversation is a list of messages an application appends to, rewrites or clears. Each save writes the
whole list through :func:`ghostmem.store.save_conversation` (the one write path: redaction, ignore marker,
forgotten ids, embeddings), with the message's position as its native id, so unchanged messages keep their
embeddings and the conversation is searchable as soon as the call returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg import Connection
from psycopg.rows import dict_row

from ghostmem.embed import Embedder
from ghostmem.records import ConversationRecord, MessageRecord, Platform, clip
from ghostmem.render import TITLE_CHARS
from ghostmem.store import SaveResult, save_conversation

TIER = "personal"


def lock_conversation(conn: Connection[Any], owner: str, conv_id: str) -> None:
    """Serialise writers of one captured conversation until the caller's transaction ends.

    Two processes appending to the same session would otherwise both read n messages and both write message n.
    """
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
        (f"ghostmem.capture\x1f{owner}\x1f{conv_id}",),
    )


def load_messages(conn: Connection[Any], owner: str, conv_id: str) -> list[MessageRecord]:
    """The messages of a captured conversation, in order (empty when it does not exist)."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            """
            SELECT native_id, role, raw_role, speaker, text, ts, meta FROM ghostmem.messages
            WHERE owner = %s AND tier = %s AND conv_id = %s ORDER BY seq
            """,
            (owner, TIER, conv_id),
        ).fetchall()
    return [MessageRecord(**row) for row in rows]


def save_messages(
    conn: Connection[Any],
    owner: str,
    conv_id: str,
    platform: Platform,
    messages: Sequence[MessageRecord],
    *,
    embedder: Embedder | None,
    title: str | None = None,
    project: str | None = None,
) -> SaveResult:
    """Make the stored conversation hold exactly ``messages`` (an empty list deletes it)."""
    lock_conversation(conn, owner, conv_id)
    if not messages:
        delete_conversation(conn, owner, conv_id)
        return SaveResult()
    now = datetime.now(UTC)
    records = [
        MessageRecord(
            native_id=str(seq),
            role=msg.role,
            text=msg.text,
            ts=msg.ts or now,
            raw_role=msg.raw_role,
            speaker=msg.speaker,
            meta=msg.meta,
        )
        for seq, msg in enumerate(messages)
    ]
    first_user = next((m.text for m in records if m.role == "user" and m.text.strip()), None)
    record = ConversationRecord(
        conv_id=conv_id,
        platform=platform,
        messages=records,
        title=title or clip(first_user, TITLE_CHARS) or None,
        project=project,
        ended_at=max(m.ts for m in records if m.ts is not None),
        source=f"live:{platform}",
    )
    # A shorter list than before (a message deleted or the list replaced) leaves no stale tail behind.
    conn.execute(
        "DELETE FROM ghostmem.messages WHERE owner = %s AND tier = %s AND conv_id = %s AND seq >= %s",
        (owner, TIER, conv_id, len(records)),
    )
    return save_conversation(conn, owner, TIER, record, embedder=embedder)


def append_messages(
    conn: Connection[Any],
    owner: str,
    conv_id: str,
    platform: Platform,
    messages: Sequence[MessageRecord],
    *,
    embedder: Embedder | None,
    title: str | None = None,
    project: str | None = None,
) -> SaveResult:
    """Add ``messages`` at the end of the conversation (created on first use)."""
    lock_conversation(conn, owner, conv_id)
    existing = load_messages(conn, owner, conv_id)
    return save_messages(
        conn,
        owner,
        conv_id,
        platform,
        [*existing, *messages],
        embedder=embedder,
        title=title,
        project=project,
    )


def delete_conversation(conn: Connection[Any], owner: str, conv_id: str) -> bool:
    """Remove a captured conversation and its messages; False when there was none."""
    lock_conversation(conn, owner, conv_id)
    row = conn.execute(
        "DELETE FROM ghostmem.conversations WHERE owner = %s AND tier = %s AND conv_id = %s RETURNING 1",
        (owner, TIER, conv_id),
    ).fetchone()
    return row is not None


def conversation_ids(conn: Connection[Any], owner: str, platform: Platform) -> list[str]:
    """The conv_ids of one platform's conversations in personal memory, oldest first."""
    rows = conn.execute(
        """
        SELECT conv_id FROM ghostmem.conversations WHERE owner = %s AND tier = %s AND platform = %s
        ORDER BY started_at NULLS LAST, conv_id
        """,
        (owner, TIER, platform),
    ).fetchall()
    return [str(r[0]) for r in rows]
