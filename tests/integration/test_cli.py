"""The command line against a real server: one sentence on failure, JSON on request, the maintenance commands."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from ghostmem.cli import main, sample_exports
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
