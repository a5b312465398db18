"""claude_ai (being built)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ghostmem.ingest.common import Item, Problem
from ghostmem.ingest.sources import Source


def parse(source: Source, state: dict[str, Any]) -> Iterator[Item]:
    yield Problem(source.label, 0, "claude_ai import is not implemented yet")
