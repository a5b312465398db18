"""Paired same-run A/B of two ``search.py`` variants: do they return the same results, and which costs less?

    python -m bench.ab --home COPY --a MAIN/core/ghostmem/search.py --b cur \\
        --cases all --modes hybrid,vector,lexical --passes 3 [--json out.json] [--stop]

``--home`` is a bench store (:mod:`bench.scale`'s corpus, already loaded: run it on a stopped *copy*, as a change
migrates the store it opens), or ``--dsn`` any database holding that corpus. ``--a``/``--b`` are each a path to a
``search.py`` or ``cur``, the installed :mod:`ghostmem.search`; a path is loaded as a sibling module of the
installed ``ghostmem`` package (its relative imports resolve to the installed package), so a branch's venv can run
main's ``search.py`` against its own.

For each case of ``bench.peers`` and each mode, every query is first searched once, untimed, by each variant and
the results compared: the result model as JSON with ``explain`` on, floats equal to 1e-9. ``diff`` lists the
queries whose results differ (0 is the check that a change keeps results). Then ``--passes`` timed passes: A and
B alternate query by query (which one goes first swaps every query and every pass), each variant on one
connection of its own, every search committed as a client's is. Each search is timed three times: its backend's
CPU time (``/proc/<pid>/schedstat``, :mod:`bench.server_cpu`: Linux, and a server on this machine), its statements'
server-side time (as ``bench.peers`` times them) and the whole call (the program run: composing its statements,
running them, building the result; the query embedding precomputed). Ratios are A ÷ B (above 1: B is cheaper): of
the sums of the per-query CPU medians, and the median of the per-query ratios; of the sums of the per-query
server-side and call medians (a change on the client's side shows there, not in the backend's CPU).

Why paired: two runs minutes apart drift by up to 1.5× on a loaded machine, so a change's evidence is A and B
measured in the same run, query by query.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
from ghostmem import GhostMem
from ghostmem import search as installed_search
from ghostmem.config import DEFAULT_EMBED_MODEL
from ghostmem.embed import make_embedder
from ghostmem.ops import get_op
from ghostmem.program import run_sync

from bench import corpus
from bench.peers import Case, add_cases_arg, selected_cases
from bench.scale import (
    PrecomputedEmbedder,
    TimedConnection,
    command_line,
    open_database,
    provenance,
    summarise,
    write_json,
)
from bench.server_cpu import ServerCPU

CURRENT = "cur"  # --a/--b: the installed ghostmem.search
TOLERANCE = 1e-9  # floats closer than this are the same
_FLOAT = re.compile(r"-?\d+\.\d+(?:e-?\d+)?")


def load_variant(path: str, tag: str) -> ModuleType:
    """``cur``: the installed :mod:`ghostmem.search`; else the file at ``path`` as module ``ghostmem._ab_<tag>``."""
    if path == CURRENT:
        return installed_search
    name = f"ghostmem._ab_{tag}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"not a Python module: {path}")
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "ghostmem"
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def same(a: str, b: str) -> bool:
    """Whether two results' JSON texts are equal, their floats to :data:`TOLERANCE`."""
    fa, fb = _FLOAT.findall(a), _FLOAT.findall(b)
    if _FLOAT.sub("F", a) != _FLOAT.sub("F", b) or len(fa) != len(fb):
        return False
    return all(abs(float(x) - float(y)) <= TOLERANCE for x, y in zip(fa, fb, strict=True))


class Side:
    """One variant on a connection of its own: runs a search, timed by its backend's CPU and server-side."""

    def __init__(self, module: ModuleType, gm: GhostMem, conn: psycopg.Connection[Any]) -> None:
        self.module = module
        self.gm = gm
        self.conn = conn
        self.server = ServerCPU.of(conn)
        if self.server is None:
            raise SystemExit(
                "bench.ab reads the backend's CPU time: the server must run on this machine (Linux)"
            )
        self.backend = conn.info.backend_pid
        conn.commit()

    def _cpu(self) -> float:
        assert self.server is not None
        seconds = self.server.process_seconds(self.backend)
        if seconds is None:
            raise RuntimeError(f"backend {self.backend} is gone")
        return seconds

    def search(self, args: dict[str, Any], embedder: PrecomputedEmbedder) -> tuple[float, float, float, str]:
        """Backend CPU seconds, server-side seconds, the call's seconds (the program run whole: composing, its
        statements, building the result; the query embedding precomputed) and the result as JSON of one search."""
        parsed = get_op("search_personal_memory").parse(args)
        timed = TimedConnection(self.conn)
        c0 = self._cpu()
        t0 = time.perf_counter()
        data = run_sync(self.module.search_personal_memory(self.gm.context, parsed), timed, embedder)  # type: ignore[arg-type]
        t1 = time.perf_counter()
        c1 = self._cpu()
        self.conn.commit()
        return c1 - c0, sum(timed.statements), t1 - t0, json.dumps(data.model_dump(mode="json"))


def measure(
    sides: dict[str, Side],
    embedder: PrecomputedEmbedder,
    case: Case,
    mode: str,
    queries: list[str],
    only: list[int],
    passes: int,
) -> dict[str, Any]:
    """One case × mode: the queries whose results differ, then ``passes`` paired timed passes."""

    def args(q: int, explain: bool) -> dict[str, Any]:
        return {
            "query": queries[q],
            "limit": 10,
            "mode": mode,
            **case.ghostmem(q),
            **({"explain": True} if explain else {}),
        }

    diff = [
        q for q in only if not same(sides["A"].search(args(q, True), embedder)[3], sides["B"].search(args(q, True), embedder)[3])
    ]  # fmt: skip
    # per variant, per query: backend CPU, server-side and call seconds of each pass
    spans: dict[str, dict[str, dict[int, list[float]]]] = {
        v: {k: {q: [] for q in only} for k in ("cpu", "wall", "call")} for v in sides
    }
    for n in range(passes):
        for i, q in enumerate(only):
            for v in ("A", "B") if (i + n) % 2 == 0 else ("B", "A"):
                c, w, t, _ = sides[v].search(args(q, False), embedder)
                for k, x in (("cpu", c), ("wall", w), ("call", t)):
                    spans[v][k][q].append(x)
    med = {
        v: {k: {q: statistics.median(xs) for q, xs in by.items()} for k, by in spans[v].items()}
        for v in sides
    }

    def ratio_sum(k: str) -> float | None:
        b = sum(med["B"][k].values())
        return sum(med["A"][k].values()) / b if b > 0 else None

    paired = [med["A"]["cpu"][q] / med["B"]["cpu"][q] for q in only if med["B"]["cpu"][q] > 0]
    every = {v: {k: [x for q in only for x in spans[v][k][q]] for k in spans[v]} for v in sides}
    return {
        "case": case.label,
        "mode": mode,
        "diff": diff,
        "ratio_sum": ratio_sum("cpu"),
        "ratio_paired_median": statistics.median(paired) if paired else None,
        "ratio_wall_sum": ratio_sum("wall"),
        "ratio_call_sum": ratio_sum("call"),
        "cpu": {v: summarise(every[v]["cpu"]) for v in sides},
        "wall": {v: summarise(every[v]["wall"]) for v in sides},
        "call": {v: summarise(every[v]["call"]) for v in sides},
        "per_query_cpu_median_ms": {
            v: {str(q): round(med[v]["cpu"][q] * 1000, 3) for q in only} for v in sides
        },
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    variants = {"A": load_variant(args.a, "a"), "B": load_variant(args.b, "b")}
    embedder = make_embedder(args.model)
    queries = [q["query"] for q in corpus.query_texts(args.seed, args.queries)]
    only = [int(x) for x in args.only.split(",")] if args.only else list(range(len(queries)))
    pre = PrecomputedEmbedder(embedder, {queries[q]: embedder.embed_query(queries[q]) for q in only})
    cases = selected_cases("" if args.cases == "all" else args.cases)
    dsn, server = open_database(args.dsn, args.home)
    rows = []
    try:
        with (
            GhostMem(dsn=dsn, owner=corpus.OWNER, embedder=embedder) as gm,
            gm.connection() as ca,
            gm.connection() as cb,
        ):
            sides = {"A": Side(variants["A"], gm, ca), "B": Side(variants["B"], gm, cb)}
            for case in cases:
                for mode in args.modes.split(","):
                    rows.append(measure(sides, pre, case, mode, queries, only, args.passes))
                    _print_row(rows[-1])
    finally:
        if server is not None and args.stop:
            server.stop()
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[0]
    return {**provenance("ab", args.command), "a": args.a, "b": args.b, "load": load, "cases": rows}


def _print_row(row: dict[str, Any]) -> None:
    def ratio(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    c, w = row["cpu"], row["wall"]
    print(
        f"{row['case']:15s} {row['mode']:7s} diff {len(row['diff']):2d}  A/B sum {ratio(row['ratio_sum'])} "
        f"paired {ratio(row['ratio_paired_median'])}  cpu p50 {c['A']['p50_ms']:.2f}/{c['B']['p50_ms']:.2f} "
        f"p95 {c['A']['p95_ms']:.2f}/{c['B']['p95_ms']:.2f}  wall p50 {w['A']['p50_ms']:.2f}/{w['B']['p50_ms']:.2f} "
        f"p95 {w['A']['p95_ms']:.2f}/{w['B']['p95_ms']:.2f}  wall sum {ratio(row['ratio_wall_sum'])} "
        f"call sum {ratio(row['ratio_call_sum'])}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.splitlines()[0])
    p.add_argument("--home", type=Path, default=None, help="GHOSTMEM_HOME of a bench store (a copy)")
    p.add_argument("--dsn", default=None, help="a database holding the bench corpus instead of --home")
    p.add_argument("--a", required=True, help="a search.py, or 'cur' (the installed one)")
    p.add_argument("--b", default=CURRENT, help="a search.py, or 'cur' (the installed one; the default)")
    add_cases_arg(p)
    p.add_argument("--modes", default="hybrid,vector", help="comma-separated search modes")
    p.add_argument("--passes", type=int, default=4, help="timed passes over each case's queries")
    p.add_argument("--queries", type=int, default=48, help="search queries per case")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--only", default="", help="comma-separated query indexes to run (default: all)")
    p.add_argument("--model", default=DEFAULT_EMBED_MODEL, help="embedding model (the store's)")
    p.add_argument("--json", type=Path, default=None, help="where to write the results")
    p.add_argument("--stop", action="store_true", help="stop the store's server at the end")
    args = p.parse_args(argv)
    if args.home is None and args.dsn is None:
        p.error("--home or --dsn is required")
    args.command = command_line("ab", argv)
    payload = run(args)
    if args.json:
        write_json(args.json, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
