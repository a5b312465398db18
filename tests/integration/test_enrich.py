"""Enrichment on a real Postgres: intensity, conversation embeddings, clusters and their labels."""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from ghostmem import GhostMem, HashEmbedder
from ghostmem.enrich import recluster, refresh, terms
from ghostmem.records import ConversationRecord, MessageRecord, Role
from ghostmem.store import save_conversation

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _words(text: str) -> list[str]:
    return text.split()


ELIXIR = _words("phoenix elixir mix liveview ecto genserver supervisor plug endpoint router channel beam")
BREAD = _words("sourdough starter flour hydration levain crumb proofing oven knead dough bake crust")
FILLER = _words("the a and how do i my with for please it is")


def _sentence(rng: random.Random, vocab: Sequence[str], n: int = 8) -> str:
    words = [rng.choice(vocab) for _ in range(n)] + [rng.choice(FILLER) for _ in range(3)]
    rng.shuffle(words)
    return " ".join(words)


def _record(
    conv_id: str,
    turns: Sequence[tuple[Role, str, datetime | None]],
    title: str | None = None,
) -> ConversationRecord:
    messages = [MessageRecord(f"{conv_id}-{i}", role, text, ts) for i, (role, text, ts) in enumerate(turns)]
    return ConversationRecord(conv_id=conv_id, platform="generic", messages=messages, title=title)


def _topic_conversation(
    rng: random.Random, conv_id: str, vocab: Sequence[str], start: datetime
) -> ConversationRecord:
    turns: list[tuple[Role, str, datetime | None]] = []
    for i in range(6):
        role: Role = "user" if i % 2 == 0 else "assistant"
        turns.append((role, _sentence(rng, vocab), start + timedelta(minutes=i)))
    return _record(conv_id, turns, title=" ".join(rng.sample(list(vocab), 3)))


def _save(gm: GhostMem, records: Sequence[ConversationRecord], tier: str = "personal") -> None:
    with gm.connection() as conn:
        for rec in records:
            save_conversation(conn, gm.owner, tier, rec, embedder=gm.embedder)
        refresh(conn, gm.owner, tier, [r.conv_id for r in records])


def _conversations(gm: GhostMem) -> dict[str, dict[str, Any]]:
    with gm.connection() as conn:
        cur = conn.execute(
            "SELECT conv_id, cluster, topic, intensity, embedding::real[] AS embedding "
            "FROM ghostmem.conversations WHERE owner = %s",
            (gm.owner,),
        )
        return {
            row[0]: {"cluster": row[1], "topic": row[2], "intensity": row[3], "embedding": row[4]}
            for row in cur
        }


def _two_topics(gm: GhostMem, n: int = 8, seed: int = 1) -> None:
    rng = random.Random(seed)
    records = [_topic_conversation(rng, f"elixir-{i}", ELIXIR, T0 + timedelta(hours=i)) for i in range(n)]
    records += [_topic_conversation(rng, f"bread-{i}", BREAD, T0 + timedelta(hours=i)) for i in range(n)]
    _save(gm, records)


def test_two_topics_end_in_two_clusters_labelled_by_their_own_words(gm: GhostMem) -> None:
    _two_topics(gm)
    with gm.connection() as conn:
        report = recluster(conn, gm.owner)
    assert report.full and report.k == 2 and report.conversations == 16
    rows = _conversations(gm)
    elixir = {rows[f"elixir-{i}"]["cluster"] for i in range(8)}
    bread = {rows[f"bread-{i}"]["cluster"] for i in range(8)}
    assert len(elixir) == 1 and len(bread) == 1 and elixir != bread
    for prefix, own, other in (("elixir", ELIXIR, BREAD), ("bread", BREAD, ELIXIR)):
        topic = rows[f"{prefix}-0"]["topic"]
        words = topic.split(" · ")
        assert len(words) == 3, topic
        assert all(w in own and w not in other for w in words), topic
        assert all(rows[f"{prefix}-{i}"]["topic"] == topic for i in range(8))
    assert sorted(c.size for c in report.clusters) == [8, 8]


def test_recluster_is_deterministic(gm: GhostMem) -> None:
    _two_topics(gm)
    with gm.connection() as conn:
        first = recluster(conn, gm.owner)
    before = _conversations(gm)
    with gm.connection() as conn:
        second = recluster(conn, gm.owner, force=True)
    after = _conversations(gm)
    assert [(c.cluster, c.topic, c.size) for c in first.clusters] == [
        (c.cluster, c.topic, c.size) for c in second.clusters
    ]
    assert {k: (v["cluster"], v["topic"]) for k, v in before.items()} == {
        k: (v["cluster"], v["topic"]) for k, v in after.items()
    }


def test_new_conversation_joins_the_nearest_cluster_until_the_next_full_pass(gm: GhostMem) -> None:
    _two_topics(gm)
    with gm.connection() as conn:
        recluster(conn, gm.owner)
    rows = _conversations(gm)
    rng = random.Random(99)
    _save(gm, [_topic_conversation(rng, "bread-new", BREAD, T0 + timedelta(days=3))])
    new = _conversations(gm)["bread-new"]
    assert (new["cluster"], new["topic"]) == (rows["bread-0"]["cluster"], rows["bread-0"]["topic"])

    # Little growth: no full pass, unclustered conversations are placed.
    with gm.connection() as conn:
        conn.execute(
            "UPDATE ghostmem.conversations SET cluster = NULL, topic = NULL WHERE owner = %s AND conv_id = %s",
            (gm.owner, "elixir-3"),
        )
        report = recluster(conn, gm.owner)
    assert not report.full and report.assigned == 1 and report.k == 2
    assert _conversations(gm)["elixir-3"]["cluster"] == rows["elixir-0"]["cluster"]

    # Growth past a quarter plus ten: the next call runs a full pass and finds the third topic.
    garden = _words("tomato compost seedling mulch trellis basil pruning irrigation soil greenhouse")
    _save(
        gm,
        [_topic_conversation(rng, f"garden-{i}", garden, T0 + timedelta(days=4, hours=i)) for i in range(16)],
    )
    with gm.connection() as conn:
        report = recluster(conn, gm.owner)
    assert report.full and report.conversations == 33
    rows = _conversations(gm)
    assert len({rows[f"garden-{i}"]["cluster"] for i in range(16)}) == 1
    assert all(w in garden for w in rows["garden-0"]["topic"].split(" · "))


def test_intensity_orders_a_dense_exchange_above_a_sparse_one(gm: GhostMem) -> None:
    dense = [("user" if i % 2 == 0 else "assistant", f"step {i} of the fix", T0 + timedelta(seconds=30 * i)) for i in range(20)]  # fmt: skip
    sparse = [
        ("user" if i % 2 == 0 else "assistant", f"note {i}", T0 + timedelta(hours=3 * i)) for i in range(4)
    ]
    short = [("user", "quick question", T0), ("assistant", "quick answer", T0 + timedelta(seconds=20))]
    _save(gm, [_record("dense", dense), _record("sparse", sparse), _record("short", short)])  # type: ignore[arg-type]
    rows = _conversations(gm)
    values = {k: rows[k]["intensity"] for k in ("dense", "sparse", "short")}
    assert all(0.0 <= v < 1.0 for v in values.values()), values
    assert values["dense"] > 0.7 > values["short"] > values["sparse"], values


def test_tool_calls_and_split_messages_do_not_inflate_intensity(gm: GhostMem) -> None:
    base: list[tuple[Role, str, datetime | None]] = []
    busy: list[tuple[Role, str, datetime | None]] = []
    for i in range(6):
        at = T0 + timedelta(minutes=2 * i)
        role: Role = "user" if i % 2 == 0 else "assistant"
        base.append((role, f"message {i}", at))
        busy.append((role, f"message {i}", at))
        if role == "assistant":  # the same answer split in two, with tool traffic in between
            busy.append(("tool_call", "run ls -la", at + timedelta(seconds=5)))
            busy.append(("tool", "file1 file2 file3", at + timedelta(seconds=6)))
            busy.append(("assistant", f"message {i} continued", at + timedelta(seconds=7)))
    _save(gm, [_record("base", base), _record("busy", busy)])
    rows = _conversations(gm)
    assert rows["busy"]["intensity"] == pytest.approx(rows["base"]["intensity"], abs=0.03)


def test_missing_timestamps_and_empty_conversations(gm: GhostMem) -> None:
    untimed: list[tuple[Role, str, datetime | None]] = [
        ("user", "hello there", None),
        ("assistant", "hi", None),
    ] * 5
    only_tools: list[tuple[Role, str, datetime | None]] = [("tool", "output", T0)]
    _save(gm, [_record("untimed", untimed), _record("only-tools", only_tools)])
    rows = _conversations(gm)
    expected = (1 - math.exp(-1.0)) * (1 - math.exp(-10 / 8.0))  # nominal one minute per turn, ten turns
    assert rows["untimed"]["intensity"] == pytest.approx(expected, rel=1e-4)
    assert rows["only-tools"]["intensity"] == 0.0
    assert rows["only-tools"]["embedding"] is None


def test_conversation_embedding_is_the_normalised_mean_of_its_messages(gm: GhostMem) -> None:
    turns: list[tuple[Role, str, datetime | None]] = [
        ("user", "how do I configure the phoenix router", T0),
        ("tool", "a long tool dump that must not count", T0),
        ("assistant", "edit router.ex and add a scope", T0),
        ("user", "and the endpoint", T0),
    ]
    _save(gm, [_record("mean", turns)])
    embedder = HashEmbedder()
    vectors = embedder.embed_documents([t for r, t, _ in turns if r in ("user", "assistant")])
    mean = [sum(col) / len(vectors) for col in zip(*vectors, strict=True)]
    norm = math.sqrt(sum(x * x for x in mean))
    expected = [x / norm for x in mean]
    got = _conversations(gm)["mean"]["embedding"]
    assert got is not None
    assert max(abs(a - b) for a, b in zip(got, expected, strict=True)) < 1e-5


def test_clusters_are_per_owner_and_cover_both_tiers(gm: GhostMem, pg_dsn: str) -> None:
    rng = random.Random(5)
    _save(gm, [_topic_conversation(rng, f"e-{i}", ELIXIR, T0) for i in range(6)])
    _save(gm, [_topic_conversation(rng, f"b-{i}", BREAD, T0) for i in range(6)], tier="library")
    with GhostMem(dsn=pg_dsn, owner=gm.owner + "-other", embedder=HashEmbedder()) as other:
        _two_topics(other, n=4)
        with other.connection() as conn:
            recluster(conn, other.owner)
    with gm.connection() as conn:
        report = recluster(conn, gm.owner)
        stored = conn.execute(
            "SELECT count(*) FROM ghostmem.clusters WHERE owner = %s", (gm.owner,)
        ).fetchone()
    assert report.conversations == 12 and report.k == 2
    assert stored is not None and stored[0] == 2


def test_japanese_conversations_are_labelled_by_their_words(gm: GhostMem) -> None:
    # Words separated by spaces so the hash embedder (a bag of words) sees them; the labeller uses bigrams.
    cooking = _words("出汁 味噌汁 昆布 鰹節 豆腐 醤油 煮物 料理")
    database = _words("索引 検索 会話 履歴 全文 性能 設計 結合")
    rng = random.Random(3)
    records = [
        _record(f"ja-{name}-{i}", [("user", " を ".join(rng.sample(vocab, 5)), T0)], title=" ".join(rng.sample(vocab, 2)))
        for name, vocab in (("cook", cooking), ("db", database))
        for i in range(6)
    ]  # fmt: skip
    _save(gm, records)
    with gm.connection() as conn:
        report = recluster(conn, gm.owner)
    assert report.k == 2
    rows = _conversations(gm)
    for name, vocab in (("cook", cooking), ("db", database)):
        words = rows[f"ja-{name}-0"]["topic"].split(" · ")
        assert all(any(w in v for v in vocab) for w in words), words


def test_a_few_conversations_form_one_cluster_named_by_their_common_words(gm: GhostMem) -> None:
    rng = random.Random(11)
    _save(gm, [_topic_conversation(rng, f"few-{i}", BREAD, T0) for i in range(3)])
    with gm.connection() as conn:
        report = recluster(conn, gm.owner)
    assert report.k == 1 and report.clusters[0].size == 3
    words = report.clusters[0].topic.split(" · ")
    assert len(words) == 3 and all(w in BREAD for w in words), words


@pytest.mark.parametrize("kinds", [1, 2, 3])
def test_copies_of_a_few_conversations_cluster_without_a_warning(gm: GhostMem, kinds: int) -> None:
    """The same few conversations imported under many ids (a data set's repeated greeting, an export read twice
    under new ids) embed alike: the clusters are at most the distinct ones, and scikit-learn's warning about empty
    clusters, which reached the terminal of `ghostmem import`, is never raised."""
    rng = random.Random(5)
    vocabularies = (ELIXIR, BREAD, _words("garden tomato compost seedling mulch trellis harvest soil"))
    originals = [_topic_conversation(rng, f"kind-{i}", vocabularies[i], T0) for i in range(kinds)]
    copies = [
        _record(f"copy-{i}", [(m.role, m.text, m.ts) for m in originals[i % kinds].messages])
        for i in range(24)
    ]
    _save(gm, copies)
    with gm.connection() as conn, warnings.catch_warnings():
        warnings.simplefilter("error")
        report = recluster(conn, gm.owner, force=True)
    assert 1 <= report.k <= kinds
    assert sum(c.size for c in report.clusters) == 24
    clusters = {row["cluster"] for row in _conversations(gm).values()}
    assert len(clusters) == report.k


def test_terms_drop_stop_words_noise_and_hiragana_bigrams() -> None:
    assert terms("Please help me set up the Phoenix mix server") == ["set", "phoenix", "mix", "server"]
    assert terms("会話を検索する") == ["会話", "検索"]
    assert terms("see https://example.com/x and [REDACTED:openai_key] 3f2a9c1e8b7d6f5a4c3b") == []
    assert terms("[REDACTED_MESSAGE len=98 sha=c002ff99] commit c002ff9 on python3 and k8s") == [
        "commit",
        "python3",
        "k8s",
    ]
    assert terms("한국어 검색") == ["한국", "국어", "검색"]


def test_real_model_separates_topics_phrased_in_different_words(gm: GhostMem, real_embedder: Any) -> None:
    web = [
        "My Phoenix LiveView page loses its websocket connection after deploy",
        "How do I broadcast a PubSub message to every LiveView process?",
        "Ecto migration fails when adding a unique index to the users table",
        "The GenServer crashes and the supervisor keeps restarting it",
        "Plug router returns 404 for the new API endpoint in my Elixir app",
        "mix phx.server cannot bind port 4000, address already in use",
    ]
    bread = [
        "My sourdough starter smells like acetone and does not rise",
        "What hydration should I use for a rustic loaf with whole wheat flour?",
        "The crumb of my bread is dense and gummy in the middle",
        "How long should the dough proof in the fridge overnight?",
        "Baking in a Dutch oven: when do I remove the lid?",
        "Levain peaked too early, can I still mix the final dough?",
    ]
    records = [
        _record(
            f"{name}-{i}", [("user", text, T0), ("assistant", f"Let us look at this: {text.lower()}", T0)]
        )
        for name, texts in (("web", web), ("bread", bread))
        for i, text in enumerate(texts)
    ]
    with gm.connection() as conn:
        for rec in records:
            save_conversation(conn, gm.owner, "personal", rec, embedder=real_embedder)
        refresh(conn, gm.owner, "personal", [r.conv_id for r in records])
        report = recluster(conn, gm.owner)
    rows = _conversations(gm)
    assert report.k == 2
    assert len({rows[f"web-{i}"]["cluster"] for i in range(6)}) == 1
    assert len({rows[f"bread-{i}"]["cluster"] for i in range(6)}) == 1
    assert rows["web-0"]["cluster"] != rows["bread-0"]["cluster"]
    for name, texts in (("web", web), ("bread", bread)):
        own = " ".join(texts).lower()
        assert all(word in own for word in rows[f"{name}-0"]["topic"].split(" · ")), rows[f"{name}-0"][
            "topic"
        ]
