"""bench.retrieval's bookkeeping: the tune/held-out split, the vector cache, the floor table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ghostmem import HashEmbedder

from bench.common import CachedEmbedder
from bench.retrieval import Question, floor_table, split_units


def test_the_split_is_fixed_disjoint_and_holds_out_a_third() -> None:
    data = [{"sample_id": f"conv-{i}", "qa": []} for i in range(7)]
    tune = split_units("locomo", data, "tune")
    held = split_units("locomo", data, "held-out")
    ids = {u["sample_id"] for u in tune} | {u["sample_id"] for u in held}
    assert len(held) == 3 and len(tune) == 4 and ids == {u["sample_id"] for u in data}
    # the same ids give the same split whatever their order in the file
    assert split_units("locomo", list(reversed(data)), "held-out") == sorted(
        held, key=lambda u: -int(u["sample_id"].split("-")[1])
    )
    articles = {"version": "x", "data": [{"title": t, "paragraphs": []} for t in "abcd"]}
    assert len(split_units("jsquad", articles, "held-out")["data"]) == 2
    assert split_units("jsquad", articles, "all") == articles


class _Counting(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.seen += texts
        return super().embed_documents(texts)


def test_cached_vectors_are_the_models_and_are_made_once(tmp_path: Path) -> None:
    inner = _Counting()
    first = CachedEmbedder(inner, tmp_path / "v.db").embed_documents(["a b", "c", "a b"])
    again = CachedEmbedder(inner, tmp_path / "v.db")
    assert again.embed_documents(["c", "a b"]) == [first[1], first[0]]
    assert again.embed_query("a b") == first[0]
    assert inner.seen == ["a b", "c"]
    expected = HashEmbedder().embed_documents(["a b"])[0]
    assert max(abs(x - y) for x, y in zip(first[0], expected, strict=True)) < 1e-6  # float32 storage


def test_the_floor_drops_vector_only_hits_only() -> None:
    q = Question("q", "?", "all", gold_sessions={"s1"})
    hits = [
        {"native_id": "0", "conv_id": "s2", "lexical": False, "similarity": 0.2},
        {"native_id": "1", "conv_id": "s1", "lexical": True, "similarity": 0.1},
    ]
    absent = [[{"native_id": "0", "conv_id": "s9", "lexical": False, "similarity": 0.25}]]
    table = {row["floor"]: row for row in floor_table("longmemeval", [(q, hits)], absent)}
    assert table[0.0]["recall_all@5"] == 1.0 and table[0.0]["absent_with_vector_only"] == 1.0
    assert table[0.3]["recall_all@5"] == 1.0 and table[0.3]["absent_empty"] == 1.0
    assert table[0.2]["absent_with_vector_only"] == 1.0 and table[0.25]["absent_rows_top10"] == 1
