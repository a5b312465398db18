"""GhostMemStore next to LangGraph's PostgresStore: put and search on the same server, the same data, in one run.

    python -m bench.store --items 2000 --queries 100

Both stores live in one throwaway database of one server and embed with the same model (MiniLM by default,
``--model hash`` for a smoke run): ``PostgresStore`` (langgraph-checkpoint-postgres) with
``index={"dims", "embed", "fields": ["content"]}`` and its default HNSW index, ``GhostMemStore`` with
``fields=["content"]``. Items are short memories spread over ``--users`` namespaces ``(user, "memories")``, as
LangMem writes them. Every put and every search is timed as a whole call (embedding included); the two systems
alternate call by call (which goes first alternates too), so background load on this shared machine falls on both.
A first pass of searches is untimed. Ratios are PostgresStore / GhostMemStore (above 1 = ghostmem faster).
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ghostmem import GhostMem
from ghostmem.embed import Embedder, make_embedder
from langgraph.store.base import BaseStore

from bench.common import RESULTS, real_embedder, server, throwaway_database
from bench.scale import command_line, provenance, summarise, write_json

logger = logging.getLogger("bench.store")

SUBJECTS = [
    "dark mode in the editor", "window seats on long train rides", "a shellfish allergy", "deploys on Tuesdays",
    "the staging database password rotation", "spicy ramen for lunch", "the quarterly budget review",
    "running the migrations before the tests", "metric units in reports", "meetings after ten in the morning",
    "Python type hints everywhere", "short answers without preamble", "the vault agent restart",
    "the nightly export timeout", "a cat named Miso", "climbing on weekends", "Postgres over MySQL",
    "bullet points in summaries", "the Berlin office", "flights with one stop at most",
]  # fmt: skip
VERBS = ["prefers", "asked about", "keeps forgetting", "decided on", "complained about", "wants reminders of"]


def memories(n: int, users: int, seed: int) -> list[tuple[tuple[str, str], str, str]]:
    """(namespace, key, text) of ``n`` memories over ``users`` namespaces, reproducible from ``seed``."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        subject, other = rng.sample(SUBJECTS, 2)
        text = f"The user {rng.choice(VERBS)} {subject}, and mentioned {other} (note {i})."
        out.append(((f"user-{i % users}", "memories"), f"m{i}", text))
    return out


def queries(n: int, users: int, seed: int) -> list[tuple[tuple[str, str], str]]:
    rng = random.Random(seed + 1)
    return [
        ((f"user-{rng.randrange(users)}", "memories"), f"what about {rng.choice(SUBJECTS)}?")
        for _ in range(n)
    ]


def _embed_fn(embedder: Embedder) -> Callable[[Sequence[str]], list[list[float]]]:
    def embed(texts: Sequence[str]) -> list[list[float]]:
        return embedder.embed_documents(list(texts))

    return embed


def run(args: argparse.Namespace) -> dict[str, Any]:
    from langgraph.store.postgres import PostgresStore

    from langchain_ghostmem import GhostMemStore

    embedder = real_embedder() if args.model == "minilm" else make_embedder(args.model)
    data = memories(args.items, args.users, args.seed)
    asked = queries(args.queries, args.users, args.seed)
    index: Any = {"dims": embedder.dim, "embed": _embed_fn(embedder), "fields": ["content"]}
    with server(args.dsn) as admin, throwaway_database(admin, "ghostmem_bench_store") as dsn:  # noqa: SIM117
        with (
            GhostMem(dsn=dsn, owner="bench", embedder=embedder) as gm,
            PostgresStore.from_conn_string(dsn, index=index) as lg,
        ):
            lg.setup()
            ours = GhostMemStore(gm, fields=["content"])
            systems: dict[str, BaseStore] = {"ghostmem": ours, "langgraph": lg}
            put: dict[str, list[float]] = {name: [] for name in systems}
            for n, (ns, key, text) in enumerate(data):
                for name in _order(systems, n):
                    start = time.perf_counter()
                    systems[name].put(ns, key, {"content": text})
                    put[name].append(time.perf_counter() - start)
            for ns, q in asked:  # untimed: pages into the cache, the model warm
                for store in systems.values():
                    store.search(ns, query=q, limit=10)
            search: dict[str, list[float]] = {name: [] for name in systems}
            overlap: list[float] = []
            for n, (ns, q) in enumerate(asked):
                found: dict[str, list[str]] = {}
                for name in _order(systems, n):
                    start = time.perf_counter()
                    found[name] = [i.key for i in systems[name].search(ns, query=q, limit=10)]
                    search[name].append(time.perf_counter() - start)
                overlap.append(
                    len(set(found["ghostmem"]) & set(found["langgraph"])) / max(1, len(found["langgraph"]))
                )
    result: dict[str, Any] = {
        **provenance("store", command_line("store", args.argv)),
        "items": args.items,
        "users": args.users,
        "queries": args.queries,
        "model": embedder.name,
        "put": {name: summarise(put[name]) for name in put},
        "search": {name: summarise(search[name]) for name in search},
        "top10_overlap": round(sum(overlap) / max(1, len(overlap)), 3),
    }
    result["ratio"] = {
        f"{op}_{stat}": round(result[op]["langgraph"][f"{stat}_ms"] / result[op]["ghostmem"][f"{stat}_ms"], 2)
        for op in ("put", "search")
        for stat in ("p50", "p95")
    }
    return result


def _order(systems: dict[str, BaseStore], n: int) -> list[str]:
    names = list(systems)
    return names if n % 2 == 0 else names[::-1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.store", description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=2000)
    p.add_argument("--users", type=int, default=20)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--model", default="minilm", help="minilm (the real model, default) or hash (smoke runs)")
    p.add_argument("--dsn", help="a server to create the throwaway database on (default: an embedded one)")
    p.add_argument(
        "--json", type=Path, help="where to write the results (default bench/results/store-N.json)"
    )
    args = p.parse_args(argv)
    args.argv = argv
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    result = run(args)
    out = args.json or RESULTS / f"store-{args.items}.json"
    write_json(out, result)
    for op in ("put", "search"):
        g, lg = result[op]["ghostmem"], result[op]["langgraph"]
        print(
            f"{op:6} p50/p95 ms  GhostMemStore {g['p50_ms']:.1f}/{g['p95_ms']:.1f}"
            f"  PostgresStore {lg['p50_ms']:.1f}/{lg['p95_ms']:.1f}"
            f"  ratio {result['ratio'][f'{op}_p50']}/{result['ratio'][f'{op}_p95']}"
        )
    print(f"top-10 overlap with PostgresStore: {result['top10_overlap']}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
