"""Kept plans (search._plan_row, migration 274): a process keeps a plan statement's row per owner and filters and,
for a later search of them, checks that nothing it read has changed (the owner's token, the clock for a time
window) instead of planning again. Each test tries to make a search use a row that no longer holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder, maintenance, search
from ghostmem.args import SearchPersonalMemoryArgs
from ghostmem.program import run_sync
from ghostmem.search import search_personal_memory
from support.conversations import conversation, import_generic
from support.databases import app_login, fresh_database, graph_store
from support.statements import recording

FILTERS: list[dict[str, Any]] = [{}, {"days": 7}, {"project": "ops"}, {"platform": "generic"}]


def _search(who: GhostMem, **args: Any) -> tuple[list[str], list[dict[str, Any]], str]:
    """A search's statements as sent ("plan" for the plan statement, "check" for the kept plan's check, "main"),
    their parameters and the result as JSON."""
    seen: list[tuple[str, Any]] = []
    with who.connection() as conn:
        program = recording(search_personal_memory(who.context, SearchPersonalMemoryArgs(**args)), conn, seen)
        result = run_sync(program, conn, who.embedder)
    kinds = [
        "plan"
        if "ghostmem.message_counts" in text
        else "check"
        if "ghostmem.owner_changes" in text
        else "main"
        for text, _ in seen
    ]
    return kinds, [dict(params or {}) for _, params in seen], result.model_dump_json()


def _planned_afresh(who: GhostMem, **args: Any) -> str:
    """The result of the search when the process keeps no plan."""
    search._kept_plans.clear()
    kinds, _, result = _search(who, **args)
    assert kinds[0] == "plan"
    return result


def _ops(gm: GhostMem, tmp_path: Path) -> None:
    convs = [
        conversation(f"c{i}", f"note {i}", i, [f"alpha deploy note {i}", f"when was beta {i} due"], "ops")
        for i in range(6)
    ]
    import_generic(gm, tmp_path / "ops.jsonl", convs)


@pytest.mark.parametrize("mode", ["hybrid", "lexical", "vector"])
def test_a_second_search_of_the_same_owner_and_filters_checks_the_kept_plan(
    gm: GhostMem, tmp_path: Path, mode: str
) -> None:
    """The first search of an owner and filters plans; the next one, another query, only checks the kept row
    (settings, this query's speakers, the token) and finds what a search planned afresh finds."""
    _ops(gm, tmp_path)
    for filters in FILTERS:
        search._kept_plans.clear()
        first, _, _ = _search(gm, query="alpha deploy", mode=mode, **filters)
        second, _, found = _search(gm, query="when was beta due", mode=mode, **filters)
        assert first == ["plan", "main"] and second == ["check", "main"], filters
        assert found == _planned_afresh(gm, query="when was beta due", mode=mode, **filters)


def test_a_retitled_conversation_is_found_by_the_next_project_search(gm: GhostMem, tmp_path: Path) -> None:
    """A project filter keeps the conversations whose title matches it, found by the plan statement: after a
    conversation is given such a title (the write path's update of ghostmem.conversations, by another connection),
    the kept row is not used and the conversation is found."""
    _ops(gm, tmp_path)
    search._kept_plans.clear()
    kinds, _, before = _search(gm, query="alpha deploy", project="zeta")
    assert kinds == ["plan", "main"] and '"conv_id":"c2"' not in before
    with psycopg.connect(gm.dsn, autocommit=True) as other:
        other.execute(
            "UPDATE ghostmem.conversations SET title = 'zeta rollout' WHERE owner = %s AND conv_id = 'c2'",
            (gm.context.owner,),
        )
    kinds, _, after = _search(gm, query="alpha deploy", project="zeta")
    assert kinds == ["check", "plan", "main"]
    assert '"conv_id":"c2"' in after


def test_an_import_by_another_process_is_seen_by_the_next_search(gm: GhostMem, tmp_path: Path) -> None:
    """Messages imported through another store (another pool, as another process would) replace the owner's
    token: the next search plans again and finds them, with the filter's new share of the owner's messages."""
    _ops(gm, tmp_path)
    for index, filters in enumerate(FILTERS):
        search._kept_plans.clear()
        _search(gm, query="gamma rollout", **filters)
        with GhostMem(dsn=gm.dsn, owner=gm.context.owner, embedder=HashEmbedder()) as writer:
            conv = conversation(f"new-{index}", "n", 1, ["gamma rollout done", "ok"], "ops")
            import_generic(writer, tmp_path / "new.jsonl", [conv])
        kinds, _, found = _search(gm, query="gamma rollout", **filters)
        assert kinds == ["check", "plan", "main"], filters
        assert f'"conv_id":"new-{index}"' in found and found == _planned_afresh(
            gm, query="gamma rollout", **filters
        )


def test_another_owners_writes_leave_the_kept_plan(gm: GhostMem, pg_dsn: str, tmp_path: Path) -> None:
    """Only the owner's own writes replace its token."""
    _ops(gm, tmp_path)
    search._kept_plans.clear()
    _search(gm, query="alpha deploy", project="ops")
    with GhostMem(dsn=pg_dsn, owner=f"{gm.context.owner}-other", embedder=HashEmbedder()) as other:
        _ops(other, tmp_path)
    kinds, _, _ = _search(gm, query="alpha deploy", project="ops")
    assert kinds == ["check", "main"]


def test_a_kept_plan_is_never_taken_for_another_database(
    gm: GhostMem, server_dsn: str, tmp_path: Path
) -> None:
    """The same owner and filters in another database (another store this process talks to) hold another token:
    the row kept for one database is checked against the other's and planned again there."""
    _ops(gm, tmp_path)
    search._kept_plans.clear()
    _search(gm, query="alpha deploy", project="ops")
    with (
        fresh_database(server_dsn) as dsn,
        GhostMem(dsn=dsn, owner=gm.context.owner, embedder=HashEmbedder()) as elsewhere,
    ):
        conv = conversation("only-here", "x", 1, ["alpha deploy elsewhere", "yes"], "ops-west")
        import_generic(elsewhere, tmp_path / "elsewhere.jsonl", [conv])
        kinds, _, found = _search(elsewhere, query="alpha deploy", project="ops")
        assert kinds == ["check", "plan", "main"]
        assert '"conv_id":"only-here"' in found and '"conv_id":"c1"' not in found


def test_a_kept_plan_of_a_time_window_holds_until_the_window_moves(gm: GhostMem, tmp_path: Path) -> None:
    """A time window's first day moves at midnight (UTC): the kept row says so, and once that moment has passed
    (here: the kept row's moment set in the past) the search plans again. Without a window a row has no end."""
    _ops(gm, tmp_path)
    search._kept_plans.clear()
    _search(gm, query="alpha deploy", days=7)
    _search(gm, query="alpha deploy")
    rows = {key[2]: row for key, row in search._kept_plans.items()}
    now = datetime.now(UTC)
    midnight = datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
    assert now < rows[7]["valid_until"] <= midnight and rows[None]["valid_until"] is None
    rows[7]["valid_until"] = now - timedelta(seconds=1)
    kinds, _, _ = _search(gm, query="alpha deploy", days=7)
    assert kinds == ["check", "plan", "main"]


def test_the_speakers_are_those_this_query_names(gm: GhostMem, tmp_path: Path) -> None:
    """A kept row carries the speakers of the query that planned it; a later query is checked for its own."""
    conv = conversation("s1", "s", 1, ["alpha deploy plan", "sounds good"], "ops")
    conv["messages"][0]["speaker"] = "Alice"
    import_generic(gm, tmp_path / "s.jsonl", [conv])
    search._kept_plans.clear()
    _, params, _ = _search(gm, query="alpha deploy")
    assert params[-1]["speakers"] == []
    kinds, params, _ = _search(gm, query="what did Alice say about deploy")
    assert kinds == ["check", "main"] and params[-1]["speakers"] == ["alice"]
    kinds, params, _ = _search(gm, query="alpha deploy again")
    assert kinds == ["check", "main"] and params[-1]["speakers"] == []


def test_a_graph_built_by_maintenance_replaces_the_token(server_dsn: str, tmp_path: Path) -> None:
    """Maintenance that builds or drops an owner's search indexes replaces its token (the kept row names the
    graphs to walk): the next search plans again and walks the new graph; a step that changes nothing keeps it."""
    token = "SELECT token FROM ghostmem.owner_changes WHERE owner = 'graphed'"
    with (
        graph_store(server_dsn, "ghostmem_kept", "project_graph_rows", 5) as dsn,
        GhostMem(dsn=dsn, owner="graphed", embedder=HashEmbedder()) as gm,
        psycopg.connect(dsn, autocommit=True) as admin,
    ):
        admin.execute("UPDATE ghostmem.settings SET value = '1000000' WHERE key = 'project_graph_rows'")
        _ops(gm, tmp_path)
        search._kept_plans.clear()
        _, _, before = _search(gm, query="alpha deploy", project="ops", mode="vector")
        first = admin.execute(token).fetchone()
        admin.execute("UPDATE ghostmem.settings SET value = '5' WHERE key = 'project_graph_rows'")
        built = maintenance.build_project_graphs(admin, "graphed")
        second = admin.execute(token).fetchone()
        maintenance.build_project_graphs(admin, "graphed")
        third = admin.execute(token).fetchone()
        kinds, _, after = _search(gm, query="alpha deploy", project="ops", mode="vector")
        assert search._kept_plans[next(reversed(search._kept_plans))]["graphs"] == ["ops"]
    assert built >= 1 and first is not None and second is not None and first != second and third == second
    assert kinds == ["check", "plan", "main"] and after == before


def test_an_applications_login_keeps_plans_and_its_writes_replace_the_token(
    pg_dsn: str, tmp_path: Path
) -> None:
    """An application's login (`ghostmem grant-app`) reads the token and its imports replace it: the table is
    covered by the grant's default privileges, and the triggers run with the writer's rights."""
    with (
        app_login(pg_dsn) as dsn,
        GhostMem(dsn=dsn, owner="kept-plans-app", embedder=HashEmbedder()) as app,
    ):
        _ops(app, tmp_path)
        search._kept_plans.clear()
        _search(app, query="alpha deploy", project="ops")
        assert _search(app, query="alpha deploy", project="ops")[0] == ["check", "main"]
        import_generic(
            app, tmp_path / "more.jsonl", [conversation("m1", "m", 1, ["alpha deploy more", "k"], "ops")]
        )
        kinds, _, found = _search(app, query="alpha deploy", project="ops")
        assert kinds == ["check", "plan", "main"] and '"conv_id":"m1"' in found


def test_truncating_the_messages_replaces_every_token(server_dsn: str, tmp_path: Path) -> None:
    """A TRUNCATE (an operator emptying the store) changes every owner's token."""
    with fresh_database(server_dsn) as dsn:
        for owner in ("t-one", "t-two"):
            with GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder()) as gm:
                _ops(gm, tmp_path)
        with psycopg.connect(dsn, autocommit=True) as admin:
            tokens = "SELECT owner, token FROM ghostmem.owner_changes ORDER BY owner"
            before = admin.execute(tokens).fetchall()
            admin.execute("TRUNCATE ghostmem.messages CASCADE")
            after = admin.execute(tokens).fetchall()
    assert [o for o, _ in before] == [o for o, _ in after] == ["t-one", "t-two"]
    assert all(b != a for (_, b), (_, a) in zip(before, after, strict=True))


def test_the_check_statement_is_planned_once_per_connection(gm: GhostMem, tmp_path: Path) -> None:
    """The check statement is prepared as the plan statement is (on its sixth run on a connection) and, after the
    five plans PostgreSQL makes for the values of its first prepared runs, reuses its generic plan."""
    _ops(gm, tmp_path)
    search._kept_plans.clear()
    runs = 14
    with GhostMem(
        dsn=gm.dsn, owner=gm.context.owner, embedder=HashEmbedder(), pool_min_size=1, pool_max_size=1
    ) as one:
        for i in range(runs):
            one.run("search_personal_memory", {"query": f"deploy note {i}", "days": 30})
        with one.connection() as conn:
            prepared = conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement LIKE '%ghostmem.owner_changes%' AND statement NOT LIKE '%message_counts%'"
            ).fetchall()
    assert prepared == [(runs - 1 - 10, 5)]


def test_an_update_replaces_the_token_only_when_it_changes_what_a_plan_reads(
    gm: GhostMem, tmp_path: Path
) -> None:
    """The embedding step's updates (vectors) and enrichment's (topics) leave the token, so they never wait for an
    import of the same owner; a message's new speaker or project, a conversation's new title or message count
    replace it."""
    _ops(gm, tmp_path)
    owner = gm.context.owner
    token = "SELECT token FROM ghostmem.owner_changes WHERE owner = %s"
    kept = [
        "UPDATE ghostmem.messages SET embedding = embedding WHERE owner = %s",
        "UPDATE ghostmem.conversations SET topic = 'renamed topic', cluster = 3 WHERE owner = %s",
        "UPDATE ghostmem.messages SET speaker = speaker, project = project WHERE owner = %s",
    ]
    replaced = [
        "UPDATE ghostmem.messages SET speaker = 'Zed' WHERE owner = %s AND conv_id = 'c1' AND seq = 0",
        "UPDATE ghostmem.messages SET project = 'ops/new' WHERE owner = %s AND conv_id = 'c2'",
        "UPDATE ghostmem.conversations SET title = 'retitled' WHERE owner = %s AND conv_id = 'c3'",
        "UPDATE ghostmem.conversations SET msg_count = msg_count + 1 WHERE owner = %s AND conv_id = 'c4'",
    ]
    with psycopg.connect(gm.dsn, autocommit=True) as conn:
        for statement in kept + replaced:
            before = conn.execute(token, (owner,)).fetchone()
            assert conn.execute(statement, (owner,)).rowcount > 0
            after = conn.execute(token, (owner,)).fetchone()
            assert (before == after) == (statement in kept), statement
