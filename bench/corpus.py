"""A synthetic conversation corpus that looks like years of a person's AI-assistant history.

Varied vocabulary (a Zipf-distributed general lexicon, sixteen technical topics, generated identifiers, paths and
error codes, some Japanese conversations), conversations of lognormal length over three years with more recent
activity, several platforms and projects. Vectors: real MiniLM embeddings for the first ``sample`` conversational
messages; every other message gets a *structured* synthetic vector — a real sample vector of the same topic plus
noise drawn from the sample's own principal components, normalised — so neighbourhoods look like real ones and an
HNSW graph behaves as on real data, without embedding a million texts on two cores.

Deterministic for a given ``seed`` and size.
"""

from __future__ import annotations

import hashlib
import math
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

OWNER = "bench"
TIER = "personal"
DIMS = 384
YEARS = 3


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


GENERAL = _words(
    "the be to of and a in that have it for not on with as you do at this but his by from they we say her she "
    "or an will my one all would there their what so up out if about who get which go me when make can like "
    "time no just him know take people into year your good some could them see other than then now look only "
    "come its over think also back after use two how our work first well way even new want because any these "
    "give day most us is was are been has had were said did getting made find here thing many where right still "
    "should need try call keep let seem help show hear play run move live believe hold bring happen write "
    "provide sit stand lose pay meet include continue set learn change lead understand watch follow stop create "
    "speak read allow add spend grow open walk win offer remember consider appear buy wait serve die send expect "
    "build stay fall cut reach kill remain suggest raise pass sell require report decide pull problem question "
    "answer idea example result reason case point fact part place week number group system program end side "
    "kind head house service friend hour game line member city community name president team minute level "
    "office door health person art war history party morning table thanks please maybe actually probably "
    "really quite almost instead already again before since while until though whether both each few more less "
    "small large big long short old young early late high low different same important possible able sure "
    "clear simple easy hard strong whole free full special certain real true false wrong better best worse"
)

TOPICS: dict[str, tuple[str, ...]] = {
    "postgres": _words(
        "postgres postgresql vacuum autovacuum index btree query planner explain analyze bloat wal replication "
        "replica schema migration table column constraint transaction deadlock lock pgbouncer connection pool "
        "jsonb partition sequence trigger"
    ),
    "vector-search": _words(
        "embedding embeddings vector pgvector hnsw ivfflat cosine similarity nearest neighbour recall ann "
        "dimension normalise rerank hybrid retrieval bm25 tsvector fusion reciprocal rank chunk chunking "
        "semantic dense sparse"
    ),
    "react-frontend": _words(
        "react component hook useeffect usestate props render jsx typescript vite webpack css tailwind layout "
        "router redux state bundle hydration nextjs button modal form input accessibility"
    ),
    "python-packaging": _words(
        "python pip wheel pyproject hatchling setuptools venv poetry uv dependency version pin lockfile import "
        "module package namespace entrypoint typing mypy ruff pytest fixture conftest"
    ),
    "kubernetes": _words(
        "kubernetes kubectl pod deployment service ingress helm chart namespace node cluster container docker "
        "image registry configmap secret volume probe liveness readiness autoscaler rollout"
    ),
    "ml-training": _words(
        "model training epoch batch gradient loss optimizer adam learning rate overfitting validation dataset "
        "tokenizer transformer attention finetune lora checkpoint inference gpu cuda torch"
    ),
    "git-workflow": _words(
        "git commit branch merge rebase conflict cherry pick stash diff patch pull request review remote origin "
        "tag release changelog bisect worktree hook squash history"
    ),
    "rust-systems": _words(
        "rust cargo crate borrow checker lifetime trait generic async tokio future ownership unsafe pointer "
        "struct enum match macro clippy compile error result option"
    ),
    "cooking": _words(
        "recipe dough flour yeast oven bake bread pasta sauce garlic onion tomato butter salt pepper simmer "
        "roast knife pan stock soup dinner lunch vegetables"
    ),
    "travel": _words(
        "flight hotel train ticket passport visa itinerary booking airport luggage museum city tour beach "
        "mountain hiking restaurant map guide budget trip kyoto lisbon"
    ),
    "writing": _words(
        "essay paragraph draft outline thesis argument citation reference abstract introduction conclusion "
        "grammar style tone edit revise chapter novel character plot dialogue"
    ),
    "finance": _words(
        "budget invoice tax expense revenue salary mortgage loan interest rate savings investment portfolio "
        "stock bond fund dividend inflation spreadsheet accounting receipt"
    ),
    "security": _words(
        "token oauth jwt password hash bcrypt tls certificate encryption secret vault permission role rbac "
        "vulnerability cve injection xss csrf audit firewall scanning"
    ),
    "api-design": _words(
        "api endpoint rest graphql request response status header pagination cursor rate limit webhook schema "
        "openapi client server latency timeout retry idempotency versioning"
    ),
    "data-pipeline": _words(
        "pipeline etl batch stream kafka spark airflow dag parquet csv warehouse dbt transform load ingest "
        "schedule backfill partition dedupe watermark lineage"
    ),
    "health": _words(
        "sleep exercise running workout diet protein calories stretch injury knee back pain doctor appointment "
        "symptom vitamin routine habit stress meditation"
    ),
}
TOPIC_NAMES = tuple(TOPICS)

JAPANESE: dict[str, tuple[str, ...]] = {
    "postgres": _words("データベース インデックス 検索 会話 テーブル 移行 トランザクション 性能 遅い 速度"),
    "travel": _words("旅行 京都 ホテル 新幹線 予約 観光 お寺 温泉 切符 空港"),
    "cooking": _words("料理 レシピ 味噌汁 ご飯 醤油 出汁 野菜 魚 焼く 煮る"),
    "writing": _words("文章 論文 要約 段落 翻訳 表現 敬語 校正 会話 説明"),
}
JAPANESE_GLUE = _words("の は を に が で と も から まで です ます について ください")

PLATFORM_WEIGHTS = {
    "claude_code": 0.34,
    "codex": 0.14,
    "chatgpt": 0.2,
    "claude_ai": 0.13,
    "gemini": 0.1,
    "cursor": 0.05,
    "langchain": 0.04,
}
CODING_PLATFORMS = frozenset({"claude_code", "codex", "gemini", "cursor"})
PROJECTS = (
    "/home/ana/src/my-webapp", "/home/ana/src/my-webapp/.worktrees/auth", "/home/ana/src/ghost-infra",
    "/home/ana/work/JSAS2026", "/home/ana/work/JSAS2026/paper", "/home/ana/personal/memory/mcp",
    "/home/ana/src/data-lake", "/home/ana/src/billing-service", "/home/ana/src/mobile-app",
    "/home/ana/src/rust-indexer", "/home/ana/src/kube-platform", "/home/ana/src/recipes-site",
    "/home/ana/src/ml-experiments", "/home/ana/src/api-gateway", "/home/ana/src/docs-site",
    "/workspace", "/home/ana/src/terraform-prod", "/home/ana/src/notebook-lab",
)  # fmt: skip
APP_PROJECTS = ("support-bot", "research-assistant", "JSAS2026", None)


@dataclass(frozen=True, slots=True)
class Message:
    seq: int
    native_id: str
    role: str
    text: str
    ts: datetime
    topic: int
    lang: str


@dataclass(slots=True)
class Conversation:
    index: int
    conv_id: str
    platform: str
    project: str | None
    title: str
    topic: int
    lang: str
    started_at: datetime
    messages: list[Message] = field(default_factory=list)

    @property
    def ended_at(self) -> datetime:
        return self.messages[-1].ts


def content_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


class Writer:
    """Generates message texts from one seeded ``random.Random`` (fast for many small draws)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.general_cum = _cumulative([1.0 / (r + 1) for r in range(len(GENERAL))])
        self.topic_cum = {
            t: _cumulative([1.0 / (r + 1) ** 0.8 for r in range(len(words))]) for t, words in TOPICS.items()
        }

    def words(self, topic: str, n: int, topical: float) -> list[str]:
        rng = self.rng
        n_topic = max(1, round(n * topical))
        out = rng.choices(GENERAL, cum_weights=self.general_cum, k=n - n_topic)
        out += rng.choices(TOPICS[topic], cum_weights=self.topic_cum[topic], k=n_topic)
        if rng.random() < 0.35:
            out.append(self.rare_token(topic))
        rng.shuffle(out)
        return out

    def rare_token(self, topic: str) -> str:
        rng = self.rng
        word = rng.choice(TOPICS[topic])
        kind = rng.randrange(5)
        if kind == 0:
            return f"{word}_{rng.choice(GENERAL)}_{rng.randrange(100)}"
        if kind == 1:
            return f"src/{word}/{rng.choice(GENERAL)}.py"
        if kind == 2:
            return f"E{rng.randrange(1000, 9999)}"
        if kind == 3:
            return f"{word.capitalize()}{rng.choice(GENERAL).capitalize()}Error"
        return f"v{rng.randrange(1, 9)}.{rng.randrange(20)}.{rng.randrange(30)}"

    def sentence_text(self, words: list[str]) -> str:
        rng = self.rng
        parts: list[str] = []
        i = 0
        while i < len(words):
            n = rng.randint(6, 16)
            chunk = words[i : i + n]
            chunk[0] = chunk[0].capitalize()
            parts.append(" ".join(chunk) + rng.choice((".", ".", ".", "?", "!", ":")))
            i += n
        return " ".join(parts)

    def japanese(self, topic: str, n: int) -> str:
        rng = self.rng
        vocab = JAPANESE.get(topic) or JAPANESE["writing"]
        parts = []
        for _ in range(n):
            parts.append(rng.choice(vocab))
            parts.append(rng.choice(JAPANESE_GLUE))
            if rng.random() < 0.15:
                parts.append("。")
        return "".join(parts) + "。"

    def message(self, role: str, topic: str, lang: str) -> str:
        rng = self.rng
        if lang == "ja" and role in ("user", "assistant"):
            return self.japanese(topic, rng.randint(4, 12) if role == "user" else rng.randint(10, 60))
        if role == "user":
            n = max(3, int(rng.lognormvariate(2.6, 0.6)))
            return self.sentence_text(self.words(topic, min(n, 120), 0.35))
        if role == "assistant":
            n = max(8, int(rng.lognormvariate(3.9, 0.7)))
            text = self.sentence_text(self.words(topic, min(n, 600), 0.3))
            if rng.random() < 0.15:
                code = "\n".join(
                    f"    {self.rare_token(topic)} = {rng.choice(TOPICS[topic])}({rng.randrange(100)})"
                    for _ in range(rng.randint(2, 8))
                )
                text += f"\n```\n{code}\n```"
            return text
        # tool output: logs and listings
        lines = [
            f"{self.rare_token(topic)} {rng.choice(('ok', 'FAILED', 'warning', 'done'))} {rng.randrange(10_000)}ms"
            for _ in range(rng.randint(1, 12))
        ]
        return "\n".join(lines)

    def title(self, topic: str, lang: str) -> str:
        if lang == "ja":
            return self.japanese(topic, 3)[:30]
        words = self.words(topic, self.rng.randint(3, 7), 0.6)
        return " ".join(words).capitalize()


def _cumulative(weights: list[float]) -> list[float]:
    total = 0.0
    out = []
    for w in weights:
        total += w
        out.append(total)
    return out


def conversations(n_messages: int, seed: int, end: datetime) -> Iterator[Conversation]:
    """Conversations until ``n_messages`` messages have been produced (the last one is cut to fit)."""
    rng = random.Random(seed)
    writer = Writer(rng)
    platforms = list(PLATFORM_WEIGHTS)
    platform_cum = _cumulative(list(PLATFORM_WEIGHTS.values()))
    produced = 0
    index = 0
    span_days = 365 * YEARS
    while produced < n_messages:
        platform = rng.choices(platforms, cum_weights=platform_cum)[0]
        topic_i = rng.randrange(len(TOPIC_NAMES))
        topic = TOPIC_NAMES[topic_i]
        lang = "ja" if topic in JAPANESE and rng.random() < 0.12 else "en"
        if platform in CODING_PLATFORMS:
            project: str | None = rng.choice(PROJECTS)
        elif platform == "langchain":
            project = rng.choice(APP_PROJECTS)
        else:
            project = None
        # more activity in recent months: days ago ~ span * u^2
        days_ago = span_days * rng.random() ** 2
        started = end - timedelta(days=days_ago)
        length = min(int(rng.lognormvariate(2.6, 0.9)) + 2, 600, n_messages - produced)
        conv = Conversation(
            index=index,
            conv_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            platform=platform,
            project=project,
            title=writer.title(topic, lang),
            topic=topic_i,
            lang=lang,
            started_at=started,
        )
        ts = started
        coding = platform in CODING_PLATFORMS
        for seq in range(length):
            if seq % 2 == 0:
                role = "user"
            elif coding and rng.random() < 0.3:
                role = rng.choice(("tool_call", "tool"))
            else:
                role = "assistant"
            msg_topic = topic_i if rng.random() < 0.85 else rng.randrange(len(TOPIC_NAMES))
            text = writer.message(role, TOPIC_NAMES[msg_topic], lang)
            conv.messages.append(Message(seq, f"m{seq}", role, text, ts, msg_topic, lang))
            ts = min(ts + timedelta(seconds=rng.expovariate(1 / 90)), end)
        produced += length
        index += 1
        yield conv


def embeddable(role: str, text: str) -> bool:
    """The product embeds human and assistant text only (store.save_conversation)."""
    return role in ("user", "assistant") and bool(text.strip())


class VectorModel:
    """Real sample embeddings per (topic, language), and anisotropic noise from their principal components."""

    def __init__(self, seed: int, noise: float = 0.75, components: int = 64) -> None:
        self.np_rng = np.random.default_rng(seed)
        self.noise = noise
        self.components = components
        self.sample: dict[tuple[int, str], list[np.ndarray[Any, Any]]] = {}
        self.basis: np.ndarray[Any, Any] | None = None
        self.scales: np.ndarray[Any, Any] | None = None

    def add_sample(self, key: tuple[int, str], vector: np.ndarray[Any, Any]) -> None:
        self.sample.setdefault(key, []).append(vector)

    def fit(self) -> None:
        allv = np.stack([v for vs in self.sample.values() for v in vs]).astype(np.float64)
        centred = allv - allv.mean(axis=0)
        _, s, vt = np.linalg.svd(centred, full_matrices=False)
        k = min(self.components, vt.shape[0])
        self.basis = vt[:k]
        var = (s[:k] ** 2) / max(1, len(allv) - 1)
        # scale so the expected squared norm of the noise is noise**2
        self.scales = np.sqrt(var / var.sum()) * self.noise
        self._stacked = {key: np.stack(vs) for key, vs in self.sample.items()}
        self._by_topic: dict[int, np.ndarray[Any, Any]] = {}
        for (topic, _lang), vs in self.sample.items():
            prev = self._by_topic.get(topic)
            self._by_topic[topic] = np.stack(vs) if prev is None else np.vstack([prev, np.stack(vs)])

    def synthetic(self, keys: list[tuple[int, str]]) -> np.ndarray[Any, Any]:
        assert self.basis is not None and self.scales is not None
        n = len(keys)
        anchors = np.empty((n, self.basis.shape[1]))
        for i, key in enumerate(keys):
            pool = self._stacked.get(key)
            if pool is None:
                pool = self._by_topic.get(key[0])
            if pool is None:
                pool = next(iter(self._stacked.values()))
            anchors[i] = pool[self.np_rng.integers(len(pool))]
        z = self.np_rng.standard_normal((n, len(self.scales))) * self.scales
        out = anchors + z @ self.basis
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.astype(np.float32)


def unit_mean(vectors: np.ndarray[Any, Any]) -> np.ndarray[Any, Any] | None:
    if len(vectors) == 0:
        return None
    mean = vectors.mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return (mean / norm).astype(np.float32) if norm > 0 and math.isfinite(norm) else None


def query_texts(seed: int, n: int) -> list[dict[str, Any]]:
    """Search queries a person would type: two to five words of one topic, sometimes a common word, some Japanese."""
    rng = random.Random(seed + 1)
    out = []
    for i in range(n):
        topic = TOPIC_NAMES[i % len(TOPIC_NAMES)]
        if topic in JAPANESE and i % 5 == 0:
            words = rng.sample(JAPANESE[topic], 2)
            out.append({"query": " ".join(words), "topic": topic, "lang": "ja"})
            continue
        k = rng.randint(2, 5)
        words = rng.sample(TOPICS[topic], k)
        if rng.random() < 0.3:
            words.append(rng.choice(GENERAL[40:200]))
        out.append({"query": " ".join(words), "topic": topic, "lang": "en"})
    return out


def now_utc() -> datetime:
    return datetime.now(UTC)
