"""Import throughput through ghostmem's real import path, against a plain sentence-transformers loop.

    python -m bench.ingest --messages 5000

The corpus of :mod:`bench.corpus` is written as files of the documented generic JSONL format (one conversation per
line, several files), then imported with ``gm.import_paths`` into a fresh database each time:

* **lexical only** — ``embed=False``: parsing, redaction, upserts, the full-text trigger, enrichment;
* **with embeddings** — ``embed=True``: the same plus embedding the conversational messages with MiniLM;
* **baseline** — ``SentenceTransformer.encode`` (batch 64, normalised) over the very texts the import embedded
  (user and assistant messages), in the same process: the floor any importer that embeds on this CPU pays.

Throughput is messages (all roles) per second of wall time; the embedded-text rate is also given.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from ghostmem import GhostMem
from ghostmem.config import DEFAULT_EMBED_MODEL
from ghostmem.embed import Embedder, SentenceTransformerEmbedder, make_embedder

from bench import corpus
from bench.common import RESULTS, server, throwaway_database, write_generic_jsonl
from bench.scale import command_line, provenance, server_settings, write_json

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


def import_run(dsn: str, files: Path, embedder: Embedder, embed: bool) -> dict[str, Any]:
    with GhostMem(dsn=dsn, owner=corpus.OWNER, embedder=embedder) as gm:
        gm.connect()  # migrations and pool outside the timed span
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
        "seconds_embed": round(report.seconds_embed, 2),
        "problems": len(report.problems),
        "conversations_new": report.conversations_new,
    }


def baseline(texts: list[str], embedder: Embedder, messages: int) -> dict[str, Any]:
    """``SentenceTransformer.encode`` over the texts, on the very model object the importer uses."""
    t0 = time.perf_counter()
    if isinstance(embedder, SentenceTransformerEmbedder):
        model = embedder._load()
        model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    else:  # a smoke run with the fake embedder: its own batch call
        embedder.embed_documents(texts)
    wall = time.perf_counter() - t0
    return {
        "texts": len(texts),
        "wall_s": round(wall, 2),
        "embedded_per_s": round(len(texts) / wall, 1) if wall else 0.0,
        "messages_per_s": round(messages / wall, 1) if wall else 0.0,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    embedder = make_embedder(args.model)
    with (
        server(args.dsn) as admin,
        tempfile.TemporaryDirectory(prefix="ghostmem-ingest-files-") as tmp,
    ):
        with psycopg.connect(admin) as conn:
            settings = server_settings(conn)
        files = Path(tmp) / "files"
        written, texts = write_files(files, args.messages, args.seed)
        logger.info("wrote %s messages in %s files", written, len(list(files.iterdir())))
        embedder.embed_documents(texts[:64])  # warm the model: the first call pays one-off costs
        runs = []
        for embed in (False, True):
            with throwaway_database(admin, "ghostmem_bench_ingest") as db:
                result = import_run(db, files, embedder, embed)
            logger.info("import embed=%s: %s", embed, result)
            runs.append(result)
        base = baseline(texts, embedder, written)
        logger.info("baseline encode loop: %s", base)
    lexical, embedded = runs
    return {
        **provenance("ingest", args.command),
        "server": settings,
        "messages": written,
        "embeddable_texts": len(texts),
        "seed": args.seed,
        "format": "generic JSONL (50 conversations per file)",
        "lexical_only": lexical,
        "with_embeddings": embedded,
        "baseline_encode": base,
        "ratio_with_embeddings_over_baseline": round(embedded["messages_per_s"] / base["messages_per_s"], 3)
        if base["messages_per_s"]
        else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ingest", description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=5000)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--dsn", default=None, help="admin DSN of a server to create throwaway databases on")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--model", default=DEFAULT_EMBED_MODEL, help="embedding model ('hash' for a smoke run)")
    args = p.parse_args(argv)
    args.command = command_line("ingest", argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    payload = run(args)
    out: Path = args.json or RESULTS / f"ingest-{payload['messages']}.json"
    write_json(out, payload)
    lex, emb, base = payload["lexical_only"], payload["with_embeddings"], payload["baseline_encode"]
    print(f"\n{payload['messages']:,} messages ({payload['embeddable_texts']:,} embeddable)")
    print(f"  import, lexical only     {lex['messages_per_s']:10.1f} msg/s  ({lex['wall_s']} s)")
    print(f"  import, with embeddings  {emb['messages_per_s']:10.1f} msg/s  ({emb['wall_s']} s)")
    print(f"  baseline encode loop     {base['messages_per_s']:10.1f} msg/s  ({base['wall_s']} s)")
    print(f"  ratio import+embed / baseline: {payload['ratio_with_embeddings_over_baseline']}")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
