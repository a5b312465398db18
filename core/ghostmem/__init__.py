"""ghostmem: long-term memory for AI agents in Postgres.

Personal memory (every conversation with an AI assistant, searchable by meaning, words and time) and ghost
memories (the rules an agent learns, ranked by a self-tuning formula, scoped by the database), served as the same
operations to Python, the CLI, MCP, LangChain and LlamaIndex.
"""

from __future__ import annotations

from ghostmem.client import AsyncGhostMem, GhostMem
from ghostmem.config import Settings
from ghostmem.embed import Embedder, HashEmbedder, SentenceTransformerEmbedder
from ghostmem.errors import (
    DatabaseError,
    DatabaseUnavailable,
    GhostMemError,
    InvalidArgument,
    NotFound,
    SchemaMismatch,
)
from ghostmem.ops import OPS, OpResult, OpSpec, get_op

__version__ = "0.1.0"

__all__ = [
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
]
