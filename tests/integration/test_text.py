"""The one home of the CJK ranges agrees with the copy the database runs (a landed migration's SQL)."""

from __future__ import annotations

import psycopg
from ghostmem.db import prepare
from ghostmem.text import CJK, CJK_RANGES


def test_the_database_cuts_the_same_scripts_into_grams(pg_dsn: str) -> None:
    prepare(pg_dsn, 384, "hash")
    sql_class = "".join(c if c == "-" else f"\\u{ord(c):04x}" for c in CJK_RANGES)
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute(
            "SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = 'ghostmem' AND p.proname = 'cjk_grams'"
        ).fetchone()
        assert row is not None and f"[{sql_class}]+" in row[0]
        # and they behave alike at every range's edges, and just outside them
        edges = [c for c in CJK_RANGES if c != "-"]
        for ch in [*edges, "\u303f", "\u3100", "\ud7b0", "\ufb00", "a", "é"]:
            grams = conn.execute("SELECT ghostmem.cjk_grams(%s, true)", (ch,)).fetchone()
            assert grams is not None and (grams[0] == [ch]) == bool(CJK.match(ch)), ch
