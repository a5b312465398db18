"""LlamaIndex tools, retrievers, chat store and memory block over ghostmem.

Every ghostmem operation is a ``FunctionTool`` (:func:`ghostmem_tool`; name, description and schema from
``ghostmem.OPS``); :class:`GhostMemToolSpec` gives them all, bound to one owner and optionally one project.
"""

from __future__ import annotations

from llama_index_ghostmem.chat_store import GhostMemChatStore, GhostMemMemoryStore
from llama_index_ghostmem.memory import GhostMemMemoryBlock
from llama_index_ghostmem.retrievers import GhostMemoryRetriever, GhostMemRetriever
from llama_index_ghostmem.tools import GhostMemToolSpec, ghostmem_tool

__all__ = [
    "GhostMemChatStore",
    "GhostMemMemoryBlock",
    "GhostMemMemoryStore",
    "GhostMemRetriever",
    "GhostMemToolSpec",
    "GhostMemoryRetriever",
    "ghostmem_tool",
]
