"""Speed at scale: load a generated corpus into ghostmem's own schema and time every read operation.

    python -m bench.scale --messages 100000
    python -m bench.scale --messages 1000000 --json bench/results/scale-1000000.json

The database is a dedicated embedded server under ``--home`` (default ``/tmp/ghostmem-bench-<N>``) or ``--dsn``.
The schema is the product's: the real migrations run first (tables, triggers, indexes). Loading is a bulk load done
the way one restores a dump: the non-constraint indexes the migrations created are dropped, the rows are COPYed
(binary) into ``ghostmem.conversations`` and ``ghostmem.messages`` (the product's triggers fire on every row), and
each index is re-created from its own definition and timed. A loaded database is reused by later runs with the
same size and seed (``--reload`` forces a new load).

Latency of each read operation is measured two ways, on the same arguments:

* **server-side** — the operation's own SQL statements, timed on the connection (Unix socket, so the round trip
  is tens of microseconds): the operation's program is driven by :func:`ghostmem.program.run_sync` over a
  connection wrapper that times each statement; the query embedding is computed outside the timed span;
* **whole tool call** — ``gm.run(name, args)``: argument validation, embedding the query with the real MiniLM
  model, every statement, rendering the text.

Each case's argument sets run once untimed first (their pages come into the server's cache, as they are for a
store in use), then all are timed server-side, then all as whole calls.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from ghostmem import GhostMem, maintenance
from ghostmem.config import DEFAULT_EMBED_MODEL
from ghostmem.db import EmbeddedServer, prepare
from ghostmem.embed import Embedder, make_embedder
from ghostmem.errors import GhostMemError
from ghostmem.ops import get_op
from ghostmem.program import run_sync
from pgvector.psycopg import register_vector
from psycopg import sql

from bench import corpus
from bench.common import RESULTS

logger = logging.getLogger("bench.scale")

BENCH_SCHEMA = "ghostmem_bench"
WARM_UP_CALLS = 3  # whole calls before timing: the model's first calls are slower
MSG_COLUMNS = (
    "owner", "tier", "conv_id", "seq", "native_id", "role", "text", "ts", "platform", "project",
    "content_hash", "embedding",
)  # fmt: skip
MSG_TYPES = (
    "text",
    "text",
    "text",
    "int4",
    "text",
    "text",
    "text",
    "timestamptz",
    "text",
    "text",
    "bytea",
    "vector",
)
CONV_COLUMNS = (
    "owner", "tier", "conv_id", "platform", "title", "project", "started_at", "ended_at", "msg_count",
    "topic", "cluster", "intensity", "first_snippet", "source", "embedding",
)  # fmt: skip
CONV_TYPES = (
    "text", "text", "text", "text", "text", "text", "timestamptz", "timestamptz", "int4", "text", "int4",
    "float4", "text", "text", "vector",
)  # fmt: skip


# -- the database -------------------------------------------------------------------------------------------


def default_home(messages: int) -> Path:
    return Path(os.environ.get("TMPDIR", "/tmp")) / f"ghostmem-bench-{messages}"


PREWARM_WAIT_S = 600.0  # the longest a bench waits for a server's cache to be read back after its start
PREWARM_APPEARS_S = 3.0  # how long after a start the autoprewarm worker may take to appear


def open_database(dsn: str | None, home: Path) -> tuple[str, EmbeddedServer | None]:
    """The DSN to use: ``dsn`` as given, or a dedicated embedded server under ``home`` (started if needed, and warm:
    see :func:`wait_for_prewarm`)."""
    if dsn:
        return dsn, None
    server = EmbeddedServer(home)
    status = server.start()
    found = status.dsn()
    assert found is not None
    wait_for_prewarm(found)
    return found, server


def wait_for_prewarm(dsn: str, timeout_s: float = PREWARM_WAIT_S) -> float:
    """Wait until a server just started has read its cache back; the seconds waited.

    The embedded server loads ``pg_prewarm``, whose autoprewarm worker reads back after a start every page the cache
    held (ghostmem.db.server). For a bench store that is gigabytes: at a million messages about 6 s in which the
    server's I/O workers keep both cores of a small machine busy. A bench timing searches at once would time that
    read beside its first case (bench.fairness's unfiltered case ran entirely inside it, its server CPU per search
    5–7× the searches' own), so every bench server is opened warm. The worker is launched about half a second
    after the start: it is looked for during :data:`PREWARM_APPEARS_S`, then waited for until it has finished.
    """
    start = time.monotonic()
    seen = False
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'autoprewarm worker'"
            ).fetchone()
            running = bool(row and row[0])
            seen = seen or running
            waited = time.monotonic() - start
            if not running and (seen or waited > PREWARM_APPEARS_S):
                if seen:
                    logger.info("the server read its cache back in %.1f s", waited)
                return waited
            if waited > timeout_s:
                raise RuntimeError(f"the server was still reading its cache back after {timeout_s:.0f} s")
            time.sleep(0.2)


def tune_server(dsn: str, maintenance_work_mem: str, workers: int) -> dict[str, str]:
    """Settings for bulk loads and index builds (ALTER SYSTEM on a dedicated server; reported)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            conn.execute(
                sql.SQL("ALTER SYSTEM SET maintenance_work_mem = {}").format(
                    sql.Literal(maintenance_work_mem)
                )
            )
            conn.execute(
                sql.SQL("ALTER SYSTEM SET max_parallel_maintenance_workers = {}").format(sql.Literal(workers))
            )
            conn.execute("SELECT pg_reload_conf()")
        except psycopg.errors.InsufficientPrivilege:
            logger.warning("cannot ALTER SYSTEM on this server: index builds use its own settings")
        return server_settings(conn)


def server_settings(conn: psycopg.Connection[Any]) -> dict[str, str]:
    names = (
        "server_version", "shared_buffers", "work_mem", "maintenance_work_mem", "max_parallel_workers",
        "max_parallel_maintenance_workers", "effective_cache_size", "jit",
    )  # fmt: skip
    out = {n: str(conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(n))).fetchone()[0]) for n in names}  # type: ignore[index]
    row = conn.execute("SELECT extname, extversion FROM pg_extension ORDER BY 1").fetchall()
    out.update({f"ext_{name}": version for name, version in row})
    return out


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor()
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        mem_kb = 0
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        # other work on the machine while the bench ran shows here (1, 5, 15 minutes)
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "os": platform.platform(),
    }


def provenance(bench: str, command: str) -> dict[str, Any]:
    """The head of every results file: which bench, how to reproduce it, when, on what code and machine."""
    return {
        "bench": bench,
        "command": command,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "machine": machine(),
    }


def corpus_loaded(conn: psycopg.Connection[Any], messages: int, seed: int) -> dict[str, Any] | None:
    """The load record of a previous run with the same corpus, if this database holds one."""
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{BENCH_SCHEMA}.loads",)).fetchone()
    if not exists or not exists[0]:
        return None
    row = conn.execute(
        sql.SQL("SELECT info FROM {} WHERE messages = %s AND seed = %s").format(
            sql.Identifier(BENCH_SCHEMA, "loads")
        ),
        (messages, seed),
    ).fetchone()
    return dict(row[0]) if row else None


@dataclass
class LoadStats:
    messages: int = 0
    conversations: int = 0
    embedded_real: int = 0
    embedded_synthetic: int = 0
    generate_s: float = 0.0
    sample_embed_s: float = 0.0
    copy_s: float = 0.0
    index_build_s: dict[str, float] = field(default_factory=dict)
    analyze_s: float = 0.0
    total_s: float = 0.0
    corpus_end: str = ""

    @property
    def copy_rate(self) -> float:
        return self.messages / self.copy_s if self.copy_s else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "conversations": self.conversations,
            "embedded_real": self.embedded_real,
            "embedded_synthetic": self.embedded_synthetic,
            "generate_s": round(self.generate_s, 2),
            "sample_embed_s": round(self.sample_embed_s, 2),
            "copy_s": round(self.copy_s, 2),
            "copy_messages_per_s": round(self.copy_rate),
            "index_build_s": {k: round(v, 2) for k, v in self.index_build_s.items()},
            "index_build_total_s": round(sum(self.index_build_s.values()), 2),
            "analyze_s": round(self.analyze_s, 2),
            "total_s": round(self.total_s, 2),
            "corpus_end": self.corpus_end,
        }


def secondary_indexes(conn: psycopg.Connection[Any]) -> list[tuple[str, str, str]]:
    """(schema, name, definition) of every index on the memory tables (and on the compact vectors, whose HNSW
    graph per owner a bulk load would otherwise grow row by row) that does not back a constraint. An index of the
    partitioned table is printed ``ON ONLY`` it (its partitions' indexes attached one by one): built again without
    ``ONLY``, it is built on every partition."""
    rows = conn.execute(
        """
        SELECT n.nspname, i.relname,
               replace(pg_get_indexdef(x.indexrelid), ' ON ONLY ghostmem.', ' ON ghostmem.')
        FROM pg_index x
        JOIN pg_class i ON i.oid = x.indexrelid
        JOIN pg_class t ON t.oid = x.indrelid
        JOIN pg_namespace n ON n.oid = i.relnamespace
        WHERE n.nspname = 'ghostmem' AND t.relname IN ('messages', 'conversations', 'message_vectors')
          AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)
        ORDER BY i.relname
        """
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def load(
    dsn: str,
    messages: int,
    seed: int,
    *,
    embedder: Embedder,
    sample: int,
    chunk: int = 20_000,
    progress: Callable[[str], None] = logger.info,
) -> LoadStats:
    """Generate the corpus and bulk-load it into a migrated, empty ghostmem schema (see the module doc)."""
    t_start = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("DELETE FROM ghostmem.conversations WHERE owner = %s", (corpus.OWNER,))
        indexes = secondary_indexes(conn)
        for schema, name, _ in indexes:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(schema, name)))
        stats = write_corpus(
            conn,
            messages,
            seed,
            corpus.OWNER,
            embedder=embedder,
            sample=sample,
            chunk=chunk,
            progress=progress,
        )
        for schema, name, definition in indexes:
            progress(f"building index {name}")
            t0 = time.perf_counter()
            conn.execute(definition.encode())  # the definition Postgres itself printed for this index
            stats.index_build_s[name] = time.perf_counter() - t0
            progress(f"built {name} in {stats.index_build_s[name]:.1f}s")
            del schema
        t0 = time.perf_counter()  # the large projects' own graphs, as an import builds them (migration 155)
        graphs = maintenance.build_project_graphs(conn, corpus.OWNER)
        stats.index_build_s["project graphs"] = time.perf_counter() - t0
        progress(f"built {graphs} project graphs in {stats.index_build_s['project graphs']:.1f}s")
        t0 = time.perf_counter()
        conn.execute("ANALYZE ghostmem.conversations")
        conn.execute("ANALYZE ghostmem.messages")
        stats.analyze_s = time.perf_counter() - t0
        stats.total_s = time.perf_counter() - t_start
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(BENCH_SCHEMA)))
        table = sql.Identifier(BENCH_SCHEMA, "loads")
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (messages bigint, seed integer, info jsonb, "
                "PRIMARY KEY (messages, seed))"
            ).format(table)
        )
        conn.execute(sql.SQL("DELETE FROM {}").format(table))
        conn.execute(
            sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(table),
            (messages, seed, psycopg.types.json.Jsonb(stats.to_dict())),
        )
    return stats


def write_corpus(
    conn: psycopg.Connection[Any],
    messages: int,
    seed: int,
    owner: str,
    *,
    embedder: Embedder,
    sample: int,
    chunk: int = 20_000,
    progress: Callable[[str], None] = logger.info,
) -> LoadStats:
    """Generate ``messages`` messages of the corpus for ``seed`` and COPY them in as ``owner``'s (indexes as they
    are: :func:`load` drops and rebuilds them around this; a second owner is added with the indexes in place)."""
    stats = LoadStats()
    end = datetime.now(UTC).replace(microsecond=0)
    stats.corpus_end = end.isoformat()
    vectors = corpus.VectorModel(seed)
    batch: list[corpus.Conversation] = []
    batch_msgs = 0
    sampled = 0
    fitted = False
    t_gen = time.perf_counter()
    for conv in corpus.conversations(messages, seed, end):
        batch.append(conv)
        batch_msgs += len(conv.messages)
        if batch_msgs < chunk:
            continue
        stats.generate_s += time.perf_counter() - t_gen
        sampled, fitted = _write_batch(conn, owner, batch, vectors, embedder, sample, sampled, fitted, stats)
        progress(f"loaded {stats.messages:,}/{messages:,} messages")
        batch, batch_msgs = [], 0
        t_gen = time.perf_counter()
    stats.generate_s += time.perf_counter() - t_gen
    if batch:
        _write_batch(conn, owner, batch, vectors, embedder, sample, sampled, fitted, stats)
    return stats


def _write_batch(
    conn: psycopg.Connection[Any],
    owner: str,
    batch: list[corpus.Conversation],
    vectors: corpus.VectorModel,
    embedder: Embedder,
    sample: int,
    sampled: int,
    fitted: bool,
    stats: LoadStats,
) -> tuple[int, bool]:
    """Embed (real for the sample, synthetic for the rest) and COPY one batch of conversations."""
    flat = [(c, m) for c in batch for m in c.messages]
    vecs: list[np.ndarray[Any, Any] | None] = [None] * len(flat)
    real_idx: list[int] = []
    synth_idx: list[int] = []
    for i, (_, m) in enumerate(flat):
        if not corpus.embeddable(m.role, m.text):
            continue
        if sampled < sample:
            real_idx.append(i)
            sampled += 1
        else:
            synth_idx.append(i)
    if real_idx:
        t0 = time.perf_counter()
        real = np.asarray(embedder.embed_documents([flat[i][1].text for i in real_idx]), dtype=np.float32)
        stats.sample_embed_s += time.perf_counter() - t0
        for i, v in zip(real_idx, real, strict=True):
            vecs[i] = v
            vectors.add_sample((flat[i][1].topic, flat[i][1].lang), v)
        stats.embedded_real += len(real_idx)
    if synth_idx:
        if not fitted:
            vectors.fit()
            fitted = True
        synth = vectors.synthetic([(flat[i][1].topic, flat[i][1].lang) for i in synth_idx])
        for i, v in zip(synth_idx, synth, strict=True):
            vecs[i] = v
        stats.embedded_synthetic += len(synth_idx)
    t0 = time.perf_counter()
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy(
            sql.SQL("COPY ghostmem.conversations ({}) FROM STDIN (FORMAT BINARY)").format(
                sql.SQL(", ").join(map(sql.Identifier, CONV_COLUMNS))
            )
        ) as copy:
            copy.set_types(list(CONV_TYPES))
            pos = 0
            for c in batch:
                own = [v for v in vecs[pos : pos + len(c.messages)] if v is not None]
                pos += len(c.messages)
                first_user = next((m.text for m in c.messages if m.role == "user"), None)
                talk = sum(1 for m in c.messages if m.role in ("user", "assistant"))
                copy.write_row(
                    (
                        owner, corpus.TIER, c.conv_id, c.platform, c.title, c.project, c.started_at,
                        c.ended_at, talk, corpus.TOPIC_NAMES[c.topic], c.topic, round(min(1.0, talk / 60), 3),
                        first_user[:300] if first_user else None, "bench",
                        corpus.unit_mean(np.stack(own)) if own else None,
                    )
                )  # fmt: skip
        with cur.copy(
            sql.SQL("COPY ghostmem.messages ({}) FROM STDIN (FORMAT BINARY)").format(
                sql.SQL(", ").join(map(sql.Identifier, MSG_COLUMNS))
            )
        ) as copy:
            copy.set_types(list(MSG_TYPES))
            for (c, m), v in zip(flat, vecs, strict=True):
                copy.write_row(
                    (
                        owner, corpus.TIER, c.conv_id, m.seq, m.native_id, m.role, m.text, m.ts,
                        c.platform, c.project, corpus.content_hash(m.text), v,
                    )
                )  # fmt: skip
    stats.copy_s += time.perf_counter() - t0
    stats.messages += len(flat)
    stats.conversations += len(batch)
    return sampled, fitted


def ensure_corpus(
    dsn: str,
    messages: int,
    seed: int,
    *,
    embedder: Embedder,
    sample: int,
    reload: bool = False,
    progress: Callable[[str], None] = logger.info,
) -> tuple[dict[str, Any], bool]:
    """Migrate, then load the corpus unless this database already holds it; returns (load record, loaded now)."""
    applied = prepare(dsn, embedder.dim, embedder.name)
    if applied:
        progress(f"applied migrations: {', '.join(applied)}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        previous = None if reload else corpus_loaded(conn, messages, seed)
    if previous is not None:
        progress("reusing the corpus already loaded in this database")
        # the graphs an import builds (migrations 155, 210, 230), as an import after an upgrade would: a migration
        # that adds a kind of them leaves the build to the next import (230: minutes at a million messages)
        t0 = time.perf_counter()
        with psycopg.connect(dsn, autocommit=True) as conn:
            graphs = maintenance.build_project_graphs(conn, corpus.OWNER)
        if graphs:
            progress(f"built {graphs} graphs in {time.perf_counter() - t0:.1f}s")
        list_common_words(dsn, progress)
        return previous, False
    stats = load(dsn, messages, seed, embedder=embedder, sample=sample, progress=progress)
    list_common_words(dsn, progress)
    return stats.to_dict(), True


def list_common_words(dsn: str, progress: Callable[[str], None] = logger.info) -> int:
    """List the known-common words of every owner of the database that is due (migration 220), as an import does
    after it writes: the bench writes its corpora with its own writer, which calls no maintenance, and a store
    loaded or reused at an older schema has no list. Returns how many (owner, tier) were listed."""
    t0 = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        owners = [r[0] for r in conn.execute("SELECT DISTINCT owner FROM ghostmem.message_counts ORDER BY 1")]
        listed = sum(maintenance.refresh_common_words(conn, owner) for owner in owners)
    if listed:
        progress(f"listed the common words of {listed} owner tiers in {time.perf_counter() - t0:.1f}s")
    return listed


# -- measuring ---------------------------------------------------------------------------------------------


class _TimedCursor:
    def __init__(self, cur: psycopg.Cursor[Any], timed: TimedConnection) -> None:
        self._cur = cur
        self._timed = timed
        self._t0 = 0.0

    def __enter__(self) -> _TimedCursor:
        self._cur.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._cur.__exit__(None, None, None)

    def execute(self, query: Any, params: Any = None) -> _TimedCursor:
        t0 = time.perf_counter()
        if isinstance(query, sql.Composable):  # what psycopg's execute would do first, with the same adapters
            query = query.as_bytes(self._cur.connection)
        self._t0 = time.perf_counter()
        self._timed.composing.append(self._t0 - t0)
        self._cur.execute(query, params)
        return self

    def fetchall(self) -> list[Any]:
        rows = self._cur.fetchall()
        self._timed.statements.append(time.perf_counter() - self._t0)
        return rows

    @property
    def description(self) -> Any:
        return self._cur.description


class TimedConnection:
    """Wraps a connection for :func:`run_sync`: records the time of each statement, from the driver's execute of
    its text to the end of its fetch, and apart from it the time psycopg took to compose that text from its parts
    (a peer's statement text is built before its driver is called: bench.peers times both at the driver)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.statements: list[float] = []
        self.composing: list[float] = []

    def cursor(self, **kwargs: Any) -> _TimedCursor:
        return _TimedCursor(self.conn.cursor(**kwargs), self)

    @property
    def adapters(self) -> Any:
        """The wrapped connection's (the driver checks the vector types are registered)."""
        return self.conn.adapters


class PrecomputedEmbedder:
    """Answers the query embedding from a cache, so server-side timing excludes the model."""

    def __init__(self, inner: Embedder, cache: dict[str, list[float]]) -> None:
        self.inner = inner
        self.cache = cache

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        if text not in self.cache:
            self.cache[text] = self.inner.embed_query(text)
        return self.cache[text]


def timed_run(
    gm: GhostMem, name: str, args: dict[str, Any], embedder: Embedder
) -> tuple[TimedConnection, Any]:
    """The operation run on a :class:`TimedConnection` (the query embedding is precomputed): its timings and data."""
    spec = get_op(name)
    parsed = spec.parse(args)
    with gm.connection() as conn:
        timed = TimedConnection(conn)
        data = run_sync(spec.program(gm.context, parsed), timed, embedder)  # type: ignore[arg-type]
    return timed, data


def server_side(gm: GhostMem, name: str, args: dict[str, Any], embedder: Embedder) -> tuple[float, Any]:
    """Seconds spent in the operation's SQL statements (the query embedding is precomputed)."""
    timed, data = timed_run(gm, name, args, embedder)
    return sum(timed.statements), data


def whole_call(gm: GhostMem, name: str, args: dict[str, Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = gm.run(name, args)
    return time.perf_counter() - t0, result


def summarise(samples: Sequence[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 3),
        "p95_ms": round(_percentile(ms, 95), 3),
        "max_ms": round(ms[-1], 3),
        "mean_ms": round(statistics.fmean(ms), 3),
    }


def _percentile(sorted_ms: Sequence[float], pct: float) -> float:
    if len(sorted_ms) == 1:
        return sorted_ms[0]
    pos = (len(sorted_ms) - 1) * pct / 100
    lo = int(pos)
    hi = min(lo + 1, len(sorted_ms) - 1)
    return sorted_ms[lo] + (sorted_ms[hi] - sorted_ms[lo]) * (pos - lo)


def pick_ids(conn: psycopg.Connection[Any], n: int, seed: int) -> list[str]:
    """Conversation ids spread over the corpus (deterministic for a seed)."""
    conn.execute("SELECT setseed(%s)", (((seed % 1000) / 1000.0),))
    return [
        r[0]
        for r in conn.execute(
            "SELECT conv_id FROM ghostmem.conversations WHERE owner = %s ORDER BY random() LIMIT %s",
            (corpus.OWNER, n),
        )
    ]


def cases(queries: list[dict[str, Any]], conv_ids: list[str]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(operation, case label, argument sets): every read operation, with and without filters."""
    qs = [q["query"] for q in queries]
    projects = ["my-webapp", "JSAS2026", "personal/memory/mcp", "rust-indexer", "kube"]
    return [
        ("search_personal_memory", "no filter", [{"query": q} for q in qs]),
        ("search_personal_memory", "days=30", [{"query": q, "days": 30} for q in qs]),
        ("search_personal_memory", "days=7", [{"query": q, "days": 7} for q in qs]),
        ("search_personal_memory", "platform=codex", [{"query": q, "platform": "codex"} for q in qs]),
        (
            "search_personal_memory",
            "project",
            [{"query": q, "project": projects[i % len(projects)]} for i, q in enumerate(qs)],
        ),
        (
            "search_personal_memory",
            "days=90+platform",
            [{"query": q, "days": 90, "platform": "claude_code"} for q in qs],
        ),
        ("get_conversation", "limit=200", [{"conv_id": c} for c in conv_ids]),
        ("get_conversation_summary", "default", [{"conv_id": c} for c in conv_ids]),
        ("list_recent_conversations", "days=2", [{"days": 2}] * 10),
        ("list_recent_conversations", "days=30+platform", [{"days": 30, "platform": "chatgpt"}] * 10),
        ("list_recent_conversations", "days=365+project", [{"days": 365, "project": "my-webapp"}] * 10),
        ("list_project_conversations", "days=14", [{"project": p} for p in projects] * 2),
        ("list_project_conversations", "days=365", [{"project": p, "days": 365} for p in projects] * 2),
    ]


def measure_ops(
    gm: GhostMem,
    queries: list[dict[str, Any]],
    conv_ids: list[str],
    *,
    repeat: int = 1,
    progress: Callable[[str], None] = logger.info,
) -> list[dict[str, Any]]:
    """p50/p95 per (operation, case), server-side and whole call; an unavailable operation is reported as such."""
    cache: dict[str, list[float]] = {}
    pre = PrecomputedEmbedder(gm.embedder, cache)
    out = []
    for name, label, arg_sets in cases(queries, conv_ids):
        row: dict[str, Any] = {"op": name, "case": label}
        try:
            for args in arg_sets:  # every argument set once, untimed: its pages come into the server's cache
                server_side(gm, name, args, pre)
            for args in arg_sets[:WARM_UP_CALLS]:  # and the model's first calls
                whole_call(gm, name, args)
            server, whole, rows = [], [], []
            for _ in range(repeat):
                for args in arg_sets:
                    s, data = server_side(gm, name, args, pre)
                    server.append(s)
                    rows.append(_result_size(data))
                for args in arg_sets:
                    w, _ = whole_call(gm, name, args)
                    whole.append(w)
        except GhostMemError as exc:
            row["error"] = str(exc)
            out.append(row)
            progress(f"{name} [{label}]: {exc}")
            continue
        row["server"] = summarise(server)
        row["whole"] = summarise(whole)
        row["rows_median"] = statistics.median(rows) if rows else 0
        row["rows_min"] = min(rows) if rows else 0
        out.append(row)
        progress(
            f"{name} [{label}]: server p50 {row['server']['p50_ms']} ms p95 {row['server']['p95_ms']} ms; "
            f"whole p50 {row['whole']['p50_ms']} ms p95 {row['whole']['p95_ms']} ms; rows {row['rows_median']}"
        )
    add_ratios(out)
    return out


def add_ratios(ops: list[dict[str, Any]]) -> None:
    """Each case's server p50 over its operation's first (baseline) case, measured in the same run."""
    baseline: dict[str, float] = {}
    for row in ops:
        if "server" not in row:
            continue
        base = baseline.setdefault(row["op"], row["server"]["p50_ms"])
        row["p50_vs_first_case"] = round(row["server"]["p50_ms"] / base, 2) if base else None
        if row["server"]["p50_ms"]:
            row["call_over_server_p50"] = round(row["whole"]["p50_ms"] / row["server"]["p50_ms"], 2)


def _result_size(data: Any) -> int:
    for attr in ("hits", "conversations", "messages", "rows", "items", "results"):
        value = getattr(data, attr, None)
        if isinstance(value, list):
            return len(value)
    return 1


def memory_report(dsn: str, server: EmbeddedServer | None) -> dict[str, Any]:
    """RSS of this process and of the server's processes; sizes of the tables and their indexes."""
    out: dict[str, Any] = {
        "bench_max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    }
    with psycopg.connect(dsn, autocommit=True) as conn:
        out["database_mb"] = _mb(conn, "SELECT pg_database_size(current_database())")
        rels = conn.execute(
            """
            SELECT c.relname, c.relkind, pg_relation_size(c.oid) AS bytes
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'ghostmem' AND c.relkind IN ('r', 'i') ORDER BY bytes DESC
            """
        ).fetchall()
        out["relations_mb"] = {r[0]: round(r[2] / 2**20, 1) for r in rels if r[2] > 0}
        out["messages_total_mb"] = _mb(conn, "SELECT pg_total_relation_size('ghostmem.messages')")
        out["shared_buffers"] = str(conn.execute("SHOW shared_buffers").fetchone()[0])  # type: ignore[index]
    if server is not None:
        pid = server.status().pid
        if pid:
            out["postgres_rss_mb"] = _process_tree_rss_mb(pid)
    return out


def _mb(conn: psycopg.Connection[Any], query: str) -> float:
    row = conn.execute(query.encode()).fetchone()
    return round(int(row[0]) / 2**20, 1) if row else 0.0


def _process_tree_rss_mb(pid: int) -> float:
    """Sum of RSS of the postmaster and its children (shared memory is counted once per process touching it)."""
    try:
        import psutil

        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
        return round(sum(p.memory_info().rss for p in procs) / 2**20, 1)
    except Exception:  # psutil missing or the process went away: report nothing rather than a guess
        return 0.0


def postgres_version(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        return str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]


# -- command line ------------------------------------------------------------------------------------------


def add_common_args(p: argparse.ArgumentParser, default_messages: int) -> None:
    p.add_argument("--messages", type=int, default=default_messages, help="corpus size in messages")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--dsn", default=None, help="any Postgres with pgvector (default: a dedicated embedded server)"
    )
    p.add_argument("--home", type=Path, default=None, help="GHOSTMEM_HOME of the dedicated embedded server")
    p.add_argument("--sample", type=int, default=4000, help="messages embedded with the real model")
    p.add_argument("--queries", type=int, default=48, help="search queries per case")
    p.add_argument("--reload", action="store_true", help="load the corpus again even if it is already there")
    p.add_argument("--stop", action="store_true", help="stop the dedicated server at the end")
    p.add_argument("--maintenance-work-mem", default="3GB")
    p.add_argument("--json", type=Path, default=None, help="where to write the results")
    p.add_argument("--model", default=DEFAULT_EMBED_MODEL, help="embedding model ('hash' for a smoke run)")


@contextmanager
def bench_database(args: argparse.Namespace) -> Iterator[tuple[str, EmbeddedServer | None, dict[str, str]]]:
    home = args.home or default_home(args.messages)
    dsn, server = open_database(args.dsn, home)
    try:
        if server is not None:  # only our own server is reconfigured; a --dsn server keeps its settings
            settings = tune_server(dsn, args.maintenance_work_mem, workers=max(1, (os.cpu_count() or 2) - 1))
        else:
            with psycopg.connect(dsn) as conn:
                settings = server_settings(conn)
        yield dsn, server, settings
    finally:
        if server is not None and args.stop:
            server.stop()


def command_line(script: str, argv: Sequence[str] | None) -> str:
    """The command that reproduces a run (``argv`` as parsed; the process' own arguments when None)."""
    return " ".join(["python", "-m", f"bench.{script}", *(sys.argv[1:] if argv is None else argv)])


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def run_bench(
    p: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    script: str,
    run: Callable[[argparse.Namespace], dict[str, Any]],
    results_name: Callable[[argparse.Namespace, dict[str, Any]], str],
) -> tuple[dict[str, Any], Path]:
    """A bench's command line: parse its arguments (``args.command`` is the command that reproduces the run), run
    it with its progress logged to stderr, and write its results to ``--json`` or ``bench/results/`` under
    ``results_name(args, payload)``. Returns the results and where they went."""
    args = p.parse_args(argv)
    args.command = command_line(script, argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    payload = run(args)
    out: Path = args.json or RESULTS / results_name(args, payload)
    write_json(out, payload)
    return payload, out


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
            cwd=Path(__file__).resolve().parent,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.splitlines()[0])
    add_common_args(p, 100_000)
    p.add_argument("--repeat", type=int, default=1, help="passes over each case's argument sets")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    embedder = make_embedder(args.model)
    with bench_database(args) as (dsn, server, settings):
        load_info, loaded_now = ensure_corpus(
            dsn, args.messages, args.seed, embedder=embedder, sample=args.sample, reload=args.reload
        )
        with GhostMem(dsn=dsn, owner=corpus.OWNER, embedder=embedder) as gm, gm.connection() as conn:
            conv_ids = pick_ids(conn, 40, args.seed)
        with GhostMem(dsn=dsn, owner=corpus.OWNER, embedder=embedder) as gm:
            ops = measure_ops(gm, corpus.query_texts(args.seed, args.queries), conv_ids, repeat=args.repeat)
        payload = {
            **provenance("scale", command_line("scale", argv)),
            "server": settings,
            "messages": args.messages,
            "seed": args.seed,
            "load": load_info,
            "loaded_now": loaded_now,
            "ops": ops,
            "memory": memory_report(dsn, server),
        }
    out = args.json or RESULTS / f"scale-{args.messages}.json"
    write_json(out, payload)
    _print_table(payload)
    print(f"\nwrote {out}")
    return 0


def _print_table(payload: dict[str, Any]) -> None:
    load_info = payload["load"]
    print(
        f"\n{payload['messages']:,} messages / {load_info['conversations']:,} conversations; "
        f"COPY {load_info['copy_messages_per_s']:,} msg/s; index builds {load_info['index_build_total_s']} s"
    )
    for name, secs in load_info["index_build_s"].items():
        print(f"  {name:40s} {secs:8.1f} s")
    print(
        f"\n{'operation':28s} {'case':18s} {'srv p50':>9s} {'srv p95':>9s} {'call p50':>9s} {'call p95':>9s}"
        f" {'vs 1st':>7s} {'call/srv':>8s}"
    )
    for row in payload["ops"]:
        if "error" in row:
            print(f"{row['op']:28s} {row['case']:18s} unavailable: {row['error']}")
            continue
        s, w = row["server"], row["whole"]
        print(
            f"{row['op']:28s} {row['case']:18s} {s['p50_ms']:9.2f} {s['p95_ms']:9.2f} "
            f"{w['p50_ms']:9.2f} {w['p95_ms']:9.2f} {row.get('p50_vs_first_case') or 0:7.2f} "
            f"{row.get('call_over_server_p50') or 0:8.2f}"
        )
    mem = payload["memory"]
    print(f"\nmemory: bench max RSS {mem['bench_max_rss_mb']} MB, database {mem['database_mb']} MB")


if __name__ == "__main__":
    sys.exit(main())
