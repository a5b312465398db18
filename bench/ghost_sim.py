"""A year of ghost-memory use, replayed against the real database functions, for the literal and default formula.

500 memories on 25 topics, each with a hidden quality (good / mediocre / bad). Every simulated day the agent opens
3 empty-query overviews (top 10), runs 8 searches on topics drawn by popularity (top 5), and gives feedback on the
on-topic results it used: good rules are endorsed (now and then they prevent an incident), bad ones corrected or
caught predicting wrongly. Two scripted events measure the flaws:

* day 180: a new rule proves wrong and is corrected 10 times; nothing touches it afterwards; its overview rank,
  score and correction term are read on day 181 and 90 idle days after the corrections (day 270);
* day 200: two new rules appear; every day the agent looks each up and endorses it, and one of them also prevents
  an incident every third day; we count the days until each enters the overview's top 10.

Topic popularity (a Zipf law) is reshuffled every 90 days: the work moves on, and a ranking that learns should
follow it.

Each formula runs on its own owner in one throwaway database, through ``agent.search_ghost_ranked_at`` /
``agent.give_feedback_at`` / ``agent.remember_at`` (the implementations behind the API functions, with the clock
as an argument so a year takes minutes) and ``agent.rank_ghosts_at`` to read ranks without bumping. Embeddings
come from the deterministic HashEmbedder: the simulation measures the ranking's dynamics, not embedding quality.

    python -m bench.ghost_sim [--dsn ADMIN_DSN] [--days 365] [--seed 1]

Prints a table, writes ``bench/results/ghost_sim.json`` and ``bench/results/ghost_sim.md``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from ghostmem.db import prepare
from ghostmem.embed import HashEmbedder

from bench.common import RESULTS, server, throwaway_database

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TOPICS = 25
PER_TOPIC = 20
OVERVIEWS_PER_DAY = 3
SEARCHES_PER_DAY = 8
CORRECTED_DAY = 180
IDLE_DAYS = 90
NEW_RULE_DAY = 200
FOCUS_DAYS = 90
CORRECTED_RULE = "rule new: retry a failed payment immediately"
NEW_RULES = {
    "endorsed daily": "rule new: always pin the toolchain version in ci",
    "endorsed, preventing an incident every 3rd day": "rule new: never rotate the signing key during a release",
}
WORDS = [
    "deploy",
    "migrate",
    "cache",
    "index",
    "backup",
    "secret",
    "token",
    "review",
    "branch",
    "release",
    "schema",
    "queue",
    "retry",
    "timeout",
    "logging",
    "metrics",
    "alert",
    "docker",
    "kubernetes",
    "terraform",
    "lint",
    "format",
    "typing",
    "fixture",
    "mock",
    "benchmark",
    "profile",
    "encoding",
    "locale",
    "upload",
    "download",
    "payment",
    "invoice",
    "tenant",
    "billing",
    "replica",
    "vacuum",
]
# feedback probabilities on an on-topic result, by hidden quality
FEEDBACK = {
    "good": {"endorse": 0.15, "incident_prevented": 0.03},
    "mediocre": {"endorse": 0.04, "correct": 0.04},
    "bad": {"correct": 0.25, "prediction_error": 0.10},
}


@dataclass
class Memory:
    memory_id: int
    topic: int
    quality: str


@dataclass
class Run:
    formula: str
    owner: str
    memories: dict[int, Memory] = field(default_factory=dict)
    overview_tops: list[list[int]] = field(default_factory=list)
    on_topic: list[float] = field(default_factory=list)
    corrected_rank: dict[str, int] = field(default_factory=dict)
    corrected_score: dict[str, float] = field(default_factory=dict)
    corrected_penalty: dict[str, float] = field(default_factory=dict)
    new_rule_days: dict[str, int | None] = field(default_factory=dict)


class Sim:
    def __init__(self, conn: psycopg.Connection[Any], seed: int) -> None:
        self.conn = conn
        self.seed = seed
        self.embedder = HashEmbedder()

    def vec(self, text: str) -> str:
        return "[" + ",".join(repr(x) for x in self.embedder.embed_query(text)) + "]"

    def remember(self, run: Run, at: datetime, content: str) -> int:
        row = self.conn.execute(
            "SELECT (agent.remember_at(%s, %s, %s, 'rule', 'global', NULL, '{}', %s::vector, NULL, NULL)).memory_id",
            (at, run.owner, content, self.vec(content)),
        ).fetchone()
        assert row is not None
        return int(row[0])

    def search(self, run: Run, at: datetime, query: str, limit: int) -> list[int]:
        rows = self.conn.execute(
            "SELECT memory_id FROM agent.search_ghost_ranked_at(%s, %s, NULL, %s, %s::vector, NULL, %s, %s)",
            (at, run.owner, query, self.vec(query) if query else None, run.formula, limit),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def ranking(self, run: Run, at: datetime) -> list[tuple[int, float, float]]:
        """(memory_id, score, correction term) of every memory, best first, without bumping anything."""
        rows = self.conn.execute(
            "SELECT memory_id, score, (breakdown->>'correction')::float8"
            " FROM agent.rank_ghosts_at(%s, %s, NULL, '', NULL, NULL, %s, 1000)",
            (at, run.owner, run.formula),
        ).fetchall()
        return [(int(r[0]), float(r[1]), float(r[2])) for r in rows]

    def feedback(self, run: Run, at: datetime, memory_id: int, signal: str) -> None:
        self.conn.execute(
            "SELECT agent.give_feedback_at(%s, %s, NULL, %s, %s, NULL)", (at, run.owner, memory_id, signal)
        )

    def topic_text(self, topic: int) -> str:
        a, b = WORDS[topic % len(WORDS)], WORDS[(topic * 7 + 3) % len(WORDS)]
        return f"{a} {b} topic{topic}"

    def run(self, formula: str, days: int) -> Run:
        # separate streams, so that both formulas see the same world and the same questions; only the feedback
        # (which depends on what each formula returned) draws from its own stream
        world, questions, luck = (
            random.Random(f"{self.seed}-{name}") for name in ("world", "questions", "luck")
        )
        run = Run(formula, f"ghost-sim-{formula}")
        for topic in range(TOPICS):
            for i in range(PER_TOPIC):
                quality = world.choices(["good", "mediocre", "bad"], weights=[6, 3, 1])[0]
                filler = " ".join(world.sample(WORDS, 3))
                content = f"rule {topic}-{i}: {self.topic_text(topic)} {filler}"
                mid = self.remember(run, T0, content)
                run.memories[mid] = Memory(mid, topic, quality)
        order = list(range(TOPICS))
        corrected: int | None = None
        new_rules: dict[str, int] = {}
        for day in range(days):
            at = T0 + timedelta(days=day, hours=9)
            if day % FOCUS_DAYS == 0:  # the work moves on: topic popularity is reshuffled every quarter
                world.shuffle(order)
            weight = {t: 1.0 / (rank + 1) ** 0.8 for rank, t in enumerate(order)}
            for _ in range(OVERVIEWS_PER_DAY):
                run.overview_tops.append(self.search(run, at, "", 10))
            for _ in range(SEARCHES_PER_DAY):
                topic = questions.choices(range(TOPICS), weights=[weight[t] for t in range(TOPICS)])[0]
                hits = self.search(run, at, self.topic_text(topic), 5)
                on_topic = [h for h in hits if h in run.memories and run.memories[h].topic == topic]
                run.on_topic.append(len(on_topic) / max(len(hits), 1))
                for hit in on_topic:
                    for signal, p in FEEDBACK[run.memories[hit].quality].items():
                        if luck.random() < p:
                            self.feedback(run, at, hit, signal)
            if day == CORRECTED_DAY:
                # a rule that proves wrong the day it is written, then sits idle: the same start for both formulas
                corrected = self.remember(run, at, CORRECTED_RULE)
                for _ in range(10):
                    self.feedback(run, at, corrected, "correct")
            if day == NEW_RULE_DAY:
                for name, text in NEW_RULES.items():
                    new_rules[name] = self.remember(run, at, text)
                    run.new_rule_days[name] = None
            for name, mid in new_rules.items():  # the agent looks it up, and it keeps proving right
                self.search(run, at, NEW_RULES[name], 5)
                self.feedback(run, at, mid, "endorse")
                if name == "endorsed, preventing an incident every 3rd day" and (day - NEW_RULE_DAY) % 3 == 2:
                    self.feedback(run, at, mid, "incident_prevented")
            checkpoints = (CORRECTED_DAY + 1, CORRECTED_DAY + IDLE_DAYS)
            pending = [name for name, d in run.new_rule_days.items() if d is None]
            if day in checkpoints or pending:
                ranking = self.ranking(run, at + timedelta(hours=8))
                ids = [mid for mid, _, _ in ranking]
                if day in checkpoints and corrected is not None:
                    run.corrected_rank[f"day {day}"] = ids.index(corrected) + 1
                    _, score, penalty = ranking[ids.index(corrected)]
                    run.corrected_score[f"day {day}"] = score
                    run.corrected_penalty[f"day {day}"] = penalty
                for name in pending:
                    if new_rules[name] in ids[:10]:
                        run.new_rule_days[name] = day - NEW_RULE_DAY + 1
        return run


def summarise(run: Run, days: int) -> dict[str, Any]:
    tops = run.overview_tops
    presence = Counter(mid for top in tops for mid in set(top))
    pinned = [mid for mid, n in presence.items() if n >= 0.9 * len(tops)]
    first_quarter = set(tops[min(len(tops), FOCUS_DAYS * OVERVIEWS_PER_DAY) - 1])
    quality = Counter(
        run.memories[mid].quality if mid in run.memories else "new" for top in tops for mid in top
    )
    return {
        "formula": run.formula,
        "days": days,
        "pinned_share_of_top10": len(pinned) / 10,
        "distinct_memories_ever_in_top10": len(presence),
        "final_top10_from_first_quarter_top10": len(first_quarter & set(tops[-1])) / 10,
        "bad_share_of_top10_slots": quality["bad"] / max(sum(quality.values()), 1),
        "search_on_topic_share": statistics.fmean(run.on_topic) if run.on_topic else 0.0,
        "corrected_rank": run.corrected_rank,
        "corrected_score": run.corrected_score,
        "corrected_penalty": run.corrected_penalty,
        "memories": len(run.memories) + len(run.new_rule_days) + bool(run.corrected_rank),
        "new_rule_days_to_top10": run.new_rule_days,
        "new_rule_window_days": max(days - NEW_RULE_DAY, 0),
    }


def table(results: list[dict[str, Any]]) -> str:
    def rank(r: dict[str, Any], day: int) -> str:
        key = f"day {day}"
        if key not in r["corrected_rank"]:
            return "-"
        return f"{r['corrected_rank'][key]}/{r['memories']} ({r['corrected_score'][key]:+.3f})"

    def penalty(r: dict[str, Any]) -> str:
        p = r["corrected_penalty"]
        first, last = p.get(f"day {CORRECTED_DAY + 1}"), p.get(f"day {CORRECTED_DAY + IDLE_DAYS}")
        if first is None or last is None:
            return "-"
        return f"{first:+.3f} → {last:+.3f}"

    def new(name: str) -> Callable[[dict[str, Any]], str]:
        def cell(r: dict[str, Any]) -> str:
            d = r["new_rule_days_to_top10"].get(name)
            return f"{d} days" if d is not None else f"never (>{r['new_rule_window_days']} days)"

        return cell

    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        (
            "share of the top 10 pinned (in ≥90% of all overviews)",
            lambda r: f"{r['pinned_share_of_top10']:.0%}",
        ),
        (
            "distinct memories ever in the overview top 10",
            lambda r: str(r["distinct_memories_ever_in_top10"]),
        ),
        (
            f"final top 10 still from the day-{FOCUS_DAYS} top 10",
            lambda r: f"{r['final_top10_from_first_quarter_top10']:.0%}",
        ),
        ("bad rules among overview top-10 slots", lambda r: f"{r['bad_share_of_top10_slots']:.1%}"),
        ("on-topic share of search results", lambda r: f"{r['search_on_topic_share']:.0%}"),
        (
            f"rank of a rule corrected 10× on day {CORRECTED_DAY}, next day",
            lambda r: rank(r, CORRECTED_DAY + 1),
        ),
        (f"… {IDLE_DAYS} idle days after the corrections", lambda r: rank(r, CORRECTED_DAY + IDLE_DAYS)),
        (f"its correction term, day {CORRECTED_DAY + 1} → day {CORRECTED_DAY + IDLE_DAYS}", penalty),
    ]
    rows += [(f"days for a new rule ({name}) to reach the top 10", new(name)) for name in NEW_RULES]
    head = "| measure | " + " | ".join(r["formula"] for r in results) + " |"
    lines = [head, "|---|" + "---|" * len(results)]
    lines += ["| " + name + " | " + " | ".join(fn(r) for r in results) + " |" for name, fn in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=None, help="admin DSN of a server to create a throwaway database on")
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    results = []
    with server(args.dsn) as admin, throwaway_database(admin, "ghostmem_ghost_sim") as dsn:
        prepare(dsn, HashEmbedder().dim, HashEmbedder().name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            # every call commits; a simulation needs no fsync per commit (scores do not depend on it)
            conn.execute("SET synchronous_commit = off")
            sim = Sim(conn, args.seed)
            for formula in ("literal", "default"):
                results.append(summarise(sim.run(formula, args.days), args.days))
    elapsed = time.perf_counter() - started
    text = table(results)
    print(text)
    print(f"\n{args.days} simulated days per formula, seed {args.seed}, {elapsed:.0f} s")
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": "ghost_sim",
        "setup": {
            "memories": TOPICS * PER_TOPIC,
            "topics": TOPICS,
            "days": args.days,
            "overviews_per_day": OVERVIEWS_PER_DAY,
            "searches_per_day": SEARCHES_PER_DAY,
            "feedback_probabilities": FEEDBACK,
            "seed": args.seed,
            "embedder": "hash (deterministic; embedding quality is not what this measures)",
            "seconds": round(elapsed, 1),
        },
        "results": results,
    }
    (RESULTS / "ghost_sim.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    (RESULTS / "ghost_sim.md").write_text(
        "### Ghost-memory ranking over a simulated year (`python -m bench.ghost_sim`)\n\n"
        f"{TOPICS * PER_TOPIC} memories, {args.days} days, {OVERVIEWS_PER_DAY} overviews and "
        f"{SEARCHES_PER_DAY} searches a day with feedback by hidden quality, against the database functions "
        "(HashEmbedder: the dynamics are measured, not embedding quality).\n\n" + text + "\n",
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
