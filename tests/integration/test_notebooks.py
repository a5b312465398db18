"""Every notebook runs top to bottom in a fresh kernel, offline, on its own embedded server, so none can rot, and
none touches the user's GHOSTMEM_HOME."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))

pytestmark = pytest.mark.slow


def test_the_three_notebooks_exist() -> None:
    assert {p.stem for p in NOTEBOOKS} == {
        "langchain_quickstart",
        "llamaindex_quickstart",
        "ghost_memories",
        "langgraph_agent",
    }


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_clean(
    path: Path, tmp_path: Path, embedded_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the user's own home must stay untouched: a notebook works in a temporary home (this one, here, so that the
    # fixture stops the server the notebook started even when a cell failed)
    users_home = tmp_path / "users-ghostmem-home"
    users_home.mkdir()
    monkeypatch.setenv("GHOSTMEM_HOME", str(users_home))
    monkeypatch.setenv("GHOSTMEM_NOTEBOOK_HOME", str(embedded_home))
    monkeypatch.setenv("GHOSTMEM_EMBED_MODEL", "hash")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in ("GHOSTMEM_DSN", "GHOSTMEM_OWNER"):
        monkeypatch.delenv(name, raising=False)
    notebook = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), (
        "commit notebooks without outputs"
    )
    client = NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute(env=dict(os.environ))  # embedded_home stops the server even when a cell failed
    errors = [
        o for cell in notebook.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors
    assert list(users_home.iterdir()) == []
