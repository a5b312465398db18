"""Live capture: what one 2-message turn costs when the conversation already holds ``--messages`` messages.

    python -m bench.capture --messages 1000 --turns 40

Three conversations of ``--messages`` messages are captured first (untimed). Then each timed turn appends a new
user message and a new assistant reply (distinct texts, so the embedding cache never answers) to each of them, in
an order that alternates turn by turn, with the real MiniLM model (``--model hash`` for a smoke run):

* **append**: ``capture.append_messages`` — what a chat history or chat store does on ``add_messages``;
* **sync**: ``capture.sync_messages`` with the whole thread and its message ids — what
  ``GhostMemCaptureMiddleware`` does after a model call;
* **rewrite (baseline)**: ``capture.save_messages`` with the whole conversation plus the turn — what every append
  did before appends were incremental (load everything, write everything).

Each figure is the whole call in its own transaction (lock, write, embed the two texts, refresh the counts,
commit). Ratios are baseline / new (above 1 = the new path is cheaper).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

from ghostmem import GhostMem
from ghostmem.capture import append_messages, load_messages, save_messages, sync_messages
from ghostmem.embed import make_embedder
from ghostmem.records import MessageRecord

from bench.common import RESULTS, real_embedder, server, throwaway_database
from bench.scale import command_line, provenance, summarise, write_json

logger = logging.getLogger("bench.capture")

TOPICS = ["the deploy pipeline", "vault token rotation", "a flaky integration test", "the billing export",
          "Postgres autovacuum", "the React form state", "an S3 lifecycle rule", "the on-call handover"]  # fmt: skip


def turn(n: int) -> list[MessageRecord]:
    topic = TOPICS[n % len(TOPICS)]
    return [
        MessageRecord(
            native_id="", role="user", text=f"Question {n}: what changed in {topic} since step {n - 1}?"
        ),
        MessageRecord(
            native_id="",
            role="assistant",
            text=f"Answer {n}: {topic} now runs stage {n % 7} before stage {n % 5}, see note {n * 13 % 97}.",
        ),
    ]


def run(args: argparse.Namespace) -> dict[str, Any]:
    embedder = real_embedder() if args.model == "minilm" else make_embedder(args.model)
    history = [m for n in range(args.messages // 2) for m in turn(n)]
    with (
        server(args.dsn) as admin,
        throwaway_database(admin, "ghostmem_bench_capture") as dsn,
        GhostMem(dsn=dsn, owner="bench", embedder=embedder) as gm,
    ):
        ids = [f"m{n}" for n in range(len(history))]
        with gm.connection() as conn:
            for conv in ("append", "rewrite"):
                save_messages(conn, "bench", conv, "langchain", history, embedder=embedder)
            sync_messages(conn, "bench", "sync", "langgraph", history, ids, embedder=embedder)
        thread = list(history)
        timed: dict[str, list[float]] = {"append": [], "sync": [], "rewrite": []}
        for t in range(args.turns):
            new = turn(args.messages // 2 + t)
            thread_ids = [*ids, f"m{len(ids)}", f"m{len(ids) + 1}"]
            calls = {
                "append": lambda conn, new=new: append_messages(
                    conn, "bench", "append", "langchain", new, embedder=embedder
                ),
                "sync": lambda conn, new=new, thread_ids=thread_ids: sync_messages(
                    conn, "bench", "sync", "langgraph", [*thread, *new], thread_ids, embedder=embedder
                ),
                "rewrite": lambda conn, new=new: save_messages(
                    conn, "bench", "rewrite", "langchain", [*load_messages(conn, "bench", "rewrite"), *new],
                    embedder=embedder,
                ),
            }  # fmt: skip
            for name in list(calls) if t % 2 == 0 else list(calls)[::-1]:
                start = time.perf_counter()
                with gm.connection() as conn:
                    calls[name](conn)
                timed[name].append(time.perf_counter() - start)
            thread.extend(new)
            ids = thread_ids
        with gm.connection() as conn:
            sizes = {c: len(load_messages(conn, "bench", c)) for c in timed}
    result: dict[str, Any] = {
        **provenance("capture", command_line("capture", args.argv)),
        "messages": args.messages,
        "turns": args.turns,
        "model": embedder.name,
        "final_sizes": sizes,
        "per_turn": {name: summarise(samples) for name, samples in timed.items()},
    }
    base = result["per_turn"]["rewrite"]
    result["ratio"] = {
        f"{name}_{stat}": round(base[f"{stat}_ms"] / result["per_turn"][name][f"{stat}_ms"], 2)
        for name in ("append", "sync")
        for stat in ("p50", "p95")
    }
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.capture", description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=1000)
    p.add_argument("--turns", type=int, default=40)
    p.add_argument("--model", default="minilm", help="minilm (the real model, default) or hash (smoke runs)")
    p.add_argument("--dsn", help="a server to create the throwaway database on (default: an embedded one)")
    p.add_argument(
        "--json", type=Path, help="where to write the results (default bench/results/capture-N.json)"
    )
    args = p.parse_args(argv)
    args.argv = argv
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    result = run(args)
    out = args.json or RESULTS / f"capture-{args.messages}.json"
    write_json(out, result)
    for name, s in result["per_turn"].items():
        print(
            f"{name:8} per 2-message turn at {args.messages} messages: p50 {s['p50_ms']:.1f} ms, p95 {s['p95_ms']:.1f} ms"
        )
    print(f"ratios (rewrite / new): {result['ratio']}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
