"""``--help`` shows the default of every option that has one, found by walking the parser (every command)."""

from __future__ import annotations

import argparse

import pytest
from ghostmem.cli import build_parser
from ghostmem.ops import OPS

NO_DEFAULT = (None, False, "", [], argparse.SUPPRESS)


def parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"ghostmem": parser, **{f"ghostmem {name}": p for name, p in sub.choices.items()}}


def _entry(help_text: str, flag: str) -> str:
    """The help of the option whose invocation starts with ``flag`` (its lines joined)."""
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split() and line.split()[0].rstrip(",") == flag)
    entry = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("    ") or not line.strip():
            break
        entry.append(line)
    return " ".join(" ".join(entry).split())


@pytest.mark.parametrize("name", sorted(parsers()))
def test_every_default_is_in_the_help(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100000")  # one line per option
    parser = parsers()[name]
    text = parser.format_help()
    for action in parser._actions:
        if not action.option_strings or action.default in NO_DEFAULT:
            continue
        line = _entry(text, action.option_strings[0])
        assert "default" in line, f"{name} {action.option_strings[0]}: {line}"
        if "(default: " in line:  # generated (else the help says it in its own words)
            shown = action.default if not isinstance(action.default, list) else " ".join(action.default)
            assert f"(default: {shown})" in line


def test_the_shown_defaults_are_the_operations() -> None:
    """An operation's command shows, and passes, its args model's defaults (one source for both)."""
    commands = parsers()
    checked = 0
    for spec in OPS:
        parser = commands[f"ghostmem {spec.cli_name}"]
        for action in parser._actions:
            info = spec.args_model.model_fields.get(action.dest)
            if info is None or info.is_required():
                continue
            assert action.default == info.get_default(call_default_factory=True), (spec.name, action.dest)
            checked += 1
    assert checked > 20


def test_a_default_is_shown_for_real() -> None:
    text = " ".join(parsers()["ghostmem recent"].format_help().split())
    assert "--days DAYS Conversations active in the last N days. (default: 2)" in text
    assert "--interval INTERVAL seconds between polls with --watch (default: 30.0)" in " ".join(
        parsers()["ghostmem import"].format_help().split()
    )
