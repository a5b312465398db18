"""An index of a large owner's recent messages' words (migration 240): built with the owner's graph of its recent
messages (migration 210) and with its day, by the schema owner's definer function the maintenance hook calls after
the graphs; the lexical leg's conjunction fetch of a search whose time window starts on or after that day reads it
(the generic plan reads the index), a longer window the owner's whole index; what the search finds is what it finds
without the index, the owner's alone beside another owner holding the same words; the index follows the graph's
day and goes with the graph; a role that may not build cannot drop, alter or re-date it."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder, maintenance
from ghostmem.args import SearchPersonalMemoryArgs
from ghostmem.db import migrate as migrations
from ghostmem.program import run_sync
from ghostmem.search import SCOPE_FETCH_BELOW, search_messages
from support.conversations import conversation, import_generic
from support.databases import app_login, fresh_database, graph_store, index_refused_to_the_application
from support.statements import conjunction_search, message_indexes, recording

SIZE = 40  # recent_graph_rows in these tests
SAID = ["deploy plan for the release", "the deploy plan is ready", "rollback steps", "release notes drafted"]
AGES = {"now": [1, 2, 3], "weeks": [10, 15, 20], "old": [60, 90, 200]}
OWNERS = ["o'brien %s", "o'brien %s\\"]  # one another's prefix, quotes, `%`, a backslash


def digest(owner: str) -> str:
    return hashlib.sha256(f"{len(owner)}:{owner}".encode()).hexdigest()[:40]


def words_name(owner: str) -> str:
    """The name migration 240 gives the index of ``owner``'s recent messages' words, computed here on its own."""
    return "messages_recent_words_" + digest(owner)


def recent_words(conn: psycopg.Connection[Any]) -> dict[str, tuple[str, str | None, str]]:
    """Each partial index of ghostmem.messages named as migration 240 names them: name -> (predicate, comment,
    definition)."""
    return message_indexes(conn, "messages\\_recent\\_words\\_")


def graph_day(conn: psycopg.Connection[Any], owner: str) -> str | None:
    row = conn.execute(
        "SELECT obj_description(to_regclass('ghostmem.message_vectors_graph_' || %s), 'pg_class')",
        (digest(owner),),
    ).fetchone()
    return row[0] if row else None


@pytest.fixture
def store(server_dsn: str, tmp_path: Path) -> Iterator[str]:
    """Two owners past the size holding the same conversations (5 messages each, of the last days, weeks and
    months), and a smaller owner."""
    with graph_store(server_dsn, "ghostmem_rwords", "recent_graph_rows", SIZE) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE ghostmem.settings SET value = %s WHERE key = 'recent_words_rows'", (str(SIZE),)
            )
        convs = [
            conversation(f"{tag}{i}", f"talk {tag}{i}", age, [*SAID, f"step {tag} {i}"])
            for tag, ages in AGES.items()
            for i, age in enumerate(ages)
        ]
        for owner in OWNERS:
            with GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder()) as gm:
                import_generic(gm, tmp_path / "a.jsonl", convs)
        with GhostMem(dsn=dsn, owner="bob", embedder=HashEmbedder()) as gm:
            import_generic(gm, tmp_path / "b.jsonl", convs[:3])
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE ghostmem.messages")  # as autovacuum does after an import
        yield dsn


def _search(gm: GhostMem, days: int | None, mode: str = "lexical") -> tuple[list[Any], set[str]]:
    """The fused rows of a search (floor off) and the GIN indexes of words its conjunction fetch (lex_all) reads in
    the statement's generic plan (the plan statement made plans generic in the transaction)."""
    args = SearchPersonalMemoryArgs(query="deploy plan release", mode=mode, days=days, limit=20)
    return conjunction_search(gm, args, r"messages_(?:owner_words|recent_words_[0-9a-f]{40})")


def test_a_large_owner_gets_an_index_of_its_recent_words_and_a_window_within_it_reads_it(store: str) -> None:
    """Each owner past the size gets an index of its own messages since its recent graph's day (the same day, the
    comment; the owner written into the predicate; the short pending list of migration 116), the smaller owner
    none. A hybrid search of the last 7 or 21 days, or of no window (its conjunction: the recent messages'), fetches
    the conjunction through the owner's own index, a window of 60 days and a search by words alone (its plan
    statement reads no window row) through the owner's whole index; every windowed search and every search by words
    alone returns what it returns without the index (the same rows at the same scores), the owner's messages of the
    window alone."""
    with psycopg.connect(store) as admin:
        found = recent_words(admin)
        days = {o: graph_day(admin, o) for o in OWNERS}
    assert set(found) == {words_name(o) for o in OWNERS}
    for owner in OWNERS:
        predicate, comment, definition = found[words_name(owner)]
        assert comment == days[owner] is not None
        assert (
            "gin_pending_list_limit='256'" in definition and "ghostmem.owner_words(owner, tsv)" in definition
        )
        quoted = owner.replace("'", "''")
        assert predicate.startswith(f"(((owner || ''::text) = '{quoted}'::text) AND (ts >= "), predicate
    results: dict[tuple[str, int | None, str], list[Any]] = {}
    for owner in OWNERS:
        with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm:
            with gm.connection() as conn:
                mine = {
                    r[0] for r in conn.execute("SELECT id FROM ghostmem.messages WHERE owner = %s", (owner,))
                }
            for window in (7, 21, 60, None):
                for mode in ("lexical", "hybrid"):
                    rows, read = _search(gm, window, mode)
                    want = (
                        {words_name(owner)}
                        if window in (7, 21, None) and mode == "hybrid"
                        else {"messages_owner_words"}
                    )
                    assert read == want, (owner, window, mode, read)
                    assert rows and {r["id"] for r in rows} <= mine
                    results[(owner, window, mode)] = [(r["id"], r["score"]) for r in rows]
    with psycopg.connect(store, autocommit=True) as admin:
        for owner in OWNERS:
            admin.execute(f'DROP INDEX ghostmem."{words_name(owner)}"'.encode())
    for owner in OWNERS:
        with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm:
            for window in (7, 21, 60, None):
                for mode in ("lexical", "hybrid"):
                    rows, read = _search(gm, window, mode)
                    assert read == {"messages_owner_words"}
                    if window is None and mode == "hybrid":
                        continue  # its conjunction was the recent messages' (the next test)
                    assert [(r["id"], r["score"]) for r in rows] == results[(owner, window, mode)], (
                        owner,
                        window,
                    )


def test_the_recent_conjunction_is_the_windows_messages_holding_every_word(store: str) -> None:
    """A direct computation: a 7-day hybrid search finds every message of the owner's window whose words hold
    every query word (the conjunction, fetched through the owner's index) and nothing outside the window, beside
    another owner holding the same messages whose index is another (attack: its rows never come back)."""
    owner, other = OWNERS
    with psycopg.connect(store) as admin:
        window = {
            r[0]
            for r in admin.execute(
                "SELECT id FROM ghostmem.messages WHERE owner = %s AND ts >= now() - interval '7 days'",
                (owner,),
            )
        }
        want = {
            r[0]
            for r in admin.execute(
                "SELECT id FROM ghostmem.messages WHERE owner = %s AND ts >= now() - interval '7 days'"
                " AND tsvector_to_array(tsv) @> tsvector_to_array(ghostmem.lexemes('deploy plan release', true))",
                (owner,),
            )
        }
        theirs = {r[0] for r in admin.execute("SELECT id FROM ghostmem.messages WHERE owner = %s", (other,))}
    assert want
    with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm:
        rows, read = _search(gm, 7, "hybrid")
    assert read == {words_name(owner)}
    found = {r["id"] for r in rows}
    assert want <= found <= window
    assert not found & theirs


def test_an_unfiltered_conjunction_is_the_recent_messages_holding_every_word(store: str) -> None:
    """A direct computation: an unfiltered hybrid search's conjunction fetch (lex_all) reads the owner's index of its
    recent messages' words, and is the owner's messages since the index's day whose words hold every query word (all
    of them when fewer than the fetch's size do), none older, none of another owner holding the same messages with
    an index of its own (attack: its rows never come back); the smaller owner, without such an index, fetches
    through the whole index, its own messages alone."""
    owner, other = OWNERS
    with psycopg.connect(store) as admin:
        since = graph_day(admin, owner)
        mine = {r[0] for r in admin.execute("SELECT id FROM ghostmem.messages WHERE owner = %s", (owner,))}
        want = {
            r[0]
            for r in admin.execute(
                "SELECT id FROM ghostmem.messages WHERE owner = %s AND ts >= %s::timestamptz"
                " AND tsvector_to_array(tsv) @> tsvector_to_array(ghostmem.lexemes('deploy plan release', true))",
                (owner, since),
            )
        }
        theirs = {r[0] for r in admin.execute("SELECT id FROM ghostmem.messages WHERE owner = %s", (other,))}
        bobs = {r[0] for r in admin.execute("SELECT id FROM ghostmem.messages WHERE owner = 'bob'")}
    assert want and since is not None
    seen: list[Any] = []
    with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm:
        rows, read = _search(gm, None, "hybrid")
        with gm.connection() as conn:
            args = SearchPersonalMemoryArgs(query="deploy plan release", mode="hybrid", limit=20)
            run_sync(
                recording(search_messages(gm.context, args, depth=60, floor=-1), conn, seen),
                conn,
                gm.embedder,
            )
            text, params = seen[-1]
            cut = re.sub(r"--[^\n]*", "", text[: text.index("lex_enough AS")]).rstrip().rstrip(",")
            fetched = {r[0] for r in conn.execute(f"{cut} SELECT id FROM lex_all".encode(), params)}
    assert read == {words_name(owner)}
    assert fetched == want  # fewer than the fetch's 60 hold every word here: all of the recent ones
    found = {r["id"] for r in rows}
    assert want <= found <= mine and not found & theirs
    with GhostMem(dsn=store, owner="bob", embedder=HashEmbedder()) as gm:
        rows, read = _search(gm, None, "hybrid")
    assert read == {"messages_owner_words"}
    assert rows and {r["id"] for r in rows} <= bobs


def test_a_windows_fetch_is_its_share_less_one_and_an_unfiltered_fetch_the_whole_depth(store: str) -> None:
    """The size of the conjunction fetch through the recent index (lex_all's LIMIT): for the last 7 days the recent
    messages' share of the depth rounded down, less SCOPE_FETCH_BELOW as for a project or a platform (session 32: a
    fetch of the share rounded up displaced more of the nearest conversations); unfiltered, the whole depth."""
    owner = OWNERS[0]
    with psycopg.connect(store) as admin:
        since = graph_day(admin, owner)
        counted = admin.execute(
            "SELECT count(*) FILTER (WHERE (ts AT TIME ZONE 'UTC')::date >= (%s::timestamptz AT TIME ZONE 'UTC')::date),"
            " count(*) FROM ghostmem.messages WHERE owner = %s",
            (since, owner),
        ).fetchone()
    assert counted is not None
    recent, every = counted
    assert 0 < recent < every
    limits: dict[int | None, int] = {}
    with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm, gm.connection() as conn:
        for days in (7, None):
            seen: list[Any] = []
            args = SearchPersonalMemoryArgs(query="deploy plan release", mode="hybrid", days=days, limit=20)
            run_sync(
                recording(search_messages(gm.context, args, depth=60, floor=-1), conn, seen),
                conn,
                gm.embedder,
            )
            text = seen[-1][0]
            fetch = text[text.index("lex_all AS") : text.index("lex_enough AS")]
            limits[days] = int(re.findall(r"LIMIT (\d+)", fetch)[-1])
    assert limits == {7: math.floor(60 * recent / every) - SCOPE_FETCH_BELOW, None: 60}


def test_the_index_follows_the_graphs_day_and_goes_with_it(store: str) -> None:
    """The build keeps the index while the graph keeps its day, builds it again with a new day (a graph re-dated),
    drops it when the graph is gone (an owner below the size) and builds none for the smaller owner; the Python
    hook builds it after the graphs."""
    owner = OWNERS[0]
    with psycopg.connect(store, autocommit=True) as admin:
        before = recent_words(admin)[words_name(owner)]
        assert admin.execute("SELECT ghostmem.build_recent_words(%s)", (owner,)).fetchone() == (0,)
        assert recent_words(admin)[words_name(owner)] == before
        graph = "message_vectors_graph_" + digest(owner)
        admin.execute(f"COMMENT ON INDEX ghostmem.{graph} IS '2026-01-02T00:00:00+00'".encode())
        assert admin.execute("SELECT ghostmem.build_recent_words(%s)", (owner,)).fetchone() == (1,)
        predicate, comment, _ = recent_words(admin)[words_name(owner)]
        assert comment == "2026-01-02T00:00:00+00" and "2026-01-02 00:00:00+00" in predicate
        admin.execute(f"DROP INDEX ghostmem.{graph}".encode())
        assert admin.execute("SELECT ghostmem.build_recent_words(%s)", (owner,)).fetchone() == (0,)
        assert words_name(owner) not in recent_words(admin)
        assert admin.execute("SELECT ghostmem.build_recent_words('bob')").fetchone() == (0,)
        assert words_name("bob") not in recent_words(admin)
        # an owner with a graph of its recent messages but below recent_words_rows gets none
        admin.execute("UPDATE ghostmem.settings SET value = '46' WHERE key = 'recent_words_rows'")
        assert admin.execute("SELECT ghostmem.build_recent_words(%s)", (OWNERS[1],)).fetchone() == (0,)
        assert words_name(OWNERS[1]) not in recent_words(admin)
        admin.execute("UPDATE ghostmem.settings SET value = %s WHERE key = 'recent_words_rows'", (str(SIZE),))
        # the hook: the graphs first (the graph of the recent messages again), then its words
        assert maintenance.build_project_graphs(admin, owner) == 2
        assert recent_words(admin)[words_name(owner)][1] == graph_day(admin, owner) is not None


@pytest.mark.parametrize(
    ("before", "after"), [("500000", ("100000", "500000")), ("60000", ("60000", "60000"))]
)
def test_272_gives_the_recent_index_100000_and_a_platform_the_size_the_store_had(
    server_dsn: str, before: str, after: tuple[str, str]
) -> None:
    """Migration 272: the recent messages' index from 100,000 messages (240's 500,000 made a time-window search at
    100,000 dearer; with the search as it is now it is cheaper there, docs/search.md), a platform's words index
    (250) under its own setting with the size it shared before; a store whose size was changed keeps its own."""
    with fresh_database(server_dsn, "ghostmem_r272") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        migrations.migrate(conn, 384, "hash", "ghostmem_runtime", upto=271)
        conn.execute("UPDATE ghostmem.settings SET value = %s WHERE key = 'recent_words_rows'", (before,))
        migrations.migrate(conn, 384, "hash", "ghostmem_runtime")
        sizes = conn.execute(
            "SELECT (SELECT value FROM ghostmem.settings WHERE key = 'recent_words_rows'),"
            " (SELECT value FROM ghostmem.settings WHERE key = 'platform_words_rows')"
        ).fetchone()
    assert sizes == after


def test_an_application_may_neither_build_drop_alter_nor_re_date_the_index(store: str) -> None:
    """The application's login (and the runtime role it may take) may not run the build, drop the index, change
    its storage or its comment (the day a search reads); the maintenance hook skips the build for it."""
    name = words_name(OWNERS[0])
    with app_login(store) as app_dsn, psycopg.connect(app_dsn, autocommit=True) as conn:
        assert maintenance.build_recent_words(conn, OWNERS[0]) == 0
        index_refused_to_the_application(
            conn, "SELECT ghostmem.build_recent_words('bob')", name, "2000-01-01T00:00:00+00"
        )
    with psycopg.connect(store) as admin:
        assert recent_words(admin)[name][1] == graph_day(admin, OWNERS[0])
