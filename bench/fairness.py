"""A small owner beside a large one: is its search as fast as in a database of its own?

    python -m bench.fairness --messages 1000000 --small 10000

The large owner is :mod:`bench.scale`'s corpus in its database (loaded if missing, as ``bench.scale`` /
``bench.peers`` do). A second owner with ``--small`` messages (the same generator, another seed) is added to that
database with every index in place, as a new user's import would be, and loaded alone into a database of its own
(a second embedded server, or ``--own-dsn``). The small owner then runs the same searches in both — every case of
``bench.peers``, hybrid mode, k = 10 — each search timed server-side as in ``bench.peers``: every query once untimed
in each database, then ``--passes`` timed passes over the queries, each query searched in both databases back to
back (which one first alternates from query to query and pass to pass), so that both sides of the ratio are
measured at the same moments of the machine's load. The figure is the ratio shared ÷ own of the p50 and p95 over
all timed searches (the goal: p95 at most 1.5), the p95 ratio of each pass alone (how much one pass's figure
moves), and whether both returned the same conversations (the same data, so they should). Where both databases
run on this machine, each on a server of its own (the default), each server's CPU time over the timed passes per
search is reported too (``cpu_ms_per_search``, :mod:`bench.server_cpu`; each server does only its own side's
searches then): the work a search costs, which the machine's load stretches far less than latency.

Why passes and pairs: until session 21 each case timed its 48 queries once in the shared database, then once in
the database of its own. A search's time is mostly its query's (the same queries are the slowest in every pass),
so the p95 of 48 searches (the third-slowest) was decided by a couple of heavy queries' single timings, and the
machine's load could change between the two blocks of searches: three runs seconds apart gave 1.22, 1.39 and 1.62
for the same unfiltered case. Three passes of paired searches give 144 timings a side per case.
"""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from ghostmem import GhostMem
from ghostmem.db import prepare
from ghostmem.embed import make_embedder

from bench import corpus
from bench.peers import Case, default_cases
from bench.scale import (
    PrecomputedEmbedder,
    add_common_args,
    bench_database,
    default_home,
    ensure_corpus,
    list_common_words,
    open_database,
    provenance,
    run_bench,
    server_side,
    summarise,
    write_corpus,
)
from bench.server_cpu import ServerCPU

logger = logging.getLogger("bench.fairness")

SMALL_OWNER = "bench-small"
SMALL_SEED_OFFSET = 1000  # the small owner's corpus seed is the large one's plus this
ANALYZED = (  # the tables a corpus writes (message_vectors: the owner's partition with it)
    "messages",
    "conversations",
    "message_vectors",
    "message_bits",
    "message_lengths",
    "message_counts",
    "message_days",
)


def ensure_small_owner(dsn: str, messages: int, seed: int, embedder: Any, sample: int) -> bool:
    """Add the small owner's corpus to the database at ``dsn`` unless it holds it already; True if added now."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM ghostmem.messages WHERE owner = %s", (SMALL_OWNER,)
        ).fetchone()
        if row and row[0] == messages:
            list_common_words(dsn)  # a store loaded at an older schema has no list
            return False
        from pgvector.psycopg import register_vector

        register_vector(conn)
        conn.execute("DELETE FROM ghostmem.conversations WHERE owner = %s", (SMALL_OWNER,))
        write_corpus(conn, messages, seed, SMALL_OWNER, embedder=embedder, sample=sample)
        # Every table the corpus wrote, as autovacuum would have analyzed them in a server that stays up: the own
        # database's server runs only during the bench, so its vector partition and counts were never analyzed.
        conn.execute("ANALYZE " + ", ".join(f"ghostmem.{t}" for t in ANALYZED))
    list_common_words(dsn)
    return True


def _times(
    systems: tuple[GhostMem, GhostMem],
    case: Case,
    queries: list[str],
    pre: PrecomputedEmbedder,
    passes: int,
    cpus: tuple[ServerCPU, ServerCPU] | None,
) -> tuple[list[list[float]], list[list[float]], list[list[Any]], list[float] | None]:
    """Each database's search times by pass (paired: each query in both databases back to back, the first of the
    two alternating), what each returned in the last pass, and each server's CPU seconds over the timed passes."""

    def arguments(i: int, q: str) -> dict[str, Any]:
        return {"query": q, "limit": 10, "mode": "hybrid", **case.ghostmem(i)}

    for gm in systems:  # every query once untimed: its pages come into each server's cache
        for i, q in enumerate(queries):
            server_side(gm, "search_personal_memory", arguments(i, q), pre)
    times: list[list[list[float]]] = [[], []]
    found: list[list[Any]] = [[], []]
    cpu_before = [c.seconds() for c in cpus] if cpus else []
    for p in range(passes):
        for side in (0, 1):
            times[side].append([])
            found[side] = []
        for i, q in enumerate(queries):
            for side in (0, 1) if (i + p) % 2 == 0 else (1, 0):
                t, data = server_side(systems[side], "search_personal_memory", arguments(i, q), pre)
                times[side][p].append(t)
                found[side].append([h.conv_id for h in data.rows])
    cpu = [c.seconds() - b for c, b in zip(cpus, cpu_before, strict=True)] if cpus else None
    return times[0], times[1], found, cpu


def _server_cpus(dsn: str, own_dsn: str) -> tuple[ServerCPU, ServerCPU] | None:
    """Both databases' servers' CPU readers: only when both run here, each on a server of its own (two databases
    of one server share its processes, and their searches' CPU times could not be told apart)."""
    readers = []
    for d in (dsn, own_dsn):
        with psycopg.connect(d, autocommit=True) as conn:
            readers.append(ServerCPU.of(conn))
    shared, own = readers
    if shared is None or own is None or shared.postmaster == own.postmaster:
        return None
    return shared, own


def run(args: argparse.Namespace) -> dict[str, Any]:
    embedder = make_embedder(args.model)
    small_seed = args.seed + SMALL_SEED_OFFSET
    own_home = args.own_home or default_home(args.small).with_name(f"ghostmem-bench-fair-{args.small}")
    with bench_database(args) as (dsn, _, settings):
        load_info, _ = ensure_corpus(dsn, args.messages, args.seed, embedder=embedder, sample=args.sample)
        added_shared = ensure_small_owner(dsn, args.small, small_seed, embedder, args.sample)
        own_dsn, own_server = open_database(args.own_dsn, own_home)
        prepare(own_dsn, embedder.dim, embedder.name)  # migrated; the small owner alone
        added_own = ensure_small_owner(own_dsn, args.small, small_seed, embedder, args.sample)
        queries = [q["query"] for q in corpus.query_texts(args.seed, args.queries)]
        pre = PrecomputedEmbedder(embedder, {q: embedder.embed_query(q) for q in queries})
        cases = []
        cpus = _server_cpus(dsn, own_dsn)
        with (
            GhostMem(dsn=dsn, owner=SMALL_OWNER, embedder=embedder) as shared,
            GhostMem(dsn=own_dsn, owner=SMALL_OWNER, embedder=embedder) as own,
        ):
            for case in default_cases():
                by_pass_shared, by_pass_own, (f_shared, f_own), cpu = _times(
                    (shared, own), case, queries, pre, args.passes, cpus
                )
                t_shared = [t for times in by_pass_shared for t in times]
                t_own = [t for times in by_pass_own for t in times]
                s, o = summarise(t_shared), summarise(t_own)
                entry = {
                    "case": case.label,
                    "shared": s,
                    "own": o,
                    "ratio_shared_over_own": {
                        "p50": round(s["p50_ms"] / o["p50_ms"], 2),
                        "p95": round(s["p95_ms"] / o["p95_ms"], 2),
                    },
                    "p95_ratio_by_pass": [
                        round(summarise(a)["p95_ms"] / summarise(b)["p95_ms"], 2)
                        for a, b in zip(by_pass_shared, by_pass_own, strict=True)
                    ],
                    "same_results": sum(1 for a, b in zip(f_shared, f_own, strict=True) if a == b),
                    "rows_median": sorted(len(f) for f in f_shared)[len(f_shared) // 2],
                }
                if cpu:
                    per_search = [round(1000 * c / len(t_shared), 3) for c in cpu]
                    entry["cpu_ms_per_search"] = dict(zip(("shared", "own"), per_search, strict=True))
                    entry["ratio_shared_over_own"]["cpu"] = round(per_search[0] / per_search[1], 2)
                cases.append(entry)
                logger.info(
                    "%s: shared p50/p95 %.2f/%.2f ms, own %.2f/%.2f ms, ratio %s (p95 by pass %s), same results %d/%d",
                    case.label, s["p50_ms"], s["p95_ms"], o["p50_ms"], o["p95_ms"],
                    entry["ratio_shared_over_own"], entry["p95_ratio_by_pass"], entry["same_results"], len(queries),
                )  # fmt: skip
        if args.stop and own_server is not None:
            own_server.stop()
    return {
        **provenance("fairness", args.command),
        "server": settings,
        "messages": args.messages,
        "small": args.small,
        "seed": args.seed,
        "queries": len(queries),
        "passes": args.passes,
        "load": load_info,
        "small_added_now": {"shared": added_shared, "own": added_own},
        "server_cpu": cpus is not None,
        "when_measured": datetime.now(UTC).isoformat(timespec="seconds"),
        "cases": cases,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.fairness", description=__doc__.splitlines()[0])
    add_common_args(p, 1_000_000)
    p.add_argument("--small", type=int, default=10_000, help="messages of the small owner")
    p.add_argument(
        "--own-home", type=Path, default=None, help="home of the small owner's own embedded server"
    )
    p.add_argument("--own-dsn", default=None, help="the small owner's own database (instead of --own-home)")
    p.add_argument("--passes", type=int, default=3, help="timed passes over the queries (each query in both)")
    _, out = run_bench(
        p, argv, "fairness", run, lambda args, _: f"fairness-{args.messages}-{args.small}.json"
    )
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
