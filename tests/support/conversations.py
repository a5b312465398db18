"""Conversations in the generic import format, built and imported for the suites on imported data."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ghostmem import GhostMem
from ghostmem.models import ConversationRow

NOW = datetime.now(UTC)
START = datetime(2026, 3, 1, 9, 5, tzinfo=UTC)  # a fixed time for renderings


def conversation(
    conv_id: str, title: str, days_ago: float, texts: list[str], project: str | None = None
) -> dict[str, Any]:
    """A conversation that ended ``days_ago``, its ``texts`` alternating user and assistant, a minute apart."""
    end = NOW - timedelta(days=days_ago)
    start = end - timedelta(minutes=len(texts))
    return {
        "conv_id": conv_id,
        "title": title,
        "project": project,
        "messages": [
            {
                "id": f"{conv_id}-{i}",
                "role": "user" if i % 2 == 0 else "assistant",
                "text": text,
                "ts": (start + timedelta(minutes=i + 1)).isoformat(),
            }
            for i, text in enumerate(texts)
        ],
    }


def import_generic(gm: GhostMem, path: Path, convs: list[dict[str, Any]], tier: str = "personal") -> None:
    path.write_text("\n".join(json.dumps(c, ensure_ascii=False) for c in convs) + "\n", encoding="utf-8")
    report = gm.import_paths([path], tier=tier)
    assert report.ok, report.render()


def ids(result: Any) -> list[str]:
    """The conv_ids of an operation's result rows, in order."""
    return [row.conv_id for row in result.data.rows]


def stored(gm: GhostMem) -> dict[str, int]:
    """conv_id → how many message rows the owner has stored for it."""
    with gm.connection() as conn:
        rows = conn.execute(
            "SELECT c.conv_id, (SELECT count(*) FROM ghostmem.messages m WHERE m.owner = c.owner AND m.tier = c.tier"
            " AND m.conv_id = c.conv_id) FROM ghostmem.conversations c WHERE c.owner = %s",
            (gm.owner,),
        ).fetchall()
    return {r[0]: int(r[1]) for r in rows}


def row(**kw: object) -> ConversationRow:
    """A result row with every field filled (``kw`` replaces some), for renderings."""
    fields: dict[str, object] = {
        "conv_id": "abc123",
        "tier": "personal",
        "platform": "claude_code",
        "started_at": START,
        "ended_at": START + timedelta(hours=2, minutes=30),
        "title": "Fix the login page",
        "topic": "auth",
        "cluster": 3,
        "msg_count": 14,
        "intensity": 0.456,
        "snippet": "the login   page\nbreaks on Safari",
    }
    fields.update(kw)
    return ConversationRow.model_validate(fields)


WORDS = ("index", "vacuum", "query", "planner", "lock", "replica", "backup", "schema", "migration", "cache",
         "latency", "deploy")  # fmt: skip


def write_corpus(
    root: Path, files: int, convs_per_file: int, messages: int = 6, grown: int = 0, seed: str = ""
) -> None:
    """``files`` generic JSONL files of ``convs_per_file`` conversations (``f{file}-c{n}``) of ``messages`` seeded
    random messages each (plus ``grown`` more: the same conversations after they went on). Another ``seed``, other
    texts (the embedding cache is shared by every owner of a database)."""
    root.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        with (root / f"part-{f:03d}.jsonl").open("w") as fh:
            for c in range(convs_per_file):
                rng = random.Random(f"{seed}{f}-{c}")  # per conversation: growing it keeps its first messages
                texts = [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(messages + grown)]
                rows = [
                    {"id": str(m), "role": "user" if m % 2 == 0 else "assistant", "text": text}
                    for m, text in enumerate(texts)
                ]
                fh.write(json.dumps({"conv_id": f"f{f}-c{c}", "messages": rows}) + "\n")
