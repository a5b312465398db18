"""Importers: platform files → :class:`~ghostmem.records.ConversationRecord` → Postgres.

``runner.import_paths`` is the import loop (``GhostMem.import_paths`` and ``ghostmem import`` reach it through
:mod:`ghostmem.maintenance`, which also embeds and enriches what it changed); one module per platform parses its
files (see docs/formats.md and docs/platforms.md); ``runner`` keeps imports incremental, idempotent and resumable.
"""

from __future__ import annotations

from ghostmem.ingest.common import Problem
from ghostmem.ingest.report import ImportReport, PlatformCounts

__all__ = ["ImportReport", "PlatformCounts", "Problem"]
