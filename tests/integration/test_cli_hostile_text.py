"""A transcript that attacks the terminal: escape sequences, C1 controls and bidi overrides in every field a
transcript fills, imported and then shown by every command that prints it. The terminal must receive none of them
(each is shown as its escape); ``--json`` keeps the data exactly as stored."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from ghostmem.cli import main
from support.conversations import conversation

ESC_CLEAR = "\x1b[2J\x1b[H"
OSC_TITLE = "\x1b]0;owned\x07"
C1_CSI = "\x9b31m"
BIDI = "\u202egnp.exe\u202c"
HOSTILE = f"{ESC_CLEAR} sourdough {OSC_TITLE} starter {C1_CSI} {BIDI} \r\x08"
CONV = f"evil-{ESC_CLEAR}"


def _acting(text: str) -> list[str]:
    """Characters a terminal would act on (controls and format characters but newline and tab)."""
    return [c for c in text if unicodedata.category(c) in ("Cc", "Cf") and c not in "\n\t"]


@pytest.fixture
def hostile(pg_dsn: str, owner: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("GHOSTMEM_EMBED_MODEL", "hash")
    record = conversation(
        CONV, f"title {HOSTILE}", 1, [f"user says {HOSTILE}", f"reply {HOSTILE}"], f"p{OSC_TITLE}"
    )
    path = tmp_path / "hostile.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    common = ["--dsn", pg_dsn, "--owner", owner]
    assert main(["import", str(path), "--no-progress", *common]) == 0
    assert main(["remember", f"never {HOSTILE} again", *common]) == 0
    return common


COMMANDS = [
    ["recent"],
    ["search", "sourdough starter"],
    ["show", CONV],
    ["show", CONV, "--limit", "1"],
    ["summary", CONV],
    ["project", "p"],
    ["ghosts"],
    ["ghosts", "sourdough"],
    ["show", f"missing-{OSC_TITLE}"],  # an error that repeats what was given
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a).encode("unicode_escape").decode())
def test_nothing_reaches_the_terminal_raw(
    argv: list[str], hostile: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    main([*argv, *hostile])
    out, err = capsys.readouterr()
    assert out + err and _acting(out + err) == [], (out + err).encode("unicode_escape")
    if argv[0] != "show" or "missing" not in argv[1]:
        assert "\\x1b[2J" in out and "\\u202egnp.exe" in out  # shown, as escapes


def test_json_keeps_the_data_as_stored(hostile: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["show", CONV, "--json", *hostile]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["conversation"]["conv_id"] == CONV
    assert data["messages"][0]["text"] == f"user says {HOSTILE}"
    capsys.readouterr()
    main(["show", f"missing-{OSC_TITLE}", "--json", *hostile])
    assert (
        repr(f"missing-{OSC_TITLE}") in json.loads(capsys.readouterr().out)["error"]
    )  # the sentence, as said
