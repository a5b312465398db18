"""Helpers shared by the benchmarks: a throwaway server, throwaway databases, generic-format files, the real model."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import uuid
from array import array
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from ghostmem.db import EmbeddedServer
from ghostmem.embed import Embedder, SentenceTransformerEmbedder
from psycopg import sql

RESULTS = Path(__file__).resolve().parent / "results"


@contextmanager
def server(dsn: str | None = None) -> Iterator[str]:
    """The admin DSN of a server to create databases on: ``dsn`` if given, else an embedded one in a temp dir."""
    if dsn:
        yield dsn
        return
    home = Path(tempfile.mkdtemp(prefix="ghostmem-server-"))
    embedded = EmbeddedServer(home)
    try:
        admin = embedded.start().dsn("postgres")
        assert admin is not None
        yield admin
    finally:
        embedded.stop()
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def throwaway_database(admin_dsn: str, prefix: str = "ghostmem_bench") -> Iterator[str]:
    """A new, empty database on the server, dropped on exit; yields its DSN."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    info = psycopg.conninfo.conninfo_to_dict(admin_dsn)
    info["dbname"] = name
    try:
        yield psycopg.conninfo.make_conninfo(**info)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def write_generic_jsonl(conversations: Iterable[dict[str, Any]], path: Path) -> Path:
    """Write conversations in ghostmem's generic JSONL import format (one conversation object per line)."""
    with path.open("w", encoding="utf-8") as fh:
        for conv in conversations:
            fh.write(json.dumps(conv, ensure_ascii=False, default=str) + "\n")
    return path


def real_embedder(threads: int = 1) -> SentenceTransformerEmbedder:
    """The default MiniLM model, offline, on ``threads`` torch threads.

    One thread by default: on this shared 2-core machine two intra-op threads spin against each other under load
    (one short query measured 2 s on two threads and 80 ms on one).
    """
    import torch

    torch.set_num_threads(threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return SentenceTransformerEmbedder()


def embedding_cache_path() -> Path:
    """Where benches keep vectors between runs: ``GHOSTMEM_BENCH_CACHE``, else ``~/.cache/ghostmem/bench-vectors.db``."""
    default = Path.home() / ".cache" / "ghostmem" / "bench-vectors.db"
    return Path(os.environ.get("GHOSTMEM_BENCH_CACHE", default))


class CachedEmbedder:
    """An embedder whose vectors are kept on disk (SQLite, keyed by model and text hash) across bench runs.

    The retrieval benchmark embeds the same ~20,000 texts on every run; the model is the slow part (minutes on a
    loaded 2-core machine), and a cached vector is the model's own output, stored as float32 as the model made it.
    A vector is returned as stored (float32, the model's own precision) on the first run as on later ones. Worker
    processes share the file (SQLite locks it).
    """

    def __init__(self, inner: Embedder, path: Path | None = None) -> None:
        self._inner = inner
        self._path = path or embedding_cache_path()
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS vectors (model TEXT, hash BLOB, vector BLOB, PRIMARY KEY (model, hash))"
            )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self._path, timeout=60)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def dim(self) -> int:
        return self._inner.dim

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        keys = [hashlib.sha256(t.encode("utf-8")).digest() for t in texts]
        found: dict[bytes, list[float]] = {}
        with self._connect() as db:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                rows = db.execute(
                    f"SELECT hash, vector FROM vectors WHERE model = ? AND hash IN ({','.join('?' * len(chunk))})",
                    [self.name, *chunk],
                ).fetchall()
                found.update((h, array("f", v).tolist()) for h, v in rows)
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            stored = [array("f", v) for v in self._inner.embed_documents([text_of[k] for k in missing])]
            found.update((k, v.tolist()) for k, v in zip(missing, stored, strict=True))
            with self._connect() as db:
                db.executemany(
                    "INSERT OR IGNORE INTO vectors VALUES (?, ?, ?)",
                    [(self.name, k, v.tobytes()) for k, v in zip(missing, stored, strict=True)],
                )
        return [found[k] for k in keys]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]
