"""What a table kept by triggers on ghostmem.messages holds, against what it should hold."""

from __future__ import annotations

from typing import Any

from psycopg import Connection

_COLUMNS = "owner, id, tier, conv_id, seq, {}, ts, platform, project"
_KEPT = "SELECT " + _COLUMNS.format("lexemes") + " FROM ghostmem.message_lengths"
_ACTUAL = "SELECT " + _COLUMNS.format("length(tsv)") + " FROM ghostmem.messages WHERE tsv IS NOT NULL"


def word_counts(conn: Connection[Any]) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """(the word counts of migration 107, what they should be: a row per message with words, its length(tsv))."""
    return set(conn.execute(_KEPT).fetchall()), set(conn.execute(_ACTUAL).fetchall())
