"""Errors honour ``--json``: every command, whether the command line is wrong or the work fails, answers one JSON
object on stdout (``error``, ``type``, ``exit_code``) and a nonzero exit status; without ``--json``, one line on
stderr. The commands are read from the parser, so a new command must be added here."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from ghostmem.cli import build_parser, main

DEAD = "postgresql://nobody:s3cret@127.0.0.1:1/none"
BAD_TOKENS = Path(tempfile.gettempdir()) / "ghostmem-test-cli-errors-tokens"

# command -> arguments that make it start its work (and fail on the dead server, or refuse at once)
WORK: dict[str, list[str]] = {
    "db": ["start"],  # an external --dsn: `ghostmem db` manages only the embedded server
    "migrate": [],
    "reembed": ["--model", "hash"],
    "doctor": [],  # reports the dead server in its JSON report, exit status 1
    "import": ["--no-embed", "/nonexistent/export.json"],
    "embed": [],
    "maintain": [],
    "forget": ["some-id"],
    "enrich": [],
    "demo": [],
    "mcp": ["--token", "a-token-of-enough-length"],  # --token without --http: a usage error, before any work
    "mcp-token": ["alice", "--tokens", str(BAD_TOKENS)],  # a tokens file that does not parse is refused
    "grant-project": ["app", "proj"],
    "restore-memory": ["1"],
    "revoke-project": ["app"],
    "grant-app": ["app"],
    "revoke-app": ["app"],
    "search": ["words"],
    "show": ["an-id"],
    "recent": [],
    "project": ["proj"],
    "summary": ["an-id"],
    "ghosts": [],
    "remember": ["a rule"],
    "feedback": ["1", "endorse"],
    "update-memory": ["1", "new words"],
    "retire-memory": ["1", "--reason", "old"],
}


def commands() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


def test_every_command_is_tried() -> None:
    assert sorted(WORK) == commands()


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _error(out: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(out)
    assert set(data) == {"error", "type", "exit_code"} and "\n" not in data["error"], data
    return data


@pytest.mark.parametrize("command", sorted(WORK))
def test_a_usage_error_is_json_with_json(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run([command, *WORK[command], "--json", "--no-such-flag"], capsys)
    assert code == 2 and err == ""
    data = _error(out)
    assert data["type"] == "UsageError" and data["exit_code"] == 2
    assert "--no-such-flag" in data["error"] and data["error"].endswith(f"(see `ghostmem {command} --help`)")
    # --json before the command counts too, and without it the same error is one line on stderr
    assert (
        _error(_run(["--json", command, *WORK[command], "--no-such-flag"], capsys)[1])["type"] == "UsageError"
    )
    code, out, err = _run([command, *WORK[command], "--no-such-flag"], capsys)
    assert code == 2 and out == "" and err.startswith("ghostmem: error: ") and len(err.splitlines()) == 1


@pytest.mark.parametrize("command", sorted(WORK))
def test_a_failure_is_json_with_json(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GHOSTMEM_EMBED_MODEL", "hash")
    BAD_TOKENS.write_text("not a token line\n")
    code, out, err = _run([command, *WORK[command], "--dsn", DEAD, "--json"], capsys)
    assert code != 0 and "Traceback" not in err and "s3cret" not in out + err
    data = json.loads(out)
    if command == "doctor":  # its report is the answer; the server check says what failed
        assert data["ok"] is False and "cannot connect" in data["checks"]["server"]["error"]
        return
    assert _error(out)["exit_code"] == code == 2
    refused = {"UsageError"} if command == "mcp" else set()
    assert data["type"] in {"DatabaseUnavailable", "GhostMemError", "InvalidArgument", *refused}, data


def test_error_json_keeps_the_cli_words(pg_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["recent", "--days", "0", "--json", "--dsn", pg_dsn], capsys)
    data = _error(out)
    assert code == 2 and data["type"] == "InvalidArgument"
    assert data["error"].startswith("invalid arguments for `ghostmem recent`: --days: ")


def test_no_command_with_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--json"], capsys)
    assert code == 2 and _error(out)["type"] == "UsageError"


def test_unknown_flag_after_double_dash_is_not_json(capsys: pytest.CaptureFixture[str]) -> None:
    """``--`` ends the options: a ``--json`` after it is a value, not the flag."""
    code, out, err = _run(["forget", "--bogus", "--", "--json"], capsys)
    assert code == 2 and out == "" and "--bogus" in err


def test_a_mistyped_command_or_flag_gets_the_nearest_and_the_right_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """argparse would list every command, and send an unknown flag of any command to the top-level help."""
    code, out, err = _run(["serch", "why"], capsys)
    assert code == 2 and out == ""
    assert (
        err
        == "ghostmem: error: unknown command 'serch': did you mean `ghostmem search`? (see `ghostmem --help`)\n"
    )
    assert (
        _error(_run(["xyzzy", "--json"], capsys)[1])["error"]
        == "unknown command 'xyzzy' (see `ghostmem --help`)"
    )
    _, _, err = _run(["recent", "--limt", "3"], capsys)
    assert err == (
        "ghostmem: error: unrecognized arguments: --limt 3; did you mean --limit? (see `ghostmem recent --help`)\n"
    )
    _, _, err = _run(["--jsn", "recent", "--plaform=codex", "--limt", "3"], capsys)
    assert "did you mean --json for --jsn, --platform for --plaform=codex, --limit for --limt?" in err
    assert err.endswith("(see `ghostmem recent --help`)\n")
    # a wrong value keeps argparse's sentence, with the command's help
    _, _, err = _run(["db", "begin"], capsys)
    assert "invalid choice: 'begin'" in err and err.endswith("(see `ghostmem db --help`)\n")
