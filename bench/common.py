"""Helpers shared by the benchmarks: a throwaway server, throwaway databases, generic-format files, the real model."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from ghostmem.db import EmbeddedServer
from ghostmem.embed import SentenceTransformerEmbedder
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
