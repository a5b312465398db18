"""Serving many users from one process: one ``GhostMem`` and one toolkit for every owner, under load, through a
database restart.

    python -m bench.serve --owners 1000 --turns 240 --concurrency 8 --pool 10

``--owners`` owners each get a conversation and a ghost memory (untimed). Then a LangGraph ``create_agent`` with a
scripted model (no LLM: its turn costs nothing) answers ``--turns`` questions, ``--concurrency`` at a time, each
for a random owner named in the call's ``config["configurable"]["user_id"]``; every turn makes 4 parallel tool
calls (search, recent, ghost memories, summary) and then answers. The store has one pool of at most ``--pool``
connections (the async one: the agent runs with ``ainvoke``). Three phases run in one process, with no restart of
the application: *before* (server up), *outage* (the embedded server stopped: every call must fail with one
sentence, ``status="error"``, after at most ``pool_timeout``) and *after* (the server started again: every call
must succeed). Reported per phase: tool calls, errors, p50/p95 of one tool call (the tool's own run, from LangChain's
tool-start to tool-end callback); over the run: the peak of the server connections the process held (sampled from
``pg_stat_activity`` every 20 ms; must stay within ``--pool``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from ghostmem import GhostMem
from ghostmem.db import EmbeddedServer
from ghostmem.embed import make_embedder
from ghostmem.records import ConversationRecord, MessageRecord
from ghostmem.store import save_conversation
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from psycopg.conninfo import make_conninfo

from bench.common import RESULTS, real_embedder, throwaway_database
from bench.scale import command_line, provenance, summarise, write_json
from langchain_ghostmem import GhostMemToolkit

logger = logging.getLogger("bench.serve")

APP = "ghostmem-bench-serve"
TOPICS = ["the deploy pipeline", "vault token rotation", "a flaky integration test", "the billing export",
          "Postgres autovacuum", "the React form state", "an S3 lifecycle rule", "the on-call handover"]  # fmt: skip


class FourToolsModel(BaseChatModel):
    """First reply: four parallel tool calls about the owner's topic; once their results are in: an answer."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if any(isinstance(m, ToolMessage) for m in messages):
            return ChatResult(generations=[ChatGeneration(message=AIMessage("done"))])
        question = str(messages[-1].content)
        conv_id = question.split("|")[1]
        calls = [
            ("search_personal_memory", {"query": question.split("|")[0], "limit": 5}),
            ("list_recent_conversations", {"days": 30, "limit": 5}),
            ("search_ghost_memories", {"query": question.split("|")[0], "limit": 3}),
            ("get_conversation_summary", {"conv_id": conv_id}),
        ]
        tool_calls = [
            {"name": name, "args": args, "id": f"c{i}-{uuid.uuid4().hex[:6]}", "type": "tool_call"}
            for i, (name, args) in enumerate(calls)
        ]
        return ChatResult(generations=[ChatGeneration(message=AIMessage("", tool_calls=tool_calls))])


class ToolTimer(BaseCallbackHandler):
    """The duration of every tool run (tool start to tool end, errors included)."""

    def __init__(self) -> None:
        self.started: dict[Any, float] = {}
        self.seconds: list[float] = []
        self._lock = threading.Lock()

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: Any, **kwargs: Any) -> None:
        with self._lock:
            self.started[run_id] = time.perf_counter()

    def on_tool_end(self, output: Any, *, run_id: Any, **kwargs: Any) -> None:
        self._done(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        self._done(run_id)

    def _done(self, run_id: Any) -> None:
        with self._lock:
            start = self.started.pop(run_id, None)
            if start is not None:
                self.seconds.append(time.perf_counter() - start)


@contextmanager
def peak_connections(dsn: str, every: float = 0.02) -> Iterator[list[int]]:
    """The most server connections named ``APP`` seen while the block runs (0 while the server is down)."""
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            try:
                with psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn:
                    while not done.is_set():
                        row = conn.execute(
                            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (APP,)
                        ).fetchone()
                        peak[0] = max(peak[0], int(row[0]) if row else 0)
                        done.wait(every)
            except psycopg.OperationalError:
                done.wait(0.2)  # the server is down (the outage phase)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


def seed(dsn: str, owners: list[str], embedder: Any) -> None:
    now = datetime.now(UTC)
    with GhostMem(dsn=dsn, owner=owners[0], embedder=embedder) as gm:
        with gm.connection() as conn:
            for n, owner in enumerate(owners):
                topic = TOPICS[n % len(TOPICS)]
                record = ConversationRecord(
                    conv_id=f"conv-{n}",
                    platform="langchain",
                    messages=[
                        MessageRecord(native_id="0", role="user", text=f"How do we handle {topic}?", ts=now),
                        MessageRecord(
                            native_id="1",
                            role="assistant",
                            text=f"For {topic}, owner {n} runs step {n % 7} first.",
                            ts=now + timedelta(seconds=1),
                        ),
                    ],
                )
                save_conversation(conn, owner, "personal", record, embedder=embedder)
        for n, owner in enumerate(owners):
            rule = {"content": f"Check {TOPICS[n % len(TOPICS)]} twice before you change it."}
            gm.run("remember", rule, context=dataclasses.replace(gm.context, owner=owner))


async def phase(
    agent: Any, owners: list[str], turns: int, concurrency: int, rng: random.Random
) -> dict[str, Any]:
    """``turns`` agent turns, ``concurrency`` at a time, each for a random owner; tool-call figures."""
    timer = ToolTimer()
    limit = asyncio.Semaphore(concurrency)
    results: list[ToolMessage] = []

    async def one_turn(n: int) -> None:
        index = rng.randrange(len(owners))
        question = f"{TOPICS[index % len(TOPICS)]}|conv-{index}"
        config = {"configurable": {"user_id": owners[index]}, "callbacks": [timer]}
        async with limit:
            state = await agent.ainvoke({"messages": [HumanMessage(question)]}, config=config)
        results.extend(m for m in state["messages"] if isinstance(m, ToolMessage))

    start = time.perf_counter()
    await asyncio.gather(*(one_turn(n) for n in range(turns)))
    wall = time.perf_counter() - start
    errors = [m for m in results if m.status == "error"]
    return {
        "turns": turns,
        "tool_calls": len(results),
        "errors": len(errors),
        "error_sentences": sorted({str(m.content) for m in errors})[:3],
        "errors_one_line": all("\n" not in str(m.content) for m in errors),
        "per_tool_call": summarise(timer.seconds),
        "wall_s": round(wall, 2),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    embedder = real_embedder() if args.model == "minilm" else make_embedder(args.model)
    rng = random.Random(args.seed)
    owners = [f"user-{n:05d}" for n in range(args.owners)]
    home = args.home or Path(tempfile.mkdtemp(prefix="ghostmem-bench-serve-"))
    server = EmbeddedServer(home)
    try:
        admin = server.start().dsn("postgres")
        assert admin is not None
        with throwaway_database(admin, "ghostmem_bench_serve") as dsn:
            started = time.perf_counter()
            seed(dsn, owners, embedder)
            seeded_s = time.perf_counter() - started
            gm = GhostMem(
                dsn=make_conninfo(dsn, application_name=APP),
                owner="nobody",
                embedder=embedder,
                pool_max_size=args.pool,
                pool_timeout=args.pool_timeout,
            )
            toolkit = GhostMemToolkit(gm, ops=[
                "search_personal_memory", "list_recent_conversations", "search_ghost_memories",
                "get_conversation_summary",
            ])  # fmt: skip
            agent = create_agent(FourToolsModel(), tools=toolkit.get_tools())
            phases: dict[str, Any] = {}

            async def serve() -> None:
                with peak_connections(dsn) as peak:
                    phases["before"] = await phase(agent, owners, args.turns, args.concurrency, rng)
                    server.stop()
                    phases["outage"] = await phase(agent, owners, args.outage_turns, args.concurrency, rng)
                    server.start()
                    phases["after"] = await phase(agent, owners, args.turns, args.concurrency, rng)
                phases["peak_connections"] = peak[0]
                await toolkit.aclose()
                gm.close()

            asyncio.run(serve())
    finally:
        server.stop()
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)
    peak_connections_seen = phases.pop("peak_connections")
    return {
        **provenance("serve", command_line("serve", args.argv)),
        "owners": args.owners,
        "concurrency": args.concurrency,
        "tools_per_turn": 4,
        "pool_max_size": args.pool,
        "pool_timeout_s": args.pool_timeout,
        "model": embedder.name,
        "seed_s": round(seeded_s, 1),
        "phases": phases,
        "peak_connections": peak_connections_seen,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.serve", description=__doc__.split("\n")[0])
    p.add_argument("--owners", type=int, default=1000)
    p.add_argument("--turns", type=int, default=240, help="agent turns before and after the outage (each)")
    p.add_argument("--outage-turns", type=int, default=16, help="agent turns while the server is down")
    p.add_argument("--concurrency", type=int, default=8, help="agent turns at a time")
    p.add_argument("--pool", type=int, default=10, help="the store's pool size")
    p.add_argument("--pool-timeout", type=float, default=2.0, help="seconds a call waits for a connection")
    p.add_argument("--model", default="hash", help="embedder: hash (default: not what is measured) or minilm")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--home", type=Path, default=None, help="the embedded server's home (default: a temp dir)")
    args = p.parse_args(argv)
    args.argv = argv
    logging.basicConfig(level=logging.WARNING)
    result = run(args)
    out = args.out or RESULTS / f"serve-{args.owners}.json"
    write_json(out, result)
    for name, figures in result["phases"].items():
        call = figures["per_tool_call"]
        print(
            f"{name:7s} {figures['tool_calls']:5d} tool calls, {figures['errors']} errors, "
            f"p50 {call.get('p50_ms')} ms, p95 {call.get('p95_ms')} ms"
        )
    print(f"peak connections {result['peak_connections']} (pool {args.pool}); wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
