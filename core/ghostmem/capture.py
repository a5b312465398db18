"""Live capture: a running LangChain or LlamaIndex conversation kept in personal memory as it happens.

A captured conversation is a list of messages an application appends to, rewrites or clears. Every write goes
through :func:`ghostmem.store.save_conversation` (the one write path: redaction, ignore marker, forgotten ids,
embeddings), so the conversation is searchable as soon as the call returns. A message's native id is its position
(chat histories and chat stores) or the application's own message id (an agent's thread, :func:`sync_messages`).
Appending writes and embeds only the new messages; rewriting keeps the rows and embeddings of unchanged ones.

Applications reach these through the client (:meth:`ghostmem.GhostMem.capture_append` and its siblings), which
supplies the connection, owner and embedder; the LangChain and LlamaIndex chat stores and the capture middleware
are thin layers over them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg import Connection
from psycopg.rows import dict_row

from ghostmem import store
from ghostmem.embed import Embedder
from ghostmem.limits import STORED_TITLE_CHARS
from ghostmem.records import ConversationRecord, MessageRecord, Platform, clip
from ghostmem.store import SaveResult, save_conversation

TIER = "personal"


def lock_conversation(conn: Connection[Any], owner: str, conv_id: str) -> None:
    """Serialise the writers of one captured conversation until the caller's transaction ends: the lock every
    writer of it takes (:func:`ghostmem.store.lock_conversation`), an import's too, so what the caller reads of it
    stays true until it commits."""
    store.lock_conversation(conn, owner, TIER, conv_id)


def load_messages(conn: Connection[Any], owner: str, conv_id: str) -> list[MessageRecord]:
    """The messages of a captured conversation, in order (empty when it does not exist), read through its own index
    entries whatever the planner knows (migration 159)."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            """
            SELECT native_id, role, raw_role, speaker, text, ts, meta
            FROM ghostmem.conversation_messages(%s, %s, %s) ORDER BY seq
            """,
            (owner, TIER, conv_id),
        ).fetchall()
    return [MessageRecord(**row) for row in rows]


def _stamped(messages: Sequence[MessageRecord], ids: Sequence[str]) -> list[MessageRecord]:
    """The messages with their native ids, a message without a time stamped now."""
    now = datetime.now(UTC)
    return [
        MessageRecord(
            native_id=native_id,
            role=msg.role,
            text=msg.text,
            ts=msg.ts or now,
            raw_role=msg.raw_role,
            speaker=msg.speaker,
            meta=msg.meta,
        )
        for native_id, msg in zip(ids, messages, strict=True)
    ]


def _conversation(
    conv_id: str,
    platform: Platform,
    records: list[MessageRecord],
    *,
    title: str | None,
    project: str | None,
    first: bool,
) -> ConversationRecord:
    """The conversation record of ``records``; ``first``: they start it, so its first user message is the title
    when none is given."""
    first_user = (
        next((m.text for m in records if m.role == "user" and m.text.strip()), None) if first else None
    )
    return ConversationRecord(
        conv_id=conv_id,
        platform=platform,
        messages=records,
        title=title or clip(first_user, STORED_TITLE_CHARS) or None,
        project=project,
        ended_at=max(m.ts for m in records if m.ts is not None),
        source=f"live:{platform}",
    )


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
    ids: Sequence[str] | None = None,
) -> SaveResult:
    """Make the stored conversation hold exactly ``messages`` (an empty list deletes it).

    ``ids`` are the messages' native ids (default: their positions); unchanged messages keep their rows and
    embeddings, stored messages whose id is not among them are deleted.
    """
    lock_conversation(conn, owner, conv_id)
    if not messages:
        delete_conversation(conn, owner, conv_id)
        return SaveResult()
    ids = list(ids) if ids is not None else [str(n) for n in range(len(messages))]
    conn.execute(  # found through the conversation's index (migration 159), deleted by id (store._BY_ID)
        """
        DELETE FROM ghostmem.messages WHERE (owner = %s) IS TRUE AND id = ANY(ARRAY(
            SELECT f.id FROM ghostmem.conversation_messages(%s, %s, %s) f WHERE f.native_id <> ALL(%s)))
        """,
        (owner, owner, TIER, conv_id, ids),
    )
    record = _conversation(
        conv_id, platform, _stamped(messages, ids), title=title, project=project, first=True
    )
    return save_conversation(conn, owner, TIER, record, embedder=embedder)


def _last_message(conn: Connection[Any], owner: str, conv_id: str) -> tuple[int, str] | None:
    """(seq, native_id) of the conversation's last message: one descent of the conversation's index, whatever its
    length and whatever the planner knows of the owner (migration 147)."""
    row = conn.execute(
        "SELECT seq, native_id FROM ghostmem.conversation_end(%s, %s, %s)", (owner, TIER, conv_id)
    ).fetchone()
    return (int(row[0]), str(row[1])) if row and row[0] is not None else None


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
    ids: Sequence[str] | None = None,
) -> SaveResult:
    """Add ``messages`` at the end of the conversation (created on first use).

    Only the new messages are written and embedded: the cost is that of ``messages``, not of the conversation.
    ``ids`` are their native ids (default: their positions); a message whose id is stored already is skipped.
    """
    lock_conversation(conn, owner, conv_id)
    if not messages:
        return SaveResult()
    return _append(conn, owner, conv_id, platform, messages, _last_message(conn, owner, conv_id),
                   embedder=embedder, title=title, project=project, ids=ids)  # fmt: skip


def _append(
    conn: Connection[Any],
    owner: str,
    conv_id: str,
    platform: Platform,
    messages: Sequence[MessageRecord],
    last: tuple[int, str] | None,
    *,
    embedder: Embedder | None,
    title: str | None,
    project: str | None,
    ids: Sequence[str] | None,
) -> SaveResult:
    """:func:`append_messages` after the lock, ``last`` read under it: the new messages are numbered from it, with
    no second look at the conversation."""
    start = last[0] + 1 if last else 0
    ids = list(ids) if ids is not None else [str(start + n) for n in range(len(messages))]
    records = _stamped(messages, ids)
    record = _conversation(conv_id, platform, records, title=title, project=project, first=last is None)
    return save_conversation(conn, owner, TIER, record, embedder=embedder, append=True, next_seq=start)


def sync_messages(
    conn: Connection[Any],
    owner: str,
    conv_id: str,
    platform: Platform,
    messages: Sequence[MessageRecord],
    ids: Sequence[str],
    *,
    embedder: Embedder | None,
    title: str | None = None,
    project: str | None = None,
) -> SaveResult:
    """Make the stored conversation hold ``messages`` (identified by ``ids``), writing only what is new.

    For a thread that grows (an agent's state), the stored messages are the first of ``messages``: only the rest is
    appended, so a turn costs its own messages and syncing the same list twice writes nothing. When the stored
    conversation is not such a beginning (the application removed or summarised messages), it is replaced.
    """
    lock_conversation(conn, owner, conv_id)
    last = _last_message(conn, owner, conv_id)
    stored = last[0] + 1 if last else 0
    if last is None or (stored <= len(ids) and ids[stored - 1] == last[1]):
        if stored >= len(messages):
            return SaveResult()
        return _append(
            conn, owner, conv_id, platform, messages[stored:], last, embedder=embedder, title=title,
            project=project, ids=ids[stored:],
        )  # fmt: skip
    return save_messages(
        conn, owner, conv_id, platform, messages, embedder=embedder, title=title, project=project, ids=ids
    )


def delete_conversation(conn: Connection[Any], owner: str, conv_id: str) -> bool:
    """Remove a captured conversation and its messages; False when there was none."""
    lock_conversation(conn, owner, conv_id)
    row = conn.execute(
        "DELETE FROM ghostmem.conversations WHERE owner = %s AND tier = %s AND conv_id = %s RETURNING 1",
        (owner, TIER, conv_id),
    ).fetchone()
    return row is not None


def remove_conversation(conn: Connection[Any], owner: str, conv_id: str) -> list[MessageRecord]:
    """Remove a captured conversation; returns the messages it held (empty when there was none)."""
    lock_conversation(conn, owner, conv_id)
    records = load_messages(conn, owner, conv_id)
    delete_conversation(conn, owner, conv_id)
    return records


def remove_message(
    conn: Connection[Any],
    owner: str,
    conv_id: str,
    platform: Platform,
    index: int,
    *,
    embedder: Embedder | None,
    project: str | None = None,
) -> MessageRecord | None:
    """Remove the message at ``index`` (negative counts from the end); None when there is no such message."""
    lock_conversation(conn, owner, conv_id)
    records = load_messages(conn, owner, conv_id)
    if not -len(records) <= index < len(records):
        return None
    removed = records.pop(index)
    save_messages(conn, owner, conv_id, platform, records, embedder=embedder, project=project)
    return removed


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
