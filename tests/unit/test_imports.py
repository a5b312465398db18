"""The public surface and the promise that importing ghostmem stays light."""

from __future__ import annotations

import subprocess
import sys

import ghostmem

EXPECTED_ALL = {
    "OPS",
    "AsyncGhostMem",
    "DatabaseError",
    "DatabaseUnavailable",
    "Embedder",
    "GhostMem",
    "GhostMemError",
    "HashEmbedder",
    "InvalidArgument",
    "NotFound",
    "OpResult",
    "OpSpec",
    "SchemaMismatch",
    "SentenceTransformerEmbedder",
    "Settings",
    "__version__",
    "get_op",
}


def test_all_is_pinned() -> None:
    assert set(ghostmem.__all__) == EXPECTED_ALL


def test_import_is_light() -> None:
    code = (
        "import sys, ghostmem;"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'langchain_core', 'langchain', 'llama_index', 'sentence_transformers', 'transformers', 'sklearn')];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_op_names_match_design() -> None:
    assert [op.name for op in ghostmem.OPS] == [
        "search_personal_memory",
        "get_conversation",
        "list_recent_conversations",
        "list_project_conversations",
        "get_conversation_summary",
        "search_ghost_memories",
        "remember",
        "give_feedback",
        "update_memory",
        "retire_memory",
    ]
