"""What a table kept by triggers on ghostmem.messages (or on its copies) holds, against what it should hold."""

from __future__ import annotations

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
