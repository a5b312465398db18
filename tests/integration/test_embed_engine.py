"""The ONNX engine against its reference: same vectors as sentence-transformers, no torch on the query path, and
a model cache that survives damage, a killed export and two processes using the model first at once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ghostmem.cli import sample_exports
from ghostmem.config import DEFAULT_EMBED_MODEL
from ghostmem.embed import (
    MIN_COSINE,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    cache_dir,
    make_embedder,
    read_config,
)

pytestmark = pytest.mark.slow  # every test here uses the reference model (so is marked `model` too)

HEAVY = ("torch", "transformers", "sentence_transformers", "sklearn")


def _sample_texts() -> list[str]:
    """Real conversation text from the shipped sample exports (every platform), plus edge cases."""
    texts: list[str] = []
    for path in sorted(sample_exports().rglob("*.json*")):
        raw = path.read_text(encoding="utf-8")
        docs = (
            [json.loads(line) for line in raw.splitlines() if line.strip()]
            if path.suffix == ".jsonl"
            else [json.loads(raw)]
        )
        texts += [s for doc in docs for s in _strings(doc) if len(s) > 20]
    texts = list(dict.fromkeys(texts))[:150]
    return [*texts, "", "x", "日本語のテキストです。", "word " * 400, "\t\n tabs and newlines \n"]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embed-home")


@pytest.fixture(scope="module")
def engine(home: Path, real_embedder: SentenceTransformerEmbedder) -> OnnxEmbedder:
    """The engine, exported into a fresh home (the export checks itself against the reference)."""
    embedder = make_embedder(DEFAULT_EMBED_MODEL, home)
    assert isinstance(embedder, OnnxEmbedder)
    assert embedder.engine == "onnxruntime"
    return embedder


def _run(code: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GHOSTMEM_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600, check=False
    )


def test_onnx_vectors_match_sentence_transformers(
    engine: OnnxEmbedder, real_embedder: SentenceTransformerEmbedder
) -> None:
    texts = _sample_texts()
    assert len(texts) > 60
    got = np.array(engine.embed_documents(texts))
    expected = np.array(real_embedder.embed_documents(texts))
    cosines = (got * expected).sum(axis=1)
    assert cosines.min() >= MIN_COSINE, texts[int(cosines.argmin())]
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # one text alone (no padding) gives the vector it got inside a padded batch
    assert np.allclose(engine.embed_query(texts[3]), got[3], atol=1e-5)
    assert engine.name == real_embedder.name and engine.dim == real_embedder.dim == got.shape[1]


def test_duplicates_share_one_vector_and_keep_their_places(engine: OnnxEmbedder) -> None:
    texts = ["the server does not start", "budget for March", "the server does not start", "budget for March"]
    vectors = engine.embed_documents(texts)
    assert vectors[0] == vectors[2] and vectors[1] == vectors[3] and vectors[0] != vectors[1]
    assert np.allclose(vectors[1], engine.embed_query("budget for March"), atol=1e-6)


def test_the_query_path_imports_no_torch(engine: OnnxEmbedder, home: Path) -> None:
    expected = engine.embed_query("why does the import stop at 0/N?")
    res = _run(
        "import json, sys\n"
        "from ghostmem.embed import make_embedder\n"
        f"v = make_embedder({DEFAULT_EMBED_MODEL!r}).embed_query('why does the import stop at 0/N?')\n"
        f"print(json.dumps({{'v': v, 'heavy': [m for m in {HEAVY!r} if m in sys.modules]}}))",
        home,
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["heavy"] == []
    assert np.allclose(out["v"], expected, atol=1e-6)
    assert res.stderr == ""  # nothing printed: no progress bars, no warnings


def test_a_damaged_cache_is_exported_again_once_by_two_processes_at_once(
    engine: OnnxEmbedder, home: Path, tmp_path: Path
) -> None:
    """The cache is copied, its model file cut in half (a disk full or a copy interrupted) and a killed export's
    temporary directory left beside it; two processes then use the model at the same moment."""
    expected = engine.embed_query("a damaged cache")
    other = tmp_path / "home"
    shutil.copytree(home / "models", other / "models", ignore=shutil.ignore_patterns("*.lock"))
    directory = cache_dir(other, DEFAULT_EMBED_MODEL)
    model_file = directory / "model.onnx"
    model_file.write_bytes(model_file.read_bytes()[: model_file.stat().st_size // 2])
    leftover = directory.parent / f".{directory.name}.killed"
    leftover.mkdir()
    (leftover / "model.onnx").write_bytes(b"partial")

    code = (
        "import json, logging\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "from ghostmem.embed import make_embedder\n"
        f"print(json.dumps(make_embedder({DEFAULT_EMBED_MODEL!r}).embed_query('a damaged cache')))"
    )
    env = {**os.environ, "GHOSTMEM_HOME": str(other), "HF_HUB_OFFLINE": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=900) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e.decode() for _, e in outputs]
    for out, _ in outputs:
        assert np.allclose(json.loads(out), expected, atol=1e-6)
    logs = "".join(e.decode() for _, e in outputs)
    assert logs.count("preparing all-MiniLM-L6-v2") == 1  # one exported; the other waited and loaded it
    assert not leftover.exists()
    config = read_config(directory)
    assert config is not None and config.supported and config.min_cosine >= MIN_COSINE


def test_a_pipeline_the_engine_cannot_reproduce_stays_on_sentence_transformers(
    tmp_path: Path, real_embedder: SentenceTransformerEmbedder
) -> None:
    """GHOSTMEM_EMBED_MODEL may name any sentence-transformers model: one with a pooling mode the engine does not
    implement is recorded as unsupported and embedded by the reference, with the reference's vectors."""
    from sentence_transformers import SentenceTransformer, models

    reference = real_embedder._load()
    custom = SentenceTransformer(
        modules=[reference[0], models.Pooling(real_embedder.dim, "weightedmean")],
        device="cpu",
    )
    path = tmp_path / "weighted-minilm"
    custom.save(str(path))
    embedder = make_embedder(str(path), tmp_path / "home")
    assert isinstance(embedder, OnnxEmbedder)
    assert embedder.engine == "sentence-transformers"
    config = read_config(cache_dir(tmp_path / "home", str(path)))
    assert config is not None and not config.supported and "weightedmean" in config.reason
    assert not (cache_dir(tmp_path / "home", str(path)) / "model.onnx").exists()
    texts = ["weighted mean pooling", "another text, longer than the first one"]
    expected = custom.encode(texts, normalize_embeddings=True)
    assert np.allclose(embedder.embed_documents(texts), expected, atol=1e-5)
    assert embedder.dim == 384
