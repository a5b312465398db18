"""A graph of each large project's own (migration 155): built past a size by the schema owner's definer function,
named by a digest whatever the owner and project say, walked by a project search with the owner and project as
literals, its results those of the exact scan; a role that may not build or drop them cannot, and a killed build
leaves nothing."""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder, maintenance, search
from ghostmem.args import SearchPersonalMemoryArgs
from ghostmem.db import migrate as migrations
from ghostmem.program import run_sync
from ghostmem.records import MessageRecord
from ghostmem.search import search_messages, search_personal_memory
from psycopg import sql
from support.conversations import conversation, import_generic
from support.databases import app_login, fresh_database, graph_store, vector_graphs
from support.statements import recording

SIZE = 12  # project_graph_rows in these tests: a project of 12 messages or more gets its graph
SAID = ["deploy plan for the release", "the deploy plan is ready", "rollback steps", "release notes drafted"]


def graph_name(owner: str, project: str) -> str:
    """The name migration 155 gives the graph of ``owner``'s ``project``, computed here on its own."""
    key = f"{len(owner)}:{owner}{project}".encode()
    return "message_vectors_graph_" + hashlib.sha256(key).hexdigest()[:40]


def graphs(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """Each graph of the compact vectors (on its owner's partition of them, migration 163): name -> its predicate."""
    return {name: predicate for name, (predicate, _) in vector_graphs(conn).items()}


@pytest.fixture
def store(server_dsn: str) -> Iterator[str]:
    """A database of its own, migrated, whose projects get a graph from SIZE messages."""
    with graph_store(server_dsn, "ghostmem_pgraph", "project_graph_rows", SIZE) as dsn:
        yield dsn


def _convs(project: str, n: int, tag: str) -> list[dict[str, Any]]:
    return [
        conversation(f"{tag}{i}", f"talk {tag}{i}", 1 + i, [*SAID, f"step {tag} {i}"], project)
        for i in range(n)
    ]


def _search(gm: GhostMem, project: str, mode: str = "vector") -> tuple[list[Any], str, Any]:
    """The fused rows of a project search (every vector row, floor off), with the statement and its parameters."""
    args = SearchPersonalMemoryArgs(query="deploy plan release", mode=mode, project=project, limit=20)
    seen: list[tuple[str, Any]] = []
    with gm.connection() as conn:
        program = recording(search_messages(gm.context, args, depth=60, floor=-1), conn, seen)
        rows = run_sync(program, conn, gm.embedder)
    text, params = seen[-1]
    return rows, text, params


def _walked(gm: GhostMem, text: str, params: Any) -> set[str]:
    """The graphs the statement's generic plan reads."""
    return set(re.findall(r"message_vectors_graph_[0-9a-f]{40}", _explain(gm, text, params)))


def _explain(gm: GhostMem, text: str, params: Any) -> str:
    with gm.connection() as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute("SET enable_seqscan = off")
        # At this size a sort of a project's few rows costs less than a walk, which the planner sees once the
        # table is analyzed (autovacuum's ANALYZE, whenever it comes, made this flaky): with sorts priced out the
        # question is the one asked, whether the generic plan can read the graph at all.
        conn.execute("SET enable_sort = off")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        rows = conn.execute(f"EXPLAIN (COSTS OFF) {text}".encode(), params)
        return "\n".join(r[0] for r in rows)


HOSTILE = [
    "/src/100%_Done\\x",
    "it's %s %(owner)s {x} ''; DROP TABLE ghostmem.messages; --",
    "\U0001d518" * 200,  # 800 bytes: the longest project the search argument takes
    "alpha",
]


def test_a_large_project_gets_its_graph_and_a_search_walks_it_with_the_exact_scans_results(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hostile owners and projects (quotes, `%`, `_`, a backslash, placeholders, 800 bytes; two owners with the
    same project) each get a graph of their own, named by digest, once past the size and not before; a project
    search then walks it (the plan reads the index), in every mode, and finds what the exact scan finds: the same
    messages at the same distances, never another owner's or another project's."""
    owners = ["o'brien %s", "o'brien %s\\"]  # one another's prefix, with quotes, % and a backslash
    for owner in owners:
        with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm:
            convs = [c for i, p in enumerate(HOSTILE) for c in _convs(p, 2, f"p{i}-")]  # 10 messages each
            import_generic(gm, tmp_path / "a.jsonl", convs)
            with gm.connection() as conn:  # below the size: none of its own yet
                assert not {graph_name(owner, p) for p in HOSTILE} & set(graphs(conn))
            convs += [c for i, p in enumerate(HOSTILE) for c in _convs(p, 1, f"q{i}-")]  # 15 each
            convs.append(
                conversation("small", "titled alpha", 1, SAID, "/src/small")
            )  # a title matching alpha
            import_generic(gm, tmp_path / "b.jsonl", convs)
    with psycopg.connect(store) as conn:
        built = graphs(conn)
    expected = {graph_name(o, p) for o in owners for p in HOSTILE}
    assert set(built) == expected, built
    with psycopg.connect(store, autocommit=True) as conn:  # as autovacuum may have done by now (see _explain)
        conn.execute("ANALYZE ghostmem.message_vectors")
    for owner in owners:
        with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm:
            for project in HOSTILE:
                monkeypatch.setattr(search, "vector_scan", lambda *_: "graph")  # the store is small
                rows, text, params = _search(gm, project)
                assert _walked(gm, text, params) == {graph_name(owner, project)}, (owner, project)
                monkeypatch.setattr(search, "vector_scan", lambda *_: "exact")
                exact, exact_text, exact_params = _search(gm, project)
                assert _walked(gm, exact_text, exact_params) == set()
                assert [(r["id"], r["vec_dist"]) for r in rows] == [(r["id"], r["vec_dist"]) for r in exact]
                want = {f"p{HOSTILE.index(project)}-{i}" for i in range(2)} | {f"q{HOSTILE.index(project)}-0"}
                if project == "alpha":
                    want.add("small")  # its title matches: read by the exact arm
                assert {r["conv_id"] for r in rows} == want, (owner, project)
                monkeypatch.setattr(search, "vector_scan", lambda *_: "graph")
                for mode in ("hybrid", "lexical"):
                    assert {r["conv_id"] for r in _search(gm, project, mode)[0]} <= want
                monkeypatch.undo()


def test_the_search_walks_a_graph_only_when_it_exists(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cost model hears of a project's graph when it has one (and picks it for a project of the bench's
    million-message store, 31,000 rows, and of 6,000; a scope of 1,800 costs less to read than a walk), and the statement
    walks it; a small project without one, the
    graphs dropped (as `ghostmem reembed` does first), a time window or a platform within the project (their
    filters would make the walk pass over what they leave out) get no graph to walk."""
    ef = search.FILTERED_EF_SEARCH
    assert search.vector_scan(31_000, 31_000, 1_010_845, 50, ef, 1, 31_000) == "graph"
    assert search.vector_scan(31_500, 31_500, 1_010_845, 50, ef, 1, 31_000) == "graph"  # and a titled few
    assert search.vector_scan(31_000, 31_000, 1_010_845, 50, ef) == "quantized"  # no graph: as before
    assert search.vector_scan(6_000, 6_000, 100_000, 50, ef, 1, 6_000) == "graph"
    assert search.vector_scan(1_800, 1_800, 100_000, 50, ef, 1, 1_800) == "exact"  # smaller than a walk
    assert search.vector_scan(40_000, 40_000, 1_010_845, 50, ef, 20, 40_000) == "quantized"  # 20 small ones
    heard: list[tuple[int, int]] = []
    choose = search.vector_scan

    def spy(*args: Any) -> search.Scan:
        heard.append(args[5:7])
        return "graph" if args[5] else choose(*args)

    monkeypatch.setattr(search, "vector_scan", spy)
    with GhostMem(dsn=store, owner="ann", embedder=HashEmbedder()) as gm:
        import_generic(gm, tmp_path / "a.jsonl", _convs("alpha", 4, "a") + _convs("beta", 2, "b"))
        rows, text, params = _search(gm, "beta")
        assert heard[-1] == (0, 0) and _walked(gm, text, params) == set()
        assert params["ungraphed"] == ["beta"] and {r["conv_id"] for r in rows} == {"b0", "b1"}
        rows, text, params = _search(gm, "a")  # alpha (a graph, 20 rows) and beta (none)
        assert heard[-1] == (1, 20) and _walked(gm, text, params) == {graph_name("ann", "alpha")}
        assert params["ungraphed"] == ["beta"]
        assert {r["conv_id"] for r in rows} == {"a0", "a1", "a2", "a3", "b0", "b1"}
        for filters in ({"days": 30}, {"platform": "generic"}):
            args = SearchPersonalMemoryArgs(query="deploy plan", mode="vector", project="alpha", **filters)
            seen: list[tuple[str, Any]] = []
            with gm.connection() as conn:
                run_sync(
                    recording(search_messages(gm.context, args, depth=60), conn, seen), conn, gm.embedder
                )
            assert heard[-1] == (0, 0) and _walked(gm, *seen[-1]) == set(), filters
        with gm.connection() as conn:
            assert conn.execute("SELECT ghostmem.drop_project_graphs()").fetchone() == (1,)
        assert _walked(gm, *_search(gm, "alpha")[1:]) == set() and heard[-1] == (0, 0)
        with gm.connection() as conn:
            assert maintenance.build_project_graphs(conn, "ann") == 1
            assert maintenance.build_project_graphs(conn, "ann") == 0  # built once
        assert _walked(gm, *_search(gm, "alpha")[1:]) == {graph_name("ann", "alpha")}


def test_a_project_walk_keeps_75_candidates_and_never_fewer_than_the_rows_it_asks(
    store: str, tmp_path: Path
) -> None:
    """A project filter alone matching a project with a graph of its own sets hnsw.ef_search to
    FILTERED_EF_SEARCH (75), or to the vector leg's rows when it asks more (a narrow filter's five per
    requested conversation: 100 for 20, 150 for 30); each walk's LIMIT is at most that. Without a graph (a small
    project) it stays the search's depth (100 up to 20 conversations, as before)."""
    with GhostMem(dsn=store, owner="ann", embedder=HashEmbedder()) as gm:
        import_generic(gm, tmp_path / "a.jsonl", _convs("alpha", 4, "a") + _convs("beta", 2, "b"))
        cases = [("alpha", 10, "75"), ("alpha", 20, "100"), ("alpha", 30, "150"), ("beta", 10, "100")]
        for project, limit, expected in cases:
            for mode in ("hybrid", "vector"):
                args = SearchPersonalMemoryArgs(query="deploy plan", mode=mode, project=project, limit=limit)
                seen: list[tuple[str, Any]] = []
                with gm.connection() as conn:
                    run_sync(
                        recording(search_personal_memory(gm.context, args), conn, seen), conn, gm.embedder
                    )
                    row = conn.execute("SHOW hnsw.ef_search").fetchone()
                    conn.rollback()
                assert row is not None and row[0] == expected, (project, limit, mode)
                leg = seen[-1][0].split("vec_scan AS MATERIALIZED", 1)[1]
                assert int(leg.split("LIMIT", 1)[1].split()[0]) <= int(expected), (project, limit, mode)


def test_a_role_that_may_not_build_or_drop_the_graphs_cannot(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An application's login (`grant-app`, read-write) and one granted the runtime role may execute neither
    function (PUBLIC may not), nor create or drop an index on the compact vectors themselves; the application's
    import still succeeds (it skips the build: its project gets none) and its project searches walk the graph the
    owner built and find the same."""
    with GhostMem(dsn=store, owner="ann", embedder=HashEmbedder()) as gm:
        import_generic(gm, tmp_path / "a.jsonl", _convs("alpha", 4, "a"))
    with psycopg.connect(store) as admin:
        (name,) = graphs(admin)
    with app_login(store) as app_dsn:
        with psycopg.connect(app_dsn, autocommit=True) as conn:
            for role in (None, "ghostmem_runtime"):
                if role:
                    conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
                for statement in (
                    "SELECT ghostmem.build_project_graphs('ann')",
                    "SELECT ghostmem.drop_project_graphs()",
                    f"DROP INDEX ghostmem.{name}",
                    "CREATE INDEX mine ON ghostmem.message_vectors USING hnsw (embedding halfvec_cosine_ops)"
                    " WHERE owner = 'ann' AND project = 'beta'",
                ):
                    with pytest.raises(psycopg.errors.InsufficientPrivilege):
                        conn.execute(statement)
        monkeypatch.setattr(search, "vector_scan", lambda *_: "graph")  # where there is one: small projects
        with GhostMem(dsn=app_dsn, owner="ann", embedder=HashEmbedder()) as gm:
            import_generic(gm, tmp_path / "b.jsonl", _convs("beta", 4, "b"))
            rows, text, params = _search(gm, "beta")
            assert _walked(gm, text, params) == set() and {r["conv_id"] for r in rows} == {
                f"b{i}" for i in range(4)
            }
            rows, text, params = _search(gm, "alpha")
            assert _walked(gm, text, params) == {name} and {r["conv_id"] for r in rows} == {
                f"a{i}" for i in range(4)
            }
    with psycopg.connect(store) as admin:
        assert set(graphs(admin)) == {name}


def test_a_killed_build_leaves_nothing_half_made(store: str, tmp_path: Path) -> None:
    """A build killed while it waits on the table (a writer holds it) or runs leaves no index, valid or not, and
    the next build makes every graph."""
    with GhostMem(dsn=store, owner="ann", embedder=HashEmbedder()) as gm:
        with gm.connection() as conn:
            conn.execute("UPDATE ghostmem.settings SET value = '1000000' WHERE key = 'project_graph_rows'")
        import_generic(gm, tmp_path / "a.jsonl", _convs("alpha", 4, "a") + _convs("beta", 4, "b"))
    with psycopg.connect(store, autocommit=True) as admin:
        assert graphs(admin) == {}
        admin.execute(
            "UPDATE ghostmem.settings SET value = %s WHERE key = 'project_graph_rows'", (str(SIZE),)
        )
        with psycopg.connect(store) as writer:  # a writer's open transaction: the build waits for it
            writer.execute("LOCK TABLE ghostmem.message_vectors IN ROW EXCLUSIVE MODE")
            builder = psycopg.connect(store, autocommit=True)
            pid = builder.info.backend_pid
            failed: list[BaseException] = []

            def build() -> None:
                try:
                    builder.execute("SELECT ghostmem.build_project_graphs('ann')")
                except psycopg.Error as error:
                    failed.append(error)

            thread = threading.Thread(target=build)
            thread.start()
            for _ in range(200):
                waiting = admin.execute(
                    "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
                ).fetchone()
                if waiting == ("Lock",):
                    break
                time.sleep(0.05)
            assert waiting == ("Lock",)
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            thread.join(10)
            builder.close()
            assert failed
        assert graphs(admin) == {}
        assert admin.execute(
            "SELECT count(*) FROM pg_index WHERE NOT indisvalid"
            " AND indrelid IN (SELECT t.relid FROM pg_partition_tree('ghostmem.message_vectors') t)"
        ).fetchone() == (0,)
        assert admin.execute("SELECT ghostmem.build_project_graphs('ann')").fetchone() == (2,)
        assert set(graphs(admin)) == {graph_name("ann", "alpha"), graph_name("ann", "beta")}


def test_the_migration_builds_the_graphs_of_the_projects_already_large(server_dsn: str) -> None:
    """A store at 154 holding a project of 5,000 messages with vectors and one of 4,999 (another owner's project of
    the same name with 10): migration 155 builds the graph of the first alone, valid, on the rows of its owner and
    project only."""
    with (
        fresh_database(server_dsn, "ghostmem_pgraph_up") as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        migrations.migrate(conn, 384, "hash", "ghostmem_runtime", upto=154)
        for owner, project, n in (("ann", "big", 5000), ("ann", "almost", 4999), ("bob", "big", 10)):
            conn.execute(
                "INSERT INTO ghostmem.conversations (owner, tier, conv_id, platform, project, msg_count)"
                " VALUES (%s, 'personal', %s, 'generic', %s, %s)",
                (owner, project, project, n),
            )
            conn.execute(
                "INSERT INTO ghostmem.messages (owner, tier, conv_id, seq, native_id, role, text, platform, project,"
                " content_hash, embedding)"
                " SELECT %(owner)s, 'personal', %(project)s, i, 'm' || i, 'user', 'words ' || i, 'generic',"
                " %(project)s, sha256(convert_to(%(owner)s || i, 'UTF8')),"
                " (SELECT array_agg(sin(i * 7 + d))::vector FROM generate_series(1, 384) d)"
                " FROM generate_series(1, %(n)s) i",
                {"owner": owner, "project": project, "n": n},
            )
        assert graphs(conn) == {}
        assert "155_project_graphs" in migrations.migrate(conn, 384, "hash", "ghostmem_runtime")
        assert graphs(conn) == {
            graph_name("ann", "big"): "((owner = 'ann'::text) AND (project = 'big'::text))"
        }
        assert conn.execute(
            "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = ('ghostmem.' || %s)::regclass",
            (graph_name("ann", "big"),),
        ).fetchone() == (True,)


def test_a_project_that_falls_below_the_size_loses_its_graph_at_the_next_build(
    store: str, tmp_path: Path
) -> None:
    """Migration 176: a build drops the graph of each of the owner's projects now smaller than the size (one
    shrunk by forgetting, one emptied, every one when the size is raised) and keeps the large ones'; another owner
    whose name is the first's prefix, with projects of the same hostile names, keeps every graph of its own until
    its own build."""
    owners = ["o'brien %s\\", "o'brien %s"]
    for owner in owners:
        with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm:
            convs = [c for i, p in enumerate(HOSTILE) for c in _convs(p, 3, f"p{i}-")]  # 15 messages each
            import_generic(gm, tmp_path / "a.jsonl", convs)
    every = {graph_name(o, p) for o in owners for p in HOSTILE}
    with psycopg.connect(store, autocommit=True) as admin:
        assert set(graphs(admin)) == every
    first, second = owners
    with GhostMem(dsn=store, owner=first, embedder=HashEmbedder()) as gm:
        gm.forget("p0-0")  # 10 messages left: below the size
        for i in range(3):
            gm.forget(f"p1-{i}")  # none left
        with gm.connection() as conn:
            assert maintenance.build_project_graphs(conn, first) == 0
    with psycopg.connect(store, autocommit=True) as admin:
        assert set(graphs(admin)) == every - {graph_name(first, HOSTILE[0]), graph_name(first, HOSTILE[1])}
        admin.execute("UPDATE ghostmem.settings SET value = '16' WHERE key = 'project_graph_rows'")
        assert admin.execute("SELECT ghostmem.build_project_graphs(%s)", (first,)).fetchone() == (0,)
        assert set(graphs(admin)) == {graph_name(second, p) for p in HOSTILE}
        admin.execute(
            "UPDATE ghostmem.settings SET value = %s WHERE key = 'project_graph_rows'", (str(SIZE),)
        )
        assert admin.execute("SELECT ghostmem.build_project_graphs(%s)", (first,)).fetchone() == (2,)
        assert set(graphs(admin)) == every - {graph_name(first, HOSTILE[0]), graph_name(first, HOSTILE[1])}


def _said(n: int, start: int = 0) -> list[MessageRecord]:
    return [
        MessageRecord(native_id="", role="user", text=f"{SAID[i % 4]} {i}") for i in range(start, start + n)
    ]


def test_a_project_filled_by_live_capture_gets_its_graph_once_it_reaches_the_size(store: str) -> None:
    """A captured conversation's project gets its graph when a capture brings it to the size (hostile owner and
    project), not before, and a search walks it; each capture kind counts (append, replace, sync)."""
    owner, project = "o'brien %s\\", HOSTILE[1]
    with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm:
        gm.capture_append("c1", _said(SIZE - 1), platform="langchain", project=project)
        with gm.connection() as conn:
            assert graphs(conn) == {}
        gm.capture_append("c1", _said(1, SIZE - 1), platform="langchain", project=project)
        with gm.connection() as conn:
            assert set(graphs(conn)) == {graph_name(owner, project)}
        gm.capture_replace("c2", _said(SIZE), platform="langchain", project="beta")
        gm.capture_sync(
            "c3", _said(SIZE), [f"m{i}" for i in range(SIZE)], platform="langchain", project="gamma"
        )
        with gm.connection() as conn:
            assert set(graphs(conn)) == {graph_name(owner, p) for p in (project, "beta", "gamma")}


def test_a_capture_whose_graph_cannot_be_built_keeps_what_it_captured(
    store: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capture that brings its project to the size while another writer holds the owner's vectors waits at most
    a second for them, then returns with its messages stored and no index, valid or not (a warning says so); one
    whose build is killed while it waits returns too, its messages stored, no index; the project's next capture
    builds the graph. A login that may not build graphs (an application's) captures as
    before and builds none."""
    with GhostMem(dsn=store, owner="ann", embedder=HashEmbedder()) as gm:
        gm.capture_append("c1", _said(SIZE - 1), platform="langchain", project="alpha")
        with psycopg.connect(store) as writer:
            writer.execute("LOCK TABLE ghostmem.message_vectors IN ROW EXCLUSIVE MODE")
            started = time.monotonic()
            gm.capture_append("c1", _said(1, SIZE - 1), platform="langchain", project="alpha")
            assert time.monotonic() - started < 10
        assert "the graph of a captured project was not built" in caplog.text
        assert len(gm.capture_messages("c1")) == SIZE
        with gm.connection() as conn:
            assert graphs(conn) == {}
            assert conn.execute(
                "SELECT count(*) FROM pg_index WHERE NOT indisvalid"
                " AND indrelid IN (SELECT t.relid FROM pg_partition_tree('ghostmem.message_vectors') t)"
            ).fetchone() == (0,)
        monkeypatch.setattr(maintenance, "CAPTURE_GRAPH_LOCK_WAIT", "60s")  # killed while it waits, this time
        with psycopg.connect(store) as writer, psycopg.connect(store, autocommit=True) as admin:
            writer.execute("LOCK TABLE ghostmem.message_vectors IN ROW EXCLUSIVE MODE")
            failed: list[BaseException] = []

            def capture() -> None:
                try:
                    gm.capture_append("c1", _said(1, SIZE), platform="langchain")
                except BaseException as error:
                    failed.append(error)

            capturing = threading.Thread(target=capture)
            capturing.start()
            for _ in range(200):
                pid = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE '%%build_project_graphs%%' AND pid <> pg_backend_pid()"
                ).fetchone()
                if pid:
                    break
                time.sleep(0.05)
            assert pid
            admin.execute("SELECT pg_terminate_backend(%s)", pid)
            capturing.join(10)
            assert not capturing.is_alive() and not failed
        assert len(gm.capture_messages("c1")) == SIZE + 1
        with gm.connection() as conn:
            assert graphs(conn) == {}
        gm.capture_append("c1", _said(1, SIZE + 1), platform="langchain", project="alpha")
        with gm.connection() as conn:
            assert set(graphs(conn)) == {graph_name("ann", "alpha")}
    with app_login(store) as app_dsn, GhostMem(dsn=app_dsn, owner="ann", embedder=HashEmbedder()) as gm:
        gm.capture_append("c2", _said(SIZE), platform="langchain", project="beta")
        assert len(gm.capture_messages("c2")) == SIZE
    with psycopg.connect(store) as admin:
        assert set(graphs(admin)) == {graph_name("ann", "alpha")}


def test_a_project_gets_its_graph_from_3000_messages_unless_the_setting_was_changed(server_dsn: str) -> None:
    """Migration 231 lowers `project_graph_rows` from 5,000 to 3,000 (a store that had changed it keeps its value),
    and the cost model walks the graph of a project of the bench's smallest size (3,237 rows at 100k messages)
    rather than reading it exactly."""
    for changed in (None, "8000"):
        with (
            fresh_database(server_dsn, "ghostmem_pgraph_3k") as dsn,
            psycopg.connect(dsn, autocommit=True) as conn,
        ):
            migrations.migrate(conn, 384, "hash", "ghostmem_runtime", upto=230)
            setting = "SELECT value FROM ghostmem.settings WHERE key = 'project_graph_rows'"
            assert conn.execute(setting).fetchone() == ("5000",)
            if changed:
                conn.execute(
                    "UPDATE ghostmem.settings SET value = %s WHERE key = 'project_graph_rows'", (changed,)
                )
            assert "231_project_graphs_from_3000" in migrations.migrate(conn, 384, "hash", "ghostmem_runtime")
            assert conn.execute(setting).fetchone() == (changed or "3000",)
    assert search.vector_scan(3_237, 3_237, 100_000, 50, 100, graphs=1, graph_rows=3_237) == "graph"
    assert search.vector_scan(3_237, 3_237, 100_000, 50, 100) == "exact"
