"""No part of a DSN's password is ever shown: not by an error, a log line or ``doctor``, whatever the password
holds. The attack: passwords with the characters that end a URL's userinfo early (``@ / ? #``, a second ``:``),
quotes and backslashes for the keyword form, given raw, percent-encoded and as keywords, to every command that
takes a DSN, with logging on. Any three consecutive characters of the password (raw or encoded) in the output
count as a leak."""

from __future__ import annotations

import logging
import re
import subprocess
from urllib.parse import quote

import pytest
from ghostmem.cli import main
from ghostmem.db import check_dsn, redact_dsn
from ghostmem.errors import InvalidArgument
from psycopg.conninfo import conninfo_to_dict
from support.cli import ghostmem

PASSWORDS = ["Xq7@Zr9/Wk", "Jh3#Pd?Ks!", "Tv8:Lm@@Np", "Hn4%Gx=Fy;", "Yb5 Qe'Rs\\Uo"]
HOST = "127.0.0.1:1"  # nothing listens: every command fails to connect, as with a wrong password


def forms(password: str) -> dict[str, str]:
    escaped = password.replace("\\", "\\\\").replace("'", "\\'")
    dsns = {
        "encoded": f"postgresql://me:{quote(password, safe='')}@{HOST}/db",
        "keywords": f"host=127.0.0.1 port=1 user=me dbname=db password='{escaped}'",
        "query": f"postgresql://me@{HOST}/db?password={quote(password, safe='')}",
    }
    if " " not in password:
        dsns["raw"] = f"postgresql://me:{password}@{HOST}/db"
    return dsns


def leaked(password: str, text: str) -> list[str]:
    secrets = {password, quote(password, safe=""), password.replace("\\", "\\\\").replace("'", "\\'")}
    windows = {s[i : i + 3] for s in secrets for i in range(len(s) - 2)}
    # an escape by itself (%40) is how the error explains encoding, not a part of the password
    return sorted(w for w in windows if w in text and not re.fullmatch(r"%[0-9A-F]{2}", w))


COMMANDS = [
    ["recent", "--dsn", "{dsn}"],
    ["--dsn", "{dsn}", "doctor", "--no-model"],
    ["--dsn", "{dsn}", "doctor", "--no-model", "--json"],
    ["db", "url", "--dsn", "{dsn}"],
    ["db", "start", "--dsn", "{dsn}"],
    ["import", "--langchain-table", "t", "--from-dsn", "{dsn}", "--dsn", "{dsn}"],
    ["import", "--langgraph-checkpoints", "{dsn}", "--dsn", "{dsn}"],
    ["search", "x", "--dsn", "{dsn}", "--json"],
]


@pytest.mark.parametrize("password", PASSWORDS)
def test_no_output_shows_any_part_of_the_password(
    password: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GHOSTMEM_EMBED_MODEL", "hash")
    caplog.set_level(logging.DEBUG)
    for form, dsn in forms(password).items():
        for argv in COMMANDS:
            capsys.readouterr()
            main([a.format(dsn=dsn) for a in argv])
            out, err = capsys.readouterr()
            said = out + err + caplog.text
            assert out + err, (form, argv)
            assert not leaked(password, said), (form, argv, leaked(password, said), said)
            caplog.clear()
        # the environment variable is a DSN too
        monkeypatch.setenv("GHOSTMEM_DSN", dsn)
        main(["recent"])
        out, err = capsys.readouterr()
        assert not leaked(password, out + err), (form, out + err)
        monkeypatch.delenv("GHOSTMEM_DSN")


@pytest.mark.parametrize("password", PASSWORDS)
def test_doctor_shows_no_part_of_the_read_standbys_password(
    password: str, pg_dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``GHOSTMEM_READ_DSN`` is reported by ``doctor`` (the primary is reachable, the standby is not). The
    primary's DSN is shown and is no secret: its database's random name (``…d45b5`` before `` host``) is not looked
    at, or it could hold three characters of a password by chance."""
    monkeypatch.setenv("GHOSTMEM_EMBED_MODEL", "hash")
    primary = conninfo_to_dict(pg_dsn)["dbname"]
    for form, dsn in forms(password).items():
        monkeypatch.setenv("GHOSTMEM_READ_DSN", dsn)
        for flags in ([], ["--json"]):
            capsys.readouterr()
            assert main(["--dsn", pg_dsn, "doctor", "--no-model", *flags]) == 1
            out, err = capsys.readouterr()
            said = (out + err).replace(str(primary), "<primary>")
            assert "read_standby" in out and "<primary>" in said and not leaked(password, said), (
                form,
                flags,
                said,
            )


def test_verbose_logs_show_no_password(monkeypatch: pytest.MonkeyPatch) -> None:
    """-v turns the driver's and the pool's logging on: in a new process, as a user runs it."""
    for password in PASSWORDS[:3]:
        for dsn in forms(password).values():
            res: subprocess.CompletedProcess[str] = ghostmem(
                "recent", "-v", env={"GHOSTMEM_DSN": dsn, "GHOSTMEM_EMBED_MODEL": "hash"}
            )
            assert res.returncode == 2 and not leaked(password, res.stdout + res.stderr), res.stderr


def test_a_password_that_would_be_read_as_the_host_is_refused() -> None:
    """libpq reads ``postgresql://me:p@ss@host`` as password ``p`` at host ``ss@host``: it would send the tail of
    the password to DNS and quote it in its error. Refused, with how to write it."""
    for dsn in (
        "postgresql://me:p@Zq9@host/db",
        "postgresql://me:p/Zq9@host/db",
        "postgresql://me@corp:Zq9@host/db",
    ):
        with pytest.raises(InvalidArgument, match="percent-encode") as err:
            check_dsn(dsn)
        assert "Zq9" not in str(err.value) and "@host/db" in str(err.value)
    assert check_dsn("postgresql://me:p%40ss@host/db") == "postgresql://me:p%40ss@host/db"
    assert check_dsn("postgresql://me:pw@[::1]:5432/db") == "postgresql://me:pw@[::1]:5432/db"
    assert redact_dsn("postgresql://me:pw@[::1]:5432/db") == "postgresql://me:***@[::1]:5432/db"
    assert redact_dsn("postgresql://me@host/db") == "postgresql://me@host/db"
