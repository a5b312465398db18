"""The import report: ok only fails when nothing could be read; problems render as file:line: reason."""

from __future__ import annotations

from ghostmem.ingest import ImportReport, Problem


def test_ok_fails_only_when_nothing_could_be_read() -> None:
    assert ImportReport().ok  # nothing to do is not an error
    bad = ImportReport(problems=[Problem("/x/a.jsonl", 0, "no such file or directory")])
    assert not bad.ok and bad.render().splitlines() == [  # not a table of zeros
        "nothing could be read:",
        "  /x/a.jsonl: no such file or directory",
    ]
    partly = ImportReport(
        files_read=1, problems=[Problem("/x/b.jsonl", 7, "malformed JSON (Expecting value)")]
    )
    assert partly.ok
    unchanged = ImportReport(files_unchanged=3, problems=[Problem("/x/c.json", 0, "not a conversation file")])
    assert unchanged.ok


def test_render_and_to_dict() -> None:
    report = ImportReport(files_read=2, files_unchanged=1)
    report.counts("claude_code").conversations_new = 3
    report.counts("claude_code").messages_new = 40
    report.counts("chatgpt").conversations_updated = 1
    report.problems += [Problem("/x/s.jsonl", 12, "unknown record type 'x'; skipped")] * 60
    text = report.render()
    lines = text.splitlines()
    assert lines[0].split() == [
        "platform",
        "new",
        "updated",
        "unchanged",
        "messages",
        "new",
        "ignored",
        "forgotten",
    ]
    assert lines[2].split()[:2] == ["chatgpt", "0"] and lines[3].split()[:5] == [
        "claude_code",
        "3",
        "0",
        "0",
        "40",
    ]
    assert "  /x/s.jsonl:12: unknown record type 'x'; skipped" in lines
    assert "… and 10 more (--json lists all)" in text
    data = report.to_dict()
    assert (data["conversations_new"], data["conversations_updated"], data["messages_new"]) == (3, 1, 40)
    assert data["problems"][0] == {
        "file": "/x/s.jsonl",
        "line": 12,
        "reason": "unknown record type 'x'; skipped",
    }
    assert len(data["problems"]) == 60 and data["ok"] is True
