"""Where a hybrid search's server time goes: its plan statement, and its main statement cut after each part.

    python -m bench.parts --messages 100000
    python -m bench.parts --messages 1000000 --cases project,days=7

On :mod:`bench.scale`'s corpus (loaded if missing), for each case of ``bench.peers`` (no filter, ``days`` 7 and 30,
``platform=codex``, a project), each query's hybrid search (k = 10) is run once to record its statements as
:mod:`ghostmem.search` builds them (the query embedded beforehand). Then, pass after pass, each query's statements
run again on one connection, each time the plan statement (with the ``BEGIN`` psycopg sends first: the search's
first round trip) followed by one *cut* of the main statement:

* ``lexical``: the statement ending after its lexical leg (``SELECT count(*) FROM lex``): the leg alone;
* ``vector``: the same after its vector leg (``vec``): the scan and its ranks alone;
* ``fused``: after the fusion of both legs and the similarity floor (``fused``);
* ``whole``: the statement the search runs, its rows fetched and parsed.

PostgreSQL computes a materialised CTE only when something reads it, so a cut runs only the part it ends with and
what that part reads (a project filter's titled conversations, read by both legs). ``end`` (``whole`` − ``fused``
of the same search) is what comes after the legs: grouping the fused messages into conversations, reading the shown
matches, and sending and parsing the rows. A query without a part (a CJK query has no vector leg) skips that cut.

Each statement is timed as ``bench.peers`` times one — from the driver's ``execute`` of its composed text to the end
of its fetch — with the backend's own CPU time over the same span beside it when the server runs on this machine
(``/proc/<pid>/schedstat``; the machine's load stretches it far less than the wall clock). The cuts of one query
run one after the other, query by query, so a change of load reaches every part alike. Every search's transaction
is committed, as the client's are: psycopg forgets its prepared statements on ``ROLLBACK``, so a harness that rolls
back times the planning of the main statement on every run (about 1.5 ms at 100k messages), which a search on a
pooled connection does not pay (it keeps the generic plan; docs/search.md, "One plan per connection").
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from dataclasses import dataclass
from typing import Any

import psycopg
from ghostmem.args import SearchPersonalMemoryArgs
from ghostmem.context import OpContext
from ghostmem.embed import Embedder, make_embedder
from ghostmem.program import Program, Query, run_sync
from ghostmem.search import search_personal_memory
from psycopg import sql
from psycopg.rows import dict_row

from bench import corpus
from bench.peers import Case, add_cases_arg, selected_cases
from bench.scale import (
    add_common_args,
    bench_database,
    ensure_corpus,
    provenance,
    run_bench,
    summarise,
)
from bench.server_cpu import ServerCPU

logger = logging.getLogger("bench.parts")

# Each cut: the CTE of search.py's statement it ends with.
CUTS = {"lexical": "lex", "vector": "vec", "fused": "fused"}
PARTS = ["plan", *CUTS, "whole"]
_CTE = re.compile(r"^\s*(\w+) AS (?:MATERIALIZED )?\(", re.MULTILINE)


def cut(statement: str, cte: str) -> str | None:
    """``statement`` ending after its CTE ``cte``, counting its rows; None when the statement has no such CTE."""
    starts = [(m.start(), m.group(1)) for m in _CTE.finditer(statement)]
    names = [name for _, name in starts]
    if cte not in names:
        return None
    i = names.index(cte)
    head = statement[: starts[i + 1][0]] if i + 1 < len(starts) else statement
    return head.rstrip().rstrip(",") + f"\nSELECT count(*) FROM {cte}"


@dataclass(frozen=True, slots=True)
class Recorded:
    """One search's two statements, composed, with their parameters."""

    plan: tuple[str, dict[str, Any]]
    main: tuple[str, dict[str, Any]]


def record(
    conn: psycopg.Connection[Any], embedder: Embedder, args: SearchPersonalMemoryArgs
) -> Recorded | None:
    """Run one search, keeping its statements (None when it runs fewer than two: nothing in scope)."""
    steps: list[tuple[str, dict[str, Any]]] = []

    def kept(program: Program[Any]) -> Program[Any]:
        reply: Any = None
        try:
            while True:
                step = program.send(reply)
                if isinstance(step, Query) and isinstance(step.text, sql.Composable):
                    steps.append((step.text.as_string(conn), step.params))
                reply = yield step
        except StopIteration as done:
            return done.value

    run_sync(kept(search_personal_memory(OpContext(owner=corpus.OWNER), args)), conn, embedder)
    conn.commit()
    return Recorded(steps[0], steps[-1]) if len(steps) >= 2 else None


class _Clock:
    """Wall and backend CPU milliseconds of one statement on ``conn`` (CPU None when the server is not local)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        server = ServerCPU.of(conn)
        self.backend = conn.info.backend_pid if server is not None else None
        self.server = server

    def _cpu(self) -> float | None:
        if self.server is None or self.backend is None:
            return None
        return self.server.process_seconds(self.backend)

    def run(self, text: str, params: dict[str, Any]) -> tuple[float, float | None]:
        c0 = self._cpu()
        t0 = time.perf_counter()
        with self.conn.cursor(row_factory=dict_row) as cur:
            cur.execute(text, params)
            cur.fetchall()
        wall = (time.perf_counter() - t0) * 1000
        c1 = self._cpu()
        return wall, None if c0 is None or c1 is None else (c1 - c0) * 1000


def measure_case(
    conn: psycopg.Connection[Any], embedder: Embedder, case: Case, queries: list[str], passes: int
) -> dict[str, Any]:
    """The parts of one case's searches: every query once untimed, then ``passes`` timed passes."""
    searches = []
    for i, query in enumerate(queries):
        args = SearchPersonalMemoryArgs.model_validate({"query": query, "limit": 10, **case.ghostmem(i)})
        found = record(conn, embedder, args)
        if found is not None:
            searches.append(found)
    clock = _Clock(conn)
    wall: dict[str, list[float]] = {part: [] for part in PARTS}
    cpu: dict[str, list[float]] = {part: [] for part in PARTS}
    ends: list[float] = []
    for timed in [False] + [True] * passes:
        for search in searches:
            text, params = search.main
            cuts = {part: cut(text, cte) for part, cte in CUTS.items()}
            cuts["whole"] = text
            took: dict[str, float] = {}
            for part, statement in cuts.items():
                if statement is None:
                    continue
                plan_wall, plan_cpu = clock.run(*search.plan)
                part_wall, part_cpu = clock.run(statement, params)
                conn.commit()
                if timed:
                    took[part] = part_wall
                    for name, w, c in (("plan", plan_wall, plan_cpu), (part, part_wall, part_cpu)):
                        wall[name].append(w / 1000)
                        if c is not None:
                            cpu[name].append(c / 1000)
            if "fused" in took:
                ends.append((took["whole"] - took["fused"]) / 1000)
    return {
        "case": case.label,
        "searches": len(searches),
        "passes": passes,
        "parts": {part: {"wall": summarise(wall[part]), "cpu": summarise(cpu[part])} for part in PARTS},
        "end": summarise(ends),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    embedder = make_embedder(args.model)
    cases = selected_cases(args.cases)
    queries = [q["query"] for q in corpus.query_texts(args.seed, args.queries)]
    with bench_database(args) as (dsn, _server, settings):
        load_info, _ = ensure_corpus(dsn, args.messages, args.seed, embedder=embedder, sample=args.sample)
        with psycopg.connect(dsn) as conn:
            results = []
            for case in cases:
                results.append(measure_case(conn, embedder, case, queries, args.passes))
                _print_case(results[-1])
    return {
        **provenance("parts", args.command),
        "server": settings,
        "messages": args.messages,
        "seed": args.seed,
        "load": load_info,
        "cases": results,
    }


def _print_case(case: dict[str, Any]) -> None:
    print(f"\n{case['case']}  ({case['searches']} searches x {case['passes']} passes)")
    for part in PARTS:
        w, c = case["parts"][part]["wall"], case["parts"][part]["cpu"]
        if not w["n"]:
            continue
        cpu = f" | backend CPU p50 {c['p50_ms']:7.2f} p95 {c['p95_ms']:7.2f}" if c["n"] else ""
        print(f"  {part:8s} wall p50 {w['p50_ms']:7.2f} p95 {w['p95_ms']:7.2f} ms{cpu}")
    if case["end"]["n"]:
        print(
            f"  end      wall p50 {case['end']['p50_ms']:7.2f} p95 {case['end']['p95_ms']:7.2f} ms (whole - fused)"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.parts", description=__doc__.splitlines()[0])
    add_common_args(p, 100_000)
    p.add_argument("--passes", type=int, default=3, help="timed passes over each case's queries")
    add_cases_arg(p)
    _, out = run_bench(p, argv, "parts", run, lambda args, _: f"parts-{args.messages}.json")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
