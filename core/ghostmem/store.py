"""The one write path into personal memory: every importer and live capture calls :func:`save_conversation`.

It is the chokepoint where secrets are redacted, ``ghostmem:ignore`` conversations and forgotten ids are dropped,
messages are upserted by native id (a re-import never duplicates), and new conversational text is embedded —
through a cache keyed by model and content hash, so the same text is never embedded twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import chain
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from ghostmem import db, japanese
from ghostmem.embed import Embedder
from ghostmem.errors import InvalidArgument
from ghostmem.limits import (
    EMBEDDED_CHARS,
    EMBEDDED_MIN_CHARS,
    STORED_ID_BYTES,
    STORED_MESSAGE_CHARS,
    STORED_PROJECT_BYTES,
    STORED_SPEAKER_BYTES,
    STORED_TITLE_CHARS,
    STORED_TOOL_CHARS,
    utf8_bytes,
)
from ghostmem.records import (
    CONVERSATIONAL_ROLES,
    PLATFORMS,
    TITLE_FROM_PLATFORM,
    TITLE_FROM_SUMMARY,
    ConversationRecord,
    MessageRecord,
    clip,
    shortened,
)
from ghostmem.redact import redact
from ghostmem.text import CJK_RANGES

logger = logging.getLogger(__name__)

IGNORE_MARKER = "ghostmem:ignore"
# Characters a marker may hide behind, removed before matching: controls (Cc) and format characters (Cf: zero-width
# spaces and joiners, bidi marks, soft hyphen, byte order mark, tags), variation selectors, the combining grapheme
# joiner and the Hangul fillers (tests/unit/test_ignore_marker.py checks every Cf and Cc character is here).
_INVISIBLE = (
    "\x00-\x08\x0e-\x1f\x7f-\x9f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0"
    "\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
)
_HIDDEN = f"[{_INVISIBLE}]*"
_GAP = f"[\\s{_INVISIBLE}]*"
_MARKER = re.compile(_HIDDEN.join("ghostmem") + _GAP + ":" + _GAP + _HIDDEN.join("ignore"))
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(slots=True)
class SaveResult:
    created: bool = False
    updated: bool = False
    messages_new: int = 0
    skipped: str | None = None  # why nothing was stored: "ignored" | "forgotten"


def content_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def embeddable(text: str) -> str | None:
    """The part of a message's text that is embedded, or None when it is not worth a vector."""
    stripped = text.strip()
    if len(stripped) < EMBEDDED_MIN_CHARS:
        return None
    return stripped[:EMBEDDED_CHARS]


def has_marker(text: str) -> bool:
    """Whether ``text`` holds ``ghostmem:ignore`` (the rule in docs/formats.md): after NFKC normalisation and case
    folding, ``ghostmem``, optional whitespace, ``:``, optional whitespace, ``ignore``, with any invisible character
    (see ``_INVISIBLE``) anywhere in between."""
    if text.isascii():
        return _MARKER.search(text.lower()) is not None
    return _MARKER.search(unicodedata.normalize("NFKC", text).casefold()) is not None


def _texts(value: Any) -> Iterator[str]:
    """Every string in a JSON value (keys too)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _texts(item)


def is_ignored(record: ConversationRecord) -> bool:
    """True when the conversation carries the ``ghostmem:ignore`` marker in any text: title, project, meta, and every
    message's text, speaker and meta (summaries and compaction metadata included)."""
    texts = chain(
        (record.title or "", record.project or ""),
        _texts(record.meta),
        *((m.text, m.speaker or "", *_texts(m.meta)) for m in record.messages),
    )
    return any(has_marker(text) for text in texts)


def _clean(text: str) -> str:
    """Text Postgres can hold: NUL removed, lone surrogates (JSON may escape them) replaced by U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = _SURROGATE.sub("\ufffd", text)
    return text


def scrub(text: str) -> str:
    """What is stored or embedded of a text: cleaned for Postgres, then redacted (:func:`ghostmem.redact.redact`)."""
    return redact(_clean(text))


def scrub_json(value: Any) -> Any:
    """A JSON value with every string in it (keys too) scrubbed, and numbers JSON cannot hold (NaN, ±inf) nulled."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(str(k)): scrub_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float):
        return value
    return scrub(str(value))


def _scrubbed(record: ConversationRecord) -> ConversationRecord:
    """The record as it may be stored: the one pass that cleans and redacts every text of it (title, project,
    source, meta, and per message its text, bounded, speaker and meta; the title clipped, the project and the
    speakers shortened to what ghostmem keeps of them); ids are only cleaned (they are its identity)."""
    messages = [
        replace(
            m,
            native_id=_clean(m.native_id),
            text=scrub(_bounded(m)),
            raw_role=_clean(m.raw_role) if m.raw_role is not None else None,
            speaker=shortened(scrub(m.speaker), STORED_SPEAKER_BYTES) if m.speaker is not None else None,
            meta=scrub_json(m.meta),
        )
        for m in record.messages
    ]
    title = clip(record.title, STORED_TITLE_CHARS)
    return replace(
        record,
        conv_id=_clean(record.conv_id),
        messages=messages,
        title=scrub(title) if title else None,
        project=shortened(scrub(record.project), STORED_PROJECT_BYTES) if record.project else None,
        parent_conv_id=_clean(record.parent_conv_id) if record.parent_conv_id else None,
        source=scrub(record.source) if record.source else None,
        meta=scrub_json(record.meta),
    )


def _check_ids(record: ConversationRecord) -> None:
    """Refuse a conversation whose id, parent's id or a message's id is longer than :data:`STORED_ID_BYTES` (ids
    are never cut: a cut id would merge distinct conversations or messages)."""
    ids = [("conversation id", record.conv_id), ("parent conversation id", record.parent_conv_id or "")]
    ids += [("message id", m.native_id) for m in record.messages]
    for what, value in ids:
        size = utf8_bytes(value)
        if size > STORED_ID_BYTES:
            raise InvalidArgument(
                f"the {what} {value[:40]!r}… is {size:,} bytes, longer than the {STORED_ID_BYTES:,} bytes ghostmem "
                "keeps of an id (it is part of every index of the conversation's messages): give it a shorter id"
            )


def _check_platform(platform: str) -> None:
    """Refuse a platform ghostmem does not know (live capture names its own: ``platform=`` is typed, not checked,
    and any string was stored, one the platform filter can never name, a long one failing only at the write)."""
    if platform not in PLATFORMS:
        raise InvalidArgument(
            f"unknown platform {platform[:40]!r}: a conversation comes from one of {', '.join(PLATFORMS)} (an"
            " application's own conversations are langchain, llamaindex or langgraph; generic for anything else)"
        )


def _bounded(msg: MessageRecord) -> str:
    limit = STORED_MESSAGE_CHARS if msg.role in CONVERSATIONAL_ROLES else STORED_TOOL_CHARS
    return msg.text if len(msg.text) <= limit else msg.text[:limit]


def _fingerprint(record: ConversationRecord) -> str:
    """A digest of everything stored per message: equal digests, nothing to upsert."""
    digest = hashlib.sha256()
    for m in record.messages:
        fields = (
            m.native_id,
            m.role,
            m.raw_role,
            m.speaker,
            m.text,
            m.ts.isoformat() if m.ts else None,
            m.meta,
        )
        digest.update(json.dumps(fields, sort_keys=True, default=str).encode("utf-8", errors="replace"))
    return digest.hexdigest()


def _choose_title(old: str | None, old_rank: int, new: str | None, new_rank: int) -> tuple[str | None, int]:
    if new and (new_rank > old_rank or (new_rank == old_rank and new_rank >= TITLE_FROM_SUMMARY) or not old):
        return new, max(new_rank, old_rank) if old else new_rank
    return old, old_rank


def _earliest(a: datetime | None, b: datetime | None) -> datetime | None:
    return min(a, b) if a and b else a or b


def _latest(a: datetime | None, b: datetime | None) -> datetime | None:
    return max(a, b) if a and b else a or b


def lock_conversation(conn: Connection[Any], owner: str, tier: str, conv_id: str) -> None:
    """Serialise the writers of one conversation (imports, live capture) until the caller's transaction ends.

    Two imports of the same conversation at once take turns here, so neither duplicates nor interleaves; a capture
    takes it before it reads the conversation's last message, so two processes appending to one session never both
    read n messages and both write message n. Taking it again in the same transaction is free (it is the session's
    already).
    """
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("\x1f".join((owner, tier, conv_id)),)
    )


def save_conversation(
    conn: Connection[Any],
    owner: str,
    tier: str,
    record: ConversationRecord,
    *,
    embedder: Embedder | None,
    append: bool = False,
    next_seq: int | None = None,
) -> SaveResult:
    """Upsert one conversation and its messages in the caller's transaction.

    Args:
        conn: a connection inside a transaction (the per-conversation advisory lock lasts until it ends).
        record: what an importer read. ``record.meta["title_rank"]`` says how good its title is (see
            ``TITLE_FROM_*``; a titled record without it counts as a platform title).
        embedder: embeds new conversational text now; None leaves it for :func:`embed_pending`.
        append: the messages continue the stored conversation (an importer that read only the new lines of a
            file): they are numbered after the stored ones and never overwrite a stored message of the same id.
        next_seq: with ``append``, the number of the first new message when the caller knows it: it read the
            conversation's last message after taking :func:`lock_conversation` in this transaction (live capture
            does, for its default ids), so no other writer can have added one since. None: it is read here with
            the conversation's row, after this function took the lock.
    """
    ignored = is_ignored(record)
    record = _scrubbed(record)
    _check_ids(record)
    _check_platform(record.platform)
    key = (owner, tier, record.conv_id)
    lock_conversation(conn, *key)
    if ignored:  # what an earlier run stored of it goes, and its id is remembered: it stays ignored
        ignore(conn, owner, record.conv_id, record.platform)
        return SaveResult(skipped="ignored")
    row = conn.execute(  # a forgotten or ignored session takes its subagent conversations with it
        "SELECT reason FROM ghostmem.forgotten WHERE owner = %s AND conv_id IN (%s, %s) ORDER BY reason DESC",
        (owner, record.conv_id, record.parent_conv_id or record.conv_id),
    ).fetchone()
    if row is not None:
        return SaveResult(skipped="ignored" if row[0] == "ignore" else "forgotten")
    created, updated, same, end = _upsert_conversation(
        conn, owner, tier, record, None if append else _fingerprint(record), end=append and next_seq is None
    )
    if next_seq is None:
        next_seq = end
    rows = [] if same else _upsert_messages(conn, owner, tier, record, append=append, next_seq=next_seq)
    result = SaveResult(
        created=created,
        updated=updated or (not created and bool(rows)),
        messages_new=sum(1 for r in rows if r[1]),
    )
    if result.updated:  # its enrichment is stale: cleared here, in the same transaction, so a job that is
        # interrupted before enriching it leaves it findable (ghostmem.maintenance.unenriched) for the next one
        conn.execute(
            "UPDATE ghostmem.conversations SET intensity = NULL WHERE owner = %s AND tier = %s AND conv_id = %s",
            key,
        )
    if embedder is not None:
        embed_messages(conn, owner, embedder, [(r[0], r[2]) for r in rows if r[3] in CONVERSATIONAL_ROLES])
    if append:  # what was stored is unchanged: the counts move by the new messages alone
        _count_added(conn, owner, tier, record.conv_id, [r[0] for r in rows])
    else:  # a caller may have deleted messages before saving (live capture shortening a thread): recount
        _refresh_counts(conn, owner, tier, record.conv_id)
    return result


def purge(conn: Connection[Any], owner: str, conv_id: str) -> dict[str, str]:
    """Delete a conversation and its subagent conversations (every tier) with their messages, vectors and the cached
    vectors of their texts (a vector says something about its text). Returns {conv_id: platform} of what went."""
    texts = conn.execute(
        """
        SELECT m.text FROM ghostmem.messages m JOIN ghostmem.conversations c USING (owner, tier, conv_id)
        WHERE c.owner = %s AND (c.conv_id = %s OR c.parent_conv_id = %s) AND m.embedding IS NOT NULL
        """,
        (owner, conv_id, conv_id),
    ).fetchall()
    rows = conn.execute(
        """
        DELETE FROM ghostmem.conversations
        WHERE owner = %s AND (conv_id = %s OR parent_conv_id = %s)
        RETURNING conv_id, platform
        """,
        (owner, conv_id, conv_id),
    ).fetchall()
    hashes = [content_hash(cut) for (text,) in texts if (cut := embeddable(text)) is not None]
    if hashes:
        conn.execute("DELETE FROM ghostmem.embedding_cache WHERE content_hash = ANY(%s)", (hashes,))
    return {r[0]: r[1] for r in rows}


def remember(conn: Connection[Any], owner: str, gone: dict[str, str | None], reason: str) -> None:
    """Keep these conversation ids from ever being imported again (``reason``: 'forget' or 'ignore')."""
    conn.execute(
        """
        INSERT INTO ghostmem.forgotten (owner, conv_id, platform, reason)
        SELECT %s, u.conv_id, u.platform, %s FROM unnest(%s::text[], %s::text[]) AS u(conv_id, platform)
        ON CONFLICT (owner, conv_id) DO NOTHING
        """,
        (owner, reason, list(gone), list(gone.values())),
    )


def ignore(conn: Connection[Any], owner: str, conv_id: str, platform: str | None) -> list[str]:
    """A conversation found to carry the marker: purge what was stored of it and its children, and remember it."""
    gone: dict[str, str | None] = {conv_id: platform, **purge(conn, owner, conv_id)}
    remember(conn, owner, gone, "ignore")
    return sorted(gone)


def _upsert_conversation(
    conn: Connection[Any],
    owner: str,
    tier: str,
    record: ConversationRecord,
    fingerprint: str | None,
    *,
    end: bool,
) -> tuple[bool, bool, bool, int]:
    """(created, updated, same messages, next seq) — the row is written only when something in it changes.

    ``fingerprint`` digests the record's messages (None for an appended chunk): when the stored one is equal, the
    messages are known to be stored as they are and need not be upserted again. ``end``: the next seq is read with
    the row (the number after the conversation's last message, 0 for a new one), else it is 0.
    """
    marks = {"fingerprint": fingerprint} if fingerprint else {}
    title = record.title
    rank = int(record.meta.get("title_rank", TITLE_FROM_PLATFORM if title else 0))
    row = conn.execute(
        "SELECT title, project, parent_conv_id, started_at, ended_at, source, meta,"
        " CASE WHEN %s THEN (ghostmem.conversation_end(owner, tier, conv_id)).seq END"
        " FROM ghostmem.conversations WHERE owner = %s AND tier = %s AND conv_id = %s",
        (end, owner, tier, record.conv_id),
    ).fetchone()
    if row is None:
        conn.execute(
            """
            INSERT INTO ghostmem.conversations
                (owner, tier, conv_id, platform, parent_conv_id, title, project, started_at, ended_at, source, meta)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            """,
            (
                owner, tier, record.conv_id, record.platform, record.parent_conv_id, title, record.project,
                record.started_at, record.ended_at, record.source,
                Jsonb({**record.meta, **marks, "title_rank": rank if title else 0}),
            ),
        )  # fmt: skip
        return True, False, False, 0
    old = tuple(row[:7])
    next_seq = 0 if row[7] is None else int(row[7]) + 1
    old_title, old_project, old_parent, old_start, old_end, old_source, old_meta = old
    same = fingerprint is not None and old_meta.get("fingerprint") == fingerprint
    if fingerprint is None:  # appended messages: the stored ones no longer match any whole-record digest
        old_meta = {k: v for k, v in old_meta.items() if k != "fingerprint"}
    new_title, new_rank = _choose_title(old_title, int(old_meta.get("title_rank", 0)), title, rank)
    new = (
        new_title,
        record.project or old_project,
        record.parent_conv_id or old_parent,
        _earliest(old_start, record.started_at),
        _latest(old_end, record.ended_at),
        old_source or record.source,  # the same conversation read from a copy elsewhere is no change
        {**old_meta, **record.meta, **marks, "title_rank": new_rank},
    )
    if new == old:
        return False, False, same, next_seq
    conn.execute(
        """
        UPDATE ghostmem.conversations SET title = %s, project = %s, parent_conv_id = %s, started_at = %s,
            ended_at = %s, source = %s, meta = %s, updated_at = now()
        WHERE owner = %s AND tier = %s AND conv_id = %s
        """,
        (*new[:6], Jsonb(new[6]), owner, tier, record.conv_id),
    )
    if new[1] != old_project:
        conn.execute(
            "UPDATE ghostmem.messages SET project = %s WHERE owner = %s AND tier = %s AND conv_id = %s",
            (new[1], owner, tier, record.conv_id),
        )
    return False, True, same, next_seq


def _upsert_messages(
    conn: Connection[Any],
    owner: str,
    tier: str,
    record: ConversationRecord,
    *,
    append: bool,
    next_seq: int,
) -> list[tuple[int, bool, str, str]]:
    """Insert new messages, update changed ones; returns (id, created, text, role) of every row written.

    ``next_seq``: with ``append``, the number of the first new message (the record's messages are numbered from 0
    otherwise)."""
    seen: set[str] = set()
    messages = []
    for msg in record.messages:
        if msg.native_id not in seen:  # a native id twice in one record: the first wins
            seen.add(msg.native_id)
            messages.append(msg)
    if not messages:
        return []
    base = next_seq if append else 0
    texts = [m.text for m in messages]
    conflict = (
        "DO NOTHING"
        if append
        else """DO UPDATE SET seq = EXCLUDED.seq, role = EXCLUDED.role, raw_role = EXCLUDED.raw_role,
                speaker = EXCLUDED.speaker, text = EXCLUDED.text, ts = EXCLUDED.ts, meta = EXCLUDED.meta,
                content_hash = EXCLUDED.content_hash, morphemes = EXCLUDED.morphemes,
                embedding = CASE WHEN m.content_hash = EXCLUDED.content_hash THEN m.embedding END
            WHERE (m.seq, m.role, m.raw_role, m.speaker, m.content_hash, m.ts, m.meta)
                IS DISTINCT FROM (EXCLUDED.seq, EXCLUDED.role, EXCLUDED.raw_role, EXCLUDED.speaker,
                                  EXCLUDED.content_hash, EXCLUDED.ts, EXCLUDED.meta)"""
    )
    cur = conn.execute(
        f"""
        INSERT INTO ghostmem.messages AS m
            (owner, tier, conv_id, seq, native_id, role, raw_role, speaker, text, ts, platform, project,
             content_hash, meta, morphemes)
        SELECT %s, %s, %s, u.seq, u.native_id, u.role, u.raw_role, u.speaker, u.text, u.ts, %s, %s, u.hash, u.meta,
               nullif(ARRAY(SELECT jsonb_array_elements_text(u.morphemes)), '{{}}')
        FROM unnest(%s::int[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[],
                    %s::bytea[], %s::jsonb[], %s::jsonb[])
            AS u(seq, native_id, role, raw_role, speaker, text, ts, hash, meta, morphemes)
        ON CONFLICT (owner, tier, conv_id, native_id) {conflict}
        RETURNING id, (xmax = 0), text, role
        """,  # noqa: S608 - only the constant conflict clause is formatted in
        (
            owner, tier, record.conv_id, record.platform, record.project,
            [base + i for i in range(len(messages))],
            [m.native_id for m in messages],
            [m.role for m in messages],
            [m.raw_role for m in messages],
            [m.speaker for m in messages],
            texts,
            [m.ts for m in messages],
            [content_hash(t) for t in texts],
            [Jsonb(m.meta) for m in messages],
            [Jsonb(_morphemes(t, m.role)) for t, m in zip(texts, messages, strict=True)],  # [] = none
        ),
    )  # fmt: skip
    return [(r[0], bool(r[1]), r[2], r[3]) for r in cur.fetchall()]


def _morphemes(text: str, role: str) -> list[str]:
    """The Japanese words of a message indexed for words (a JSON list: unnest's arrays cannot hold arrays)."""
    return (japanese.terms(text) or []) if role in CONVERSATIONAL_ROLES else []


def fill_morphemes(conn: Connection[Any], owner: str, *, batch_size: int = 500) -> int:
    """Give the Japanese words to conversational messages stored without them (imported before the ``[ja]`` extra
    was installed): the tsv trigger adds them to the lexical index. Returns how many messages got words.

    ``conn`` must be in autocommit mode (each batch is its own transaction, so an interrupted run keeps what it
    did). Without SudachiPy there is nothing to add and nothing is read. A message whose Japanese holds no content
    word stays without words and is looked at again by the next run (cheap: it is rare).
    """
    if not japanese.available():
        return 0
    done = 0
    for rows in _message_batches(
        conn, owner, "morphemes IS NULL AND text ~ %s", (f"[{CJK_RANGES}]",), batch_size
    ):
        found = [(words, mid, owner) for mid, text in rows if (words := japanese.terms(text))]
        if found:
            conn.cursor().executemany(
                "UPDATE ghostmem.messages SET morphemes = %s WHERE id = %s AND owner = %s", found
            )
        done += len(found)
    return done


def _message_batches(
    conn: Connection[Any], owner: str, pending: str, params: tuple[Any, ...], batch_size: int
) -> Iterator[list[tuple[Any, ...]]]:
    """``(id, text)`` of the owner's conversational messages that match ``pending`` (a constant condition with
    ``params``), ``batch_size`` at a time in id order; each batch is handled inside its own transaction, committed
    when the next one is asked for (so an interrupted job keeps the batches it finished)."""
    last_id = 0
    while True:
        with conn.transaction():
            rows = conn.execute(
                f"""
                SELECT id, text FROM ghostmem.messages
                WHERE owner = %s AND id > %s AND role IN ('user', 'assistant') AND {pending}
                ORDER BY id LIMIT %s
                """,  # noqa: S608 - the condition is a constant of this module, its values are bound
                (owner, last_id, *params, batch_size),
            ).fetchall()
            if not rows:
                return
            last_id = rows[-1][0]
            yield rows


# _BY_ID: a statement that finds messages by their ids (those an append just wrote) checks their owner as
# ``(owner = %s) IS TRUE``: the same test (owner is never NULL), but one no index takes, so the ids are read through
# messages_pkey (id, owner), a probe each. Written ``owner = %s``, the planner could read every message of the owner
# through an owner-leading index and filter the ids, and it does whenever its statistics have not seen the owner (a
# new user since the last ANALYZE, a never-analyzed table): it estimates one row for them, so that scan costs what a
# probe does. Each append then read all of a new user's messages, twice.


def _count_added(conn: Connection[Any], owner: str, tier: str, conv_id: str, added: list[int]) -> None:
    """What :func:`_refresh_counts` would make of the conversation after an append, from the messages it added
    (``added``, their ids) and the row as it was: an append costs its own messages, whatever the conversation's
    length (live capture appends every turn). The first snippet changes only when the conversation had none, or
    had no user message and gets one: that check reads the messages before the conversation's first user
    message (usually none or one)."""
    if not added:
        return
    conn.execute(
        """
        UPDATE ghostmem.conversations c SET
            msg_count = c.msg_count + s.n,
            started_at = COALESCE(c.started_at, s.first_ts),
            ended_at = COALESCE(c.ended_at, s.last_ts),
            first_snippet = CASE
                WHEN c.first_snippet IS NULL THEN COALESCE(s.first_user, s.first_assistant)
                -- walks the conversation's (owner, tier, conv_id, seq) index from its start (migration 147: a
                -- plain statement may be planned over the owner's messages instead)
                WHEN s.first_user IS NOT NULL
                     AND ghostmem.first_user_message(c.owner, c.tier, c.conv_id, s.first_seq) IS NULL
                    THEN s.first_user
                ELSE c.first_snippet
            END
        FROM (
            SELECT count(*) FILTER (WHERE role IN ('user', 'assistant')) AS n,
                   min(ts) AS first_ts, max(ts) AS last_ts, min(seq) AS first_seq,
                   (array_agg(left(text, 300) ORDER BY seq) FILTER (WHERE role = 'user'))[1] AS first_user,
                   (array_agg(left(text, 300) ORDER BY seq) FILTER (WHERE role = 'assistant'))[1]
                       AS first_assistant
            FROM ghostmem.messages WHERE id = ANY(%s) AND (owner = %s) IS TRUE  -- by id: see _BY_ID
        ) s
        WHERE c.owner = %s AND c.tier = %s AND c.conv_id = %s
          AND (s.n > 0 OR (c.started_at IS NULL AND s.first_ts IS NOT NULL)
               OR (c.ended_at IS NULL AND s.last_ts IS NOT NULL))
        """,
        (added, owner, owner, tier, conv_id),
    )


def _refresh_counts(conn: Connection[Any], owner: str, tier: str, conv_id: str) -> None:
    """The conversation's message count (user and assistant), first and last times when it has none, and first
    snippet (its first user message, else its first assistant message), recounted from all its messages; the row
    is written only when one of them changes."""
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
                   COALESCE((array_agg(left(text, 300) ORDER BY seq) FILTER (WHERE role = 'user'))[1],
                            (array_agg(left(text, 300) ORDER BY seq) FILTER (WHERE role = 'assistant'))[1])
                       AS first_text
            FROM ghostmem.conversation_messages(%s, %s, %s)  -- its own index entries (migration 159)
        ) s
        WHERE c.owner = %s AND c.tier = %s AND c.conv_id = %s
          AND (c.msg_count, c.first_snippet, c.started_at IS NULL AND s.first_ts IS NOT NULL,
               c.ended_at IS NULL AND s.last_ts IS NOT NULL)
              IS DISTINCT FROM (s.n, s.first_text, false, false)
        """,
        (owner, tier, conv_id, owner, tier, conv_id),
    )


EMBED_WINDOW = 1024  # messages read per transaction by embed_pending: the texts embedded are sorted by length
# over this many, so each call to the embedder gets texts of similar length (little padding)
EMBED_CHUNK = 128  # texts per call to the embedder: a progress display moves after each


def embed_messages(
    conn: Connection[Any],
    owner: str,
    embedder: Embedder,
    rows: Sequence[tuple[int, str]],
    progress: Callable[[int], None] | None = None,
) -> int:
    """Give the owner's messages (id, text) their vectors; each distinct text is embedded once, ever (cache by hash).

    Returns how many messages got a vector. Texts not worth embedding are left without one. The texts to embed go
    to the embedder shortest first, :data:`EMBED_CHUNK` at a time; ``progress`` hears how many of ``rows`` each
    call accounted for (all of them in the end).
    """
    ids: list[int] = []
    hashes: list[bytes] = []
    texts: dict[bytes, str] = {}
    for msg_id, text in rows:
        cut = embeddable(text)
        if cut is None:
            continue
        digest = content_hash(cut)
        ids.append(msg_id)
        hashes.append(digest)
        texts.setdefault(digest, cut)
    if not ids:
        if progress is not None:
            progress(len(rows))
        return 0
    cached = {
        r[0]
        for r in conn.execute(
            "SELECT content_hash FROM ghostmem.embedding_cache WHERE model = %s AND content_hash = ANY(%s)",
            (embedder.name, list(texts)),
        )
    }
    missing = sorted((h for h in texts if h not in cached), key=lambda h: len(texts[h]))
    reported = 0
    if missing:
        db.use_vectors(conn)
        vectors: list[list[float]] = []
        for start in range(0, len(missing), EMBED_CHUNK):
            chunk = missing[start : start + EMBED_CHUNK]
            vectors += embedder.embed_documents([texts[h] for h in chunk])
            if progress is not None:
                progress(len(chunk))
                reported += len(chunk)
        conn.execute(
            """
            INSERT INTO ghostmem.embedding_cache (model, content_hash, embedding)
            SELECT %s, u.h, u.v FROM unnest(%s::bytea[], %s::vector[]) AS u(h, v)
            ON CONFLICT DO NOTHING
            """,
            (embedder.name, missing, [db.vector(v) for v in vectors]),
        )
    conn.execute(
        """
        UPDATE ghostmem.messages m SET embedding = c.embedding
        FROM unnest(%s::bigint[], %s::bytea[]) AS u(id, h)
        JOIN ghostmem.embedding_cache c ON c.model = %s AND c.content_hash = u.h
        WHERE m.id = u.id AND (m.owner = %s) IS TRUE  -- by id: see _BY_ID
        """,
        (ids, hashes, embedder.name, owner),
    )
    if progress is not None:
        progress(len(rows) - reported)  # the rest: cached or repeated texts, texts not worth a vector
    return len(ids)


def embed_pending(
    conn: Connection[Any],
    owner: str,
    embedder: Embedder,
    *,
    tier: str | None = None,
    batch_size: int = EMBED_WINDOW,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Embed every conversational message still without a vector, committing batch by batch.

    ``conn`` must be in autocommit mode (each batch is its own transaction, so an interrupted run keeps what it
    did). Returns the number of messages embedded; ``progress`` hears of the messages done, call by call.
    """
    done = 0
    for rows in _message_batches(
        conn, owner, "(%s::text IS NULL OR tier = %s) AND embedding IS NULL", (tier, tier), batch_size
    ):
        done += embed_messages(conn, owner, embedder, rows, progress)
    return done
