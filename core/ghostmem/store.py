"""The one write path into personal memory: every importer and live capture calls :func:`save_conversation`.

It is the chokepoint where secrets are redacted, ``ghostmem:ignore`` conversations and forgotten ids are dropped,
messages are upserted by native id (a re-import never duplicates), and new conversational text is embedded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from ghostmem.embed import Embedder
from ghostmem.records import CONVERSATIONAL_ROLES, ConversationRecord

IGNORE_MARKER = "ghostmem:ignore"


@dataclass(slots=True)
class SaveResult:
    created: bool = False
    messages_new: int = 0
    skipped: str | None = None  # why nothing was stored: "ignored" | "forgotten"


def content_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def save_conversation(
    conn: Connection[Any], owner: str, tier: str, record: ConversationRecord, *, embedder: Embedder | None
) -> SaveResult:
    """Upsert one conversation and its messages in the caller's transaction."""
    if any(IGNORE_MARKER in m.text for m in record.messages) or IGNORE_MARKER in (record.title or ""):
        return SaveResult(skipped="ignored")
    forgotten = conn.execute(
        "SELECT 1 FROM ghostmem.forgotten WHERE owner = %s AND conv_id = %s", (owner, record.conv_id)
    ).fetchone()
    if forgotten:
        return SaveResult(skipped="forgotten")
    created = conn.execute(
        """
        INSERT INTO ghostmem.conversations AS c
            (owner, tier, conv_id, platform, parent_conv_id, title, project, started_at, ended_at, source, meta)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (owner, tier, conv_id) DO UPDATE SET
            title = COALESCE(EXCLUDED.title, c.title),
            project = COALESCE(EXCLUDED.project, c.project),
            started_at = LEAST(c.started_at, EXCLUDED.started_at),
            ended_at = GREATEST(c.ended_at, EXCLUDED.ended_at),
            source = COALESCE(EXCLUDED.source, c.source),
            meta = c.meta || EXCLUDED.meta,
            updated_at = now()
        RETURNING (xmax = 0) AS created
        """,
        (
            owner, tier, record.conv_id, record.platform, record.parent_conv_id, record.title, record.project,
            record.started_at, record.ended_at, record.source, Jsonb(record.meta),
        ),
    ).fetchone()  # fmt: skip
    new = 0
    to_embed: list[tuple[int, str]] = []
    for seq, msg in enumerate(record.messages):
        row = conn.execute(
            """
            INSERT INTO ghostmem.messages AS m
                (owner, tier, conv_id, seq, native_id, role, raw_role, speaker, text, ts, platform, project,
                 content_hash, meta)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (owner, tier, conv_id, native_id) DO UPDATE SET
                seq = EXCLUDED.seq, role = EXCLUDED.role, text = EXCLUDED.text, ts = EXCLUDED.ts,
                speaker = EXCLUDED.speaker, content_hash = EXCLUDED.content_hash,
                embedding = CASE WHEN m.content_hash = EXCLUDED.content_hash THEN m.embedding END
            RETURNING id, (xmax = 0) AS created, embedding IS NULL AS needs_embedding
            """,
            (
                owner, tier, record.conv_id, seq, msg.native_id, msg.role, msg.raw_role, msg.speaker, msg.text,
                msg.ts, record.platform, record.project, content_hash(msg.text), Jsonb(msg.meta),
            ),
        ).fetchone()  # fmt: skip
        assert row is not None
        new += int(row[1])
        if row[2] and msg.role in CONVERSATIONAL_ROLES and msg.text.strip():
            to_embed.append((row[0], msg.text))
    if embedder is not None and to_embed:
        vectors = embedder.embed_documents([text for _, text in to_embed])
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE ghostmem.messages SET embedding = %s::vector WHERE id = %s",
                [(str(vec), msg_id) for (msg_id, _), vec in zip(to_embed, vectors, strict=True)],
            )
    conn.execute(
        """
        UPDATE ghostmem.conversations c SET
            msg_count = s.n,
            started_at = COALESCE(c.started_at, s.first_ts),
            ended_at = COALESCE(c.ended_at, s.last_ts),
            first_snippet = s.first_text
        FROM (
            SELECT count(*) FILTER (WHERE role IN ('user', 'assistant')) AS n,
                   min(ts) AS first_ts, max(ts) AS last_ts,
                   (array_agg(left(text, 300) ORDER BY seq) FILTER (WHERE role = 'user'))[1] AS first_text
            FROM ghostmem.messages WHERE owner = %s AND tier = %s AND conv_id = %s
        ) s
        WHERE c.owner = %s AND c.tier = %s AND c.conv_id = %s
        """,
        (owner, tier, record.conv_id, owner, tier, record.conv_id),
    )
    return SaveResult(created=bool(created and created[0]), messages_new=new)
