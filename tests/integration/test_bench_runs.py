"""Small-scale smoke runs of the speed benches (scale, peers, ingest, cli) and of the report, so they cannot rot.

The fake embedder stands in for MiniLM: these runs check the benches' code paths and bookkeeping, not speed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import search

from bench import cli, corpus, fairness, ingest, parts, peers, report, scale
from bench.common import throwaway_database

pytestmark = pytest.mark.slow

MESSAGES = 2000
SMOKE = ["--messages", str(MESSAGES), "--sample", "150", "--queries", "3", "--model", "hash"]


@pytest.fixture(scope="module")
def bench_dsn(server_dsn: str) -> Iterator[str]:
    with throwaway_database(server_dsn, "ghostmem_bench_smoke") as dsn:
        yield dsn


@pytest.fixture(scope="module")
def own_dsn(server_dsn: str) -> Iterator[str]:
    with throwaway_database(server_dsn, "ghostmem_bench_fair_smoke") as dsn:
        yield dsn


@pytest.fixture(scope="module")
def results(
    bench_dsn: str, own_dsn: str, server_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench-results")
    assert scale.main([*SMOKE, "--dsn", bench_dsn, "--json", str(out / "scale.json")]) == 0
    with psycopg.connect(bench_dsn) as conn:
        indexes_after_first = sorted(name for _, name, _ in scale.secondary_indexes(conn))
    assert scale.main([*SMOKE, "--dsn", bench_dsn, "--json", str(out / "scale-again.json")]) == 0
    assert peers.main([*SMOKE, "--dsn", bench_dsn, "--json", str(out / "peers.json")]) == 0
    again = ["--cases", "days=7", "--json", str(out / "peers-again.json")]
    assert peers.main([*SMOKE, "--dsn", bench_dsn, *again]) == 0
    assert parts.main([*SMOKE, "--dsn", bench_dsn, "--passes", "1", "--json", str(out / "parts.json")]) == 0
    fair = ["--small", "300", "--own-dsn", own_dsn, "--json", str(out / "fairness.json")]
    assert fairness.main([*SMOKE, "--dsn", bench_dsn, *fair]) == 0
    assert (
        ingest.main(
            ["--messages", "300", "--model", "hash", "--dsn", server_dsn, "--json", str(out / "ingest.json")]
        )
        == 0
    )
    smoke_cli = ["--repeat", "1", "--mcp-repeat", "1", "--model", "hash", "--json", str(out / "cli.json")]
    assert cli.main(smoke_cli) == 0
    loaded = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    loaded["_dir"] = out
    loaded["_indexes"] = indexes_after_first
    return loaded


def test_scale_loads_the_corpus_through_the_product_schema(results: dict[str, Any], bench_dsn: str) -> None:
    run = results["scale"]
    assert run["loaded_now"] is True and results["scale-again"]["loaded_now"] is False
    assert run["load"]["messages"] == MESSAGES
    with psycopg.connect(bench_dsn) as conn:
        n, convs, tsv_talk, tsv_tool, vectors = conn.execute(
            """
            SELECT count(*), count(DISTINCT conv_id),
                   count(tsv) FILTER (WHERE role IN ('user', 'assistant')),
                   count(tsv) FILTER (WHERE role NOT IN ('user', 'assistant')),
                   count(embedding)
            FROM ghostmem.messages WHERE owner = %s
            """,
            (corpus.OWNER,),
        ).fetchone()  # type: ignore[misc]
        talk = conn.execute(
            "SELECT count(*) FROM ghostmem.messages WHERE owner = %s AND role IN ('user', 'assistant')",
            (corpus.OWNER,),
        ).fetchone()[0]  # type: ignore[index]
        indexes = sorted(name for _, name, _ in scale.secondary_indexes(conn))
    assert n == MESSAGES and convs == run["load"]["conversations"]
    assert tsv_talk == talk and tsv_tool == 0  # the product's trigger fired on every COPYed row
    assert vectors == talk == run["load"]["embedded_real"] + run["load"]["embedded_synthetic"]
    assert indexes == results["_indexes"]
    assert set(run["load"]["index_build_s"]) == {*indexes, "project graphs"}


def test_a_bench_store_gets_its_known_common_words(results: dict[str, Any], bench_dsn: str) -> None:
    """The bench writes its corpus with its own writer, which calls no maintenance: ensure_corpus lists the owners'
    known-common words itself (migration 220), as an import would, on a load and on a reuse. The smoke corpus is
    below the size an owner is listed at; with the size lowered, the bench owner's list is the direct count."""
    with psycopg.connect(bench_dsn, autocommit=True) as conn:
        conn.execute("UPDATE ghostmem.settings SET value = '1000' WHERE key = 'common_words_rows'")
        try:
            assert scale.list_common_words(bench_dsn) >= 1
            listed = conn.execute(
                "SELECT lexeme, df FROM ghostmem.common_words WHERE owner = %s AND tier = 'personal'",
                (corpus.OWNER,),
            ).fetchall()
            counted = conn.execute(
                "SELECT l, count(*) FROM ghostmem.messages m, unnest(tsvector_to_array(m.tsv)) l"
                " WHERE m.owner = %s AND m.tier = 'personal' GROUP BY l HAVING count(*) >= %s",
                (corpus.OWNER, search.DF_CAP),
            ).fetchall()
            assert listed and dict(listed) == dict(counted)
        finally:
            conn.execute("UPDATE ghostmem.settings SET value = '10000' WHERE key = 'common_words_rows'")
            scale.list_common_words(bench_dsn)  # below the size again: the lists go
        assert conn.execute("SELECT count(*) FROM ghostmem.common_words").fetchone() == (0,)


def test_scale_times_every_read_operation(results: dict[str, Any]) -> None:
    ops = results["scale"]["ops"]
    assert {o["op"] for o in ops} == {
        "search_personal_memory", "get_conversation", "get_conversation_summary",
        "list_recent_conversations", "list_project_conversations",
    }  # fmt: skip
    for o in ops:
        assert "error" not in o, o
        assert o["server"]["n"] > 0 and o["whole"]["n"] == o["server"]["n"]
        assert 0 < o["server"]["p50_ms"] <= o["server"]["p95_ms"]
    search = next(o for o in ops if o["op"] == "search_personal_memory" and o["case"] == "no filter")
    assert search["rows_median"] > 0
    assert results["scale"]["memory"]["database_mb"] > 0


def test_peers_compare_on_the_same_data(results: dict[str, Any]) -> None:
    run = results["peers"]
    assert [c["case"] for c in run["cases"]] == [
        "no filter",
        "days=7",
        "days=30",
        "platform=codex",
        "project",
    ]
    # the second run reused the peers' copies (same corpus, same table definitions) and ran the case it was given
    assert results["peers-again"]["peer_setup"] == run["peer_setup"]
    assert [c["case"] for c in results["peers-again"]["cases"]] == ["days=7"]
    talk = run["load"]["embedded_real"] + run["load"]["embedded_synthetic"]
    assert run["peer_setup"]["pgvectorstore"]["rows"] == talk == run["peer_setup"]["langgraph"]["rows"]
    for case in run["cases"]:
        systems = case["systems"]
        assert set(systems) == {
            "exact scan", "ghostmem hybrid", "ghostmem vector", "PGVectorStore vector", "PGVectorStore hybrid",
            "PGVectorStore vector (iterative scan)", "PGVectorStore hybrid (iterative scan)", "LangGraph PostgresStore",
        }  # fmt: skip
        assert systems["exact scan"]["rows_min"] == run["k"]
        assert systems["exact scan"]["server"]["n"] == run["queries"]
        for name, entry in systems.items():
            if name != "exact scan":  # each system's every query timed in every round
                assert entry["server"]["n"] == run["rounds"] * run["queries"] == 3 * 3, name
            for metric in ("msg_recall", "conv_recall"):
                if metric in entry:
                    assert 0.0 <= entry[metric] <= 1.0, (name, metric)
            if run["server_cpu"]:  # the suite's own server runs here: every system's work is read
                assert entry["cpu_ms_per_search"] > 0, name
                # and the load its block ran under: run-queue waits per search, the machine's steal
                assert entry["server_runq_ms_per_search"] >= 0 and entry["bench_runq_ms_per_search"] >= 0, (
                    name
                )
                assert 0 <= entry["steal_share"] < 1, name
            # the earlier clocks, same searches: around the driver's calls / with composing the text
            if name.startswith("PGVectorStore"):
                assert entry["server_sqlalchemy_events"]["mean_ms"] >= entry["server"]["mean_ms"], name
            if name.startswith("ghostmem"):
                assert entry["server_with_composing"]["mean_ms"] > entry["server"]["mean_ms"], name
        assert set(case["ratio_peer_over_ghostmem_hybrid"]) == set(systems) - {"ghostmem hybrid"}
    unfiltered = run["cases"][0]["systems"]
    # on 2,000 messages an HNSW scan is close to exact: the recall bookkeeping must say so
    assert unfiltered["PGVectorStore vector"]["msg_recall"] >= 0.8
    assert unfiltered["ghostmem vector"]["conv_recall"] >= 0.8
    # the reference searches with pgvector's iterative scan, the goal's peer at pgvector's defaults
    settings = run["pgvector_settings"]
    assert settings["PGVectorStore"]["hnsw.iterative_scan"] == "off"
    assert settings["PGVectorStore (iterative scan)"]["hnsw.iterative_scan"] == "relaxed_order"


def test_timing_a_search_does_not_change_it(results: dict[str, Any], bench_dsn: str) -> None:
    """bench.scale composes a statement's text before the driver's execute (to keep composing out of the clock):
    the search returns what the same search returns untimed, and every statement's time and composing are read."""
    from ghostmem import GhostMem
    from ghostmem.embed import make_embedder

    embedder = make_embedder("hash")
    queries = [q["query"] for q in corpus.query_texts(7, 3)]
    pre = scale.PrecomputedEmbedder(embedder, {})
    with GhostMem(dsn=bench_dsn, owner=corpus.OWNER, embedder=embedder) as gm:
        for q in queries:
            for args in ({"query": q, "limit": 10}, {"query": q, "limit": 10, "days": 30, "mode": "vector"}):
                timed, data = scale.timed_run(gm, "search_personal_memory", args, pre)
                plain = gm.run("search_personal_memory", args).data
                assert [(h.conv_id, h.score) for h in data.rows] == [(h.conv_id, h.score) for h in plain.rows]
                assert len(timed.statements) == len(timed.composing) >= 1
                assert min(timed.statements) > 0 and min(timed.composing) > 0


def test_parts_time_every_part_of_every_search(results: dict[str, Any]) -> None:
    run = results["parts"]
    assert [c["case"] for c in run["cases"]] == [c.label for c in peers.default_cases()]
    for case in run["cases"]:
        n = case["searches"] * case["passes"]
        measured = case["parts"]
        assert case["searches"] > 0
        # every search has a lexical leg, fusion and an end; the plan statement runs before each of its cuts
        for part in ("lexical", "fused", "whole"):
            assert measured[part]["wall"]["n"] == n, (case["case"], part)
        assert case["end"]["n"] == n
        assert measured["plan"]["wall"]["n"] == n * 3 + measured["vector"]["wall"]["n"]
        if run["cases"][0]["parts"]["whole"]["cpu"]["n"]:  # the suite's server runs here: the backend is read
            assert measured["whole"]["cpu"]["n"] == n and measured["whole"]["cpu"]["p50_ms"] > 0
    assert "## Where a hybrid search's time goes" in report.render(results["_dir"], with_plots=False)
    assert run["command"] in report.render(results["_dir"], with_plots=False)


def test_a_cut_runs_only_its_part_and_the_search_keeps_its_plan(
    results: dict[str, Any], bench_dsn: str
) -> None:
    """bench.parts reads a part's time from the statement cut after it: the cut must run that part alone (a
    materialised CTE nothing reads is not computed) and count what the search's leg returns; and the harness must
    time the prepared generic plan a search runs, not a new plan each time (psycopg forgets its prepared statements
    on ROLLBACK)."""
    from ghostmem.args import SearchPersonalMemoryArgs
    from ghostmem.embed import make_embedder
    from ghostmem.search import DEPTH_PER_LEG

    embedder = make_embedder("hash")
    query = corpus.query_texts(7, 3)[1]["query"]
    with psycopg.connect(bench_dsn) as conn:
        found = parts.record(conn, embedder, SearchPersonalMemoryArgs(query=query, limit=10))
        assert found is not None
        text, params = found.main
        assert parts.cut(text, "no_such_part") is None
        shown = {}
        for part, cte in parts.CUTS.items():
            statement = parts.cut(text, cte)
            assert statement is not None
            with conn.cursor() as cur:
                cur.execute(*found.plan)
                explain = "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + statement
                plan = [r[0] for r in cur.execute(explain, params).fetchall()]
                shown[part] = cur.execute(statement, params).fetchone()[0]  # type: ignore[index]
            conn.commit()
            # a CTE nothing reads is planned but never executed: each cut computes its leg(s) only
            assert _executed(plan, "lex_all") == (part != "vector"), (part, plan)
            assert _executed(plan, "vec_scan") == (part != "lexical"), (part, plan)
        # unfiltered, each leg contributes at most depth messages, and the vector leg exactly that many here
        assert 0 < shown["lexical"] <= DEPTH_PER_LEG and shown["vector"] == DEPTH_PER_LEG
        assert shown["fused"] >= max(shown["lexical"], shown["vector"])
        # the CJK query has no vector leg: that cut does not exist
        cjk = parts.record(conn, embedder, SearchPersonalMemoryArgs(query="会話 移行", limit=10))
        assert cjk is not None and parts.cut(cjk.main[0], "vec") is None
        case = parts.measure_case(conn, embedder, peers.default_cases()[0], [query], passes=8)
        assert case["parts"]["whole"]["wall"]["n"] == 8
        # committed, never rolled back: the whole statement stays prepared, run with its generic plan
        rows = conn.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_catalog.pg_prepared_statements"
        ).fetchall()
        # the hybrid search's statement: both legs and the shown messages
        whole = [r for r in rows if "ghostmem.messages shown" in r[0] and "vec_scan AS" in r[0]]
        assert len(whole) == 1 and whole[0][1] >= 3 and whole[0][2] == 0, rows


def _executed(plan: list[str], cte: str) -> bool:
    """Whether EXPLAIN ANALYZE's plan ran the materialised CTE ``cte`` (absent after the cut, or its node says
    "never executed")."""
    at = [i for i, line in enumerate(plan) if line.strip() == f"CTE {cte}"]
    return bool(at) and "never executed" not in plan[at[0] + 1]


def test_fairness_runs_the_small_owner_in_both_databases(
    results: dict[str, Any], bench_dsn: str, own_dsn: str
) -> None:
    run = results["fairness"]
    assert [c["case"] for c in run["cases"]] == [c.label for c in peers.default_cases()]
    for case in run["cases"]:  # every pass searches every query in both databases
        assert case["shared"]["n"] == case["own"]["n"] == run["queries"] * run["passes"] == run["queries"] * 3
        assert case["ratio_shared_over_own"]["p95"] > 0
        assert len(case["p95_ratio_by_pass"]) == run["passes"] and min(case["p95_ratio_by_pass"]) > 0
    # the same data in both databases: the same conversations, but for an approximate HNSW scan now and then
    assert sum(c["same_results"] for c in run["cases"]) >= 0.8 * run["queries"] * len(run["cases"])
    for dsn, owners in ((bench_dsn, {corpus.OWNER, fairness.SMALL_OWNER}), (own_dsn, {fairness.SMALL_OWNER})):
        with psycopg.connect(dsn) as conn:
            counts = dict(
                conn.execute("SELECT owner, count(*) FROM ghostmem.messages GROUP BY owner").fetchall()
            )
        assert set(counts) == owners and counts[fairness.SMALL_OWNER] == 300


def test_every_system_filters_the_same_messages(bench_dsn: str) -> None:
    """A case's filter in ghostmem's terms (a project substring that may also match titles) and in the peers'
    (the whole project path) select the same messages, so the comparison is like for like."""
    with psycopg.connect(bench_dsn) as conn:
        for i, name in enumerate(peers.PROJECTS):
            case = peers.Case("project", projects=True)
            ((column, op, path),) = case.conditions(i, corpus.now_utc())
            assert (column, op) == ("project", "=") and case.ghostmem(i) == {"project": name}
            by_path, by_substring = conn.execute(
                """
                SELECT count(*) FILTER (WHERE m.project = %(path)s),
                       count(*) FILTER (WHERE m.project ILIKE %(like)s OR c.title ILIKE %(like)s)
                FROM ghostmem.messages m
                JOIN ghostmem.conversations c ON c.owner = m.owner AND c.tier = m.tier AND c.conv_id = m.conv_id
                WHERE m.owner = %(owner)s
                """,
                {"path": path, "like": f"%{name}%", "owner": corpus.OWNER},
            ).fetchone()  # type: ignore[misc]
            assert by_path == by_substring
    filters = peers.Case("both", days=7, platform="codex")
    now = corpus.now_utc()
    assert filters.pgvectorstore(0, now) == {
        "$and": [{"ts": {"$gte": now - timedelta(days=7)}}, {"platform": {"$eq": "codex"}}]
    }
    assert filters.langgraph(0, now) == {
        "ts": {"$gte": (now - timedelta(days=7)).isoformat(timespec="seconds")},
        "platform": {"$eq": "codex"},
    }


def test_ingest_imports_everything_and_embeds_the_conversational_text(results: dict[str, Any]) -> None:
    run = results["ingest"]
    assert run["messages"] == 300
    assert run["lexical_only"]["messages_stored"] == 300 and run["lexical_only"]["messages_embedded"] == 0
    assert run["with_embeddings"]["messages_stored"] == 300
    assert run["with_embeddings"]["messages_embedded"] == run["embeddable_texts"]
    assert run["lexical_only"]["problems"] == 0 and run["with_embeddings"]["problems"] == 0
    assert run["ratio_with_embeddings_over_baseline"] > 0


def test_cli_times_cold_commands_and_the_mcp_first_search(results: dict[str, Any]) -> None:
    run = results["cli"]
    assert run["search"]["runs"] == run["recent"]["runs"] == 1
    assert run["search"]["median_s"] > run["python_pass"]["median_s"] > 0
    assert run["ratio_search_over_recent"] > 0 and run["setup_import_s"] > 0
    # the fake embedder: no model library may be imported for a search
    assert "torch" not in run["heavy_modules"]
    assert run["mcp"]["start_to_first_answer_median_s"] >= run["mcp"]["first_call_median_s"] > 0


def test_report_renders_every_result_with_its_command(results: dict[str, Any], tmp_path: Path) -> None:
    text = report.render(results["_dir"], tmp_path / "img")
    for name in ("scale", "peers", "ingest", "cli"):
        assert results[name]["command"] in text
    assert "PGVectorStore hybrid" in text and "## Speed at scale" in text and "## Ingest throughput" in text
    assert "Reference, not the goal's row" in text and "server CPU ms per search" in text
    assert "server run-queue wait ms per search" in text
    ghostmem = results["peers"]["cases"][0]["systems"]["ghostmem hybrid"]
    if results["peers"]["server_cpu"]:
        assert (
            f"| {ghostmem['cpu_ms_per_search']:.2f} | {ghostmem['server_runq_ms_per_search']:.2f} |" in text
        )
    assert "The same searches by the earlier clocks" in text and "SQLAlchemy's cursor events" in text
    assert "## Cold commands" in text and "Every case at a glance" in text
    assert f"{results['peers']['cases'][0]['systems']['ghostmem hybrid']['server']['p50_ms']:.2f}" in text
    assert (tmp_path / "img" / "bench-peers.png").stat().st_size > 1000
    assert (tmp_path / "img" / "bench-scale.png").stat().st_size > 1000


def test_a_bench_server_is_opened_with_its_cache_read_back(embedded_home: Path) -> None:
    """After a restart the embedded server reads its cache back (pg_prewarm); a bench must not time searches beside
    that read, so ``open_database`` returns once it is over: every page the cache held is a hit, none is read."""
    from ghostmem.db import EmbeddedServer

    server = EmbeddedServer(embedded_home)
    dsn = server.start().dsn()
    assert dsn is not None
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE warm AS SELECT g AS id, repeat('x', 200) AS pad FROM generate_series(1, 200000) g"
        )
        conn.execute("SELECT count(*) FROM warm")
    server.stop()  # the autoprewarm leader writes down the cached pages at shutdown
    try:
        dsn, opened = scale.open_database(None, embedded_home)
        assert opened is not None
        with psycopg.connect(dsn, autocommit=True) as conn:
            running = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autoprewarm worker'"
            ).fetchone()
            assert running == (0,)
            plan = "\n".join(
                str(r[0])
                for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) SELECT count(*) FROM warm").fetchall()
            )
        assert "shared hit=" in plan and "read=" not in plan, plan
    finally:
        EmbeddedServer(embedded_home).stop()
