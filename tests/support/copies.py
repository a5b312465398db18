"""What a table kept by triggers on ghostmem.messages (or on its copies) holds, against what it should hold."""

from __future__ import annotations

import hashlib
from typing import Any

from psycopg import Connection

_COLUMNS = "owner, id, tier, conv_id, seq, {}, ts, platform, project"
_KEPT = "SELECT " + _COLUMNS.format("lexemes") + " FROM ghostmem.message_lengths"
_ACTUAL = "SELECT " + _COLUMNS.format("length(tsv)") + " FROM ghostmem.messages WHERE tsv IS NOT NULL"


def word_counts(conn: Connection[Any]) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """(the word counts of migration 107, what they should be: a row per message with words, its length(tsv))."""
    return set(conn.execute(_KEPT).fetchall()), set(conn.execute(_ACTUAL).fetchall())


_BITS_KEPT = "SELECT owner, id, tier, conv_id, ts, platform, project, bits::text FROM ghostmem.message_bits"
_BITS_ACTUAL = (
    "SELECT owner, id, tier, conv_id, ts, platform, project, binary_quantize(embedding)::text"
    " FROM ghostmem.message_vectors"
)


def vector_bits(conn: Connection[Any]) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """(the bits of migration 110, what they should be: one bit a dimension of each compact vector of 101)."""
    return set(conn.execute(_BITS_KEPT).fetchall()), set(conn.execute(_BITS_ACTUAL).fetchall())


def share_ids(conn: Connection[Any], owner: str, with_owner: str) -> int:
    """Write ``owner``'s messages again under ``with_owner``'s ids (in id order), as a restore or a merge of two
    stores writes rows with explicit ids: the key of messages is (id, owner), so two owners may hold one id.
    Returns how many ids the two owners now share."""
    conn.execute(
        "CREATE TEMP TABLE shared_rows ON COMMIT DROP AS"
        " SELECT m.*, row_number() OVER (ORDER BY m.id) AS nth FROM ghostmem.messages m WHERE m.owner = %s",
        (owner,),
    )
    conn.execute("DELETE FROM ghostmem.messages WHERE owner = %s", (owner,))
    conn.execute(
        "UPDATE shared_rows s SET id = w.id FROM (SELECT id, row_number() OVER (ORDER BY id) AS nth"
        " FROM ghostmem.messages WHERE owner = %s) w WHERE w.nth = s.nth",
        (with_owner,),
    )
    conn.execute("ALTER TABLE shared_rows DROP COLUMN nth")
    conn.execute("INSERT INTO ghostmem.messages OVERRIDING SYSTEM VALUE SELECT * FROM shared_rows")
    shared = conn.execute(
        "SELECT count(*) FROM ghostmem.messages a JOIN ghostmem.messages b ON a.id = b.id"
        " WHERE a.owner = %s AND b.owner = %s",
        (owner, with_owner),
    ).fetchone()
    return int(shared[0]) if shared else 0


def owner_index(conn: Connection[Any], index: str, owner: str) -> str:
    """The name of the index of ``owner``'s partition of the compact vectors (migration 163) that ``index`` of the
    partitioned table ``ghostmem.message_vectors`` made there (the owner has vectors: its partition holds them)."""
    row = conn.execute(
        "SELECT c.relname::text FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid"
        " JOIN pg_index i ON i.indexrelid = c.oid"
        " WHERE h.inhparent = format('ghostmem.%%I', %s::text)::regclass"
        "   AND i.indrelid = (SELECT v.tableoid FROM ghostmem.message_vectors v WHERE v.owner = %s LIMIT 1)",
        (index, owner),
    ).fetchone()
    assert row is not None, (index, owner)
    return str(row[0])


def vector_partitions(conn: Connection[Any]) -> dict[str, set[str]]:
    """Owner -> the partitions of the compact vectors (migration 163) that hold its rows (one each, its own)."""
    placed: dict[str, set[str]] = {}
    for owner, part in conn.execute(
        "SELECT owner, tableoid::regclass::text FROM ghostmem.message_vectors GROUP BY 1, 2"
    ):
        placed.setdefault(owner, set()).add(part)
    return placed


def partition_name(owner: str) -> str:
    """The name migration 163 gives an owner's partition of the compact vectors (40 hex digits of sha256 of its
    UTF-8 bytes, never the name itself)."""
    return "message_vectors_" + hashlib.sha256(owner.encode()).hexdigest()[:40]
