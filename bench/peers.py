"""The peers side by side: the same searches, on the same data, in the same run.

    python -m bench.peers --messages 100000
    python -m bench.peers --messages 1000000

The corpus of :mod:`bench.scale` (reused when the database already holds it) is copied, server-side, into the
tables each peer creates for itself, and each peer builds its own indexes with its own defaults:

* **langchain-postgres ``PGVectorStore``** (0.0.19): ``init_vectorstore_table`` with a ``content_tsv`` column,
  ``apply_vector_index(HNSWIndex())`` (m=16, ef_construction=64, as ghostmem's) and ``apply_hybrid_search_index()``
  (GIN). Searched by vector (``similarity_search_by_vector``) and in its hybrid mode (``similarity_search`` with a
  ``HybridSearchConfig``: reciprocal rank fusion, each leg asked for as many candidates as ghostmem's legs: 100
  full-text, 100 nearest — 50 under a filter), its HNSW scans at pgvector's default ``ef_search`` (40, so it
  never returns more than 40 nearest; ghostmem's is 100).
  0.0.19 writes the first query's text into the config object and reuses it for every later query (upstream issue
  #337), so every hybrid query here gets a **fresh ``HybridSearchConfig``**: each query is searched by its own words.
* **LangGraph ``PostgresStore``** (langgraph-checkpoint-postgres): ``setup()`` with an HNSW index on
  ``store_vectors``, rows copied into ``store`` / ``store_vectors``; searched with ``store.search(namespace,
  query=...)``; its filters are on the JSON value (``value->>'ts' >= …``, ``value->'platform' = …``).
* **exact scan**: the same vector query with index scans disabled (a sequential scan over every vector) — the
  quality reference for recall and the brute-force latency baseline.

Cases (:func:`default_cases`, ``--cases`` picks some): no filter, ``days`` 7 and 30, ``platform=codex`` and a
project (the query's own, round robin over :data:`PROJECTS`). Every system gets the same filter in its own terms —
ghostmem its arguments, PGVectorStore its metadata filter, LangGraph its JSON filter, the exact scan a ``WHERE`` —
and all select the same messages: ghostmem's project filter is a substring of the project or the conversation's
title, and the bench's projects are each one path of the corpus that no title holds, so the peers compare the
whole path.

The peers' copies are kept in the database with the corpus they were made from and the version of their table
definitions (:func:`setup_key`); a later run reuses them (the HNSW builds take minutes at a million rows) unless the
corpus was loaded again, their definitions changed, or ``--rebuild-peers`` says so.

Latency: *server* is the time of the SQL statements each system sends, each from its driver's ``execute`` of the
statement's text until its rows are fetched and parsed in the client, with the query embedding computed beforehand:
ghostmem's on its connection (:func:`bench.scale.timed_run`), PGVectorStore's by a cursor class given to its
engine's psycopg connections (:func:`_timing_async_cursor_class`), LangGraph's by a cursor class on its psycopg
connection. None counts the transaction's end (ghostmem's ``COMMIT``, the ``ROLLBACK`` SQLAlchemy's pool sends when
PGVectorStore gives a connection back); each counts the ``BEGIN`` psycopg sends with a transaction's first statement
(PGVectorStore opens one per statement: each runs on a connection of its own from the pool). Building a statement's
text is not counted: PGVectorStore's f-strings and SQLAlchemy's compiler run before its driver is called, and the
bench composes ghostmem's ``sql.Composed`` just before the driver's ``execute`` (psycopg would compose it inside).
The earlier clocks were not quite this: ghostmem's included composing, and PGVectorStore's were SQLAlchemy's cursor
events — which covered the fetch as well (SQLAlchemy's async psycopg adapter fetches every row inside its
``execute``) plus SQLAlchemy's own work around the driver call. Both are kept, measured on the same searches
(``server_sqlalchemy_events``; ``server_with_composing``, ghostmem's figure with its composing time added; a table
below each case in docs/benchmarks.md). Same run, 100k, 48 queries × 5 cases (load 4):
the earlier mean was above the one compared now by 0.08–0.16 ms a search for ghostmem hybrid and vector, by
0.05–0.17 ms for PGVectorStore hybrid (two statements) and 0.02–0.07 ms for its vector search (one) —
PGVectorStore hybrid ÷ ghostmem hybrid moved by at most 0.01 either way. *call* is
the whole call a user makes, embedding the query with the same MiniLM model.

CPU: ``cpu_ms_per_search`` is the CPU time the server's processes used over a system's server-timed searches
(:mod:`bench.server_cpu`: the postmaster and its children — backends, I/O workers, parallel workers —
from ``/proc``), divided by the number of searches: the work a search costs the server, whatever its latency. It is
left out when the server is not on this machine.

Load: each system is timed in passes of its own (``--rounds``, 3: in each round every system times every query, one
system after another, the order reversed every other round), so the machine's load can differ from one pass to the
next; three passes spread apart give each system a share of the run's quiet and busy moments, where one block each
let a burst of load or steal fall on one system alone (session 35: the same code's ratios moved by up to 1.9×
between two runs). Read in the same walk of ``/proc`` as the CPU, over each pass: ``server_runq_ms_per_search``,
the time the same server processes spent ready to run but waiting for a core (``/proc/<pid>/schedstat`` field 2),
per search; ``bench_runq_ms_per_search``, the same for every thread of this process (``/proc/self/task/*/schedstat``:
the client's side, PGVectorStore's engine included, which runs its searches on its event loop's thread); and
``steal_share``, the share of the machine's CPU time the hypervisor gave to others (``/proc/stat``). A system whose
passes had a large wait or steal has latencies — its p95 most, the eighth slowest of 3 × 48 searches — set by the
machine rather than the search: compare the systems' CPU per search there, and read a latency ratio beside both
systems' waits.

The reference rows *PGVectorStore vector / hybrid (iterative scan)* are the same store, calls and configuration on
an engine whose connections set pgvector 0.8's ``hnsw.iterative_scan = relaxed_order`` (libpq ``options`` in the
engine's ``connect_args``, :data:`ITERATIVE_SCAN_OPTIONS`; ``hnsw.max_scan_tuples`` 20,000, ``ef_search`` 40 and
``hnsw.scan_mem_multiplier`` 1 stay pgvector's defaults): a filtered scan goes on through the index until it has
its rows, what a PGVectorStore user who wants complete filtered results would do. The settings each engine's
connections search with are read back (``pgvector_settings`` in the results; a misspelt value is only dropped, with
a warning, when pgvector loads) and the run stops if the iterative scan did not take. The goal's peer stays
PGVectorStore hybrid at its defaults; the reference has its own ratio.

Ratios are peer / ghostmem (above 1 = ghostmem faster, or cheaper for ``cpu``). The exact scans run first, in a
pass of their own; then every system runs every query once untimed (its index and table pages come into the
server's cache, as they are for a store in use), then the timed rounds, then every query as a whole call (no query
is timed right after a sequential scan through every vector; a pass's first query follows another system's pass).

Quality: message-level recall@k of each vector search against the exact scan's top-k messages, and, for ghostmem
(which returns conversations), conversation-level recall@k against the exact scan's k nearest conversations within
its similarity floor (ghostmem returns nothing farther; the peers have no floor and are compared with the k nearest
conversations however far; a query with no conversation within the floor has no ghostmem recall). A
hybrid result is not meant to equal the vector top-k; its overlap is reported for information. ``rows`` counts what
came back: a filtered search that returns fewer than k rows although k exist has lost results.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from ghostmem import GhostMem
from ghostmem.embed import Embedder, make_embedder
from ghostmem.search import DEPTH_PER_LEG, SIMILARITY_FLOOR, vector_depth
from langchain_core.embeddings import Embeddings
from psycopg import sql

from bench import corpus
from bench.scale import (
    WARM_UP_CALLS,
    PrecomputedEmbedder,
    add_common_args,
    bench_database,
    ensure_corpus,
    provenance,
    run_bench,
    summarise,
    timed_run,
)
from bench.server_cpu import Block, ServerCPU

logger = logging.getLogger("bench.peers")

PEER_SCHEMA = "bench_peers"
PEER_TABLES = (
    1  # the version of the peers' table definitions below: a kept copy of another version is rebuilt
)
LC_TABLE = "lc_messages"
NAMESPACE = ("bench", "messages")
# Projects of the corpus that are one path each and appear in no title, so a substring of the project (ghostmem's
# filter, which also matches titles) and equality with the whole path (the peers' filters) select the same rows.
PROJECTS = ("rust-indexer", "billing-service", "data-lake", "api-gateway", "terraform-prod")
PLATFORM = "codex"
# The reference systems: PGVectorStore as is, its connections set to pgvector 0.8's iterative HNSW scan (a filtered
# search goes on through the index until it has its rows or hnsw.max_scan_tuples, 20,000 by default).
ITERATIVE = " (iterative scan)"
ITERATIVE_SCAN_OPTIONS = "-c hnsw.iterative_scan=relaxed_order"


@dataclass(frozen=True)
class Case:
    """One filter of the comparison, written the way each system takes it (all select the same messages)."""

    label: str
    days: int | None = None
    platform: str | None = None
    projects: bool = False  # the query's project, round robin over PROJECTS

    def project(self, i: int) -> str | None:
        return PROJECTS[i % len(PROJECTS)] if self.projects else None

    def ghostmem(self, i: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.days:
            out["days"] = self.days
        if self.platform:
            out["platform"] = self.platform
        if self.projects:
            out["project"] = self.project(i)
        return out

    def conditions(self, i: int, now: datetime) -> list[tuple[str, str, Any]]:
        """(column, operator, value) of the filter on a message row."""
        out: list[tuple[str, str, Any]] = []
        if self.days:
            out.append(("ts", ">=", now - timedelta(days=self.days)))
        if self.platform:
            out.append(("platform", "=", self.platform))
        if self.projects:
            out.append(("project", "=", _project_path(str(self.project(i)))))
        return out

    def pgvectorstore(self, i: int, now: datetime) -> dict[str, Any] | None:
        ops = {">=": "$gte", "=": "$eq"}
        parts = [{col: {ops[op]: value}} for col, op, value in self.conditions(i, now)]
        return None if not parts else parts[0] if len(parts) == 1 else {"$and": parts}

    def langgraph(self, i: int, now: datetime) -> dict[str, Any] | None:
        ops = {">=": "$gte", "=": "$eq"}
        out: dict[str, Any] = {}
        for col, op, value in self.conditions(i, now):
            # the copied rows keep ts as ISO text: compared as text, as LangGraph's filter does
            out[col] = {
                ops[op]: value.isoformat(timespec="seconds") if isinstance(value, datetime) else value
            }
        return out or None


def _project_path(name: str) -> str:
    (path,) = [p for p in corpus.PROJECTS if p.rsplit("/", 1)[-1] == name]
    return path


def default_cases() -> list[Case]:
    return [
        Case("no filter"),
        Case("days=7", days=7),
        Case("days=30", days=30),
        Case(f"platform={PLATFORM}", platform=PLATFORM),
        Case("project", projects=True),
    ]


def add_cases_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cases",
        default="",
        help="comma-separated case labels to run (default: all: "
        + ", ".join(c.label for c in default_cases())
        + ")",
    )


def selected_cases(labels: str) -> list[Case]:
    """The cases ``--cases`` names (comma-separated labels; every case when empty)."""
    wanted = [label.strip() for label in labels.split(",") if label.strip()]
    unknown = set(wanted) - {c.label for c in default_cases()}
    if unknown:
        raise SystemExit(f"unknown cases: {', '.join(sorted(unknown))}")
    return [c for c in default_cases() if not wanted or c.label in wanted]


class QueryEmbeddings(Embeddings):
    """A LangChain ``Embeddings`` over a ghostmem embedder; ``cached=True`` answers repeated queries from memory."""

    def __init__(self, embedder: Embedder, cached: bool) -> None:
        self.embedder = embedder
        self.cached = cached
        self.cache: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        if not self.cached:
            return self.embedder.embed_query(text)
        if text not in self.cache:
            self.cache[text] = self.embedder.embed_query(text)
        return self.cache[text]


class StatementClock:
    """Accumulates the time of SQL statements reported by a driver hook: ``start``/``stop`` pairs (the first
    statement started is the first to stop), or spans measured by the hook itself (``add``)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0
        self._t0: list[float] = []

    def start(self, *_: Any) -> None:
        self.count += 1
        self._t0.append(time.perf_counter())

    def stop(self, *_: Any) -> None:
        if self._t0:
            self.total += time.perf_counter() - self._t0.pop(0)

    def add(self, seconds: float) -> None:
        self.total += seconds

    def take(self) -> float:
        total, self.total = self.total, 0.0
        self._t0.clear()  # statements never fetched (DDL, pipeline syncs) are not counted
        return total


def _timing_cursor_class(clock: StatementClock) -> type[psycopg.Cursor[Any]]:
    """A cursor timing each statement from ``execute`` to the end of ``fetchall``.

    LangGraph runs its statements in pipeline mode, where ``execute`` only queues the query and the server's work
    is waited for in the fetch: timing ``execute`` alone would measure nothing.
    """

    class TimingCursor(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **kw: Any) -> TimingCursor:
            clock.start()
            super().execute(query, params, **kw)
            return self

        def fetchall(self) -> list[Any]:
            try:
                return super().fetchall()
            finally:
                clock.stop()

    return TimingCursor


def _timing_async_cursor_class(clock: StatementClock) -> type[psycopg.AsyncCursor[Any]]:
    """PGVectorStore's driver cursor (its engine is SQLAlchemy's async psycopg one), timing each statement from
    ``execute`` to the end of its ``fetchall``: the instrument of ghostmem's and LangGraph's figures.

    SQLAlchemy's async adapter fetches a statement's rows inside its own ``execute``, right after psycopg's; a
    statement without rows (a ``SET``) ends with its ``execute``. The spans of both calls are summed.
    """

    class TimingAsyncCursor(psycopg.AsyncCursor[Any]):
        async def execute(self, query: Any, params: Any = None, **kw: Any) -> TimingAsyncCursor:
            t0 = time.perf_counter()
            try:
                await super().execute(query, params, **kw)
            finally:
                clock.add(time.perf_counter() - t0)
            return self

        async def fetchall(self) -> list[Any]:
            t0 = time.perf_counter()
            try:
                return await super().fetchall()
            finally:
                clock.add(time.perf_counter() - t0)

    return TimingAsyncCursor


# -- setting the peers up ----------------------------------------------------------------------------------


def _sqlalchemy_url(dsn: str) -> Any:
    from sqlalchemy.engine import URL

    info = psycopg.conninfo.conninfo_to_dict(dsn)
    return URL.create(
        "postgresql+psycopg",
        username=str(info.get("user") or "") or None,
        password=str(info.get("password") or "") or None,
        host=str(info.get("host") or "") or None,
        port=int(info["port"]) if info.get("port") else None,
        database=str(info.get("dbname") or "") or None,
    )


def _setup_record(conn: psycopg.Connection[Any], name: str, key: dict[str, Any]) -> dict[str, Any] | None:
    """A peer's setup kept from an earlier run, if it was made from the same corpus load and table definition."""
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{PEER_SCHEMA}.setups",)).fetchone()
    if not exists or not exists[0]:
        return None
    row = conn.execute(
        sql.SQL("SELECT info FROM {} WHERE name = %s").format(sql.Identifier(PEER_SCHEMA, "setups")), (name,)
    ).fetchone()
    return dict(row[0]) if row and row[0].get("key") == key else None


def _save_setup(conn: psycopg.Connection[Any], name: str, info: dict[str, Any]) -> None:
    table = sql.Identifier(PEER_SCHEMA, "setups")
    conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, info jsonb)").format(table))
    conn.execute(
        sql.SQL(
            "INSERT INTO {} VALUES (%s, %s) ON CONFLICT (name) DO UPDATE SET info = EXCLUDED.info"
        ).format(table),
        (name, psycopg.types.json.Jsonb(info)),
    )


def setup_key(load_info: dict[str, Any], messages: int, seed: int) -> dict[str, Any]:
    """What a peer's copy depends on: the corpus (size, seed, the load's end time) and the peers' table definitions."""
    return {
        "messages": messages,
        "seed": seed,
        "corpus_end": load_info.get("corpus_end"),
        "tables": PEER_TABLES,
    }


def setup_pgvectorstore(
    dsn: str, embedder: Embedder, key: dict[str, Any], rebuild: bool, progress: Callable[[str], None]
) -> dict[str, Any]:
    """PGVectorStore's own table filled with the corpus' embedded messages, and its own indexes (timed)."""
    from langchain_postgres import Column, PGEngine, PGVectorStore
    from langchain_postgres.v2.hybrid_search_config import HybridSearchConfig
    from langchain_postgres.v2.indexes import HNSWIndex

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(PEER_SCHEMA)))
        previous = None if rebuild else _setup_record(conn, "pgvectorstore", key)
    if previous:
        return previous
    engine = PGEngine.from_connection_string(_sqlalchemy_url(dsn))
    info: dict[str, Any] = {"key": key}
    try:
        engine.init_vectorstore_table(
            LC_TABLE,
            corpus.DIMS,
            schema_name=PEER_SCHEMA,
            metadata_columns=[
                Column("conv_id", "TEXT"),
                Column("ts", "TIMESTAMPTZ"),
                Column("platform", "TEXT"),
                Column("project", "TEXT"),
            ],
            overwrite_existing=True,
            hybrid_search_config=HybridSearchConfig(),
        )
        progress("PGVectorStore: copying rows")
        t0 = time.perf_counter()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (langchain_id, content, embedding, conv_id, ts, platform, project, content_tsv) "
                    "SELECT gen_random_uuid(), text, embedding, conv_id, ts, platform, project, "
                    "to_tsvector('pg_catalog.english', text) "
                    "FROM ghostmem.messages WHERE owner = %s AND embedding IS NOT NULL"
                ).format(sql.Identifier(PEER_SCHEMA, LC_TABLE)),
                (corpus.OWNER,),
            )
        info["copy_s"] = round(time.perf_counter() - t0, 2)
        store = PGVectorStore.create_sync(
            engine,
            QueryEmbeddings(embedder, cached=True),
            LC_TABLE,
            schema_name=PEER_SCHEMA,
            metadata_columns=["conv_id", "ts", "platform", "project"],
            hybrid_search_config=HybridSearchConfig(tsv_column="content_tsv"),
        )
        progress("PGVectorStore: building its HNSW index")
        t0 = time.perf_counter()
        store.apply_vector_index(HNSWIndex())
        info["hnsw_build_s"] = round(time.perf_counter() - t0, 2)
        progress("PGVectorStore: building its GIN index")
        t0 = time.perf_counter()
        store.apply_hybrid_search_index()
        info["gin_build_s"] = round(time.perf_counter() - t0, 2)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(PEER_SCHEMA, LC_TABLE)))
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(PEER_SCHEMA, LC_TABLE))
            ).fetchone()
            info["rows"] = int(row[0]) if row else 0
            _save_setup(conn, "pgvectorstore", info)
    finally:
        engine._run_as_sync(engine.close())
    return info


def setup_langgraph(
    dsn: str, key: dict[str, Any], rebuild: bool, progress: Callable[[str], None]
) -> dict[str, Any]:
    """LangGraph's ``store`` / ``store_vectors`` tables in their own schema, filled server-side, index rebuilt."""
    from langgraph.store.postgres import PostgresStore

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(PEER_SCHEMA)))
        previous = None if rebuild else _setup_record(conn, "langgraph", key)
        if previous:
            return previous
    info: dict[str, Any] = {"key": key}
    with _langgraph_conn(dsn, None) as conn:
        conn.execute("DROP TABLE IF EXISTS store_vectors, store, store_migrations, vector_migrations CASCADE")
        store = PostgresStore(conn, index={"dims": corpus.DIMS, "embed": _no_embed, "fields": ["text"]})
        store.setup()
        index_def = conn.execute(
            "SELECT pg_get_indexdef('store_vectors_embedding_idx'::regclass) AS def"
        ).fetchone()
        assert index_def is not None
        conn.execute("DROP INDEX store_vectors_embedding_idx")
        progress("LangGraph PostgresStore: copying rows")
        t0 = time.perf_counter()
        prefix = ".".join(NAMESPACE)
        conn.execute(
            """
            INSERT INTO store (prefix, key, value, created_at, updated_at)
            SELECT %(prefix)s, m.id::text,
                   jsonb_build_object('text', m.text, 'conv_id', m.conv_id, 'platform', m.platform,
                                      'project', m.project,
                                      'ts', to_char(m.ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')),
                   m.ts, m.ts
            FROM ghostmem.messages m WHERE m.owner = %(owner)s AND m.embedding IS NOT NULL
            """,
            {"prefix": prefix, "owner": corpus.OWNER},
        )
        conn.execute(
            """
            INSERT INTO store_vectors (prefix, key, field_name, embedding, created_at, updated_at)
            SELECT %(prefix)s, m.id::text, 'text', m.embedding, m.ts, m.ts
            FROM ghostmem.messages m WHERE m.owner = %(owner)s AND m.embedding IS NOT NULL
            """,
            {"prefix": prefix, "owner": corpus.OWNER},
        )
        info["copy_s"] = round(time.perf_counter() - t0, 2)
        progress("LangGraph PostgresStore: building its HNSW index")
        t0 = time.perf_counter()
        conn.execute(str(index_def["def"]).encode())  # the definition its own setup() created
        info["hnsw_build_s"] = round(time.perf_counter() - t0, 2)
        conn.execute("ANALYZE store")
        conn.execute("ANALYZE store_vectors")
        row = conn.execute("SELECT count(*) FROM store_vectors").fetchone()
        info["rows"] = int(row["count"]) if row else 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        _save_setup(conn, "langgraph", info)
    return info


def _no_embed(texts: Sequence[str]) -> list[list[float]]:
    raise RuntimeError("the corpus is copied with its vectors; nothing should be embedded here")


def _langgraph_conn(dsn: str, clock: StatementClock | None) -> psycopg.Connection[Any]:
    """An autocommit connection whose search_path puts LangGraph's tables in the peers' schema."""
    from psycopg.rows import dict_row

    conn = psycopg.connect(
        dsn,
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        options=f"-c search_path={PEER_SCHEMA},public",
        cursor_factory=_timing_cursor_class(clock) if clock else psycopg.Cursor,
    )
    from pgvector.psycopg import register_vector

    register_vector(conn)
    return conn


# -- searching --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Truth:
    """The exact answer of one query: its k nearest messages and conversations, and the k nearest conversations
    whose nearest message is within ghostmem's similarity floor (what ghostmem's vector search may return)."""

    msg_ids: list[int]
    conv_ids: list[str]
    floored_conv_ids: list[str]


def exact_neighbours(
    conn: psycopg.Connection[Any], vector: list[float], k: int, conditions: list[tuple[str, str, Any]]
) -> tuple[float, _Truth]:
    """The exact k nearest messages and conversations under the case's filter (one sequential scan), and its time."""
    where: list[sql.Composable] = [sql.SQL("owner = %s AND embedding IS NOT NULL")]
    params: list[Any] = [corpus.OWNER]
    for column, op, value in conditions:
        where.append(sql.SQL("{} {} %s").format(sql.Identifier(column), sql.SQL(op)))
        params.append(value)
    q = sql.SQL(
        "SELECT id, conv_id, embedding <=> %s::vector AS d FROM ghostmem.messages WHERE {} ORDER BY d LIMIT %s"
    ).format(sql.SQL(" AND ").join(where))
    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        t0 = time.perf_counter()
        rows = conn.execute(q, [str(vector), *params, k * 50]).fetchall()
        elapsed = time.perf_counter() - t0
    ids = [int(r[0]) for r in rows[:k]]

    def nearest_conversations(max_dist: float) -> list[str]:
        return list(dict.fromkeys(r[1] for r in rows if r[2] <= max_dist))[:k]

    truth = _Truth(ids, nearest_conversations(2.0), nearest_conversations(1.0 - SIMILARITY_FLOOR))
    return elapsed, truth


def _recall(found: Sequence[Any], truth: Sequence[Any]) -> float | None:
    if not truth:
        return None
    return len(set(found) & set(truth)) / len(truth)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from langchain_postgres import PGVectorStore
    from langchain_postgres.v2.hybrid_search_config import HybridSearchConfig, reciprocal_rank_fusion
    from langgraph.store.postgres import PostgresStore

    progress = logger.info
    embedder = make_embedder(args.model)
    peers = set(args.peers.split(","))
    k = args.k
    with bench_database(args) as (dsn, _server, settings):
        load_info, _ = ensure_corpus(
            dsn, args.messages, args.seed, embedder=embedder, sample=args.sample, reload=args.reload
        )
        setups: dict[str, Any] = {}
        key = setup_key(load_info, args.messages, args.seed)
        if peers & {"pgvectorstore", "pgvectorstore-iterative"}:
            setups["pgvectorstore"] = setup_pgvectorstore(dsn, embedder, key, args.rebuild_peers, progress)
        if "langgraph" in peers:
            setups["langgraph"] = setup_langgraph(dsn, key, args.rebuild_peers, progress)
        queries = [q["query"] for q in corpus.query_texts(args.seed, args.queries)]
        cached = QueryEmbeddings(embedder, cached=True)
        live = QueryEmbeddings(embedder, cached=False)
        vectors = {q: cached.embed_query(q) for q in queries}
        precomputed = PrecomputedEmbedder(embedder, dict(vectors))
        now = datetime.now(UTC)
        index = {q: i for i, q in enumerate(queries)}  # a query's project (round robin)
        cases = selected_cases(args.cases)

        lc_clock, lc_events = StatementClock(), StatementClock()
        engines: dict[str, Any] = {}  # system name suffix -> its PGEngine
        if "pgvectorstore" in peers:
            engines[""] = _pgvectorstore_engine(dsn, lc_clock, lc_events, None)
        if "pgvectorstore-iterative" in peers:
            engines[ITERATIVE] = _pgvectorstore_engine(dsn, lc_clock, lc_events, ITERATIVE_SCAN_OPTIONS)
        pgvector_settings = {f"PGVectorStore{name}": _pgvector_settings(e) for name, e in engines.items()}
        iterative = pgvector_settings.get(f"PGVectorStore{ITERATIVE}")
        if iterative is not None and iterative["hnsw.iterative_scan"] != "relaxed_order":
            raise RuntimeError(f"the iterative scan's connections search with {iterative}")
        lc_stores = {
            name: tuple(
                PGVectorStore.create_sync(
                    engine,
                    embeddings,
                    LC_TABLE,
                    schema_name=PEER_SCHEMA,
                    metadata_columns=["conv_id", "ts", "platform", "project"],
                )
                for embeddings in (cached, live)
            )
            for name, engine in engines.items()
        }
        lg_clock = StatementClock()
        lg_conn = _langgraph_conn(dsn, lg_clock) if "langgraph" in peers else None
        lg_store = lg_conn and PostgresStore(
            lg_conn, index={"dims": corpus.DIMS, "embed": cached, "fields": ["text"]}
        )
        lg_store_live = lg_conn and PostgresStore(
            lg_conn, index={"dims": corpus.DIMS, "embed": live, "fields": ["text"]}
        )

        def fresh_hybrid(filtered: bool) -> HybridSearchConfig:
            # A new config per query: 0.0.19 stores the first query's words in the config (issue #337).
            return HybridSearchConfig(
                tsv_column="content_tsv",
                fusion_function=reciprocal_rank_fusion,
                primary_top_k=vector_depth(
                    k, DEPTH_PER_LEG, 0.0 if filtered else None
                ),  # as deep as ghostmem's deepest
                secondary_top_k=DEPTH_PER_LEG,
            )

        results: list[dict[str, Any]] = []
        with (
            GhostMem(dsn=dsn, owner=corpus.OWNER, embedder=embedder) as gm,
            psycopg.connect(dsn, autocommit=True) as exact_conn,
        ):
            cpu = ServerCPU.of(exact_conn)
            for case in cases:
                acc: dict[str, dict[str, list[Any]]] = {}
                # The quality reference first, in a pass of its own: a sequential scan through every vector
                # leaves the caches unlike what the searches see, and no system is timed right after it.
                truth: dict[str, _Truth] = {}
                before = cpu.snapshot() if cpu else None
                for q in queries:
                    t_exact, truth[q] = exact_neighbours(
                        exact_conn, vectors[q], k, case.conditions(index[q], now)
                    )
                    _add(acc, "exact scan", server=t_exact, rows=len(truth[q].msg_ids))
                if cpu and before:
                    _add(acc, "exact scan", block=cpu.snapshot().since(before))
                bound = _BoundCase(case, index, now)
                systems = [
                    _ghostmem_system(gm, mode, k, bound.ghostmem, precomputed)
                    for mode in ("hybrid", "vector")
                ]
                for suffix, (lc_cached, lc_live) in lc_stores.items():
                    systems += _pgvectorstore_systems(
                        suffix,
                        lc_cached,
                        lc_live,
                        (lc_clock, lc_events),
                        exact_conn,
                        vectors,
                        k,
                        bound.pgvectorstore,
                        fresh_hybrid,
                    )
                if lg_store is not None and lg_store_live is not None:
                    systems.append(_langgraph_system(lg_store, lg_store_live, lg_clock, k, bound.langgraph))
                _measure(systems, queries, truth, acc, cpu, args.rounds)
                results.append(_case_summary(case.label, acc, k))
                _print_case(results[-1])
        for engine in engines.values():
            engine._run_as_sync(engine.close())
        if lg_conn is not None:
            lg_conn.close()
    return {
        **provenance("peers", args.command),
        "server": settings,
        "messages": args.messages,
        "seed": args.seed,
        "k": k,
        "queries": len(queries),
        "rounds": args.rounds,
        "load": load_info,
        "peer_setup": setups,
        "versions": _versions(),
        "pgvector_settings": pgvector_settings,
        "server_cpu": cpu is not None,
        "cases": results,
    }


def _pgvectorstore_engine(
    dsn: str, clock: StatementClock, events: StatementClock, options: str | None
) -> Any:
    """A ``PGEngine`` made the way a user makes one (``from_connection_string``; ``options``: server settings for
    every connection it opens, as libpq takes them). ``clock`` times its statements at the driver's cursor (the
    figure compared); ``events`` by SQLAlchemy's cursor events (the earlier figure, kept beside it)."""
    from langchain_postgres import PGEngine
    from sqlalchemy import event

    connect_args: dict[str, Any] = {"cursor_factory": _timing_async_cursor_class(clock)}
    if options:
        connect_args["options"] = options
    engine = PGEngine.from_connection_string(_sqlalchemy_url(dsn), connect_args=connect_args)
    sync_engine = engine._pool.sync_engine
    event.listen(sync_engine, "before_cursor_execute", events.start)
    event.listen(sync_engine, "after_cursor_execute", events.stop)
    return engine


def _pgvector_settings(engine: Any) -> dict[str, str]:
    """The pgvector settings a connection of ``engine`` searches with, read after pgvector has loaded in it (a
    setting given at connect time is only checked then; one this pgvector lacks reads None) — and its version."""
    from sqlalchemy import text

    async def read() -> dict[str, str]:
        async with engine._pool.connect() as conn:
            await conn.execute(text("SELECT '[1]'::vector"))
            names = (
                "hnsw.iterative_scan",
                "hnsw.ef_search",
                "hnsw.max_scan_tuples",
                "hnsw.scan_mem_multiplier",
            )
            out = {
                n: (await conn.execute(text("SELECT current_setting(:n, true)"), {"n": n})).scalar_one()
                for n in names
            }
            version = await conn.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'"))
            out["pgvector"] = version.scalar_one()
        return out

    return engine._run_as_sync(read())  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _System:
    """One searcher: ``server(q)`` = (seconds in its SQL by each clock, what came back); ``call(q)`` = the whole
    call. The first clock, ``server``, is the figure compared."""

    name: str
    server: Callable[[str], tuple[dict[str, float], _Found]]
    call: Callable[[str], object]
    floored: bool = (
        False  # returns nothing farther than ghostmem's similarity floor (compared with that truth)
    )


@dataclass(frozen=True)
class _Found:
    rows: int
    conv_ids: list[str]
    msg_ids: Callable[[], list[int]] | None = None  # message-level results (vector searches of messages)


def _measure(
    systems: list[_System],
    queries: list[str],
    truth: dict[str, _Truth],
    acc: dict[str, Any],
    cpu: ServerCPU | None,
    rounds: int,
) -> None:
    """Every system warmed (every query once untimed, then a few whole calls), then ``rounds`` timed rounds — in
    each, every system's pass of every query timed server-side, one system after another, the order reversed every
    other round, with the server's CPU time, run-queue waits and steal over each pass — then every query of every
    system as a whole call. Rows and recall are the first round's (a search returns the same every time)."""
    for system in systems:
        for q in queries:
            system.server(q)
        for q in queries[:WARM_UP_CALLS]:
            system.call(q)
    for r in range(rounds):
        for system in systems if r % 2 == 0 else systems[::-1]:
            before = cpu.snapshot() if cpu else None
            timed = [system.server(q) for q in queries]
            if cpu and before:
                _add(acc, system.name, block=cpu.snapshot().since(before))
            for q, (clocks, found) in zip(queries, timed, strict=True):
                _add(acc, system.name, **clocks)
                if r == 0:
                    _add(acc, system.name, **_quality(system, found, truth[q]))
    for system in systems:
        for q in queries:
            t0 = time.perf_counter()
            system.call(q)
            _add(acc, system.name, call=time.perf_counter() - t0)


def _quality(system: _System, found: _Found, exact: _Truth) -> dict[str, Any]:
    """What a search found, against the exact scan: its rows, its conversations' recall, its messages' recall."""
    convs = exact.floored_conv_ids if system.floored else exact.conv_ids
    values: dict[str, Any] = {
        "rows": found.rows,
        "conv_recall": _recall(list(dict.fromkeys(found.conv_ids)), convs),
    }
    if found.msg_ids is not None:
        values["msg_recall"] = _recall(found.msg_ids(), exact.msg_ids)
    return values


@dataclass(frozen=True)
class _BoundCase:
    """A case's filter for each query (by the query's position), in each system's terms."""

    case: Case
    index: dict[str, int]
    now: datetime

    def ghostmem(self, q: str) -> dict[str, Any]:
        return self.case.ghostmem(self.index[q])

    def pgvectorstore(self, q: str) -> dict[str, Any] | None:
        return self.case.pgvectorstore(self.index[q], self.now)

    def langgraph(self, q: str) -> dict[str, Any] | None:
        return self.case.langgraph(self.index[q], self.now)


def _ghostmem_system(
    gm: GhostMem, mode: str, k: int, filters: Callable[[str], dict[str, Any]], precomputed: Embedder
) -> _System:
    def arguments(q: str) -> dict[str, Any]:
        return {"query": q, "limit": k, "mode": mode, **filters(q)}

    def server(q: str) -> tuple[dict[str, float], _Found]:
        timed, data = timed_run(gm, "search_personal_memory", arguments(q), precomputed)
        convs = [h.conv_id for h in data.rows]
        srv = sum(timed.statements)
        return {"server": srv, "server_with_composing": srv + sum(timed.composing)}, _Found(len(convs), convs)

    return _System(
        f"ghostmem {mode}", server, lambda q: gm.run("search_personal_memory", arguments(q)), floored=True
    )


def _pgvectorstore_systems(
    suffix: str,
    lc_cached: Any,
    lc_live: Any,
    clocks: tuple[StatementClock, StatementClock],
    conn: psycopg.Connection[Any],
    vectors: dict[str, list[float]],
    k: int,
    filt: Callable[[str], dict[str, Any] | None],
    fresh_hybrid: Callable[[bool], Any],
) -> list[_System]:
    clock, events = clocks

    def timed(search: Callable[[], list[Any]]) -> tuple[dict[str, float], list[Any]]:
        clock.take()
        events.take()
        docs = search()
        return {"server": clock.take(), "server_sqlalchemy_events": events.take()}, docs

    def vector(q: str) -> tuple[dict[str, float], _Found]:
        clocks, docs = timed(lambda: lc_cached.similarity_search_by_vector(vectors[q], k=k, filter=filt(q)))
        ids = [d.id for d in docs]
        return clocks, _Found(
            len(docs), [d.metadata["conv_id"] for d in docs], lambda: _lc_message_ids(conn, ids)
        )

    def hybrid_call(store: Any, q: str) -> Any:
        f = filt(q)
        return store.similarity_search(q, k=k, filter=f, hybrid_search_config=fresh_hybrid(f is not None))

    def hybrid(q: str) -> tuple[dict[str, float], _Found]:
        clocks, docs = timed(lambda: hybrid_call(lc_cached, q))
        return clocks, _Found(len(docs), [d.metadata["conv_id"] for d in docs])

    return [
        _System(
            f"PGVectorStore vector{suffix}",
            vector,
            lambda q: lc_live.similarity_search(q, k=k, filter=filt(q)),
        ),
        _System(f"PGVectorStore hybrid{suffix}", hybrid, lambda q: hybrid_call(lc_live, q)),
    ]


def _langgraph_system(
    store: Any, live: Any, clock: StatementClock, k: int, filt: Callable[[str], dict[str, Any] | None]
) -> _System:
    def server(q: str) -> tuple[dict[str, float], _Found]:
        clock.take()
        items = store.search(NAMESPACE, query=q, limit=k, filter=filt(q))
        srv = clock.take()
        ids = [int(i.key) for i in items]
        return {"server": srv}, _Found(len(items), [i.value["conv_id"] for i in items], lambda: ids)

    return _System(
        "LangGraph PostgresStore", server, lambda q: live.search(NAMESPACE, query=q, limit=k, filter=filt(q))
    )


def _add(acc: dict[str, dict[str, list[Any]]], system: str, **values: Any) -> None:
    slot = acc.setdefault(system, {})
    for key, value in values.items():
        slot.setdefault(key, []).append(value)


def _lc_message_ids(conn: psycopg.Connection[Any], lc_ids: Sequence[str | None]) -> list[int]:
    """PGVectorStore rows carry fresh uuids: map them back to ghostmem message ids by (conv_id, content)."""
    if not lc_ids:
        return []
    rows = conn.execute(
        sql.SQL(
            "SELECT m.id FROM {} l JOIN ghostmem.messages m "
            "ON m.owner = %s AND m.tier = %s AND m.conv_id = l.conv_id AND m.text = l.content AND m.ts = l.ts "
            "WHERE l.langchain_id = ANY(%s::uuid[])"
        ).format(sql.Identifier(PEER_SCHEMA, LC_TABLE)),
        (corpus.OWNER, corpus.TIER, [i for i in lc_ids if i]),
    ).fetchall()
    return [int(r[0]) for r in rows]


def _case_summary(label: str, acc: dict[str, dict[str, list[Any]]], k: int) -> dict[str, Any]:
    systems: dict[str, Any] = {}
    for system, values in acc.items():
        entry: dict[str, Any] = {"server": summarise(values["server"])}
        for clock in [c for c in values if c.startswith("server_")]:
            entry[clock] = summarise(values[clock])
        if "call" in values:
            entry["call"] = summarise(values["call"])
        if "block" in values:
            entry.update(_block_figures(values["block"], len(values["server"])))
        entry["rows_median"] = statistics.median(values["rows"])
        entry["rows_min"] = min(values["rows"])
        entry["short_results"] = sum(1 for r in values["rows"] if r < k)
        for metric in ("msg_recall", "conv_recall"):
            got = [v for v in values.get(metric, []) if v is not None]
            if got:
                entry[metric] = round(statistics.fmean(got), 4)
        systems[system] = entry
    ratios: dict[str, Any] = {}
    base = systems.get("ghostmem hybrid")
    if base:
        for system, entry in systems.items():
            if system == "ghostmem hybrid":
                continue
            r: dict[str, float] = {}
            for span in ("server", "call"):
                if span in entry and span in base:
                    for p in ("p50_ms", "p95_ms"):
                        if base[span].get(p):
                            r[f"{span}_{p[:3]}"] = round(entry[span][p] / base[span][p], 2)
            if entry.get("cpu_ms_per_search") and base.get("cpu_ms_per_search"):
                r["cpu"] = round(entry["cpu_ms_per_search"] / base["cpu_ms_per_search"], 2)
            ratios[system] = r
    return {"case": label, "systems": systems, "ratio_peer_over_ghostmem_hybrid": ratios}


def _block_figures(blocks: list[Block], searches: int) -> dict[str, Any]:
    """The server's CPU and the run-queue waits per search over a system's timed passes, and the steal's share."""
    out: dict[str, Any] = {"cpu_ms_per_search": round(1000 * sum(b.cpu for b in blocks) / searches, 3)}
    for key, waits in (
        ("server_runq_ms_per_search", [b.server_wait for b in blocks]),
        ("bench_runq_ms_per_search", [b.bench_wait for b in blocks]),
    ):
        known = [w for w in waits if w is not None]
        if len(known) == len(blocks):
            out[key] = round(1000 * sum(known) / searches, 3)
    steal = [b.steal for b in blocks if b.steal is not None]
    time_ = [b.machine_time for b in blocks if b.machine_time is not None]
    if len(steal) == len(time_) == len(blocks):
        # passes shorter than /proc/stat's tick (10 ms, a smoke run's) may see no tick at all, and then no steal
        out["steal_share"] = round(sum(steal) / sum(time_), 4) if sum(time_) > 0 else 0.0
    return out


def _print_case(case: dict[str, Any]) -> None:
    print(f"\n== {case['case']}")
    print(f"{'system':26s} {'srv p50':>8s} {'srv p95':>8s} {'call p50':>9s} {'call p95':>9s} {'rows':>5s} "
          f"{'msg R':>6s} {'conv R':>6s} {'cpu':>6s} {'srv rq':>6s} {'cli rq':>6s} {'steal':>6s}")  # fmt: skip
    nan = float("nan")
    for system, e in case["systems"].items():
        call = e.get("call", {})
        print(
            f"{system:26s} {e['server']['p50_ms']:8.2f} {e['server']['p95_ms']:8.2f} "
            f"{call.get('p50_ms', nan):9.2f} {call.get('p95_ms', nan):9.2f} "
            f"{e['rows_median']:5.0f} {e.get('msg_recall', nan):6.3f} {e.get('conv_recall', nan):6.3f} "
            f"{e.get('cpu_ms_per_search', nan):6.2f} {e.get('server_runq_ms_per_search', nan):6.2f} "
            f"{e.get('bench_runq_ms_per_search', nan):6.2f} {e.get('steal_share', nan):6.1%}"
        )
    for system, r in case["ratio_peer_over_ghostmem_hybrid"].items():
        print(f"  {system} / ghostmem hybrid: {r}")


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("langchain-postgres", "langgraph-checkpoint-postgres", "pgvector", "psycopg", "sqlalchemy"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.splitlines()[0])
    add_common_args(p, 100_000)
    p.add_argument("--k", type=int, default=10, help="results per search")
    add_cases_arg(p)
    p.add_argument(
        "--peers",
        default="pgvectorstore,pgvectorstore-iterative,langgraph",
        help="comma-separated: pgvectorstore (at its defaults), pgvectorstore-iterative (its connections set to "
        "pgvector's iterative scan), langgraph",
    )
    p.add_argument("--rebuild-peers", action="store_true", help="copy and index the peers' tables again")
    p.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="timed rounds: in each, every system times every query, one system after another",
    )
    _, out = run_bench(p, argv, "peers", run, lambda args, _: f"peers-{args.messages}.json")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
