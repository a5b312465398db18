"""The adapters' public surfaces are pinned: a flat ``__init__`` whose ``__all__`` only changes on purpose."""

from __future__ import annotations

import langchain_ghostmem
import llama_index_ghostmem


def test_langchain_all_is_pinned() -> None:
    assert set(langchain_ghostmem.__all__) == {
        "GhostMemCaptureMiddleware",
        "GhostMemChatMessageHistory",
        "GhostMemRetriever",
        "GhostMemStore",
        "GhostMemTool",
        "GhostMemToolkit",
        "GhostMemoryRetriever",
    }
    assert all(getattr(langchain_ghostmem, name) for name in langchain_ghostmem.__all__)


def test_llamaindex_all_is_pinned() -> None:
    assert set(llama_index_ghostmem.__all__) == {
        "GhostMemChatStore",
        "GhostMemMemoryBlock",
        "GhostMemMemoryStore",
        "GhostMemRetriever",
        "GhostMemToolSpec",
        "GhostMemoryRetriever",
        "ghostmem_tool",
    }
    assert all(getattr(llama_index_ghostmem, name) for name in llama_index_ghostmem.__all__)
