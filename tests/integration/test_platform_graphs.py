"""A graph of each large platform of an owner's (migration 230): built by the schema owner's definer function with
the projects' graphs for a platform holding at least `platform_graph_rows` of the owner's messages and at most
half of them, named by a digest no project's graph gets; a search of the platform walks it (the plan reads the
index) and finds what the exact scan finds, never another owner's or another platform's rows; the build drops it
once the platform is outside those bounds; a role that may not build cannot drop or forge one."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder, maintenance, search
from ghostmem.args import SearchPersonalMemoryArgs
from ghostmem.db import migrate as migrations
from ghostmem.program import run_sync
from ghostmem.search import search_messages
from support.conversations import conversation, import_generic
from support.databases import app_login, fresh_database, graph_store, graphs_where
from support.statements import generic_plan, recording

SIZE = 20  # platform_graph_rows in these tests: a platform of 20 messages or more (at most half) gets a graph
SAID = ["deploy plan for the release", "the deploy plan is ready", "rollback steps", "release notes drafted"]
PLATFORM = "codex"  # a search's platform is one of the importers' (SearchPersonalMemoryArgs)


def platform_name(owner: str, platform: str) -> str:
    """The name migration 230 gives the graph of ``owner``'s ``platform``, computed here on its own."""
    return (
        "message_vectors_graph_" + hashlib.sha256(f"{len(owner)};{owner}{platform}".encode()).hexdigest()[:40]
    )


def project_name(owner: str, project: str) -> str:
    """The name migration 155 gives the graph of ``owner``'s ``project``."""
    return (
        "message_vectors_graph_" + hashlib.sha256(f"{len(owner)}:{owner}{project}".encode()).hexdigest()[:40]
    )


def platform_graphs(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """Each graph of the compact vectors whose predicate is a platform (name -> predicate)."""
    return {n: predicate for n, (predicate, _) in graphs_where(conn, "(platform =").items()}


@pytest.fixture
def store(server_dsn: str) -> Iterator[str]:
    """A database of its own, migrated, whose owners' platforms get a graph from SIZE messages."""
    with graph_store(server_dsn, "ghostmem_platgraph", "platform_graph_rows", SIZE) as dsn:
        yield dsn


def _convs(tag: str, n: int, project: str | None = None) -> list[dict[str, Any]]:
    """``n`` conversations of five messages, the last days."""
    return [
        conversation(f"{tag}{i}", f"talk {tag}{i}", 1 + i, [*SAID, f"step {tag} {i}"], project)
        for i in range(n)
    ]


def _fill(gm: GhostMem, path: Path, on_platform: int, generic: int) -> None:
    """Import ``on_platform`` conversations moved to PLATFORM (conv ids p0, p1, ...) and ``generic`` left on the
    generic importer's platform (g0, ...), then build the owner's graphs (as an import does, after the move)."""
    import_generic(gm, path, _convs("p", on_platform) + _convs("g", generic))
    with gm.connection() as conn:
        conn.execute(
            "UPDATE ghostmem.messages SET platform = %s WHERE owner = %s AND conv_id LIKE 'p%%'",
            (PLATFORM, gm.owner),
        )
    with psycopg.connect(gm.dsn, autocommit=True) as admin:
        maintenance.build_project_graphs(admin, gm.owner)


def _search(gm: GhostMem, mode: str = "vector", **filters: Any) -> tuple[list[Any], set[str]]:
    """The fused rows of a search (every vector row, floor off) and the HNSW indexes its statement's plan reads,
    sorts off in its transaction: at this size a sort of a few dozen rows beats any index."""
    args = SearchPersonalMemoryArgs(query="deploy plan release", mode=mode, limit=20, **filters)
    seen: list[tuple[str, Any]] = []
    with gm.connection() as conn:
        conn.execute("SET LOCAL enable_sort = off")
        rows = run_sync(
            recording(search_messages(gm.context, args, depth=60, floor=-1), conn, seen), conn, gm.embedder
        )
        # the generic plan, as the search runs it (with the parameters bound the planner would see the platform)
        plan = generic_plan(conn, seen[-1][0].replace("%%", "%"))
    return rows, set(re.findall(r"Index Scan using (\S+(?:embedding_idx|graph_[0-9a-f]{40}))", plan))


def test_a_large_platform_gets_its_graph_and_a_search_of_it_walks_it_with_the_exact_scans_results(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two owners (one another's prefix, quotes, `%`, a backslash) holding the same messages each get a graph of
    their messages on PLATFORM (5 conversations of 5: 25 messages, under half of their 60), none of the generic
    platform's (35: over half), a smaller owner none; a search of PLATFORM, alone or within a time window, walks the
    owner's own platform graph and returns what the exact scan returns (the same messages at the same distances:
    the platform's, the owner's alone), in vector and hybrid mode; a search of the other platform walks the owner's
    whole graph."""
    owners = ["o'brien %s", "o'brien %s\\"]
    for owner in owners:
        with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm:
            _fill(gm, tmp_path / "a.jsonl", 5, 7)
    with GhostMem(dsn=store, owner="bob", embedder=HashEmbedder()) as gm:
        _fill(gm, tmp_path / "b.jsonl", 3, 4)  # 15 messages on the platform: under the size
    with psycopg.connect(store) as admin:
        assert set(platform_graphs(admin)) == {platform_name(o, PLATFORM) for o in owners}
    want = {f"p{i}" for i in range(5)}
    for owner in owners:
        with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm:
            with gm.connection() as conn:
                mine = {
                    r[0]
                    for r in conn.execute(
                        "SELECT id FROM ghostmem.messages WHERE owner = %s AND platform = %s",
                        (owner, PLATFORM),
                    )
                }
            for filters in ({"platform": PLATFORM}, {"platform": PLATFORM, "days": 3}):
                monkeypatch.setattr(search, "vector_scan", lambda *_: "hnsw")  # the store is small
                rows, walked = _search(gm, **filters)
                assert walked == {platform_name(owner, PLATFORM)}, (owner, filters, walked)
                monkeypatch.setattr(search, "vector_scan", lambda *_: "exact")
                exact, exact_walked = _search(gm, **filters)
                assert exact_walked == set()
                assert [(r["id"], r["vec_dist"]) for r in rows] == [(r["id"], r["vec_dist"]) for r in exact]
                assert {r["id"] for r in rows} <= mine
                assert {r["conv_id"] for r in rows} == (want if "days" not in filters else {"p0", "p1"})
                monkeypatch.setattr(search, "vector_scan", lambda *_: "hnsw")
                hybrid, hybrid_walked = _search(gm, "hybrid", **filters)
                assert hybrid_walked == {platform_name(owner, PLATFORM)}
                assert {r["id"] for r in hybrid} <= mine
            rows, walked = _search(gm, platform="generic")
            assert len(walked) == 1 and not walked & {platform_name(o, PLATFORM) for o in owners}, walked
            assert {r["conv_id"] for r in rows} == {f"g{i}" for i in range(7)}
            monkeypatch.undo()
    with GhostMem(dsn=store, owner="bob", embedder=HashEmbedder()) as gm:
        monkeypatch.setattr(search, "vector_scan", lambda *_: "hnsw")
        rows, walked = _search(gm, platform=PLATFORM)
        assert len(walked) == 1 and not walked & {platform_name(o, PLATFORM) for o in owners}, walked
        assert {r["conv_id"] for r in rows} == {"p0", "p1", "p2"}


def test_the_cost_model_hears_of_the_smallest_graph_that_holds_the_scope(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A platform search hands vector_scan the platform's messages (every tier) as the walked graph's rows when the
    platform has a graph, the owner's when not; within a time window, the fewer of those and the recent messages'
    graph's rows (migration 210), and only the chosen graph's predicate is written into the walk's filter. The
    walk of the bench's codex at 100k messages (14,440 of 100,000) is chosen over its quantized scan with the
    graph, and the quantized scan without it."""
    assert search.vector_scan(14_440, 14_440, 100_000, 50, 100, index_only=True) == "quantized"
    assert search.vector_scan(14_440, 14_440, 14_440, 50, 100, index_only=True) == "hnsw"
    assert search.vector_scan(14_440, 14_440, 14_440, 20, 100, index_only=True) == "hnsw"
    with psycopg.connect(store, autocommit=True) as admin:
        admin.execute("UPDATE ghostmem.settings SET value = '40' WHERE key = 'recent_graph_rows'")
    with GhostMem(dsn=store, owner="ann", embedder=HashEmbedder()) as gm:
        import_generic(gm, tmp_path / "l.jsonl", [conversation("lib", "lib", 5, SAID)], tier="library")
        with gm.connection() as conn:
            conn.execute("UPDATE ghostmem.messages SET platform = %s WHERE owner = 'ann'", (PLATFORM,))
        # 5 + 4 library messages on the platform, 30 generic of the last days and 20 older than the recent graph
        _fill(gm, tmp_path / "a.jsonl", 5, 6)
        import_generic(
            gm, tmp_path / "o.jsonl", [conversation(f"old{i}", "old", 90 + i, SAID) for i in range(5)]
        )
        with psycopg.connect(store, autocommit=True) as admin:
            maintenance.build_project_graphs(admin, "ann")
            assert set(platform_graphs(admin)) == {platform_name("ann", PLATFORM)}
        with gm.connection() as conn:
            platform_rows, all_rows = conn.execute(
                "SELECT count(*) FILTER (WHERE platform = %s), count(*) FROM ghostmem.messages WHERE owner = 'ann'",
                (PLATFORM,),
            ).fetchone()  # type: ignore[misc]
        assert platform_rows == 29 and all_rows == 79
        heard: list[float] = []  # the walked graph's rows vector_scan is told of (a walk is then chosen)
        monkeypatch.setattr(search, "vector_scan", lambda *args: heard.append(args[2]) or "hnsw")
        seen: list[tuple[str, Any]] = []
        for filters, rows in (
            ({"platform": PLATFORM}, platform_rows),
            ({"platform": "generic"}, all_rows),
            ({"platform": PLATFORM, "days": 7}, platform_rows),  # fewer than the recent graph's 59
            ({"platform": "generic", "days": 7}, all_rows - 20),  # the recent graph's
            ({"platform": PLATFORM, "days": 200}, platform_rows),
        ):
            args = SearchPersonalMemoryArgs(
                query="deploy plan", mode="vector", include_library=True, **filters
            )
            with gm.connection() as conn:
                run_sync(
                    recording(search_messages(gm.context, args, depth=60), conn, seen), conn, gm.embedder
                )
            assert heard[-1] == rows, (filters, heard)
            text = seen[-1][0]
            platform_walk = rows == platform_rows
            assert ("m.platform = 'codex'" in text) == platform_walk, (filters, text)
            assert ("m.ts >= '" in text) == (not platform_walk and "days" in filters), (filters, text)


def test_the_build_follows_the_platforms_size_and_share(store: str, tmp_path: Path) -> None:
    """Built once (a second build keeps it); a platform below the size (the setting raised) or holding more than
    half of the owner's messages loses its graph, and gets it back once within them; `reembed`'s drop of every graph
    drops it; a project's graph and the platform's of the same name text are two graphs."""
    with GhostMem(dsn=store, owner="ann", embedder=HashEmbedder()) as gm:
        _fill(gm, tmp_path / "a.jsonl", 5, 7)
    name = platform_name("ann", PLATFORM)
    assert name != project_name("ann", PLATFORM)
    with psycopg.connect(store, autocommit=True) as admin:
        assert platform_graphs(admin) == {name: "(platform = 'codex'::text)"}
        assert maintenance.build_project_graphs(admin, "ann") == 0
        admin.execute("UPDATE ghostmem.settings SET value = '26' WHERE key = 'platform_graph_rows'")
        assert maintenance.build_project_graphs(admin, "ann") == 0
        assert platform_graphs(admin) == {}
        admin.execute(
            "UPDATE ghostmem.settings SET value = %s WHERE key = 'platform_graph_rows'", (str(SIZE),)
        )
        assert maintenance.build_project_graphs(admin, "ann") == 1
        assert set(platform_graphs(admin)) == {name}
        # two generic conversations moved over: 35 of 60, more than half
        admin.execute(
            "UPDATE ghostmem.messages SET platform = %s WHERE owner = 'ann' AND conv_id IN ('g0', 'g1')",
            (PLATFORM,),
        )
        assert maintenance.build_project_graphs(admin, "ann") == 1  # the generic platform's 25 now
        assert set(platform_graphs(admin)) == {platform_name("ann", "generic")}
        assert admin.execute("SELECT ghostmem.drop_project_graphs()").fetchone() == (1,)
        assert platform_graphs(admin) == {}


def test_a_role_that_may_not_build_cannot_drop_or_make_a_platform_graph(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An application's login (and the runtime role) may not build or drop the graphs, drop the platform's graph nor
    make one of its own on the compact vectors; its platform searches walk the graph the owner built."""
    with GhostMem(dsn=store, owner="ann", embedder=HashEmbedder()) as gm:
        _fill(gm, tmp_path / "a.jsonl", 5, 7)
    name = platform_name("ann", PLATFORM)
    with app_login(store) as app_dsn:
        with psycopg.connect(app_dsn, autocommit=True) as conn:
            for role in (None, "ghostmem_runtime"):
                if role:
                    conn.execute(f"SET ROLE {role}")
                for statement in (
                    "SELECT ghostmem.build_project_graphs('ann')",
                    "SELECT ghostmem.drop_project_graphs()",
                    f"DROP INDEX ghostmem.{name}",
                    "CREATE INDEX mine ON ghostmem.message_vectors USING hnsw (embedding halfvec_cosine_ops)"
                    " WHERE platform = 'generic'",
                ):
                    with pytest.raises(psycopg.errors.InsufficientPrivilege):
                        conn.execute(statement.encode())
        monkeypatch.setattr(search, "vector_scan", lambda *_: "hnsw")
        with GhostMem(dsn=app_dsn, owner="ann", embedder=HashEmbedder()) as gm:
            rows, walked = _search(gm, platform=PLATFORM)
            assert walked == {name} and {r["conv_id"] for r in rows} == {f"p{i}" for i in range(5)}
    with psycopg.connect(store) as admin:
        assert set(platform_graphs(admin)) == {name}


def test_an_upgrade_leaves_the_build_to_the_next_import(server_dsn: str) -> None:
    """A store at 229 whose owner holds a platform of 5,000 messages: migration 230 builds no graph (at a million
    messages the build took minutes), the owner's next build (an import's, an embedding's) does, on that owner's
    partition, of that platform alone."""
    with (
        fresh_database(server_dsn, "ghostmem_platgraph_up") as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        migrations.migrate(conn, 384, "hash", "ghostmem_runtime", upto=229)
        for owner, platform, n in (("ann", PLATFORM, 5000), ("ann", "generic", 5001), ("bob", PLATFORM, 10)):
            conn.execute(
                "INSERT INTO ghostmem.conversations (owner, tier, conv_id, platform, msg_count)"
                " VALUES (%s, 'personal', %s, %s, %s)",
                (owner, platform, platform, n),
            )
            conn.execute(
                "INSERT INTO ghostmem.messages (owner, tier, conv_id, seq, native_id, role, text, platform,"
                " content_hash, embedding)"
                " SELECT %(owner)s, 'personal', %(platform)s, i, 'm' || i, 'user', 'words ' || i, %(platform)s,"
                " sha256(convert_to(%(owner)s || %(platform)s || i, 'UTF8')),"
                " (SELECT array_agg(sin(i * 7 + d))::vector FROM generate_series(1, 384) d)"
                " FROM generate_series(1, %(n)s) i",
                {"owner": owner, "platform": platform, "n": n},
            )
        assert "230_platform_graphs" in migrations.migrate(conn, 384, "hash", "ghostmem_runtime")
        assert platform_graphs(conn) == {}  # 5,000 of 10,001: at the default size, under half
        assert maintenance.build_project_graphs(conn, "ann") == 1
        assert platform_graphs(conn) == {platform_name("ann", PLATFORM): "(platform = 'codex'::text)"}
        (table,) = conn.execute(
            "SELECT i.indrelid::regclass::text FROM pg_index i WHERE i.indexrelid = ('ghostmem.' || %s)::regclass",
            (platform_name("ann", PLATFORM),),
        ).fetchone() or [None]
        assert (
            table
            == conn.execute(
                "SELECT DISTINCT tableoid::regclass::text FROM ghostmem.message_vectors WHERE owner = 'ann'"
            ).fetchone()[0]
        )  # type: ignore[index]
