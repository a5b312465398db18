"""The command line against a real server: one sentence on failure, JSON on request, the maintenance commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder, InvalidArgument
from ghostmem.cli import build_parser, main, sample_exports
from ghostmem.db import redact_dsn
from ghostmem.records import MessageRecord
from support.cli import ghostmem

FIXTURES = sample_exports()


def test_dead_port_gives_one_line_and_nonzero_exit() -> None:
    res = ghostmem(
        "recent", env={"GHOSTMEM_DSN": "postgresql://nobody@127.0.0.1:1/none", "GHOSTMEM_EMBED_MODEL": "hash"}
    )
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(
        "ghostmem: error: cannot connect to Postgres at postgresql://nobody@127.0.0.1:1/none"
    )


def test_nothing_readable_exits_nonzero(
    pg_dsn: str, owner: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text("[1, 2, 3]")
    os.environ["GHOSTMEM_EMBED_MODEL"] = "hash"
    try:
        assert main(["import", "--dsn", pg_dsn, "--owner", owner, "--json", str(junk)]) == 1
        assert json.loads(capsys.readouterr().out)["problems"][0]["reason"].startswith("not a conversation")
        assert main(["import", "--dsn", pg_dsn, "--owner", owner, "--json", str(FIXTURES / "gemini")]) == 0
    finally:
        del os.environ["GHOSTMEM_EMBED_MODEL"]


def test_cli_import_embed_forget_enrich(
    pg_dsn: str, owner: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GHOSTMEM_EMBED_MODEL", "hash")
    common = ["--dsn", pg_dsn, "--owner", owner, "--json"]

    def run(*argv: str) -> Any:
        capsys.readouterr()
        assert main([*argv, *common]) == 0
        return json.loads(capsys.readouterr().out)

    imported = run("import", "--no-embed", str(FIXTURES / "claude_code"))
    assert imported["conversations_new"] == 5 and imported["messages_embedded"] == 0
    embedded = run("embed")
    assert embedded["embedded"] > 0 and embedded["conversations_refreshed"] == 5
    assert run("embed")["embedded"] == 0
    assert run("forget", "c45af7b1-cb7c-4e51-93db-8cbb250a877a")["removed"] == [
        "c45af7b1-cb7c-4e51-93db-8cbb250a877a", "c45af7b1-cb7c-4e51-93db-8cbb250a877a:agent-af1ff21"
    ]  # fmt: skip
    assert run("enrich")["conversations"] == 3
    assert main(["import", "--langchain-table", "t", *common]) == 2  # --from-dsn is required


# (the flag as typed, the attribute it sets, its value)
GLOBAL_FLAGS = [
    (["--dsn", "postgresql://a@h/db"], "dsn", "postgresql://a@h/db"),
    (["--owner", "alice"], "owner", "alice"),
    (["--json"], "json", True),
    (["-v"], "verbose", True),
    (["--verbose"], "verbose", True),
]


@pytest.mark.parametrize(
    ("flag", "name", "value"), GLOBAL_FLAGS, ids=lambda f: f[0] if isinstance(f, list) else ""
)
@pytest.mark.parametrize(
    "command", [["recent"], ["import", "x.jsonl"], ["forget", "c1"], ["mcp"], ["db", "status"]]
)
def test_a_global_flag_counts_before_or_after_the_command(
    flag: list[str], name: str, value: object, command: list[str]
) -> None:
    parser = build_parser()
    before = parser.parse_args([*flag, *command])
    after = parser.parse_args([*command, *flag])
    assert getattr(before, name) == getattr(after, name) == value
    assert vars(before) == vars(after)
    assert getattr(parser.parse_args(command), name) in (None, False)


def test_dsn_before_the_command_is_the_database_written(
    pg_dsn: str, owner: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ghostmem --dsn <prod> import` used to import into the local store: here the fallback does not even exist."""
    monkeypatch.setenv("GHOSTMEM_DSN", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.setenv("GHOSTMEM_EMBED_MODEL", "hash")
    argv = ["--dsn", pg_dsn, "--owner", owner, "--json", "import", "--no-embed", str(FIXTURES / "gemini")]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["conversations_new"] == 1
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM ghostmem.conversations WHERE owner = %s", (owner,)
        ).fetchone()
    assert row == (1,)


MALFORMED = [
    "postgresql://me:s3cret@[::1:5432/db",  # unclosed IPv6 bracket
    "postgresql://me:s3cret@localhost/db?bogus=1",  # unknown URI parameter
    "host=localhost password=s3cret bogus=1",  # unknown keyword
]


@pytest.mark.parametrize("dsn", MALFORMED)
@pytest.mark.parametrize(
    "argv",
    [
        ["recent", "--dsn", "{dsn}"],
        ["--dsn", "{dsn}", "doctor", "--no-model"],
        ["import", "--langchain-table", "t", "--from-dsn", "{dsn}", "--dsn", "{ok}"],
        ["import", "--langgraph-checkpoints", "{dsn}", "--dsn", "{ok}"],
    ],
    ids=["store", "doctor", "from-dsn", "langgraph"],
)
def test_a_malformed_dsn_is_one_sentence_without_its_password(
    dsn: str, argv: list[str], pg_dsn: str, owner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GHOSTMEM_EMBED_MODEL", "hash")
    res = ghostmem(*[a.format(dsn=dsn, ok=pg_dsn) for a in argv], "--owner", owner)
    assert res.returncode != 0
    assert "s3cr" not in res.stderr + res.stdout and "Traceback" not in res.stderr
    said = [
        line for line in (res.stderr + res.stdout).splitlines() if "DSN" in line
    ]  # doctor reports on stdout
    assert len(said) == 1 and "malformed DSN" in said[0], res.stderr + res.stdout


def test_the_client_refuses_a_malformed_dsn_in_one_sentence() -> None:
    with pytest.raises(InvalidArgument) as err:
        GhostMem(dsn=MALFORMED[0], embedder=HashEmbedder()).connect()
    assert "s3cret" not in str(err.value) and 'matching "]"' in str(err.value)


def test_redact_dsn_masks_the_whole_password() -> None:
    assert redact_dsn("postgresql://me:p@ss@host:5432/db") == "postgresql://me:***@host:5432/db"
    assert redact_dsn("host=h password='a b' user=me") == "host=h password=*** user=me"
    assert redact_dsn("postgresql://me@host/db") == "postgresql://me@host/db"


def test_forget_refuses_an_unknown_id_and_can_be_undone(
    pg_dsn: str, owner: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GHOSTMEM_EMBED_MODEL", "hash")
    common = ["--dsn", pg_dsn, "--owner", owner]

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([*argv, *common])
        out, err = capsys.readouterr()
        return code, out, err

    assert run("import", "--no-embed", str(FIXTURES / "claude_code"))[0] == 0
    stored = "c45af7b1-cb7c-4e51-93db-8cbb250a877a"
    code, _, err = run("forget", stored[:-1] + "b")  # a typo
    assert code == 2 and "no conversation" in err and "--force" in err and len(err.strip().splitlines()) == 1
    code, _, err = run("forget", stored[:-1])  # cut short: the ids beginning with it, not --force
    assert code == 2 and f"'{stored}'" in err and "--force" not in err and len(err.strip().splitlines()) == 1
    assert run("forget", "kept-out-before-import", "--force")[0] == 0
    assert run("forget", stored)[0] == 0
    assert run("import", "--no-embed", str(FIXTURES / "claude_code"))[0] == 0
    code, out, _ = run("show", stored)
    assert code == 2  # still forgotten after importing again
    code, out, _ = run("forget", "--undo", stored, "--json")
    assert code == 0 and json.loads(out)["unforgotten"] == [stored, f"{stored}:agent-af1ff21"]
    assert run("import", "--no-embed", str(FIXTURES / "claude_code"))[0] == 0
    assert run("show", stored)[0] == 0  # back
    code, _, err = run("forget", "--undo", stored)
    assert code == 2 and "was not forgotten" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["mcp", "--http", "--port", "99999"],
        ["mcp", "--http", "--port", "0"],
        ["mcp", "--http", "--port", "http"],
        ["import", "--watch", "--interval", "-5"],
        ["import", "--watch", "--interval", "0"],
        ["import", "--watch", "--interval", "nan"],
    ],
)
def test_an_impossible_port_or_interval_is_one_sentence(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "error: argument" in err and "Traceback" not in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"ghostmem {version('ghostmem')}"


def test_a_reader_that_stops_reading_ends_the_command_silently(gm: GhostMem) -> None:
    """`ghostmem recent | head -3` (a newcomer's first look at a long list): when whatever reads the output has gone,
    the command stops with status 141, as one that SIGPIPE ends, and says nothing; it printed BrokenPipeError's
    traceback (a write in the middle) or 'Exception ignored ... BrokenPipeError' (the last flush at exit)."""
    gm.capture_append(
        "c", [MessageRecord(native_id="", role="user", text="hello there")], platform="langchain"
    )
    command = [sys.executable, "-m", "ghostmem.cli", "--dsn", gm.dsn, "--owner", gm.owner]
    proc = subprocess.Popen(
        [*command, "recent", "--days", "36500"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the command writes a line
    said = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141 and said == "", said
