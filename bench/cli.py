"""Cold command latency: ``ghostmem search`` against ``ghostmem recent``, and the MCP server's first search.

    python -m bench.cli --repeat 9

A throwaway home first meets a new user's first command, ``ghostmem search "<query>"`` on an empty store (it
starts the embedded server; with nothing stored it embeds nothing, so it does not prepare the model), then gets the
sample exports shipped with ghostmem (``ghostmem import``, the real model; on a fresh home this command prepares the
embedding engine, and its time is reported as such). Then every command is a **new process**, timed from its start
to its exit, as a person at a shell meets it:

* ``ghostmem search "<query>"`` — parses, embeds the query, searches, prints;
* ``ghostmem recent --days 36500`` — the same server and store, no embedding: the floor of a command;
* ``python -c pass`` — the interpreter alone.

Search and recent alternate (search, recent, search, …) so that the machine's load falls on both alike; the ratio is
of their medians in the same run. One more search runs with ``-X importtime`` to list the heavy modules it imported.

**MCP first search**: ``ghostmem mcp --read-only`` over stdio, started fresh each time: from process start to the
first ``search_personal_memory`` answer, and that call alone (the model loads on it), then a second call.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ghostmem.cli import sample_exports
from ghostmem.config import DEFAULT_EMBED_MODEL
from ghostmem.db import EmbeddedServer

from bench.scale import provenance, run_bench

logger = logging.getLogger("bench.cli")

QUERY = "server does not start"
# Modules the search path has no use for; their import alone costs seconds.
HEAVY = ("torch", "transformers", "sentence_transformers", "sklearn", "scipy", "pandas", "matplotlib")


def _ghostmem(*args: str) -> list[str]:
    return [sys.executable, "-m", "ghostmem.cli", *args]


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Seconds from process start to exit; a failing command stops the bench."""
    t0 = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=600)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr.strip()[-500:]}")
    return wall


def heavy_imports(env: dict[str, str]) -> dict[str, Any]:
    """The heavy modules a cold ``ghostmem search`` imports, and its slowest imports, from ``-X importtime``."""
    argv = [sys.executable, "-X", "importtime", "-m", "ghostmem.cli", "search", QUERY]
    res = subprocess.run(argv, capture_output=True, text=True, env=env, check=True, timeout=600)
    cumulative: dict[str, int] = {}
    for line in res.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cum, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
        if cum.isdigit():
            cumulative[name] = int(cum)
    top = [name for name in cumulative if "." not in name]
    top.sort(key=lambda n: -cumulative[n])
    return {
        "heavy_modules": [m for m in HEAVY if m in cumulative],
        "slowest_top_level_imports_ms": {n: round(cumulative[n] / 1000, 1) for n in top[:8]},
    }


def summary(times: list[float]) -> dict[str, Any]:
    return {
        "runs": len(times),
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "max_s": round(max(times), 3),
    }


async def mcp_first_search(env: dict[str, str]) -> dict[str, float]:
    """One fresh ``ghostmem mcp`` over stdio: start → first answer, the first call alone, a second call."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=_ghostmem("mcp", "--read-only")[1:], env=env)
    t0 = time.perf_counter()
    async with Client(params, read_timeout_seconds=600) as client:
        t_ready = time.perf_counter()
        first = await client.call_tool("search_personal_memory", {"query": QUERY, "limit": 3})
        t_first = time.perf_counter()
        second = await client.call_tool("search_personal_memory", {"query": "budget spreadsheet", "limit": 3})
        t_second = time.perf_counter()
    if first.is_error or second.is_error:
        raise RuntimeError(f"MCP search failed: {first.content} {second.content}")
    return {
        "start_to_ready_s": t_ready - t0,
        "start_to_first_answer_s": t_first - t0,
        "first_call_s": t_first - t_ready,
        "second_call_s": t_second - t_first,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="ghostmem-bench-cli-"))  # mkdtemp: the server's system user may enter
    env = {**os.environ, "GHOSTMEM_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    for name in ("GHOSTMEM_DSN", "GHOSTMEM_OWNER"):
        env.pop(name, None)
    env["GHOSTMEM_EMBED_MODEL"] = args.model
    if args.models:  # an already prepared model cache: the import below then measures no export
        shutil.copytree(args.models, home / "models")
    try:
        first = timed(_ghostmem("search", QUERY), env)
        logger.info("first search on the fresh home (server start, empty store): %.1f s", first)
        setup = timed(_ghostmem("import", "--no-progress", str(sample_exports())), env)
        logger.info("import of the sample exports (fresh home, first embedding use): %.1f s", setup)
        timed(_ghostmem("search", QUERY), env)  # untimed warm-up: the OS file cache, the server's pages
        search, recent, python = [], [], []
        for i in range(args.repeat):
            search.append(timed(_ghostmem("search", QUERY), env))
            recent.append(timed(_ghostmem("recent", "--days", "36500"), env))
            python.append(timed([sys.executable, "-c", "pass"], env))
            logger.info("round %d: search %.2f s, recent %.2f s", i + 1, search[-1], recent[-1])
        imports = heavy_imports(env)
        logger.info("heavy modules imported by search: %s", imports["heavy_modules"])
        mcp_runs = [asyncio.run(mcp_first_search(env)) for _ in range(args.mcp_repeat)]
        logger.info("MCP: %s", mcp_runs)
    finally:
        EmbeddedServer(home).stop()
        shutil.rmtree(home, ignore_errors=True)
    pair_ratios = [s / r for s, r in zip(search, recent, strict=True)]
    mcp = {k: round(statistics.median(r[k] for r in mcp_runs), 3) for k in mcp_runs[0]}
    return {
        **provenance("cli", args.command),
        "model": args.model,
        "query": QUERY,
        "store": "the sample exports shipped with ghostmem (ghostmem import)",
        "first_search_new_home_s": round(first, 2),
        "setup_import_s": round(setup, 2),
        "setup_prepared_model": bool(args.models),
        "search": summary(search),
        "recent": summary(recent),
        "python_pass": summary(python),
        "ratio_search_over_recent": round(statistics.median(search) / statistics.median(recent), 2),
        "ratio_search_over_recent_pairs_median": round(statistics.median(pair_ratios), 2),
        **imports,
        "mcp": {"runs": len(mcp_runs), **{f"{k.removesuffix('_s')}_median_s": v for k, v in mcp.items()}},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cli", description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=9, help="cold runs of each command")
    p.add_argument("--mcp-repeat", type=int, default=3, help="fresh MCP servers, one first search each")
    p.add_argument(
        "--models",
        type=Path,
        default=None,
        help="copy this prepared model cache (GHOSTMEM_HOME/models) into the throwaway home",
    )
    p.add_argument("--model", default=DEFAULT_EMBED_MODEL, help="embedding model ('hash' for a smoke run)")
    p.add_argument("--json", type=Path, default=None)
    payload, out = run_bench(p, argv, "cli", run, lambda *_: "cli.json")
    s, r, py, mcp = payload["search"], payload["recent"], payload["python_pass"], payload["mcp"]
    print(f"\ncold commands, {s['runs']} runs each (median, min–max)")
    print(f"  ghostmem search   {s['median_s']:6.2f} s  ({s['min_s']}–{s['max_s']})")
    print(f"  ghostmem recent   {r['median_s']:6.2f} s  ({r['min_s']}–{r['max_s']})")
    print(f"  python -c pass    {py['median_s']:6.2f} s")
    print(
        f"  search / recent: {payload['ratio_search_over_recent']} (pairs: {payload['ratio_search_over_recent_pairs_median']})"
    )
    print(f"  heavy modules imported by search: {payload['heavy_modules'] or 'none'}")
    print(
        f"  MCP: start → first search answer {mcp['start_to_first_answer_median_s']} s, "
        f"first call {mcp['first_call_median_s']} s, second call {mcp['second_call_median_s']} s"
    )
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
