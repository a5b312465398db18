"""Existing langchain-postgres ``PostgresChatMessageHistory`` tables, read from any Postgres by DSN and table name.

langchain-postgres stores one row per message: ``(id SERIAL, session_id UUID, message JSONB, created_at)`` where
``message`` is LangChain's ``message_to_dict`` (``{"type": "human"|"ai"|"system"|"tool"|…, "data": {"content", …}}``)
and a session's messages are read ``ORDER BY id``. Each session becomes a conversation (platform ``langchain``,
conv_id = the session id); each row keeps its ``id`` as native id. The highest id read is remembered, so the next
run reads only newer rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import sql

from ghostmem import db
from ghostmem.ingest.common import Item, Parsed, Problem, finish, normalise_role, text_of
from ghostmem.ingest.reading import decode
from ghostmem.records import MessageRecord, Role

_TYPES: dict[str, Role] = {
    "human": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "system": "system",
    "tool": "tool",
}


def source_key(dsn: str, table: str) -> str:
    """The import_state key of a table (the DSN without its password)."""
    return f"langchain-postgres:{db.redact_dsn(dsn)}#{table}"


def read_table(dsn: str, table: str, state: dict[str, Any]) -> Iterator[Item]:
    """Conversations with the rows of ``table`` newer than ``state["last_id"]``; updates it as it goes."""
    last_id = int(state.get("last_id", 0))
    schema, _, name = table.rpartition(".")
    ident = sql.Identifier(schema, name) if schema else sql.Identifier(name)
    query = sql.SQL(
        "SELECT id, session_id::text, message::text, created_at FROM {} WHERE id > %s ORDER BY session_id, id"
    ).format(ident)
    with db.connect(dsn) as conn, conn.cursor(name="ghostmem_langchain_import") as cur:
        cur.itersize = 2000
        cur.execute(query, (last_id,))
        session: str | None = None
        rows: list[tuple[Any, ...]] = []
        for row_id, session_id, text, created_at in cur:
            state["last_id"] = max(int(state.get("last_id", 0)), int(row_id))
            # decoded here within the readers' limits (psycopg's own json.loads would recurse without bound)
            message, error, _ = decode((text or "null").encode("utf-8", errors="replace"))
            if error is not None:
                yield Problem(source_key(dsn, table), int(row_id), f"row {row_id}: {error}")
                continue
            if session_id != session and rows:
                yield from _conversation(rows, append=last_id > 0)
                rows = []
            session = session_id
            rows.append((row_id, session_id, message, created_at))
        if rows:
            yield from _conversation(rows, append=last_id > 0)


def _conversation(rows: list[tuple[Any, ...]], *, append: bool) -> Iterator[Parsed]:
    messages = []
    for row_id, _session, message, created_at in rows:
        message = message if isinstance(message, dict) else {}
        kind = str(message.get("type") or "")
        raw_data = message.get("data")
        data: dict[str, Any] = raw_data if isinstance(raw_data, dict) else {}
        name = data.get("name")
        messages.append(
            MessageRecord(
                native_id=str(row_id),
                role=_TYPES.get(kind) or normalise_role(data.get("role")) or "meta",
                text=text_of(data.get("content")),
                ts=created_at,
                raw_role=kind,
                speaker=name if isinstance(name, str) else None,
            )
        )
    parsed = finish(
        conv_id=str(rows[0][1]), platform="langchain", messages=messages, source=None, append=append
    )
    if parsed is not None:
        yield parsed
