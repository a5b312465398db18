"""A small owner beside a large one: is its search as fast as in a database of its own?

    python -m bench.fairness --messages 1000000 --small 10000

The large owner is :mod:`bench.scale`'s corpus in its database (loaded if missing, as ``bench.scale`` /
``bench.peers`` do). A second owner with ``--small`` messages (the same generator, another seed) is added to that
database with every index in place, as a new user's import would be, and loaded alone into a database of its own
(a second embedded server, or ``--own-dsn``). The small owner then runs the same searches in both — every case of ``bench.peers``,
hybrid mode, k = 10 — each database timed server-side as in ``bench.peers`` (every query once untimed, then every
query timed), the two alternating case by case. The figure is the ratio shared ÷ own at p50 and p95 (the goal: at
most 1.5), and whether both returned the same conversations (the same data, so they should).
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
from bench.common import RESULTS
from bench.peers import Case, default_cases
from bench.scale import (
    PrecomputedEmbedder,
    add_common_args,
    bench_database,
    command_line,
    default_home,
    ensure_corpus,
    open_database,
    provenance,
    server_side,
    summarise,
    write_corpus,
    write_json,
)

logger = logging.getLogger("bench.fairness")

SMALL_OWNER = "bench-small"
SMALL_SEED_OFFSET = 1000  # the small owner's corpus seed is the large one's plus this


def ensure_small_owner(dsn: str, messages: int, seed: int, embedder: Any, sample: int) -> bool:
    """Add the small owner's corpus to the database at ``dsn`` unless it holds it already; True if added now."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM ghostmem.messages WHERE owner = %s", (SMALL_OWNER,)
        ).fetchone()
        if row and row[0] == messages:
            return False
        from pgvector.psycopg import register_vector

        register_vector(conn)
        conn.execute("DELETE FROM ghostmem.conversations WHERE owner = %s", (SMALL_OWNER,))
        write_corpus(conn, messages, seed, SMALL_OWNER, embedder=embedder, sample=sample)
        conn.execute("ANALYZE ghostmem.messages")
        conn.execute("ANALYZE ghostmem.conversations")
    return True


def _times(
    gm: GhostMem, case: Case, queries: list[str], pre: PrecomputedEmbedder
) -> tuple[list[float], list[Any]]:
    def arguments(i: int, q: str) -> dict[str, Any]:
        return {"query": q, "limit": 10, "mode": "hybrid", **case.ghostmem(i)}

    for i, q in enumerate(queries):  # every query once untimed: its pages come into the server's cache
        server_side(gm, "search_personal_memory", arguments(i, q), pre)
    times, found = [], []
    for i, q in enumerate(queries):
        t, data = server_side(gm, "search_personal_memory", arguments(i, q), pre)
        times.append(t)
        found.append([h.conv_id for h in data.rows])
    return times, found


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
        with (
            GhostMem(dsn=dsn, owner=SMALL_OWNER, embedder=embedder) as shared,
            GhostMem(dsn=own_dsn, owner=SMALL_OWNER, embedder=embedder) as own,
        ):
            for case in default_cases():
                t_shared, f_shared = _times(shared, case, queries, pre)
                t_own, f_own = _times(own, case, queries, pre)
                s, o = summarise(t_shared), summarise(t_own)
                entry = {
                    "case": case.label,
                    "shared": s,
                    "own": o,
                    "ratio_shared_over_own": {
                        "p50": round(s["p50_ms"] / o["p50_ms"], 2),
                        "p95": round(s["p95_ms"] / o["p95_ms"], 2),
                    },
                    "same_results": sum(1 for a, b in zip(f_shared, f_own, strict=True) if a == b),
                    "rows_median": sorted(len(f) for f in f_shared)[len(f_shared) // 2],
                }
                cases.append(entry)
                logger.info(
                    "%s: shared p50/p95 %.2f/%.2f ms, own %.2f/%.2f ms, ratio %s, same results %d/%d",
                    case.label, s["p50_ms"], s["p95_ms"], o["p50_ms"], o["p95_ms"],
                    entry["ratio_shared_over_own"], entry["same_results"], len(queries),
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
        "load": load_info,
        "small_added_now": {"shared": added_shared, "own": added_own},
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
    args = p.parse_args(argv)
    args.command = command_line("fairness", argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    payload = run(args)
    out: Path = args.json or RESULTS / f"fairness-{args.messages}-{args.small}.json"
    write_json(out, payload)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
