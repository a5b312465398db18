"""Importers: platform files → :class:`~ghostmem.records.ConversationRecord` → Postgres.

``import_paths`` is the entry point (``GhostMem.import_paths`` and ``ghostmem import`` call it); one module per
platform parses its files (see docs/formats.md and docs/platforms.md); ``runner`` keeps imports incremental, idempotent
and resumable.
"""

from __future__ import annotations

from ghostmem.ingest.common import Problem
from ghostmem.ingest.report import ImportReport, PlatformCounts
from ghostmem.ingest.runner import (
    autocommit,
    embed_all,
    enrich_everything,
    forget,
    import_langchain_table,
    import_paths,
    refresh_embedded,
    watch,
)

__all__ = [
    "ImportReport",
    "PlatformCounts",
    "Problem",
    "autocommit",
    "embed_all",
    "enrich_everything",
    "forget",
    "import_langchain_table",
    "import_paths",
    "refresh_embedded",
    "watch",
]
