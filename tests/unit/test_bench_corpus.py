"""The generated benchmark corpus: deterministic, varied, and shaped like real assistant history."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy as np

from bench import corpus

END = datetime(2026, 6, 1, tzinfo=UTC)


def _all(n: int, seed: int = 3) -> list[corpus.Conversation]:
    return list(corpus.conversations(n, seed, END))


def test_exact_size_and_determinism() -> None:
    first = _all(3000)
    assert sum(len(c.messages) for c in first) == 3000
    again = _all(3000)
    assert [(c.conv_id, [m.text for m in c.messages]) for c in first] == [
        (c.conv_id, [m.text for m in c.messages]) for c in again
    ]
    other = _all(3000, seed=4)
    assert first[0].conv_id != other[0].conv_id


def test_variety_of_platforms_projects_roles_languages_and_lengths() -> None:
    convs = _all(6000)
    platforms = Counter(c.platform for c in convs)
    assert len(platforms) >= 5
    assert len({c.project for c in convs if c.project}) >= 10
    roles = Counter(m.role for c in convs for m in c.messages)
    assert {"user", "assistant", "tool"} <= set(roles)
    assert any(c.lang == "ja" for c in convs)
    lengths = [len(c.messages) for c in convs]
    assert min(lengths) <= 4 and max(lengths) >= 40
    vocabulary = {w for c in convs for m in c.messages for w in m.text.split()}
    assert len(vocabulary) > 2000  # identifiers, paths and error codes on top of the word lists


def test_timestamps_span_years_in_order_and_end_by_the_end() -> None:
    convs = _all(6000)
    starts = [c.started_at for c in convs]
    assert END - min(starts) > timedelta(days=365)
    assert all(c.ended_at <= END for c in convs)
    for c in convs:
        ts = [m.ts for m in c.messages]
        assert ts == sorted(ts)
    recent = sum(1 for s in starts if END - s < timedelta(days=180))
    assert recent / len(starts) > 180 / (365 * corpus.YEARS)  # more activity in recent months


def test_synthetic_vectors_are_unit_and_stay_near_their_topic() -> None:
    rng = np.random.default_rng(0)
    model = corpus.VectorModel(seed=1)
    centres = {t: rng.standard_normal(corpus.DIMS) for t in range(3)}
    for t, centre in centres.items():
        for _ in range(40):
            v = centre + 0.5 * rng.standard_normal(corpus.DIMS)
            model.add_sample((t, "en"), v / np.linalg.norm(v))
    model.fit()
    out = model.synthetic(
        [(0, "en")] * 50 + [(2, "ja")] * 50
    )  # (2, "ja") has no sample: falls back to topic 2
    assert out.shape == (100, corpus.DIMS)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    unit = {t: c / np.linalg.norm(c) for t, c in centres.items()}
    assert float(np.mean(out[:50] @ unit[0])) > float(np.mean(out[:50] @ unit[1])) + 0.2
    assert float(np.mean(out[50:] @ unit[2])) > float(np.mean(out[50:] @ unit[0])) + 0.2


def test_queries_cover_topics_and_japanese() -> None:
    queries = corpus.query_texts(7, 32)
    assert len(queries) == 32
    assert len({q["topic"] for q in queries}) == len(corpus.TOPIC_NAMES)
    assert any(q["lang"] == "ja" for q in queries)
    assert all(q["query"].strip() for q in queries)
