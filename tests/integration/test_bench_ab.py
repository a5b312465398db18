"""bench.ab end to end on a small store: a variant compared with itself differs nowhere; one whose ranking changes
differs, so the check can fail."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from ghostmem import search
from ghostmem.embed import make_embedder

from bench import ab, scale
from bench.common import throwaway_database

pytestmark = pytest.mark.slow

MESSAGES = 300
RUN = [
    "--model",
    "hash",
    "--queries",
    "3",
    "--passes",
    "1",
    "--cases",
    "no filter,days=30",
    "--modes",
    "hybrid",
]


@pytest.fixture(scope="module")
def store(server_dsn: str) -> Iterator[str]:
    with throwaway_database(server_dsn, "ghostmem_bench_ab") as dsn:
        scale.ensure_corpus(dsn, MESSAGES, 7, embedder=make_embedder("hash"), sample=100)
        yield dsn


def _run(dsn: str, a: str, out: Path) -> list[dict[str, object]]:
    assert ab.main(["--dsn", dsn, "--a", a, "--b", "cur", *RUN, "--json", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert payload["command"].startswith("python -m bench.ab --dsn")
    rows: list[dict[str, object]] = payload["cases"]
    assert [(r["case"], r["mode"]) for r in rows] == [("no filter", "hybrid"), ("days=30", "hybrid")]
    return rows


def test_a_variant_compared_with_itself_differs_nowhere(store: str, tmp_path: Path) -> None:
    rows = _run(store, "cur", tmp_path / "same.json")
    for row in rows:
        assert row["diff"] == []
        cpu = row["cpu"]
        assert isinstance(cpu, dict) and cpu["A"]["n"] == cpu["B"]["n"] == 3
        assert cpu["A"]["p50_ms"] > 0 and row["ratio_sum"] is not None
        call = row["call"]  # the whole program run, at least its statements' server-side time
        assert isinstance(call, dict) and call["A"]["n"] == call["B"]["n"] == 3
        assert call["B"]["p50_ms"] >= row["wall"]["B"]["p50_ms"] > 0  # type: ignore[index]
        assert row["ratio_wall_sum"] is not None and row["ratio_call_sum"] is not None


def test_a_variant_that_ranks_otherwise_differs(store: str, tmp_path: Path) -> None:
    source = Path(search.__file__).read_text(encoding="utf-8")
    assert "\nRRF_K = 60\n" in source
    altered = tmp_path / "search.py"
    altered.write_text(source.replace("\nRRF_K = 60\n", "\nRRF_K = 1\n"), encoding="utf-8")
    rows = _run(store, str(altered), tmp_path / "altered.json")
    assert all(row["diff"] for row in rows)  # every fused score changes
