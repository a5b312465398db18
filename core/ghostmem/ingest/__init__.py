"""Importers: platform files → :class:`~ghostmem.records.ConversationRecord` → Postgres. (Being built.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ghostmem.errors import NotImplementedYet

if TYPE_CHECKING:
    from ghostmem.client import GhostMem


@dataclass
class ImportReport:
    conversations_new: int = 0
    conversations_updated: int = 0
    messages_new: int = 0
    problems: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return True

    def render(self) -> str:
        return str(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return {"conversations_new": self.conversations_new, "problems": self.problems}


def import_paths(
    gm: GhostMem,
    paths: Sequence[str | Path] | None,
    *,
    tier: str = "personal",
    embed: bool = True,
    **kwargs: Any,
) -> ImportReport:
    raise NotImplementedYet("importing is not implemented yet")


def watch(
    gm: GhostMem, paths: Sequence[str | Path] | None, *, tier: str, embed: bool, interval: float
) -> int:
    raise NotImplementedYet("import --watch is not implemented yet")
