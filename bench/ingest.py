"""Import throughput through ghostmem's real import path, against a plain sentence-transformers loop.

    python -m bench.ingest --messages 20000

The corpus of :mod:`bench.corpus` is written as files of the documented generic JSONL format (one conversation per
line, several files), then imported with ``gm.import_paths`` into a fresh database each time:

* **lexical only** — ``embed=False``: parsing, redaction, upserts, the full-text trigger, enrichment;
* **with embeddings** — ``embed=True``: the same plus embedding the conversational messages with MiniLM through
  ghostmem's engine (:func:`ghostmem.embed.make_embedder`: ONNX Runtime when installed);
* **baseline** — a plain ``SentenceTransformer.encode`` (batch 64, normalised, torch's default threads) over the
  very texts the import embedded (user and assistant messages), in the same process: what an importer that simply
  calls sentence-transformers pays on this CPU.

Throughput is messages (all roles) per second of wall time; the embedded-text rate is also given, and where the
import's time went (storing, loading the model, embedding, enriching), with the machine's mean load average during
each timed phase. The same run
also times one query at a time through both engines (``embed_query``, p50/p95 over ``--queries`` short texts), the
engine's texts/s at 1 and at every core's intra-op threads (on a slice of the texts), and the agreement of the two
engines' vectors (minimum cosine over that slice).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from ghostmem import GhostMem
from ghostmem.config import DEFAULT_EMBED_MODEL, default_home
from ghostmem.embed import (
    HASH_MODEL,
    Embedder,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    available_cores,
    make_embedder,
)

from bench import corpus
from bench.common import server, throwaway_database, write_generic_jsonl
from bench.scale import provenance, run_bench, server_settings

logger = logging.getLogger("bench.ingest")


def write_files(directory: Path, messages: int, seed: int, per_file: int = 50) -> tuple[int, list[str]]:
    """The corpus as generic-format JSONL files; returns (messages written, texts the product embeds)."""
    directory.mkdir(parents=True, exist_ok=True)
    batch: list[dict[str, Any]] = []
    written = 0
    embeddable: list[str] = []
    end = datetime.now(UTC).replace(microsecond=0)
    for conv in corpus.conversations(messages, seed, end):
        batch.append(
            {
                "conv_id": conv.conv_id,
                "title": conv.title,
                "project": conv.project,
                "messages": [
                    {"id": m.native_id, "role": m.role, "text": m.text, "ts": m.ts.isoformat()}
                    for m in conv.messages
                ],
            }
        )
        written += len(conv.messages)
        embeddable += [m.text for m in conv.messages if corpus.embeddable(m.role, m.text)]
        if len(batch) == per_file:
            write_generic_jsonl(batch, directory / f"conversations-{conv.index // per_file:04d}.jsonl")
            batch = []
    if batch:
        write_generic_jsonl(batch, directory / "conversations-last.jsonl")
    return written, embeddable


class LoadAverage:
    """The machine's 1-minute load average, sampled every few seconds while a phase runs: its mean says how busy
    the machine was during that phase (this bench shares the machine with whatever else runs)."""

    def __init__(self, every: float = 5.0) -> None:
        self._every = every
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self._samples.append(os.getloadavg()[0])
            if self._stop.wait(self._every):
                return

    def __enter__(self) -> LoadAverage:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mean(self) -> float:
        return round(statistics.fmean(self._samples), 2) if self._samples else 0.0


def import_run(dsn: str, files: Path, embedder: Embedder, embed: bool) -> dict[str, Any]:
    with GhostMem(dsn=dsn, owner=corpus.OWNER, embedder=embedder) as gm:
        gm.connect()  # migrations and pool outside the timed span
        with LoadAverage() as load:
            t0 = time.perf_counter()
            report = gm.import_paths([files], embed=embed)
            wall = time.perf_counter() - t0
        with gm.connection() as conn:
            row = conn.execute(
                "SELECT count(*), count(embedding) FROM ghostmem.messages WHERE owner = %s", (corpus.OWNER,)
            ).fetchone()
    stored, embedded = (int(row[0]), int(row[1])) if row else (0, 0)
    return {
        "embed": embed,
        "wall_s": round(wall, 2),
        "messages_stored": stored,
        "messages_embedded": embedded,
        "messages_per_s": round(stored / wall, 1) if wall else 0.0,
        "embedded_per_s": round(embedded / wall, 1) if wall and embedded else None,
        "seconds_import": round(report.seconds_import, 2),
        "seconds_model_load": round(report.seconds_model_load, 2),
        "seconds_embed": round(report.seconds_embed, 2),
        "seconds_enrich": round(report.seconds_enrich, 2),
        "load_average_mean": load.mean,
        "problems": len(report.problems),
        "conversations_new": report.conversations_new,
    }


def baseline(texts: list[str], reference: Embedder, messages: int) -> dict[str, Any]:
    """A plain ``SentenceTransformer.encode`` over the texts (the fake embedder's own batch call in a smoke run)."""
    with LoadAverage() as load:
        t0 = time.perf_counter()
        if isinstance(reference, SentenceTransformerEmbedder):
            reference._load().encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
        else:
            reference.embed_documents(texts)
        wall = time.perf_counter() - t0
    return {
        "load_average_mean": load.mean,
        "texts": len(texts),
        "wall_s": round(wall, 2),
        "embedded_per_s": round(len(texts) / wall, 1) if wall else 0.0,
        "messages_per_s": round(messages / wall, 1) if wall else 0.0,
    }


def query_latency(embedder: Embedder, queries: list[str]) -> dict[str, Any]:
    """One ``embed_query`` at a time, as a search embeds its query: p50/p95 in ms."""
    times = []
    for q in queries:
        t0 = time.perf_counter()
        embedder.embed_query(q)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {
        "queries": len(times),
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[min(len(times) - 1, int(0.95 * len(times)))], 2),
    }


def thread_sweep(model: str, texts: list[str]) -> dict[str, float]:
    """The engine's texts/s over ``texts`` with 1 intra-op thread and with one per core (same process)."""
    out: dict[str, float] = {}
    for threads in sorted({1, available_cores()}):
        engine = OnnxEmbedder(model, default_home(), threads=threads)
        engine.embed_documents(texts[:16])  # load outside the timed span
        t0 = time.perf_counter()
        engine.embed_documents(texts)
        out[str(threads)] = round(len(texts) / (time.perf_counter() - t0), 1)
    return out


def agreement(engine: Embedder, reference: Embedder, texts: list[str]) -> float:
    """The smallest cosine between the two engines' vectors of the same texts (1.0 = identical)."""
    ours = np.array(engine.embed_documents(texts))
    theirs = np.array(reference.embed_documents(texts))
    return round(float((ours * theirs).sum(axis=1).min()), 7)


def run(args: argparse.Namespace) -> dict[str, Any]:
    embedder = make_embedder(args.model)
    reference: Embedder = embedder if args.model == HASH_MODEL else SentenceTransformerEmbedder(args.model)
    with (
        server(args.dsn) as admin,
        tempfile.TemporaryDirectory(prefix="ghostmem-ingest-files-") as tmp,
    ):
        with psycopg.connect(admin) as conn:
            settings = server_settings(conn)
        files = Path(tmp) / "files"
        written, texts = write_files(files, args.messages, args.seed)
        logger.info("wrote %s messages in %s files", written, len(list(files.iterdir())))
        # warm both engines: the first call pays one-off costs (loading; the engine's one-time export)
        embedder.embed_documents(texts[:64])
        reference.embed_documents(texts[:64])
        runs = []
        for embed in (False, True):
            with throwaway_database(admin, "ghostmem_bench_ingest") as db:
                result = import_run(db, files, embedder, embed)
            logger.info("import embed=%s: %s", embed, result)
            runs.append(result)
        base = baseline(texts, reference, written)
        logger.info("baseline encode loop: %s", base)
        queries = [" ".join(t.split()[:8]) for t in texts[: args.queries]]
        latency = {
            "engine": query_latency(embedder, queries),
            "sentence_transformers": query_latency(reference, queries),
        }
        logger.info("query embedding: %s", latency)
        sample = texts[: args.sample]
        engine = isinstance(embedder, OnnxEmbedder) and embedder.engine == "onnxruntime"
        sweep = thread_sweep(args.model, sample) if engine else None
        cosine = agreement(embedder, reference, sample) if embedder is not reference else None
        logger.info("threads: %s; min cosine engine vs reference: %s", sweep, cosine)
    lexical, embedded = runs
    return {
        **provenance("ingest", args.command),
        "server": settings,
        "messages": written,
        "embeddable_texts": len(texts),
        "seed": args.seed,
        "format": "generic JSONL (50 conversations per file)",
        "engine": embedder.engine if isinstance(embedder, OnnxEmbedder) else embedder.name,
        "lexical_only": lexical,
        "with_embeddings": embedded,
        "baseline_encode": base,
        "ratio_with_embeddings_over_baseline": round(embedded["messages_per_s"] / base["messages_per_s"], 3)
        if base["messages_per_s"]
        else None,
        "query_embedding": latency,
        "engine_texts_per_s_by_threads": sweep,
        "sample_texts": len(sample),
        "min_cosine_engine_vs_reference": cosine,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ingest", description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=20000)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--dsn", default=None, help="admin DSN of a server to create throwaway databases on")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--model", default=DEFAULT_EMBED_MODEL, help="embedding model ('hash' for a smoke run)")
    p.add_argument("--queries", type=int, default=50, help="query texts timed one at a time per engine")
    p.add_argument("--sample", type=int, default=1000, help="texts for the thread sweep and the cosine check")
    payload, out = run_bench(p, argv, "ingest", run, lambda _, payload: f"ingest-{payload['messages']}.json")
    lex, emb, base = payload["lexical_only"], payload["with_embeddings"], payload["baseline_encode"]
    print(f"\n{payload['messages']:,} messages ({payload['embeddable_texts']:,} embeddable)")
    print(f"  import, lexical only     {lex['messages_per_s']:10.1f} msg/s  ({lex['wall_s']} s)")
    print(f"  import, with embeddings  {emb['messages_per_s']:10.1f} msg/s  ({emb['wall_s']} s)")
    print(f"  baseline encode loop     {base['messages_per_s']:10.1f} msg/s  ({base['wall_s']} s)")
    print(f"  ratio import+embed / baseline: {payload['ratio_with_embeddings_over_baseline']}")
    for engine, q in payload["query_embedding"].items():
        print(f"  query embedding p50 {engine:22} {q['p50_ms']:8.1f} ms (p95 {q['p95_ms']} ms)")
    print(f"  engine texts/s by intra-op threads: {payload['engine_texts_per_s_by_threads']}")
    print(f"  min cosine engine vs reference: {payload['min_cosine_engine_vs_reference']}")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
