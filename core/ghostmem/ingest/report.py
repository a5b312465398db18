"""The import report: per platform counts, files read or skipped, and every problem as ``file:line: reason``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ghostmem.ingest.common import Problem

MAX_PROBLEMS_SHOWN = 50


@dataclass(slots=True)
class PlatformCounts:
    conversations_new: int = 0
    conversations_updated: int = 0
    conversations_unchanged: int = 0
    messages_new: int = 0
    ignored: int = 0  # carried the ghostmem:ignore marker
    forgotten: int = 0  # removed by `ghostmem forget` earlier


@dataclass
class ImportReport:
    """What an import did. ``ok`` is False only when nothing at all could be read."""

    platforms: dict[str, PlatformCounts] = field(default_factory=dict)
    files_read: int = 0
    files_unchanged: int = 0  # already imported and not modified since: not read again
    files_skipped: int = 0  # unreadable or not a known format
    messages_embedded: int = 0
    conversations_enriched: int = 0  # this import's, and those an interrupted one left unenriched
    seconds_import: float = 0.0
    seconds_model_load: float = 0.0  # loading the embedding model, before the first message was embedded
    seconds_embed: float = 0.0  # embedding itself (the model's load not included)
    seconds_enrich: float = 0.0
    problems: list[Problem] = field(default_factory=list)
    conv_ids: set[str] = field(default_factory=set, repr=False)  # conversations created or updated

    def counts(self, platform: str) -> PlatformCounts:
        return self.platforms.setdefault(platform, PlatformCounts())

    @property
    def conversations_new(self) -> int:
        return sum(c.conversations_new for c in self.platforms.values())

    @property
    def conversations_updated(self) -> int:
        return sum(c.conversations_updated for c in self.platforms.values())

    @property
    def messages_new(self) -> int:
        return sum(c.messages_new for c in self.platforms.values())

    @property
    def ok(self) -> bool:
        return not self.problems or self.files_read + self.files_unchanged > 0

    def render(self) -> str:
        if not self.ok:  # not a table of zeros: what was looked for, and where
            return "\n".join(["nothing could be read:", *self._problem_lines()])
        rows: list[tuple[str, ...]] = [
            ("platform", "new", "updated", "unchanged", "messages new", "ignored", "forgotten")
        ]
        for name, c in sorted(self.platforms.items()):
            rows.append(
                (name, *map(str, (c.conversations_new, c.conversations_updated, c.conversations_unchanged,
                                  c.messages_new, c.ignored, c.forgotten)))
            )  # fmt: skip
        if len(rows) == 1:
            rows.append(("(none)", "0", "0", "0", "0", "0", "0"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [
            "  ".join(
                cell.ljust(w) if i == 0 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(r, widths, strict=True))
            )
            for r in rows
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(
            f"files: {self.files_read} read, {self.files_unchanged} unchanged, {self.files_skipped} skipped"
            f" · {self.messages_embedded} messages embedded · {self.conversations_enriched} conversations enriched"
        )
        load = f"{self.seconds_model_load:.1f}s loading the model, " if self.seconds_model_load else ""
        lines.append(
            f"time: {self.seconds_import:.1f}s import, {load}{self.seconds_embed:.1f}s embedding,"
            f" {self.seconds_enrich:.1f}s enriching"
        )
        if self.problems:
            lines.append(f"problems ({len(self.problems)}):")
            lines += self._problem_lines()
        return "\n".join(lines)

    def _problem_lines(self) -> list[str]:
        lines = [f"  {p}" for p in self.problems[:MAX_PROBLEMS_SHOWN]]
        if len(self.problems) > MAX_PROBLEMS_SHOWN:
            lines.append(f"  … and {len(self.problems) - MAX_PROBLEMS_SHOWN} more (--json lists all)")
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "conversations_new": self.conversations_new,
            "conversations_updated": self.conversations_updated,
            "messages_new": self.messages_new,
            "platforms": {name: asdict(c) for name, c in sorted(self.platforms.items())},
            "files_read": self.files_read,
            "files_unchanged": self.files_unchanged,
            "files_skipped": self.files_skipped,
            "messages_embedded": self.messages_embedded,
            "conversations_enriched": self.conversations_enriched,
            "seconds_import": round(self.seconds_import, 3),
            "seconds_model_load": round(self.seconds_model_load, 3),
            "seconds_embed": round(self.seconds_embed, 3),
            "seconds_enrich": round(self.seconds_enrich, 3),
            "problems": [{"file": p.path, "line": p.line, "reason": p.reason} for p in self.problems],
        }
