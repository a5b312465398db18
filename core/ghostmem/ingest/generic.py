"""The generic format (platform ``generic``): conversations as plain JSON, for data from anywhere.

A ``.jsonl`` file holds one conversation object per line; a ``.json`` file one object or an array of them::

    {"conv_id": "c1", "title": "…", "project": "…", "started_at": "…", "ended_at": "…",
     "messages": [{"id": "m1", "role": "user", "text": "…", "ts": "…", "speaker": "…"}]}

Only ``conv_id`` and ``messages`` (each with ``role`` and ``text``) are required; times are ISO-8601 or epoch
seconds/milliseconds; an optional ``meta`` object (conversation or message) is kept as is. See docs/formats.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ghostmem.ingest.common import (
    SHAPE_ERRORS,
    Item,
    Problem,
    finish,
    normalise_role,
    parse_time,
    read_records,
    resume_jsonl,
    shape_problem,
)
from ghostmem.ingest.sources import Source
from ghostmem.records import MessageRecord


def parse(source: Source, state: dict[str, Any]) -> Iterator[Item]:
    with source.open() as fh:
        if source.kind == "append":
            for line in resume_jsonl(fh, source.label, state):
                if isinstance(line, Problem):
                    yield line
                else:
                    yield from _guarded(line.value, source, line.number)
            return
        yield from read_records(
            fh, source.label, lambda obj, line, where: _conversation(obj, source, line, where)
        )


def _guarded(obj: Any, source: Source, line: int, where: str = "") -> Iterator[Item]:
    try:
        yield from _conversation(obj, source, line, where)
    except SHAPE_ERRORS as exc:
        yield shape_problem(source.label, line, exc, where)


def _conversation(obj: Any, source: Source, line: int, where: str) -> Iterator[Item]:
    if (
        not isinstance(obj, dict)
        or obj.get("conv_id") in (None, "")
        or isinstance(obj.get("conv_id"), dict | list)
        or not isinstance(obj.get("messages"), list)
    ):
        yield Problem(source.label, line, f"{where}not a conversation (needs conv_id and a messages list)")
        return
    messages: list[MessageRecord] = []
    for index, raw in enumerate(obj["messages"]):
        if not isinstance(raw, dict) or not isinstance(raw.get("text"), str):
            yield Problem(source.label, line, f"{where}message #{index} has no text; skipped")
            continue
        role = normalise_role(raw.get("role"))
        if role is None:
            yield Problem(
                source.label,
                line,
                f"{where}message #{index} has unknown role {raw.get('role')!r}; kept as meta",
            )
        messages.append(
            MessageRecord(
                native_id=str(raw.get("id") if raw.get("id") not in (None, "") else index),
                role=role or "meta",
                text=raw["text"],
                ts=parse_time(raw.get("ts")),
                raw_role=str(raw.get("role")),
                speaker=str(raw["speaker"]) if raw.get("speaker") not in (None, "") else None,
                meta=raw["meta"] if isinstance(raw.get("meta"), dict) else {},
            )
        )
    parsed = finish(
        conv_id=str(obj["conv_id"]),
        platform="generic",
        messages=messages,
        source=source.label,
        title=obj.get("title"),
        project=str(obj["project"]) if obj.get("project") not in (None, "") else None,
        started_at=parse_time(obj.get("started_at")),
        ended_at=parse_time(obj.get("ended_at")),
        meta=obj["meta"] if isinstance(obj.get("meta"), dict) else {},
    )
    if parsed is not None:
        yield parsed
