"""Hostile files in a real import: one bad file or line never stops the others, and is not met again next run."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ghostmem import GhostMem
from support.transcripts import cc, jsonl

DEEP = 100_000


def stored(gm: GhostMem) -> dict[str, int]:
    with gm.connection() as conn:
        rows = conn.execute(
            "SELECT conv_id, msg_count FROM ghostmem.conversations WHERE owner = %s", (gm.owner,)
        ).fetchall()
    return {r[0]: int(r[1]) for r in rows}


def test_hostile_files_are_reported_once_and_every_other_file_imports(gm: GhostMem, tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    first = jsonl(folder / "a" / "s1.jsonl", [cc("user", "u1", None, "first session", sessionId="s1")])
    with first.open("ab") as fh:  # a line nested 100,000 deep, then one of the wrong shape, then a good one
        fh.write(
            b'{"type": "user", "uuid": "x", "sessionId": "s1", "message": '
            + b"[" * DEEP
            + b"]" * DEEP
            + b"}\n"
        )
        fh.write(
            json.dumps({**cc("assistant", "a1", "u1", "x", sessionId="s1"), "message": 5}).encode() + b"\n"
        )
        fh.write(json.dumps(cc("user", "u2", "u1", "after the bad lines", sessionId="s1")).encode() + b"\n")
    jsonl(folder / "b" / "s2.jsonl", [cc("user", "v1", None, "second session", sessionId="s2")])
    if hasattr(os, "mkfifo"):
        os.mkfifo(folder / "b" / "pipe.jsonl")
    (folder / "b" / "broken.json").write_bytes(
        b'[{"conv_id": "ok", "messages": [{"role": "user", "text": "fine"}]}, {"conv_id": "deep", "messages": '
        + b"[" * DEEP
        + b"]" * DEEP
        + b"}]"
    )
    report = gm.import_paths([folder], embed=False)
    assert report.ok
    assert stored(gm) == {"s1": 2, "s2": 1, "ok": 1}
    lines = sorted(f"{Path(p.path).name}:{p.line}: {p.reason.split(' (')[0]}" for p in report.problems)
    expected = [
        "broken.json:1: conversation #1: nested more than 100 levels deep; skipped",
        "s1.jsonl:2: nested more than 100 levels deep; skipped",
        "s1.jsonl:3: unexpected shape",
    ]
    if hasattr(os, "mkfifo"):
        expected.insert(1, "pipe.jsonl:0: a FIFO, not a regular file; skipped")
    assert lines == expected
    again = gm.import_paths([folder], embed=False)  # the files' state was saved: nothing fails a second time
    assert [p.reason for p in again.problems] == (
        ["a FIFO, not a regular file; skipped"] if hasattr(os, "mkfifo") else []
    )
    assert again.files_unchanged == 3 and again.files_read == 0


def test_text_postgres_cannot_hold_is_cleaned_and_empty_conversations_are_not_stored(
    gm: GhostMem, tmp_path: Path
) -> None:
    conv = {"conv_id": "odd", "title": "nul\x00 and \ud800 lone", "project": "p\x00",
            "meta": {"nan": float("nan"), "k\x00": ["\udfff"]},
            "messages": [{"role": "user", "text": "a\x00b \ud83d", "speaker": "x\x00", "meta": {"inf": float("inf")}}]}  # fmt: skip
    empty = {"conv_id": "empty", "messages": []}
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps(conv) + "\n" + json.dumps(empty) + "\n")  # json writes NaN and lone surrogates
    report = gm.import_paths([path], embed=False)
    assert report.ok and not report.problems
    assert stored(gm) == {"odd": 1}
    with gm.connection() as conn:
        row = conn.execute(
            "SELECT c.title, c.project, c.meta, m.text, m.speaker, m.meta FROM ghostmem.conversations c"
            " JOIN ghostmem.messages m USING (owner, tier, conv_id) WHERE c.owner = %s",
            (gm.owner,),
        ).fetchone()
    assert row is not None
    title, project, meta, text, speaker, msg_meta = row
    assert (title, project, text, speaker) == ("nul and \ufffd lone", "p", "ab \ufffd", "x")
    assert meta["nan"] is None and meta["k"] == ["\ufffd"] and msg_meta == {"inf": None}
