"""Settings, read once from arguments and the environment.

Environment: ``GHOSTMEM_DSN`` (any Postgres; unset = the embedded server), ``GHOSTMEM_HOME`` (data dir of the
embedded server and import state), ``GHOSTMEM_EMBED_MODEL`` (a sentence-transformers model name or path, or
``hash`` for the deterministic test embedder), ``GHOSTMEM_OWNER`` (whose memory this is). The embedded server
also reads ``GHOSTMEM_SHARED_BUFFERS`` when it starts (see :mod:`ghostmem.db.server`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

# Schema names are fixed: migrations create them and SQL refers to them through sql.Identifier.
MEMORY_SCHEMA = "ghostmem"
AGENT_SCHEMA = "agent"
DEFAULT_EMBED_MODEL = "all-MiniLM-L6-v2"
DEFAULT_OWNER = "default"
DEFAULT_RUNTIME_ROLE = "ghostmem_runtime"
EMBEDDED_DATABASE = "ghostmem"


def default_home() -> Path:
    """``GHOSTMEM_HOME``, else the per-user data directory (``~/.local/share/ghostmem`` on Linux)."""
    env = os.environ.get("GHOSTMEM_HOME")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("ghostmem", appauthor=False))


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything ghostmem needs to know to reach its database and embed text."""

    dsn: str | None = None
    home: Path = field(default_factory=default_home)
    owner: str = DEFAULT_OWNER
    embed_model: str = DEFAULT_EMBED_MODEL
    runtime_role: str = DEFAULT_RUNTIME_ROLE
    pool_min_size: int = 1
    pool_max_size: int = 8

    @classmethod
    def from_env(
        cls,
        dsn: str | None = None,
        owner: str | None = None,
        embed_model: str | None = None,
        home: str | Path | None = None,
    ) -> Settings:
        """Explicit arguments win over the environment, which wins over the defaults."""
        return cls(
            dsn=dsn or os.environ.get("GHOSTMEM_DSN") or None,
            home=Path(home).expanduser() if home else default_home(),
            owner=owner or os.environ.get("GHOSTMEM_OWNER") or DEFAULT_OWNER,
            embed_model=embed_model or os.environ.get("GHOSTMEM_EMBED_MODEL") or DEFAULT_EMBED_MODEL,
            runtime_role=os.environ.get("GHOSTMEM_RUNTIME_ROLE") or DEFAULT_RUNTIME_ROLE,
        )
