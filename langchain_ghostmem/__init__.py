"""LangChain tools, retrievers and chat history over ghostmem.

Every ghostmem operation is a :class:`GhostMemTool` (name, description and schema from ``ghostmem.OPS``);
:class:`GhostMemToolkit` gives them all, bound to one owner and optionally one project.
"""

from __future__ import annotations

from langchain_ghostmem.chat_history import GhostMemChatMessageHistory
from langchain_ghostmem.middleware import GhostMemCaptureMiddleware
from langchain_ghostmem.retrievers import GhostMemoryRetriever, GhostMemRetriever
from langchain_ghostmem.store import GhostMemStore
from langchain_ghostmem.tools import GhostMemTool, GhostMemToolkit

__all__ = [
    "GhostMemCaptureMiddleware",
    "GhostMemChatMessageHistory",
    "GhostMemRetriever",
    "GhostMemStore",
    "GhostMemTool",
    "GhostMemToolkit",
    "GhostMemoryRetriever",
]
