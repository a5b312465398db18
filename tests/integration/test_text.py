"""The one home of the CJK ranges agrees with the copies the database runs (landed migrations' SQL), and
ghostmem.lexemes gives every text the lexemes it gave before migration 191 let it skip identifier_parts and
cjk_grams for texts that cannot have their lexemes."""

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
        # ghostmem.lexemes asks cjk_grams only of a text holding a character of the class (migration 191)
        row = conn.execute(
            "SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = 'ghostmem' AND p.proname = 'lexemes'"
        ).fetchone()
        assert row is not None and f"~ '[{sql_class}]'" in row[0]
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


# ghostmem.lexemes as migration 090 made it: identifier_parts and cjk_grams asked of every text.
_LEXEMES_090 = """
CREATE FUNCTION pg_temp.lexemes_090(body text, for_query boolean DEFAULT false) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT
AS $$
    SELECT to_tsvector('english'::regconfig, left(body, 200000))
        || ghostmem.identifier_parts(left(body, 200000))
        || array_to_tsvector(ghostmem.cjk_grams(left(body, 200000), NOT for_query))
$$"""


def test_lexemes_skip_only_what_a_text_cannot_hold(pg_dsn: str) -> None:
    """Every text, as a message and as a query, gets the lexemes (and positions) of 090's function: identifiers of
    each shape identifier_parts splits, CJK runs of every script, both mixed, texts with neither, the empty text,
    an identifier or a CJK run past the 200,000 characters that are read, and NULLs (the function is no longer
    STRICT, 191, yet NULL in gives NULL out)."""
    prepare(pg_dsn, 384, "hash")
    rnd = random.Random(191)
    alphabet = "aZq Bx09 ._/\\:-会話日本語テスト한국어\uf900 é,!?\n"
    filler = "plain words and more plain words " * 6_100  # 201,300 characters
    bodies: list[str | None] = [
        None,
        "",
        " ",
        "how did we fix the flaky deploy last week",
        "getUserName",
        "HTTPServer",
        "src/ghostmem/search.py",
        "a.b",
        "C:\\Users\\me",
        "snake_case_name",
        "v1.2-rc",
        "--",
        "昨日の会話をしました",
        "会",
        "한국어 대화",
        "\uf900\ufaff",
        "ｅｘａｍｐｌｅ ＡＢＣ",
        "deployの設定をgetConfig()で読む",
        "emoji 🙂 only",
        filler[:200_000] + " getUserName 会話",
        filler[:199_990] + "getUserName 会話",
        *("".join(rnd.choices(alphabet, k=rnd.randint(0, 60))) for _ in range(400)),
    ]
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(_LEXEMES_090)
        for body in bodies:
            for for_query in (False, True, None):
                row = conn.execute(
                    "SELECT ghostmem.lexemes(%(b)s, %(q)s)::text, pg_temp.lexemes_090(%(b)s, %(q)s)::text",
                    {"b": body, "q": for_query},
                ).fetchone()
                assert row is not None and row[0] == row[1], (body and body[-40:], for_query, row)
        assert conn.execute("SELECT ghostmem.lexemes('getUserName') IS NOT NULL").fetchone() == (True,)


def test_lexemes_are_inlined_into_a_statement(pg_dsn: str) -> None:
    """A statement that asks for a text's lexemes (a search's query words, a message's trigger) runs the function's
    expression itself, as a generic plan shows: no call of ghostmem.lexemes, whose SQL-function executor a CASE of
    a STRICT function would bring back; identifier_parts and cjk_grams only under their CASE."""
    prepare(pg_dsn, 384, "hash")
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute("PREPARE words(text) AS SELECT ghostmem.lexemes($1, true)")
        plan = "\n".join(
            r[0] for r in conn.execute("EXPLAIN (VERBOSE, COSTS OFF) EXECUTE words('getUserName')")
        )
    assert "lexemes(" not in plan, plan
    assert "CASE WHEN" in plan and "identifier_parts" in plan and "cjk_grams" in plan, plan
