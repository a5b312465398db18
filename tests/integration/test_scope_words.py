"""An index of the words of each large project and platform of a large owner (migration 250): built by the schema
owner's definer function, which the maintenance hook calls after the graphs, for the scopes that get a graph of
their own; the lexical leg's conjunction fetch of a hybrid search filtered by one of them reads it (the generic
plan reads the index; with several, the smallest), a filter matching several projects or a title the owner's
whole index; what the search finds is the scope's messages holding the words, the owner's alone beside another
owner holding the same projects, platforms and words; the build drops the indexes of scopes below the bounds and
never another owner's; a role that may not build cannot drop, alter or re-own them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder, maintenance
from ghostmem.args import SearchPersonalMemoryArgs
from support.conversations import conversation, import_generic
from support.databases import app_login, graph_store, index_refused_to_the_application
from support.statements import conjunction_search, message_indexes

OWNER_ROWS = (
    40  # project_words_rows and platform_words_rows here: an owner of 40 messages or more gets the indexes
)
SCOPE_ROWS = 10  # project_graph_rows and platform_graph_rows: a scope of 10 messages or more (a platform: at most half)
SAID = ["deploy plan for the release", "the deploy plan is ready", "rollback steps", "release notes drafted"]
QUERY = "deploy plan release"
OWNERS = ["o'brien %s", "o'brien %s\\"]  # one another's prefix, quotes, `%`, a backslash
ALPHA, BETA = "/src/alpha", "/src/beta"
PLATFORM = "codex"  # a search's platform is one of the importers' (SearchPersonalMemoryArgs)


def project_name(owner: str, project: str) -> str:
    """The name migration 250 gives the index of ``owner``'s ``project``'s words, computed here on its own."""
    return "messages_words_" + hashlib.sha256(f"{len(owner)}:{owner}{project}".encode()).hexdigest()[:40]


def platform_name(owner: str, platform: str) -> str:
    return "messages_words_" + hashlib.sha256(f"{len(owner)};{owner}{platform}".encode()).hexdigest()[:40]


def scope_words(conn: psycopg.Connection[Any]) -> dict[str, tuple[str, str | None, str]]:
    """Each partial index of ghostmem.messages named as migration 250 names them: name -> (predicate, comment,
    definition)."""
    return message_indexes(conn, "messages\\_words\\_")


def _convs(tag: str, n: int, project: str | None) -> list[dict[str, Any]]:
    return [
        conversation(f"{tag}{i}", f"talk {tag}{i}", 1 + i, [*SAID, f"step {tag} {i}"], project)
        for i in range(n)
    ]


@pytest.fixture
def store(server_dsn: str, tmp_path: Path) -> Iterator[str]:
    """Two owners past the size holding the same conversations: 4 of ALPHA (20 messages), 3 of BETA (15) and 4
    without a project (20), BETA's and two of the others on PLATFORM (25 of 55), the rest on the generic importer's
    platform (30: over half); and a smaller owner (2 conversations of ALPHA)."""
    with graph_store(server_dsn, "ghostmem_swords", "project_graph_rows", SCOPE_ROWS) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            # the migrations' sizes: a project's index from an owner of 50,000 messages (271), a platform's from
            # 500,000 (272), the recent messages' (240) from 100,000 (272): one setting each
            assert dict(
                conn.execute(
                    "SELECT key, value FROM ghostmem.settings"
                    " WHERE key IN ('recent_words_rows', 'project_words_rows', 'platform_words_rows')"
                ).fetchall()
            ) == {
                "recent_words_rows": "100000",
                "project_words_rows": "50000",
                "platform_words_rows": "500000",
            }
            conn.execute(
                "UPDATE ghostmem.settings SET value = %s WHERE key IN ('project_words_rows', 'platform_words_rows')",
                (str(OWNER_ROWS),),
            )
            conn.execute(
                "UPDATE ghostmem.settings SET value = %s WHERE key = 'platform_graph_rows'",
                (str(SCOPE_ROWS),),
            )
        convs = _convs("a", 4, ALPHA) + _convs("b", 3, BETA) + _convs("n", 4, None)
        for owner in OWNERS:
            with GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder()) as gm:
                import_generic(gm, tmp_path / "a.jsonl", convs)
                with gm.connection() as conn:
                    conn.execute(
                        "UPDATE ghostmem.messages SET platform = %s"
                        " WHERE owner = %s AND (conv_id LIKE 'b%%' OR conv_id IN ('n0', 'n1'))",
                        (PLATFORM, owner),
                    )
        with GhostMem(dsn=dsn, owner="bob", embedder=HashEmbedder()) as gm:
            import_generic(gm, tmp_path / "b.jsonl", convs[:2])
        with psycopg.connect(dsn, autocommit=True) as conn:
            for owner in [*OWNERS, "bob"]:
                maintenance.build_project_graphs(conn, owner)  # as an import does (after the platform moved)
            conn.execute("VACUUM ANALYZE ghostmem.messages")  # as autovacuum does after an import
        yield dsn


def _search(gm: GhostMem, mode: str = "hybrid", **filters: Any) -> tuple[list[Any], set[str]]:
    """The fused rows of a search (floor off) and the GIN indexes of words its conjunction fetch (lex_all) reads in
    the statement's generic plan (the plan statement made plans generic in the transaction)."""
    args = SearchPersonalMemoryArgs(query=QUERY, mode=mode, limit=20, **filters)
    return conjunction_search(gm, args, r"messages_(?:owner_words|words_[0-9a-f]{40})")


def _ids(conn: psycopg.Connection[Any], where: str, *params: Any) -> set[int]:
    return {r[0] for r in conn.execute(f"SELECT id FROM ghostmem.messages WHERE {where}".encode(), params)}


def test_a_large_owners_projects_and_platforms_get_indexes_and_a_search_of_one_reads_its_own(
    store: str,
) -> None:
    """Each owner past the size gets an index of each project's and each platform's words that gets a graph
    (ALPHA, BETA, PLATFORM; not the generic platform, over half), its predicate the owner and the scope written in,
    its comment the owner, the short pending list of migration 116; the smaller owner none. A hybrid search of a
    project or a platform fetches its conjunction through the owner's index of that scope, of both through the
    smaller's (BETA within PLATFORM); a filter matching two projects or a title, a search by words alone and one
    without a filter through the owner's whole index; a search by meaning alone fetches nothing. Every search
    returns the owner's messages of its scope alone."""
    with psycopg.connect(store) as admin:
        found = scope_words(admin)
    want = {
        name: owner
        for owner in OWNERS
        for name in (project_name(owner, ALPHA), project_name(owner, BETA), platform_name(owner, PLATFORM))
    }
    assert {n: c for n, (_, c, _) in found.items()} == want
    for owner in OWNERS:
        quoted = owner.replace("'", "''")
        for name, column, scope in (
            (project_name(owner, ALPHA), "project", ALPHA),
            (platform_name(owner, PLATFORM), "platform", PLATFORM),
        ):
            predicate, _, definition = found[name]
            assert predicate == f"(((owner || ''::text) = '{quoted}'::text) AND ({column} = '{scope}'::text))"
            assert "gin_pending_list_limit='256'" in definition
            assert "ghostmem.owner_words(owner, tsv)" in definition
    for owner in OWNERS:
        with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm:
            with gm.connection() as conn:
                alpha = _ids(conn, "owner = %s AND project = %s", owner, ALPHA)
                beta_codex = _ids(
                    conn, "owner = %s AND project = %s AND platform = %s", owner, BETA, PLATFORM
                )
                codex = _ids(conn, "owner = %s AND platform = %s", owner, PLATFORM)
                mine = _ids(conn, "owner = %s", owner)
            for filters, mode, reads, scope in (
                ({"project": "alpha"}, "hybrid", {project_name(owner, ALPHA)}, alpha),
                ({"platform": PLATFORM}, "hybrid", {platform_name(owner, PLATFORM)}, codex),
                (
                    {"platform": PLATFORM, "project": "beta"},
                    "hybrid",
                    {project_name(owner, BETA)},
                    beta_codex,
                ),
                ({"project": "src"}, "hybrid", {"messages_owner_words"}, alpha | _ids_of(store, owner, BETA)),
                ({"project": "talk a"}, "hybrid", {"messages_owner_words"}, alpha),
                ({"project": "alpha"}, "lexical", {"messages_owner_words"}, alpha),
                ({"platform": PLATFORM}, "lexical", {"messages_owner_words"}, codex),
                ({}, "hybrid", {"messages_owner_words"}, mine),
                ({"project": "alpha"}, "vector", set(), alpha),
            ):
                rows, read = _search(gm, mode, **filters)
                assert read == reads, (owner, filters, mode, read)
                assert rows and {r["id"] for r in rows} <= scope, (owner, filters, mode)


def _ids_of(store: str, owner: str, project: str) -> set[int]:
    with psycopg.connect(store) as conn:
        return _ids(conn, "owner = %s AND project = %s", owner, project)


def test_a_scopes_conjunction_is_its_messages_holding_every_word_and_never_another_owners(store: str) -> None:
    """A direct computation: a hybrid search of a project or a platform finds every message of the owner's scope
    whose words hold every query word (fetched through the owner's index of the scope) and nothing outside it,
    beside another owner holding the same messages, projects and platforms, whose indexes are others (attack: its
    rows never come back, and its indexes answer no search of this owner's); the results equal those of the
    search without the scope's indexes but for the conjunction's sample, which here is whole."""
    owner, other = OWNERS
    with psycopg.connect(store) as admin:
        holds = "tsvector_to_array(tsv) @> tsvector_to_array(ghostmem.lexemes(%s, true))"
        theirs = _ids(admin, "owner = %s", other)
        cases = {
            "project": (
                {"project": "alpha"},
                _ids(admin, f"owner = %s AND project = %s AND {holds}", owner, ALPHA, QUERY),
                _ids(admin, "owner = %s AND project = %s", owner, ALPHA),
                project_name(owner, ALPHA),
            ),
            "platform": (
                {"platform": PLATFORM},
                _ids(admin, f"owner = %s AND platform = %s AND {holds}", owner, PLATFORM, QUERY),
                _ids(admin, "owner = %s AND platform = %s", owner, PLATFORM),
                platform_name(owner, PLATFORM),
            ),
        }
    with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm:
        for label, (filters, want, scope, index) in cases.items():
            assert want, label
            rows, read = _search(gm, "hybrid", **filters)
            assert read == {index}, label
            found = {r["id"] for r in rows}
            assert want <= found <= scope, label
            assert not found & theirs, label


def test_the_build_keeps_drops_and_never_touches_another_owners_indexes(store: str) -> None:
    """The build keeps an owner's indexes while its scopes keep their sizes (building none again), drops a
    project's once it is below the size and a platform's once it holds over half of the owner's messages, its
    platforms' once the owner is below platform_words_rows and its projects' once it is below project_words_rows
    (migrations 271, 272: the sizes apart; recent_words_rows, the recent messages' index's, moves neither), never
    another owner's (the same scopes); the Python hook builds them after the graphs."""
    owner, other = OWNERS
    with psycopg.connect(store, autocommit=True) as admin:
        before = scope_words(admin)
        assert admin.execute("SELECT ghostmem.build_scope_words(%s)", (owner,)).fetchone() == (0,)
        assert scope_words(admin) == before
        # BETA (15 messages) below the size, ALPHA (20) not
        admin.execute("UPDATE ghostmem.settings SET value = '16' WHERE key = 'project_graph_rows'")
        assert admin.execute("SELECT ghostmem.build_scope_words(%s)", (owner,)).fetchone() == (0,)
        after = scope_words(admin)
        assert project_name(owner, BETA) not in after and project_name(owner, ALPHA) in after
        assert project_name(other, BETA) in after  # the other owner's, the same project: kept
        # the recent messages' size (272: no longer a platform's) below or past the owner: none dropped, none built
        for size in ("1", "56"):
            admin.execute("UPDATE ghostmem.settings SET value = %s WHERE key = 'recent_words_rows'", (size,))
            assert admin.execute("SELECT ghostmem.build_scope_words(%s)", (owner,)).fetchone() == (0,)
            assert scope_words(admin) == after
        # the owner (55 messages) below the platforms' size but not the projects': its project's index kept
        admin.execute("UPDATE ghostmem.settings SET value = '56' WHERE key = 'platform_words_rows'")
        assert admin.execute("SELECT ghostmem.build_scope_words(%s)", (owner,)).fetchone() == (0,)
        assert {n for n, (_, c, _) in scope_words(admin).items() if c == owner} == {
            project_name(owner, ALPHA)
        }
        # and below both: none of its indexes left, the other owner's all there
        admin.execute("UPDATE ghostmem.settings SET value = '56' WHERE key = 'project_words_rows'")
        assert admin.execute("SELECT ghostmem.build_scope_words(%s)", (owner,)).fetchone() == (0,)
        after = scope_words(admin)
        assert not {n for n, (_, c, _) in after.items() if c == owner}
        assert {n for n, (_, c, _) in after.items() if c == other} == {
            project_name(other, ALPHA),
            project_name(other, BETA),
            platform_name(other, PLATFORM),
        }
        assert admin.execute("SELECT ghostmem.build_scope_words('bob')").fetchone() == (0,)
        # back to the sizes: the hook builds the owner's two again (BETA still below), after its graphs
        admin.execute(
            "UPDATE ghostmem.settings SET value = %s WHERE key IN ('project_words_rows', 'platform_words_rows')",
            (str(OWNER_ROWS),),
        )
        assert maintenance.build_scope_words(admin, owner) == 2
        assert {n for n, (_, c, _) in scope_words(admin).items() if c == owner} == {
            project_name(owner, ALPHA),
            platform_name(owner, PLATFORM),
        }
        # PLATFORM over half of the owner's messages: its index dropped
        admin.execute(
            "UPDATE ghostmem.messages SET platform = %s WHERE owner = %s AND conv_id LIKE 'a%%'",
            (PLATFORM, owner),
        )
        maintenance.build_project_graphs(admin, owner)
        assert platform_name(owner, PLATFORM) not in scope_words(admin)
        assert platform_name(other, PLATFORM) in scope_words(admin)


def test_an_application_may_neither_build_drop_alter_nor_re_own_the_indexes(store: str) -> None:
    """The application's login (and the runtime role it may take) may not run the build, drop an index, change its
    storage or its comment (the owner whose build may drop it); the maintenance hook skips the build for it."""
    name = project_name(OWNERS[0], ALPHA)
    with app_login(store) as app_dsn, psycopg.connect(app_dsn, autocommit=True) as conn:
        assert maintenance.build_scope_words(conn, OWNERS[0]) == 0
        index_refused_to_the_application(conn, "SELECT ghostmem.build_scope_words('bob')", name, "bob")
    with psycopg.connect(store) as admin:
        assert scope_words(admin)[name][1] == OWNERS[0]
