"""A graph of a large owner's recent messages (migration 210): built past a size by the schema owner's definer
function with the projects' graphs, named by a digest, its day its comment; a search whose time window starts on or
after that day walks it (the plan reads the index) and finds what the exact scan finds, never another owner's rows;
a longer window, a smaller owner and another owner walk their own graphs; the build replaces a graph whose day is
too old and drops it once the owner is below the size; a role that may not build cannot forge its day."""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder, maintenance, search
from ghostmem.args import SearchPersonalMemoryArgs
from ghostmem.program import run_sync
from ghostmem.search import search_messages
from support.conversations import conversation, import_generic
from support.databases import app_login, graph_store, graphs_where
from support.statements import recording

SIZE = 40  # recent_graph_rows in these tests: an owner of 40 messages or more gets a graph of its recent ones
DAYS = 31  # recent_graph_days (the migration's)
SAID = ["deploy plan for the release", "the deploy plan is ready", "rollback steps", "release notes drafted"]


def recent_name(owner: str) -> str:
    """The name migration 210 gives the graph of ``owner``'s recent messages (migration 155's name of a project
    ''), computed here on its own."""
    return "message_vectors_graph_" + hashlib.sha256(f"{len(owner)}:{owner}".encode()).hexdigest()[:40]


def day(days_before: int = DAYS) -> str:
    """Midnight UTC ``days_before`` today's, as the graph's comment writes it."""
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return (today - timedelta(days=days_before)).strftime("%Y-%m-%dT%H:%M:%S+00")


def recent_graphs(conn: psycopg.Connection[Any]) -> dict[str, str | None]:
    """Each graph of the compact vectors whose predicate is a time (name -> its comment: the day)."""
    return {n: comment for n, (_, comment) in graphs_where(conn, "(ts >=").items()}


# Longer than any test here takes on a loaded machine (about 10 s at most, setup included).
MIDNIGHT_MARGIN = 60


@pytest.fixture(autouse=True)
def one_utc_day() -> None:
    """Each test checks the graph's day, written when the graph is built, against day(), computed after: across a
    midnight (UTC) the two are a day apart (the build's 2026-11-02 against day()'s 2026-11-03). A test that would
    start less than MIDNIGHT_MARGIN seconds before midnight waits for it to pass."""
    now = datetime.now(UTC)
    left = (now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1) - now).total_seconds()
    if left < MIDNIGHT_MARGIN:
        time.sleep(left + 1)


@pytest.fixture
def store(server_dsn: str) -> Iterator[str]:
    """A database of its own, migrated, whose owners get a graph of their recent messages from SIZE messages."""
    with graph_store(server_dsn, "ghostmem_recent", "recent_graph_rows", SIZE) as dsn:
        yield dsn


# conversations of five messages: 3 of the last days, 3 of the last weeks (within the graph), 3 older than it
AGES = {"now": [1, 2, 3], "weeks": [10, 15, 20], "old": [60, 90, 200]}


def _convs() -> list[dict[str, Any]]:
    return [
        conversation(f"{tag}{i}", f"talk {tag}{i}", age, [*SAID, f"step {tag} {i}"])
        for tag, ages in AGES.items()
        for i, age in enumerate(ages)
    ]


def _search(gm: GhostMem, days: int, mode: str = "vector") -> tuple[list[Any], set[str]]:
    """The fused rows of a search of the last ``days`` (every vector row, floor off) and the HNSW indexes its
    statement's plan reads (the owner's graph or a graph of part of it), sorts off in its transaction: at
    this size a sort of a few dozen rows beats any index, and the planner picks what it picks on a large store."""
    args = SearchPersonalMemoryArgs(query="deploy plan release", mode=mode, days=days, limit=20)
    seen: list[tuple[str, Any]] = []
    with gm.connection() as conn:
        conn.execute("SET LOCAL enable_sort = off")
        rows = run_sync(
            recording(search_messages(gm.context, args, depth=60, floor=-1), conn, seen), conn, gm.embedder
        )
        text, params = seen[-1]
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN (COSTS OFF) {text}".encode(), params))
    return rows, set(re.findall(r"Index Scan using (\S+(?:embedding_idx|graph_[0-9a-f]{40}))", plan))


def test_a_large_owner_gets_a_graph_of_its_recent_messages_and_a_window_within_it_walks_it(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two owners past the size (one another's prefix, quotes, `%`, a backslash) holding the same messages each get
    a graph of their messages since DAYS days before today (midnight UTC, its comment), a smaller owner none; a
    search of the last 7 or 20 days walks the owner's own recent graph and returns what the exact scan returns (the
    same messages at the same distances: those of the window, the owner's alone), in vector and hybrid mode; a
    window of 60 days starts before the graph's day and walks the owner's whole graph, as the smaller owner's
    searches do."""
    owners = ["o'brien %s", "o'brien %s\\"]
    for owner in owners:
        with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm:
            import_generic(gm, tmp_path / "a.jsonl", _convs())
    with GhostMem(dsn=store, owner="bob", embedder=HashEmbedder()) as gm:
        import_generic(gm, tmp_path / "b.jsonl", _convs()[:3])  # 15 messages
    with psycopg.connect(store) as admin:
        assert recent_graphs(admin) == {recent_name(o): day() for o in owners}
    windows = {7: {"now0", "now1", "now2"}, 21: {"now0", "now1", "now2", "weeks0", "weeks1", "weeks2"}}
    for owner in owners:
        with GhostMem(dsn=store, owner=owner, embedder=HashEmbedder()) as gm:
            with gm.connection() as conn:
                mine = {
                    r[0] for r in conn.execute("SELECT id FROM ghostmem.messages WHERE owner = %s", (owner,))
                }
            for days, want in windows.items():
                monkeypatch.setattr(search, "vector_scan", lambda *_: "hnsw")  # the store is small
                rows, walked = _search(gm, days)
                assert walked == {recent_name(owner)}, (owner, days, walked)
                monkeypatch.setattr(search, "vector_scan", lambda *_: "exact")
                exact, exact_walked = _search(gm, days)
                assert exact_walked == set()
                assert [(r["id"], r["vec_dist"]) for r in rows] == [(r["id"], r["vec_dist"]) for r in exact]
                assert {r["conv_id"] for r in rows} == want and {r["id"] for r in rows} <= mine
                monkeypatch.setattr(search, "vector_scan", lambda *_: "hnsw")
                hybrid = _search(gm, days, "hybrid")
                assert hybrid[1] == {recent_name(owner)}
                assert {r["conv_id"] for r in hybrid[0]} <= want and {r["id"] for r in hybrid[0]} <= mine
            rows, walked = _search(gm, 60)
            assert len(walked) == 1 and not walked & {recent_name(o) for o in owners}, walked
            assert {r["conv_id"] for r in rows} == windows[21]
            monkeypatch.undo()
    with GhostMem(dsn=store, owner="bob", embedder=HashEmbedder()) as gm:
        monkeypatch.setattr(search, "vector_scan", lambda *_: "hnsw")
        rows, walked = _search(gm, 7)
        assert len(walked) == 1 and not walked & {recent_name(o) for o in owners}, walked
        assert {r["conv_id"] for r in rows} == {"now0", "now1", "now2"}


def test_the_cost_model_hears_of_the_recent_messages_the_walk_would_pass_over(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window within the graph's span hands vector_scan the owner's messages since the graph's day (every tier)
    as the walked graph's rows and writes the day into the walk's filter; a longer window hands it the owner's
    whole graph and writes no day; the walk of a week of the bench's stores is chosen over the quantized scan at
    100k messages (its 15,500 recent rows instead of 100,000) and stays chosen at a million."""
    assert search.vector_scan(8_704, 8_704, 100_000, 20, 100, index_only=True) == "quantized"
    assert search.vector_scan(8_704, 8_704, 15_500, 20, 100, index_only=True) == "hnsw"
    assert search.vector_scan(8_704, 8_704, 15_500, 50, 100, index_only=True) == "hnsw"
    assert search.vector_scan(82_005, 82_005, 155_000, 20, 119, index_only=True) == "hnsw"
    with GhostMem(dsn=store, owner="ann", embedder=HashEmbedder()) as gm:
        import_generic(gm, tmp_path / "a.jsonl", _convs())
        import_generic(gm, tmp_path / "l.jsonl", [conversation("lib", "lib", 5, SAID)], tier="library")
        with gm.connection() as conn:
            graph_rows = {
                days: conn.execute(
                    "SELECT count(*) FROM ghostmem.messages WHERE owner = 'ann'"
                    " AND (ts AT TIME ZONE 'UTC')::date >= %s::timestamptz AT TIME ZONE 'UTC'",
                    (since,),
                ).fetchone()[0]  # type: ignore[index]
                for days, since in ((7, day()), (60, "-infinity"))
            }
        heard: list[float] = []
        choose = search.vector_scan

        def spy(*args: Any, **kw: Any) -> search.Scan:
            heard.append(args[2])
            return "hnsw"

        monkeypatch.setattr(search, "vector_scan", spy)
        for days in (7, 60):
            _search(gm, days)
            assert heard[-1] == graph_rows[days], (days, heard)
        assert graph_rows[7] < graph_rows[60]
        monkeypatch.setattr(search, "vector_scan", choose)
        seen: list[tuple[str, Any]] = []
        args = SearchPersonalMemoryArgs(query="deploy plan", mode="vector", days=7)
        with gm.connection() as conn:
            run_sync(recording(search_messages(gm.context, args, depth=60), conn, seen), conn, gm.embedder)
        assert f"m.ts >= '{day()}'::timestamptz" not in seen[-1][0]  # a small store reads its week exactly


def test_the_build_replaces_a_graph_too_old_and_drops_it_below_the_size(store: str, tmp_path: Path) -> None:
    """Built once (a second build keeps it); a graph whose day is more than DAYS days older than a build's now would
    be is replaced by one from that day; an owner below the size (the setting raised) loses it, as `reembed`'s
    drop of every graph drops it; the projects' graphs are kept meanwhile."""
    with GhostMem(dsn=store, owner="ann", embedder=HashEmbedder()) as gm:
        import_generic(gm, tmp_path / "a.jsonl", _convs())
    name = recent_name("ann")
    with psycopg.connect(store, autocommit=True) as admin:
        assert recent_graphs(admin) == {name: day()}
        assert maintenance.build_project_graphs(admin, "ann") == 0
        # within twice the span: kept
        admin.execute(f"COMMENT ON INDEX ghostmem.{name} IS '{day(DAYS + DAYS - 1)}'")
        assert maintenance.build_project_graphs(admin, "ann") == 0
        admin.execute(f"COMMENT ON INDEX ghostmem.{name} IS '{day(DAYS + DAYS + 1)}'")
        assert maintenance.build_project_graphs(admin, "ann") == 1
        assert recent_graphs(admin) == {name: day()}
        (predicate,) = admin.execute(
            "SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i WHERE i.indexrelid = %s::regclass",
            (f"ghostmem.{name}",),
        ).fetchone() or [None]
        assert admin.execute(
            f"SELECT {predicate.replace('ts >=', '%s::timestamptz =')}", (day(),)
        ).fetchone() == (True,)
        admin.execute("UPDATE ghostmem.settings SET value = '1000000' WHERE key = 'recent_graph_rows'")
        assert maintenance.build_project_graphs(admin, "ann") == 0
        assert recent_graphs(admin) == {}
        admin.execute("UPDATE ghostmem.settings SET value = %s WHERE key = 'recent_graph_rows'", (str(SIZE),))
        assert maintenance.build_project_graphs(admin, "ann") == 1
        assert admin.execute("SELECT ghostmem.drop_project_graphs()").fetchone() == (1,)
        assert recent_graphs(admin) == {}


def test_a_role_that_may_not_build_cannot_forge_or_drop_the_graph(store: str, tmp_path: Path) -> None:
    """An application's login (and the runtime role) may not change the graph's day (its comment, which searches
    write into their statements) nor drop it; its searches walk the graph the owner built."""
    with GhostMem(dsn=store, owner="ann", embedder=HashEmbedder()) as gm:
        import_generic(gm, tmp_path / "a.jsonl", _convs())
    name = recent_name("ann")
    with app_login(store) as app_dsn, psycopg.connect(app_dsn, autocommit=True) as conn:
        for role in (None, "ghostmem_runtime"):
            if role:
                conn.execute(f"SET ROLE {role}")
            for statement in (
                f"COMMENT ON INDEX ghostmem.{name} IS '2000-01-01T00:00:00+00'",
                f"DROP INDEX ghostmem.{name}",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement.encode())
    with psycopg.connect(store) as admin:
        assert recent_graphs(admin) == {name: day()}
