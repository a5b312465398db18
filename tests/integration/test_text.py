"""The one home of the CJK ranges agrees with the copy the database runs (a landed migration's SQL)."""

from __future__ import annotations

import random
import re

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


def _grams(body: str, with_unigrams: bool) -> set[str]:
    """An independent cut: every pair of neighbouring CJK characters of each run (a one-character run: itself)."""
    grams: set[str] = set()
    for run in re.findall(f"[{CJK_RANGES}]+", body):
        grams.update(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
        if with_unigrams:
            grams.update(run)
    return grams


def test_the_grams_are_every_neighbouring_pair_of_each_run(pg_dsn: str) -> None:
    prepare(pg_dsn, 384, "hash")
    rnd = random.Random(7)
    alphabet = "会話をしました日本語テスト한국어 abc.,、。1"
    bodies = [
        "",
        "a",
        "会",
        "会話",
        "会 話",
        "会話。会話",
        *("".join(rnd.choices(alphabet, k=rnd.randint(0, 40))) for _ in range(300)),
    ]
    with psycopg.connect(pg_dsn) as conn:
        for body in bodies:
            for with_unigrams in (True, False):
                row = conn.execute("SELECT ghostmem.cjk_grams(%s, %s)", (body, with_unigrams)).fetchone()
                assert row is not None and set(row[0]) == _grams(body, with_unigrams), (body, with_unigrams)


def test_a_message_of_one_long_cjk_run_is_cut_whole(pg_dsn: str) -> None:
    """A hostile text: 200,000 characters without a break, the most of a message its words are read from."""
    prepare(pg_dsn, 384, "hash")
    rnd = random.Random(11)
    body = "".join(rnd.choices("会話日本語漢字文章検索がのはをにで", k=200_000))
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute("SELECT ghostmem.cjk_grams(%s, true)", (body,)).fetchone()
    assert row is not None and set(row[0]) == _grams(body, True)
