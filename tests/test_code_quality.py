"""ruff (lint + format) and mypy (strict on core/) are part of the test command."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)


pytestmark = pytest.mark.slow


@pytest.mark.skipif(
    shutil.which("ruff") is None and not Path(sys.executable).with_name("ruff").exists(),
    reason="ruff is in the [test] extra",
)
def test_ruff_lint() -> None:
    res = _run(sys.executable, "-m", "ruff", "check", ".")
    assert res.returncode == 0, res.stdout + res.stderr


def test_ruff_format() -> None:
    res = _run(sys.executable, "-m", "ruff", "format", "--check", ".")
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy() -> None:
    res = _run(sys.executable, "-m", "mypy")
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_repository_explains_itself() -> None:
    """Nothing cites documents that are not in the repository (the design notes and format notes the project
    started from, or the shared folder beside the work tree): what the code relies on is in docs/."""
    cited = re.compile(
        "|".join(re.escape(name) for name in ("DESIGN" + ".md", "FORMATS" + ".md", "../" + "shared"))
    )
    landed = re.compile(r"core/ghostmem/db/migrations/0[0-5]\d_")  # landed migrations are never edited
    roots = ["core", "docs", "bench", "tests", "langchain_ghostmem", "llama_index_ghostmem", "notebooks"]
    files = [REPO / "README.md", REPO / "pyproject.toml"]
    files += [
        p for root in roots for p in (REPO / root).rglob("*") if p.suffix in {".py", ".md", ".sql", ".ipynb"}
    ]
    offenders = [
        f"{p.relative_to(REPO)}:{n}"
        for p in files
        if "results" not in p.parts and ".venv" not in p.parts and not landed.search(str(p.relative_to(REPO)))
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if cited.search(line)
    ]
    assert offenders == []
