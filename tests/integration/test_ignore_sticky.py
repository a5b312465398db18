"""``ghostmem:ignore`` is a property of the conversation: each way around it that an attacker (or a careless
workflow) would try — appending later, subagent transcripts, a marker added after an import, disguised spellings,
a marker outside the message text — leaves nothing of the conversation stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ghostmem import GhostMem
from support.conversations import stored
from support.transcripts import cc, jsonl


def append(path: Path, *lines: dict[str, object]) -> None:
    with path.open("ab") as fh:
        for line in lines:
            fh.write(json.dumps(line).encode() + b"\n")


def test_lines_appended_to_an_ignored_session_stay_out(gm: GhostMem, tmp_path: Path) -> None:
    path = jsonl(tmp_path / "p" / "s1.jsonl", [cc("user", "u1", None, "ghostmem:ignore private notes")])
    first = gm.import_paths([tmp_path], embed=False)
    assert first.platforms["claude_code"].ignored == 1 and stored(gm) == {}
    append(path, cc("assistant", "a1", "u1", "the secret plan"), cc("user", "u2", "a1", "more private text"))
    second = gm.import_paths(
        [tmp_path], embed=False
    )  # the --watch / cron workflow: only the new lines are read
    assert second.platforms["claude_code"].ignored == 1 and stored(gm) == {}


@pytest.mark.parametrize("subagent_first", [False, True])
def test_subagent_transcripts_of_an_ignored_session_stay_out(
    gm: GhostMem, tmp_path: Path, subagent_first: bool
) -> None:
    project = tmp_path / "p"
    sub = project / "s1" / "subagents" / "agent-beef.jsonl"
    main = project / "s1.jsonl"
    lines = {
        main: [cc("user", "u1", None, "GHOSTMEM:IGNORE do not keep this session")],
        sub: [cc("user", "w1", None, "subagent task over private code", isSidechain=True, agentId="beef")],
    }
    for path in (sub, main) if subagent_first else (main, sub):
        jsonl(path, lines[path])
        gm.import_paths([project], embed=False)
    assert stored(gm) == {}


def test_a_marker_added_later_purges_what_was_stored_and_its_children(gm: GhostMem, tmp_path: Path) -> None:
    project = tmp_path / "p"
    main = jsonl(project / "s1.jsonl", [cc("user", "u1", None, "an ordinary start")])
    jsonl(project / "s1" / "subagents" / "agent-beef.jsonl",
          [cc("user", "w1", None, "subagent work", isSidechain=True, agentId="beef")])  # fmt: skip
    jsonl(project / "s2.jsonl", [cc("user", "v1", None, "another session", sessionId="s2")])
    gm.import_paths([project], embed=True)
    assert stored(gm) == {"s1": 1, "s1:agent-beef": 1, "s2": 1}
    append(main, cc("user", "u2", "u1", "on second thought: ghostmem: ignore"))
    gm.import_paths([project], embed=False)
    assert stored(gm) == {"s2": 1}
    main.write_text(
        json.dumps(cc("user", "u1", None, "an ordinary start")) + "\n"
    )  # the marker edited out again
    gm.import_paths([project], embed=False)
    assert stored(gm) == {"s2": 1}  # once ignored, later re-reads stay ignored


@pytest.mark.parametrize(
    "marker",
    [
        "GHOSTMEM:IGNORE",
        "ghostmem: ignore",
        "ghostmem :\tignore",
        "ghost\u200bmem:ig\u200dnore",  # zero-width space and joiner
        "\u00adghostmem\u2060:\ufeffignore",  # soft hyphen, word joiner, byte order mark
        "ｇｈｏｓｔｍｅｍ：ｉｇｎｏｒｅ",  # fullwidth (NFKC)
        "\U0001d420\U0001d421\U0001d428\U0001d42c\U0001d42d\U0001d426\U0001d41e\U0001d426:ignore",  # math bold
        "ＧＨＯＳＴＭＥＭ : IGNORE",
    ],
)
def test_disguised_markers_are_recognised(gm: GhostMem, tmp_path: Path, marker: str) -> None:
    path = tmp_path / "g.jsonl"
    path.write_text(
        json.dumps({"conv_id": "c", "messages": [{"role": "user", "text": f"note {marker} here"}]}) + "\n"
    )
    report = gm.import_paths([path], embed=False)
    assert report.platforms["generic"].ignored == 1 and stored(gm) == {}


def test_markers_outside_the_message_text_count(gm: GhostMem, tmp_path: Path) -> None:
    convs = [
        {"conv_id": "title", "title": "Ghostmem:Ignore", "messages": [{"role": "user", "text": "plain"}]},
        {
            "conv_id": "meta",
            "meta": {"tags": ["x", "ghostmem:ignore"]},
            "messages": [{"role": "user", "text": "p"}],
        },
        {"conv_id": "speaker", "messages": [{"role": "user", "text": "p", "speaker": "ghostmem:ignore"}]},
        {
            "conv_id": "msgmeta",
            "messages": [{"role": "user", "text": "p", "meta": {"note": "ghostmem: ignore"}}],
        },
        {"conv_id": "kept", "messages": [{"role": "user", "text": "nothing to hide"}]},
    ]
    path = tmp_path / "g.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in convs))
    gm.import_paths([path], embed=False)
    assert stored(gm) == {"kept": 1}
    project = tmp_path / "p"
    jsonl(project / "s1.jsonl", [
        cc("user", "u1", None, "session that gets compacted"),
        {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": "u1", "sessionId": "s1",
         "compactMetadata": {"trigger": "manual", "preTokens": 1, "note": "ghostmem:ignore"}},
    ])  # fmt: skip
    jsonl(project / "s2.jsonl", [cc("user", "v1", None, "summarised elsewhere", sessionId="s2")])
    gm.import_paths([project], embed=False)
    assert set(stored(gm)) == {"kept", "s2"}
    jsonl(project / "later.jsonl", [{"type": "summary", "summary": "GHOSTMEM:ignore", "leafUuid": "v1"}])
    gm.import_paths(
        [project], embed=False
    )  # a summary line (another file) marks the session holding its leaf
    assert set(stored(gm)) == {"kept"}


def test_a_marked_summary_read_first_ignores_the_session_read_later(gm: GhostMem, tmp_path: Path) -> None:
    project = tmp_path / "p"
    jsonl(project / "a-summary.jsonl", [{"type": "summary", "summary": "ghostmem:ignore", "leafUuid": "x1"}])
    gm.import_paths([project], embed=False)
    jsonl(project / "s3.jsonl", [cc("user", "x1", None, "read after its summary", sessionId="s3")])
    gm.import_paths([project], embed=False)
    assert stored(gm) == {}
