"""The known-common words of migration 220: each large owner's words held by at least DF_CAP of its messages of a
tier, listed by maintenance, so that a search does not fetch them (search.py's lexical leg, docs/search.md
"Known-common words not fetched"). The list against a direct count, the search's results against a direct
computation and against the search without the list, beside another owner whose common words are this owner's rare
ones; a removal or an edit taking its words out; and the application's login, which may read the list and never
write it."""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder, maintenance, search
from ghostmem.args import SearchPersonalMemoryArgs
from ghostmem.db import migrate as migrations
from ghostmem.program import Params, run_sync
from ghostmem.search import search_messages
from psycopg import sql
from support.conversations import conversation, import_generic
from support.databases import app_login, fresh_database, wait_until_blocked
from support.statements import recording

RUNTIME = "ghostmem_runtime"
LISTED_ROWS = 100  # the setting common_words_rows in these tests: an owner of this many messages is listed
QUERIES = ("alpha beta", "alpha beta zebra", "zebra stripe")


@pytest.fixture
def dsn(server_dsn: str) -> Iterator[str]:
    """A migrated database of its own (the settings changed here reach no other test), listing owners of
    LISTED_ROWS messages."""
    with fresh_database(server_dsn, "ghostmem_common") as db:
        with GhostMem(dsn=db, owner="setup", embedder=HashEmbedder()) as gm:
            gm.connect()
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(
                "UPDATE ghostmem.settings SET value = %s WHERE key = 'common_words_rows'", (str(LISTED_ROWS),)
            )
        yield db


def _texts() -> list[str]:
    """118 messages hold alpha, 118 beta (both common), 8 both, 5 zebra (rare)."""
    texts = [f"alpha item {i}" for i in range(110)] + [f"beta thing {i}" for i in range(110)]
    texts += [f"alpha beta pair {i}" for i in range(8)] + [f"zebra stripe {i}" for i in range(5)]
    return texts


def _store(dsn: str, tmp_path: Path, owner: str, texts: list[str]) -> GhostMem:
    gm = GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder())
    import_generic(
        gm, tmp_path / f"{owner}.jsonl", [conversation(f"c{i}", "t", 1, [t]) for i, t in enumerate(texts)]
    )
    return gm


def _listed(conn: psycopg.Connection[Any], owner: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT lexeme, df FROM ghostmem.common_words WHERE owner = %s AND tier = 'personal'", (owner,)
    ).fetchall()
    return {r[0]: int(r[1]) for r in rows}


def _counted(conn: psycopg.Connection[Any], owner: str) -> dict[str, int]:
    """Each lexeme held by at least DF_CAP of the owner's messages, with its count, from the stored words."""
    rows = conn.execute(
        "SELECT l, count(*) FROM ghostmem.messages m, unnest(tsvector_to_array(m.tsv)) l"
        " WHERE m.owner = %s AND m.tier = 'personal' GROUP BY l HAVING count(*) >= %s",
        (owner, search.DF_CAP),
    ).fetchall()
    return {r[0]: int(r[1]) for r in rows}


def _search(gm: GhostMem, query: str) -> tuple[list[tuple[Any, ...]], int]:
    """The lexical leg's results (id, conversation, rank, score, cover) and how many words it fetched one by one
    (the loops of its word fetch's index scan, ``EXPLAIN ANALYZE`` of the statement as sent)."""
    args = SearchPersonalMemoryArgs(query=query, mode="lexical")
    seen: list[tuple[str, Params]] = []
    with gm.connection() as conn:
        rows = run_sync(recording(search_messages(gm.context, args, 50), conn, seen), conn, gm.embedder)
        conn.commit()
        (text, params), *_ = [s for s in seen if "lex_hits" in s[0]]
        (plan,) = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {text}".encode(), params).fetchone() or [None]
        conn.rollback()
    found = [
        (r["id"], r["conv_id"], r["lex_rank"], round(r["lex_score"], 9), round(r["lex_cover"], 9))
        for r in rows
    ]
    return sorted(found), _word_fetches(plan[0]["Plan"])


def _word_fetches(plan: dict[str, Any]) -> int:
    def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield node
        for child in node.get("Plans", []):
            yield from nodes(child)

    (hits,) = [n for n in nodes(plan) if n.get("Subplan Name") == "CTE lex_hits"]
    return sum(int(n["Actual Loops"]) for n in nodes(hits) if n.get("Index Name") == "messages_owner_words")


def _expected(gm: GhostMem, query: str) -> dict[str, float]:
    """conv_id -> word coverage, computed directly from the owner's stored words as the lexical leg defines them:
    when fewer than DF_CAP messages hold every query word, the candidates are those messages and those holding a
    word rarer than DF_CAP (df counted in the owner's messages, capped); one message a conversation, so a window is
    its message."""
    with gm.connection() as conn:
        words = [
            r[0]
            for r in conn.execute("SELECT unnest(tsvector_to_array(ghostmem.lexemes(%s, true)))", (query,))
        ]
        held = {
            conv: set(lexemes) & set(words)
            for conv, lexemes in conn.execute(
                "SELECT conv_id, tsvector_to_array(tsv) FROM ghostmem.messages WHERE owner = %s", (gm.owner,)
            )
        }
        (n,) = conn.execute(
            "SELECT least(sum(n), %s)::int FROM ghostmem.message_counts WHERE owner = %s",
            (search.N_CAP, gm.owner),
        ).fetchone() or [0]
    df = {w: min(sum(w in h for h in held.values()), search.DF_CAP) for w in words}
    idf = {w: math.log(1 + (max(n, df[w]) - df[w] + 0.5) / (df[w] + 0.5)) for w in words}
    every = {c for c, h in held.items() if h == set(words)}
    assert len(every) < search.DF_CAP
    rare = {w for w in words if df[w] < search.DF_CAP}
    candidates = every | {c for c, h in held.items() if h & rare}
    return {c: sum(idf[w] for w in held[c]) / sum(idf.values()) for c in candidates}


def _covers(found: list[tuple[Any, ...]]) -> dict[str, float]:
    return {r[1]: r[4] for r in found}


def _without_list(
    dsn: str, gm: GhostMem, queries: tuple[str, ...]
) -> dict[str, tuple[list[tuple[Any, ...]], int]]:
    """Each query's results and word fetches with every list emptied (and put back after)."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        saved = admin.execute("DELETE FROM ghostmem.common_words RETURNING *").fetchall()
        try:
            return {q: _search(gm, q) for q in queries}
        finally:
            with admin.cursor() as cur:
                cur.executemany("INSERT INTO ghostmem.common_words VALUES (%s, %s, %s, %s)", saved)


def test_known_common_words_are_not_fetched_and_change_no_result_beside_another_owner(
    dsn: str, tmp_path: Path
) -> None:
    """The list holds exactly the owner's words of at least DF_CAP messages, with their counts; a search fetches
    none of them and returns what a direct computation gives and what it returns without the list: an all-common
    query ranks the messages holding every word (the common words' samples are no candidates), a query with a rare
    word ranks its messages. Another owner holds the rare word in 150 messages (its list has it): this owner still
    fetches it, and its results are the same with or without the other owner's list."""
    mine = _store(dsn, tmp_path, f"mine-{uuid.uuid4().hex[:6]}", _texts())
    other = _store(
        dsn, tmp_path, f"other-{uuid.uuid4().hex[:6]}", [f"zebra crossing {i}" for i in range(150)]
    )
    with psycopg.connect(dsn, autocommit=True) as admin:
        assert (
            _listed(admin, mine.owner)
            == _counted(admin, mine.owner)
            == {
                "alpha": 118,
                "beta": 118,
                "item": 110,
                "thing": 110,
            }
        )
        assert _listed(admin, other.owner) == _counted(admin, other.owner) == {"zebra": 150, "cross": 150}
    with_list = {q: _search(mine, q) for q in QUERIES}
    assert [with_list[q][1] for q in QUERIES] == [0, 1, 2]  # alpha and beta never fetched; zebra, stripe are
    for q in QUERIES:
        assert _covers(with_list[q][0]) == pytest.approx(_expected(mine, q), abs=1e-8), q
    assert {r[1] for r in with_list["alpha beta"][0]} == {f"c{i}" for i in range(220, 228)}  # holding both
    without = _without_list(dsn, mine, QUERIES)
    assert [without[q][1] for q in QUERIES] == [2, 3, 2]
    assert {q: without[q][0] for q in QUERIES} == {q: with_list[q][0] for q in QUERIES}
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("DELETE FROM ghostmem.common_words WHERE owner = %s", (other.owner,))
    assert {q: _search(mine, q) for q in QUERIES} == with_list


def test_a_removal_or_an_edit_takes_its_words_out_of_the_list(dsn: str, tmp_path: Path) -> None:
    """A word must never stay listed once fewer than DF_CAP messages hold it: forgetting 20 of alpha's messages
    (118 -> 98) takes every listed word they held out of the list at once (alpha, item), and the search then fetches
    alpha and ranks its messages as a direct computation does; an edit takes out the listed words its message lost,
    an update of vectors none. A word taken out that is still common (beta after the edit) is fetched until the
    owner is listed again, once its size has moved by `common_words_growth` (213 of 233 is less than a tenth)."""
    gm = _store(dsn, tmp_path, f"mine-{uuid.uuid4().hex[:6]}", _texts())
    for i in range(20):
        gm.forget(f"c{i}")
    with psycopg.connect(dsn, autocommit=True) as admin:
        assert _listed(admin, gm.owner) == {"beta": 118, "thing": 110}
    found, fetched = _search(gm, "alpha beta zebra")
    expected = _expected(gm, "alpha beta zebra")
    assert fetched == 2 and len(expected) == 98 + 5  # alpha's messages are candidates again, and zebra's
    covers = _covers(found)
    assert len(covers) == 50 and covers == pytest.approx({c: expected[c] for c in covers}, abs=1e-8)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(
            "UPDATE ghostmem.messages SET text = 'gamma thing' WHERE owner = %s AND conv_id = 'c110'",
            (gm.owner,),
        )
        assert _listed(admin, gm.owner) == {"thing": 110}  # beta lost a message; thing did not
        admin.execute(  # a new vector changes no word: nothing is taken out
            "UPDATE ghostmem.messages SET embedding = embedding WHERE owner = %s", (gm.owner,)
        )
        assert _listed(admin, gm.owner) == {"thing": 110}
        assert maintenance.refresh_common_words(admin, gm.owner) == 0  # not due
        found, fetched = _search(gm, "alpha beta zebra")
        assert fetched == 3 and _covers(found) == pytest.approx(
            {c: v for c, v in _expected(gm, "alpha beta zebra").items() if c in _covers(found)}, abs=1e-8
        )
        admin.execute("UPDATE ghostmem.settings SET value = '0.05' WHERE key = 'common_words_growth'")
        assert maintenance.refresh_common_words(admin, gm.owner) == 1
        assert _listed(admin, gm.owner) == _counted(admin, gm.owner) == {"beta": 117, "thing": 110}


def test_a_refresh_waits_for_a_removal_in_flight(dsn: str, tmp_path: Path) -> None:
    """A removal not yet committed when a refresh starts (of an owner not listed yet, so its trigger had nothing to
    trim): a count that still saw its rows would list alpha (118 in the refresh's snapshot, 98 once it commits) and
    nothing would take it out. The refresh waits for it (a SHARE lock on messages) and counts what it left."""
    gm = _store(dsn, tmp_path, f"mine-{uuid.uuid4().hex[:6]}", _texts())
    tag = f"refresh-{uuid.uuid4().hex[:6]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("DELETE FROM ghostmem.common_words WHERE owner = %s", (gm.owner,))  # never listed
        admin.execute("DELETE FROM ghostmem.common_words_counted WHERE owner = %s", (gm.owner,))
    with psycopg.connect(dsn) as remover:
        remover.execute(
            "DELETE FROM ghostmem.messages WHERE owner = %s AND conv_id = ANY(%s)",
            (gm.owner, [f"c{i}" for i in range(20)]),
        )
        listed: list[int] = []

        def refresh() -> None:
            with psycopg.connect(dsn, autocommit=True, application_name=tag) as conn:
                listed.append(maintenance.refresh_common_words(conn, gm.owner))

        worker = threading.Thread(target=refresh)
        worker.start()
        try:
            wait_until_blocked(dsn, tag)
        finally:
            remover.commit()
            worker.join(timeout=60)
    assert listed == [1]
    with psycopg.connect(dsn, autocommit=True) as admin:
        assert _listed(admin, gm.owner) == _counted(admin, gm.owner) == {"beta": 118, "thing": 110}


def test_an_owner_is_listed_past_its_size_and_again_once_it_has_grown(dsn: str, tmp_path: Path) -> None:
    """Below `common_words_rows` messages an owner has no list; once listed, a refresh lists it again only after it
    has grown by `common_words_growth` (a tenth), and one whose size fell below loses its list."""
    owner = f"mine-{uuid.uuid4().hex[:6]}"
    gm = _store(dsn, tmp_path, owner, [f"alpha note {i}" for i in range(LISTED_ROWS - 1)])
    with psycopg.connect(dsn, autocommit=True) as admin:
        assert _listed(admin, owner) == {}
        import_generic(gm, tmp_path / "more.jsonl", [conversation("m0", "t", 1, ["alpha note last"])])
        assert _listed(admin, owner) == {"alpha": 100, "note": 100}  # listed by the import
        assert maintenance.refresh_common_words(admin, owner) == 0
        import_generic(
            gm, tmp_path / "nine.jsonl", [conversation(f"n{i}", "t", 1, ["alpha"]) for i in range(9)]
        )
        assert _listed(admin, owner) == {"alpha": 100, "note": 100}  # 109 < 110: not due
        import_generic(gm, tmp_path / "tenth.jsonl", [conversation("n9", "t", 1, ["alpha"])])
        assert _listed(admin, owner) == {"alpha": 110, "note": 100}
        admin.execute("UPDATE ghostmem.settings SET value = '1000' WHERE key = 'common_words_rows'")
        assert maintenance.refresh_common_words(admin, owner) == 0
        assert _listed(admin, owner) == {}


def test_the_application_reads_the_list_and_never_writes_it(dsn: str, tmp_path: Path) -> None:
    """An application's login (ghostmem grant-app) searches with the list but may not write either table, nor run
    the refresh (maintenance skips it); its removals still take words out (the trigger is the schema owner's), so it
    can shorten the list, never lengthen it. Another owner's import through the application lists nothing for
    this owner."""
    mine = _store(dsn, tmp_path, f"mine-{uuid.uuid4().hex[:6]}", _texts())
    with app_login(dsn) as app_dsn:
        with psycopg.connect(app_dsn, autocommit=True) as app:
            assert _listed(app, mine.owner)["alpha"] == 118
            forbidden = [
                f"INSERT INTO ghostmem.common_words VALUES ('{mine.owner}', 'zebra', 'personal', 1000)",
                f"UPDATE ghostmem.common_words SET lexeme = 'zebra' WHERE owner = '{mine.owner}'",
                "DELETE FROM ghostmem.common_words",
                "TRUNCATE ghostmem.common_words",
                f"INSERT INTO ghostmem.common_words_counted VALUES ('{mine.owner}', 'library', 1, 1)",
                "UPDATE ghostmem.common_words_counted SET rows = 0",
                "DELETE FROM ghostmem.common_words_counted",
                f"SELECT ghostmem.refresh_common_words('{mine.owner}', 1)",
                "SELECT ghostmem.common_words_trim()",
            ]
            for statement in forbidden:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    app.execute(statement)
            assert maintenance.refresh_common_words(app, mine.owner) == 0
            app.execute("DELETE FROM ghostmem.messages WHERE owner = %s AND conv_id = 'c110'", (mine.owner,))
            assert "beta" not in _listed(app, mine.owner)
        theirs = GhostMem(dsn=app_dsn, owner=f"theirs-{uuid.uuid4().hex[:6]}", embedder=HashEmbedder())
        import_generic(
            theirs, tmp_path / "theirs.jsonl", [conversation(f"z{i}", "t", 1, ["zebra"]) for i in range(150)]
        )
        app_gm = GhostMem(dsn=app_dsn, owner=mine.owner, embedder=HashEmbedder())
        found, fetched = _search(app_gm, "alpha beta zebra")
        assert fetched == 2 and _covers(found) == pytest.approx(
            _expected(app_gm, "alpha beta zebra"), abs=1e-8
        )
    with psycopg.connect(dsn, autocommit=True) as admin:
        assert _listed(admin, theirs.owner) == {}  # the application's import may not list
        assert set(_listed(admin, mine.owner)) == {"alpha", "item"}  # c110's words (beta, thing) taken out


def test_roles_granted_before_the_list_existed_may_only_read_it(server_dsn: str) -> None:
    """An application granted before migration 220 got writes on its new tables through the default privileges;
    the migration takes them back, and grant_app never gives them."""
    app = f"ghostmem_app_{uuid.uuid4().hex[:8]}"
    with (
        fresh_database(server_dsn, "ghostmem_common_roles") as db,
        psycopg.connect(db, autocommit=True) as admin,
    ):
        migrations.migrate(admin, 384, "hash", RUNTIME, upto=219)
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(app)))
        try:
            admin.execute("SELECT ghostmem.grant_app(%s, %s)", (app, RUNTIME))
            migrations.migrate(admin, 384, "hash", RUNTIME)
            assert _privileges(admin, app) == READ_ONLY
            admin.execute("SELECT ghostmem.grant_app(%s, %s)", (app, RUNTIME))
            assert _privileges(admin, app) == READ_ONLY
        finally:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(app)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(app)))


READ_ONLY = {
    (table, privilege): privilege == "SELECT"
    for table in ("ghostmem.common_words", "ghostmem.common_words_counted")
    for privilege in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE")
}


def _privileges(conn: psycopg.Connection[Any], role: str) -> dict[tuple[str, str], bool]:
    return {
        (table, privilege): bool(
            (
                conn.execute("SELECT has_table_privilege(%s, %s, %s)", (role, table, privilege)).fetchone()
                or [0]
            )[0]
        )
        for table, privilege in READ_ONLY
    }
