"""Settings, read once from arguments and the environment.

Environment: ``GHOSTMEM_DSN`` (any Postgres; unset = the embedded server), ``GHOSTMEM_HOME`` (data dir of the
embedded server and import state), ``GHOSTMEM_EMBED_MODEL`` (a sentence-transformers model name or path, or
``hash`` for the deterministic test embedder), ``GHOSTMEM_OWNER`` (whose memory this is), and the connection
pool's ``GHOSTMEM_POOL_MIN_SIZE`` / ``GHOSTMEM_POOL_MAX_SIZE`` (connections kept open / at most) and
``GHOSTMEM_POOL_TIMEOUT`` (seconds a call waits for a connection before it fails with one sentence). Reads may go
to a streaming-replication standby: ``GHOSTMEM_READ_DSN``, ``GHOSTMEM_READ_WAIT`` (seconds a read waits for the
standby before it goes to the primary) and ``GHOSTMEM_READ_RETRY`` (seconds a standby that failed or fell behind is
left alone; see :mod:`ghostmem.db.replica`). The embedded server also reads ``GHOSTMEM_SHARED_BUFFERS`` when it
starts (see :mod:`ghostmem.db.server`).

A DSN may be a libpq connection string or URL, or a SQLAlchemy URL (``postgresql+psycopg://``,
``postgresql+psycopg2://``, ``postgres://``): :func:`normalize_dsn` turns the latter into the former, so the URL an
application already gives SQLAlchemy or langchain-postgres works here unchanged.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from ghostmem.context import checked_owner
from ghostmem.errors import InvalidArgument
from ghostmem.limits import STORED_EMBEDDER_NAME_BYTES, utf8_bytes

DEFAULT_EMBED_MODEL = "all-MiniLM-L6-v2"
DEFAULT_OWNER = "default"
DEFAULT_RUNTIME_ROLE = "ghostmem_runtime"
# PostgreSQL keeps at most 63 bytes of a name (NAMEDATALEN - 1) and cuts a longer one with a mere notice: a runtime
# role named longer was created, granted and switched to under its cut name while ghostmem's list of runtime roles
# held the whole one, so the grants of later migrations skipped it and every ghost operation failed with
# "permission denied".
ROLE_NAME_BYTES = 63
EMBEDDED_DATABASE = "ghostmem"
DEFAULT_POOL_MIN_SIZE = 1
DEFAULT_POOL_MAX_SIZE = 8
DEFAULT_POOL_TIMEOUT = 10.0
DEFAULT_READ_WAIT = 0.25
DEFAULT_READ_RETRY = 5.0

# A SQLAlchemy URL's scheme: the dialect, optionally "+driver" (postgresql+psycopg, postgres+asyncpg, ...).
_SQLALCHEMY_SCHEME = re.compile(r"^postgres(?:ql)?(?:\+[a-z0-9_]+)?://", re.IGNORECASE)


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
    pool_min_size: int = DEFAULT_POOL_MIN_SIZE
    pool_max_size: int = DEFAULT_POOL_MAX_SIZE
    pool_timeout: float = DEFAULT_POOL_TIMEOUT
    read_dsn: str | None = None
    read_wait: float = DEFAULT_READ_WAIT
    read_retry: float = DEFAULT_READ_RETRY

    def __post_init__(self) -> None:
        checked_owner(self.owner)
        checked_embedder_name(self.embed_model)
        size = utf8_bytes(self.runtime_role)
        if size > ROLE_NAME_BYTES:
            raise InvalidArgument(
                f"the runtime role name {self.runtime_role[:40]!r}… is {size} bytes, longer than the "
                f"{ROLE_NAME_BYTES} bytes PostgreSQL keeps of a name: set GHOSTMEM_RUNTIME_ROLE to a shorter one"
            )

    @classmethod
    def from_env(
        cls,
        dsn: Any = None,
        owner: str | None = None,
        embed_model: str | None = None,
        home: str | Path | None = None,
        *,
        pool_min_size: int | None = None,
        pool_max_size: int | None = None,
        pool_timeout: float | None = None,
        read_dsn: Any = None,
        read_wait: float | None = None,
        read_retry: float | None = None,
    ) -> Settings:
        """Explicit arguments win over the environment, which wins over the defaults.

        ``dsn`` may also be a SQLAlchemy ``Engine`` or ``URL``: its URL is used (see :func:`normalize_dsn`).
        """
        max_size = _number("GHOSTMEM_POOL_MAX_SIZE", pool_max_size, DEFAULT_POOL_MAX_SIZE, int)
        min_size = _number("GHOSTMEM_POOL_MIN_SIZE", pool_min_size, min(DEFAULT_POOL_MIN_SIZE, max_size), int)
        if max_size < 1 or not 0 <= min_size <= max_size:
            raise InvalidArgument(
                f"the pool sizes must satisfy 0 <= min ({min_size}) <= max ({max_size}) and max >= 1: fix "
                "pool_min_size / pool_max_size (or GHOSTMEM_POOL_MIN_SIZE / GHOSTMEM_POOL_MAX_SIZE)"
            )
        timeout = _seconds("GHOSTMEM_POOL_TIMEOUT", pool_timeout, DEFAULT_POOL_TIMEOUT, "pool_timeout")
        wait = _seconds("GHOSTMEM_READ_WAIT", read_wait, DEFAULT_READ_WAIT, "read_wait")
        retry = _seconds("GHOSTMEM_READ_RETRY", read_retry, DEFAULT_READ_RETRY, "read_retry")
        return cls(
            dsn=normalize_dsn(dsn or os.environ.get("GHOSTMEM_DSN") or None),
            home=Path(home).expanduser() if home else default_home(),
            owner=owner or os.environ.get("GHOSTMEM_OWNER") or DEFAULT_OWNER,
            embed_model=embed_model or os.environ.get("GHOSTMEM_EMBED_MODEL") or DEFAULT_EMBED_MODEL,
            runtime_role=os.environ.get("GHOSTMEM_RUNTIME_ROLE") or DEFAULT_RUNTIME_ROLE,
            pool_min_size=min_size,
            pool_max_size=max_size,
            pool_timeout=timeout,
            read_dsn=normalize_dsn(read_dsn or os.environ.get("GHOSTMEM_READ_DSN") or None),
            read_wait=wait,
            read_retry=retry,
        )


def checked_embedder_name(name: str) -> str:
    """``name`` (an embedder's), when PostgreSQL can store and key it; else one sentence.

    Every text an embedder embeds is kept in ``ghostmem.embedding_cache`` under its name and the text's hash, so a
    name too long for that key (some 2,700 random bytes) failed at the first embedding with PostgreSQL's "index row
    size" text: after an import had written its conversations, after a re-embedding had dropped every vector. Every
    way an embedder comes in calls it before anything is written with it: the settings (``GhostMem(embedder="name")``,
    ``GHOSTMEM_EMBED_MODEL``), an application's own embedder (``GhostMem(embedder=...)``, so every adapter's
    ``embedder=``) and a re-embedding (``GhostMem.reembed``, ``ghostmem reembed --model``).
    """
    if "\x00" in name:
        raise InvalidArgument(
            f"the embedder's name {name[:40]!r} contains a NUL character (\\x00): remove it"
        )
    size = utf8_bytes(name)
    if size > STORED_EMBEDDER_NAME_BYTES:
        raise InvalidArgument(
            f"the embedder's name {name[:40]!r}… is {size:,} bytes, longer than the "
            f"{STORED_EMBEDDER_NAME_BYTES:,} bytes ghostmem keeps of an embedder's name (it keys the embedding "
            "cache): name it by its model's hub name, a shorter path to its files, or a shorter name of your own"
        )
    return name


def normalize_dsn(dsn: Any) -> str | None:
    """A DSN libpq reads: SQLAlchemy's ``postgresql+driver://`` scheme becomes ``postgresql://``.

    A SQLAlchemy ``Engine`` (or ``URL``) gives its URL, password included (``str(url)`` would mask it).
    Anything else that is not a string is refused with one sentence instead of failing deep in the driver.
    """
    if dsn is None or dsn == "":
        return None
    url = getattr(dsn, "url", dsn)  # an Engine has .url; a URL renders itself
    if hasattr(url, "render_as_string"):
        dsn = url.render_as_string(hide_password=False)
    if not isinstance(dsn, str):
        raise InvalidArgument(
            f"dsn must be a connection string or URL, or a SQLAlchemy engine (got a {type(dsn).__name__}); "
            "pass an open psycopg pool as pool=..."
        )
    return _SQLALCHEMY_SCHEME.sub("postgresql://", dsn.strip(), count=1)


def _seconds(env: str, given: float | None, default: float, what: str) -> float:
    """A positive number of seconds from ``given``, the environment or ``default``."""
    value: float = _number(env, given, default, float)
    if not value > 0:
        raise InvalidArgument(f"{what} (or {env}) must be a positive number of seconds (got {value})")
    return value


def _number(env: str, given: Any, default: Any, kind: type[Any]) -> Any:
    """``given``, else the environment variable ``env``, else ``default``; a malformed value is one sentence."""
    if given is not None:
        return kind(given)
    raw = os.environ.get(env, "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise InvalidArgument(
            f"{env}={raw!r} is not a {kind.__name__}: set it to a number or unset it"
        ) from None
