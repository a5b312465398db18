"""Retrieval quality on public data sets, scored as bench/README.md's "Retrieval data" says, for each search leg alone and
for the hybrid default.

    python -m bench.retrieval --dataset locomo --data $GHOSTMEM_EVAL/locomo_dev.json
    python -m bench.retrieval --dataset longmemeval --data $GHOSTMEM_EVAL/longmemeval_s_dev35.json
    python -m bench.retrieval --dataset jsquad --data $GHOSTMEM_EVAL/jsquad_dev.json

Every store (a LoCoMo conversation, a LongMemEval question's haystack, a JSQuAD file) is written in ghostmem's
generic JSONL format, imported through ``GhostMem.import_paths`` into a throwaway database, and searched through
ghostmem's own search code with the real embedding model:

* LoCoMo: each session is a conversation (its date as the time), each turn a message whose id is its ``dia_id``
  and whose speaker is metadata. Turn recall@k = share of a question's evidence turns among the top-k messages;
  session recall@k = share of its evidence sessions among the top-k sessions (in the order the messages rank them).
* LongMemEval: each haystack session is a conversation; ``search_personal_memory`` ranks them. recall_all@k = 1 when
  every answer session is in the top k; nDCG@k with binary relevance. Abstention questions (``_abs``) are skipped.
* JSQuAD: every paragraph is a one-message conversation; recall@k = 1 when the question's paragraph is in the top k.

``--split tune`` / ``--split held-out`` score a fixed part of the file: a third of its units (LoCoMo conversations,
LongMemEval questions, JSQuAD articles; at least one) is held out, chosen by a seeded hash of each unit's id
(:func:`split_units`). Search changes are tuned on ``tune``; ``held-out`` is scored to see whether they carry over.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import logging
import math
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ghostmem import GhostMem
from ghostmem.args import SearchMode, SearchPersonalMemoryArgs
from ghostmem.config import DEFAULT_EMBED_MODEL
from ghostmem.embed import make_embedder
from ghostmem.program import run_sync
from ghostmem.search import search_messages

from bench.common import (
    RESULTS,
    CachedEmbedder,
    real_embedder,
    server,
    throwaway_database,
    write_generic_jsonl,
)

logger = logging.getLogger("bench.retrieval")

MODES: tuple[SearchMode, ...] = ("lexical", "vector", "hybrid")
DEFAULT_K = {"locomo": (1, 5, 10, 25), "longmemeval": (5, 10), "jsquad": (1, 5, 10)}
MESSAGE_DEPTH = 100
OWNER = "bench"


@dataclass
class Question:
    qid: str
    text: str
    category: str
    gold_turns: set[str] = field(default_factory=set)
    gold_sessions: set[str] = field(default_factory=set)


@dataclass
class Store:
    name: str
    conversations: list[dict[str, Any]]
    questions: list[Question]
    absent: list[Question] = field(default_factory=list)  # questions whose answer this store does not hold


# --- data sets → generic conversations ------------------------------------------------------------------------


def _time(text: str, formats: tuple[str, ...]) -> datetime | None:
    cleaned = re.sub(r"\s*\([A-Za-z]{3}\)\s*", " ", text).strip()
    for fmt in formats:
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def _messages(turns: list[dict[str, Any]], start: datetime | None) -> list[dict[str, Any]]:
    """Turns → generic messages; turn i is stamped i seconds after the session's time so the order survives."""
    out = []
    for i, turn in enumerate(turns):
        msg = {k: v for k, v in turn.items() if v is not None}
        if start is not None:
            msg["ts"] = (start + timedelta(seconds=i)).isoformat()
        out.append(msg)
    return out


LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def locomo_stores(data: Any) -> list[Store]:
    stores = []
    for sample in data:
        conv = sample["conversation"]
        speakers = [conv.get("speaker_a"), conv.get("speaker_b")]
        conversations = []
        sessions = sorted(
            (int(m.group(1)), key) for key in conv if (m := re.fullmatch(r"session_(\d+)", key))
        )
        for number, key in sessions:
            start = _time(str(conv.get(f"{key}_date_time", "")), ("%I:%M %p on %d %B, %Y",))
            turns = []
            for turn in conv[key]:
                text = turn["text"]
                if turn.get("blip_caption"):
                    text = f"{text} [image: {turn['blip_caption']}]"
                # LoCoMo is a chat between two people: the first speaker plays "user", the other "assistant".
                role = "user" if turn["speaker"] == speakers[0] else "assistant"
                turns.append({"id": turn["dia_id"], "role": role, "text": text, "speaker": turn["speaker"]})
            conversations.append(
                {
                    "conv_id": f"session_{number}",
                    "title": f"{sample['sample_id']} session {number}",
                    "started_at": start.isoformat() if start else None,
                    "messages": _messages(turns, start),
                }
            )
        questions = []
        for i, qa in enumerate(sample["qa"]):
            gold = {e.strip() for entry in qa.get("evidence", []) for e in str(entry).split(";") if e.strip()}
            if not gold:
                continue
            sessions_of_gold = {f"session_{g.split(':')[0].lstrip('D')}" for g in gold}
            questions.append(
                Question(
                    qid=f"{sample['sample_id']}#{i}",
                    text=qa["question"],
                    category=LOCOMO_CATEGORIES.get(qa["category"], str(qa["category"])),
                    gold_turns=gold,
                    gold_sessions=sessions_of_gold,
                )
            )
        stores.append(Store(sample["sample_id"], conversations, questions))
    return stores


def longmemeval_stores(data: Any) -> list[Store]:
    stores = []
    for item in data:
        conversations = []
        for sid, date, turns in zip(
            item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"], strict=True
        ):
            start = _time(date, ("%Y/%m/%d %H:%M",))
            messages = [
                {"id": f"{sid}:{i}", "role": t["role"], "text": t["content"]} for i, t in enumerate(turns)
            ]
            conversations.append(
                {
                    "conv_id": sid,
                    "started_at": start.isoformat() if start else None,
                    "messages": _messages(messages, start),
                }
            )
        question = Question(
            qid=item["question_id"],
            text=item["question"],
            category=item["question_type"],
            gold_sessions=set(item["answer_session_ids"]),
        )
        # An abstention question asks about something its haystack never mentions.
        if item["question_id"].endswith("_abs"):
            stores.append(Store(item["question_id"], conversations, [], [question]))
        else:
            stores.append(Store(item["question_id"], conversations, [question]))
    return stores


def jsquad_stores(data: Any, by_article: bool = False) -> list[Store]:
    """One store of every paragraph (``by_article``: one store per article, for the floor study)."""
    if by_article:
        return [
            Store(f"jsquad-{a}", store.conversations, store.questions)
            for a, article in enumerate(data["data"])
            for store in jsquad_stores({**data, "data": [article]})
        ]
    conversations = []
    questions = []
    for a, article in enumerate(data["data"]):
        for p, paragraph in enumerate(article["paragraphs"]):
            conv_id = f"a{a}p{p}"
            conversations.append(
                {
                    "conv_id": conv_id,
                    "title": article.get("title"),
                    "messages": [{"id": "0", "role": "user", "text": paragraph["context"]}],
                }
            )
            for qa in paragraph["qas"]:
                questions.append(
                    Question(qid=qa["id"], text=qa["question"], category="all", gold_sessions={conv_id})
                )
    return [Store("jsquad", conversations, questions)]


SPLITS = ("all", "tune", "held-out")
SPLIT_SEED = 16
HELD_OUT_SHARE = 3  # one unit in three is held out


def _units(dataset: str, data: Any) -> list[Any]:
    return data["data"] if dataset == "jsquad" else data


def _unit_id(dataset: str, unit: Any) -> str:
    return str(unit[{"locomo": "sample_id", "longmemeval": "question_id", "jsquad": "title"}[dataset]])


def split_units(dataset: str, data: Any, part: str, seed: int = SPLIT_SEED) -> Any:
    """The part of a data file to score: ``all``, or the ``tune`` / ``held-out`` split by unit (LoCoMo conversation,
    LongMemEval question, JSQuAD article). The units are ordered by ``sha256(seed:id)`` and the first third
    (rounded up) is held out, so the split depends on the ids only, never on their content or order in the file."""
    if part == "all":
        return data
    units = _units(dataset, data)
    ranked = sorted(
        units, key=lambda u: hashlib.sha256(f"{seed}:{_unit_id(dataset, u)}".encode()).hexdigest()
    )
    held = {_unit_id(dataset, u) for u in ranked[: -(-len(units) // HELD_OUT_SHARE)]}
    kept = [u for u in units if (_unit_id(dataset, u) in held) == (part == "held-out")]
    return {**data, "data": kept} if dataset == "jsquad" else kept


LOADERS: dict[str, Callable[[Any], list[Store]]] = {
    "locomo": locomo_stores,
    "longmemeval": longmemeval_stores,
    "jsquad": jsquad_stores,
}


# --- scoring ---------------------------------------------------------------------------------------------------


def recall(gold: set[str], ranked: list[str], k: int) -> float:
    return len(gold & set(ranked[:k])) / len(gold) if gold else 0.0


def recall_all(gold: set[str], ranked: list[str], k: int) -> float:
    return float(gold <= set(ranked[:k]))


def ndcg(gold: set[str], ranked: list[str], k: int) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, item in enumerate(ranked[:k]) if item in gold)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / ideal if ideal else 0.0


def _dedup(items: Iterator[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _ranked_messages(gm: GhostMem, query: str, mode: SearchMode) -> list[dict[str, Any]]:
    args = SearchPersonalMemoryArgs(query=query, mode=mode)
    with gm.connection() as conn:
        return run_sync(search_messages(gm.context, args, MESSAGE_DEPTH), conn, gm.embedder)


def score_question(
    dataset: str, gm: GhostMem, q: Question, mode: SearchMode, ks: tuple[int, ...]
) -> dict[str, float]:
    metrics: dict[str, float] = {}
    if dataset == "longmemeval":
        limit = max(ks)
        result = gm.run("search_personal_memory", {"query": q.text, "mode": mode, "limit": limit})
        sessions = [hit.conv_id for hit in result.data.rows]
        for k in ks:
            metrics[f"recall_all@{k}"] = recall_all(q.gold_sessions, sessions, k)
            metrics[f"ndcg@{k}"] = ndcg(q.gold_sessions, sessions, k)
        return metrics
    rows = _ranked_messages(gm, q.text, mode)
    sessions = _dedup(r["conv_id"] for r in rows)
    for k in ks:
        if dataset == "locomo":
            metrics[f"turn_recall@{k}"] = recall(q.gold_turns, [r["native_id"] for r in rows], k)
            metrics[f"session_recall@{k}"] = recall(q.gold_sessions, sessions, k)
        else:
            metrics[f"recall@{k}"] = recall(q.gold_sessions, sessions, k)
    return metrics


# --- the similarity floor ----------------------------------------------------------------------------------------

FLOORS = (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
ABSENT_PER_STORE = 60  # questions of the next store asked of each store (its answer is not there)
STUDY_METRIC = {"locomo": ("turn_recall", 10), "longmemeval": ("recall_all", 5), "jsquad": ("recall", 5)}


def _hits(gm: GhostMem, query: str) -> list[dict[str, Any]]:
    """Hybrid messages with the floor off: what each floor would keep is decided afterwards."""
    args = SearchPersonalMemoryArgs(query=query, mode="hybrid")
    with gm.connection() as conn:
        rows = run_sync(search_messages(gm.context, args, MESSAGE_DEPTH, floor=-1.0), conn, gm.embedder)
    return [
        {
            "native_id": r["native_id"],
            "conv_id": r["conv_id"],
            "lexical": r["lex_rank"] is not None,
            "similarity": 1.0 - float(r["vec_dist"]) if r["vec_dist"] is not None else -1.0,
        }
        for r in rows
    ]


def _kept_hits(hits: list[dict[str, Any]], floor: float) -> list[dict[str, Any]]:
    """The messages a floor keeps: those of conversations with a word match or a message at least that close."""
    relevant = {h["conv_id"] for h in hits if h["lexical"] or h["similarity"] >= floor}
    return [h for h in hits if h["conv_id"] in relevant]


def _vector_only_conversation(hits: list[dict[str, Any]]) -> bool:
    lexical = {h["conv_id"] for h in hits if h["lexical"]}
    return any(h["conv_id"] not in lexical for h in hits)


def floor_table(
    dataset: str, present: list[tuple[Question, list[dict[str, Any]]]], absent: list[list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Per floor: the recall of answerable questions, and what unanswerable ones still get back."""
    metric, k = STUDY_METRIC[dataset]
    table = []
    for floor in FLOORS:
        scores = []
        for q, hits in present:
            kept = _kept_hits(hits, floor)
            if dataset == "locomo":
                scores.append(recall(q.gold_turns, [h["native_id"] for h in kept], k))
            else:
                sessions = _dedup(h["conv_id"] for h in kept)
                score = recall_all if dataset == "longmemeval" else recall
                scores.append(score(q.gold_sessions, sessions, k))
        kept_absent = [_kept_hits(hits, floor) for hits in absent]
        table.append(
            {
                "floor": floor,
                f"{metric}@{k}": round(statistics.fmean(scores), 4) if scores else None,
                # unanswerable questions that still get a conversation only the vector leg found (what the floor
                # governs) ...
                "absent_with_vector_only": round(
                    statistics.fmean(_vector_only_conversation(kept) for kept in kept_absent), 4
                )
                if absent
                else None,
                # ... and that get nothing back at all (a word match is not the floor's to judge)
                "absent_empty": round(statistics.fmean(not kept for kept in kept_absent), 4)
                if absent
                else None,
                "absent_rows_top10": round(
                    statistics.fmean(len(_dedup(h["conv_id"] for h in kept)[:10]) for kept in kept_absent), 2
                )
                if absent
                else None,
            }
        )
    return table


# --- what a shown score means ------------------------------------------------------------------------------------

SCORE_LINE = 0.5  # a reader takes a hit scored at least this as relevant
SHOWN_LIMIT = 10


def _shown(gm: GhostMem, query: str) -> list[dict[str, Any]]:
    """The hits the operation shows (default floor, 10 conversations): each one's shown score and the fusion's
    score that orders them (``fused``: best = 1, what the shown score was before it meant relevance)."""
    result = gm.run("search_personal_memory", {"query": query, "limit": SHOWN_LIMIT, "explain": True})
    return [{"conv_id": h.conv_id, "score": h.score, "fused": h.explain["fused"]} for h in result.data.rows]


def _auc(right: list[float], wrong: list[float]) -> float | None:
    """The chance that a right hit scores above a wrong one (ties count half)."""
    if not right or not wrong:
        return None
    wins = sum((r > w) + 0.5 * (r == w) for r in right for w in wrong)
    return wins / (len(right) * len(wrong))


def score_table(
    present: list[tuple[Question, list[dict[str, Any]]]], absent: list[list[dict[str, Any]]]
) -> dict[str, Any]:
    """What the shown scores say: the score of the first hit holding the answer (a right hit), against the top
    hit of a question whose answer the store does not hold (a wrong hit), for the shown score and the fusion's.
    ``order_kept``: every list's shown scores fall in the fusion's order."""
    right = [
        next(h for h in hits if h["conv_id"] in q.gold_sessions)
        for q, hits in present
        if any(h["conv_id"] in q.gold_sessions for h in hits)
    ]
    wrong = [hits[0] for hits in absent if hits]
    table: dict[str, Any] = {"right_hits": len(right), "wrong_hits": len(wrong)}
    for key in ("score", "fused"):
        r = [h[key] for h in right]
        w = [h[key] for h in wrong]
        table[key] = {
            "right_median": round(statistics.median(r), 3) if r else None,
            "wrong_median": round(statistics.median(w), 3) if w else None,
            f"right_at_least_{SCORE_LINE}": round(statistics.fmean(x >= SCORE_LINE for x in r), 3)
            if r
            else None,
            f"wrong_at_least_{SCORE_LINE}": round(statistics.fmean(x >= SCORE_LINE for x in w), 3)
            if w
            else None,
            "auc": round(auc, 3) if (auc := _auc(r, w)) is not None else None,
        }
    lists = [hits for _, hits in present] + absent
    table["order_kept"] = all(
        all(a["score"] >= b["score"] and a["fused"] >= b["fused"] for a, b in itertools.pairwise(hits))
        for hits in lists
    )
    return table


def _study_store(
    store: Store, absent: list[Question], admin: str, model: str | None
) -> tuple[
    list[tuple[Question, list[dict[str, Any]]]],
    list[list[dict[str, Any]]],
    list[tuple[Question, list[dict[str, Any]]]],
    list[list[dict[str, Any]]],
]:
    embedder = CachedEmbedder(make_embedder(model) if model else real_embedder())
    with (
        tempfile.TemporaryDirectory(prefix="ghostmem-retrieval-") as tmp,
        throwaway_database(admin) as dsn,
        GhostMem(dsn=dsn, owner=OWNER, embedder=embedder) as gm,
    ):
        report = gm.import_paths([write_generic_jsonl(store.conversations, Path(tmp) / "store.jsonl")])
        if not report.ok:
            raise RuntimeError(f"{store.name}: import failed: {report.render()}")
        return (
            [(q, _hits(gm, q.text)) for q in store.questions],
            [_hits(gm, q.text) for q in absent],
            [(q, _shown(gm, q.text)) for q in store.questions],
            [_shown(gm, q.text) for q in absent],
        )


def floor_study(
    dataset: str,
    data_path: Path,
    *,
    admin_dsn: str | None = None,
    model: str | None = None,
    jobs: int = 1,
    split: str = "tune",
) -> dict[str, Any]:
    """Calibrate the similarity floor: every store is asked its own questions and, as questions whose answer it
    does not hold, up to :data:`ABSENT_PER_STORE` of the next store's (and LongMemEval's abstention questions).
    The same questions, through the operation itself, say what its shown scores mean (:func:`score_table`)."""
    data = split_units(dataset, json.loads(data_path.read_text(encoding="utf-8")), split)
    stores = jsquad_stores(data, by_article=True) if dataset == "jsquad" else LOADERS[dataset](data)
    present: list[tuple[Question, list[dict[str, Any]]]] = []
    absent: list[list[dict[str, Any]]] = []
    shown_present: list[tuple[Question, list[dict[str, Any]]]] = []
    shown_absent: list[list[dict[str, Any]]] = []
    started = time.perf_counter()
    with server(admin_dsn) as admin, ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = []
        for i, store in enumerate(stores):
            others = stores[(i + 1) % len(stores)].questions if len(stores) > 1 else []
            asked = store.absent + others[:ABSENT_PER_STORE]
            futures.append(pool.submit(_study_store, store, asked, admin, model))
        for future in as_completed(futures):
            p, a, sp, sa = future.result()
            present += p
            absent += a
            shown_present += sp
            shown_absent += sa
    return {
        "bench": "retrieval_floor",
        "dataset": dataset,
        "data": str(data_path),
        "split": split,
        "model": model or DEFAULT_EMBED_MODEL,
        "present": len(present),
        "absent": len(absent),
        "seconds": round(time.perf_counter() - started, 1),
        "command": "python -m bench.retrieval " + " ".join(sys.argv[1:]),
        "floors": floor_table(dataset, present, absent),
        "scores": score_table(shown_present, shown_absent),
    }


def _mean_table(per_question: list[tuple[str, dict[str, float]]]) -> dict[str, Any]:
    by_category: dict[str, list[dict[str, float]]] = defaultdict(list)
    for category, metrics in per_question:
        by_category[category].append(metrics)

    def mean(rows: list[dict[str, float]]) -> dict[str, float]:
        return {key: round(statistics.fmean(r[key] for r in rows), 4) for key in rows[0]} if rows else {}

    return {
        "overall": mean([m for _, m in per_question]),
        "n": len(per_question),
        "categories": {cat: {"n": len(rows), **mean(rows)} for cat, rows in sorted(by_category.items())},
    }


# --- running ---------------------------------------------------------------------------------------------------


def _score_store(
    dataset: str,
    store: Store,
    ks: tuple[int, ...],
    modes: tuple[SearchMode, ...],
    admin: str,
    model: str | None,
) -> list[tuple[str, str, dict[str, float]]]:
    """Import one store into its own throwaway database and score every question in every mode.

    Runs in a worker process (``--jobs``), so it builds its own embedder from the model name.
    """
    embedder = CachedEmbedder(make_embedder(model) if model else real_embedder())
    scored = []
    with (
        tempfile.TemporaryDirectory(prefix="ghostmem-retrieval-") as tmp,
        throwaway_database(admin) as dsn,
        GhostMem(dsn=dsn, owner=OWNER, embedder=embedder) as gm,
    ):
        report = gm.import_paths([write_generic_jsonl(store.conversations, Path(tmp) / "store.jsonl")])
        if not report.ok:
            raise RuntimeError(f"{store.name}: import failed: {report.render()}")
        for q in store.questions:
            for mode in modes:
                scored.append((mode, q.category, score_question(dataset, gm, q, mode, ks)))
    return scored


def run(
    dataset: str,
    data_path: Path,
    ks: tuple[int, ...],
    *,
    admin_dsn: str | None = None,
    model: str | None = None,
    modes: tuple[SearchMode, ...] = MODES,
    max_stores: int | None = None,
    jobs: int = 1,
    split: str = "all",
) -> dict[str, Any]:
    """Import every store of the file into its own throwaway database and score every mode on it.

    ``jobs`` stores are imported and scored at once, each in a worker process (the embedding is the slow part).
    """
    data = split_units(dataset, json.loads(data_path.read_text(encoding="utf-8")), split)
    stores = [s for s in LOADERS[dataset](data) if s.questions][:max_stores]
    per_mode: dict[str, list[tuple[str, dict[str, float]]]] = {m: [] for m in modes}
    started = time.perf_counter()
    with server(admin_dsn) as admin, ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(_score_store, dataset, s, ks, modes, admin, model): s for s in stores}
        for future in as_completed(futures):
            for mode, category, metrics in future.result():
                per_mode[mode].append((category, metrics))
            logger.info("%s: %d questions scored", futures[future].name, len(futures[future].questions))
    return {
        "dataset": dataset,
        "data": str(data_path),
        "k": list(ks),
        "model": model or DEFAULT_EMBED_MODEL,
        "split": split,
        "units": [_unit_id(dataset, u) for u in _units(dataset, data)],
        "stores": len(stores),
        "messages": sum(len(c["messages"]) for s in stores for c in s.conversations),
        "seconds": round(time.perf_counter() - started, 1),
        "command": "python -m bench.retrieval " + " ".join(sys.argv[1:]),
        "modes": {mode: _mean_table(rows) for mode, rows in per_mode.items()},
    }


def render_table(result: dict[str, Any]) -> str:
    """One line per mode and category: the mean of every metric."""
    modes = result["modes"]
    first = next(iter(modes.values()))
    keys = list(first["overall"])
    lines = [
        f"{result['dataset']} ({result.get('split', 'all')}): {result['stores']} stores, {result['messages']} messages, model {result['model']}",
        f"{'mode':<8} {'category':<26} {'n':>5} " + " ".join(f"{k:>18}" for k in keys),
    ]
    for mode, table in modes.items():
        rows = [("overall", table["n"], table["overall"])]
        rows += [(cat, c["n"], c) for cat, c in table["categories"].items()]
        for cat, n, metrics in rows:
            lines.append(f"{mode:<8} {cat:<26} {n:>5} " + " ".join(f"{metrics[k]:>18.3f}" for k in keys))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, choices=sorted(LOADERS))
    parser.add_argument(
        "--data",
        required=True,
        type=Path,
        help="one of the data files bench/README.md describes (Retrieval data)",
    )
    parser.add_argument("--k", type=int, nargs="+", help="cut-offs (default: the data set's usual ones)")
    parser.add_argument("--json", type=Path, help="where to write the results (default bench/results/...)")
    parser.add_argument("--dsn", help="admin DSN of a server to create throwaway databases on")
    parser.add_argument(
        "--model", help="embedding model (default: the configured MiniLM; 'hash' for a smoke run)"
    )
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--max-stores", type=int, help="only the first N stores (a quick look)")
    parser.add_argument("--jobs", type=int, default=1, help="stores imported and scored at once (processes)")
    parser.add_argument(
        "--split",
        choices=SPLITS,
        default="all",
        help="score the tuning part, the held-out part, or the whole file",
    )
    parser.add_argument(
        "--label", help="names the run in the results (and its file), e.g. the commit it scores"
    )
    parser.add_argument(
        "--floor-study",
        action="store_true",
        help="calibrate the similarity floor instead (answerable vs absent)",
    )
    opts = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    suffix = ("" if opts.split == "all" else f"_{opts.split}") + (f"_{opts.label}" if opts.label else "")
    if opts.floor_study:
        study = floor_study(
            opts.dataset, opts.data, admin_dsn=opts.dsn, model=opts.model, jobs=opts.jobs, split=opts.split
        )
        print(json.dumps(study["floors"], indent=1))
        out = opts.json or RESULTS / f"retrieval_floor_{opts.dataset}{suffix}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(study, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {out}")
        return 0
    ks = tuple(opts.k) if opts.k else DEFAULT_K[opts.dataset]
    result = run(
        opts.dataset,
        opts.data,
        ks,
        admin_dsn=opts.dsn,
        model=opts.model,
        modes=tuple(opts.modes),
        max_stores=opts.max_stores,
        jobs=opts.jobs,
        split=opts.split,
    )
    if opts.label:
        result["label"] = opts.label
    print(render_table(result))
    out = opts.json or RESULTS / f"retrieval_{opts.dataset}{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
