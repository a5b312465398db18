"""What a person reads at the command line: labelled fields, local time with its zone, paging past the end said
plainly, and nothing from a transcript that a terminal would act on."""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from ghostmem import render
from ghostmem.cli import READER
from ghostmem.models import (
    ConversationList,
    GhostMemoryRow,
    MessageView,
    RememberResult,
    SearchHit,
    SearchResult,
    Thread,
)
from ghostmem.text import visible
from support.conversations import START, row


@pytest.fixture
def tokyo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_row_is_labelled_fields_in_local_time_with_the_zone(tokyo: None) -> None:
    text = render.conversation_list(ConversationList(rows=[row(project="webapp")]), READER)
    assert text.splitlines() == [
        "Fix the login page",
        "  id:      abc123",
        "  from:    claude_code · 14 messages",
        "  when:    2026-03-01 18:05 → 2026-03-01 20:35 JST",
        "  project: webapp",
        "  topic:   auth · cluster 3 · intensity 0.46",
        "  starts:  the login page breaks on Safari",
    ]
    # the model's text is unchanged: one header line, UTC without saying so (its description says UTC)
    assert render.conversation_list(ConversationList(rows=[row()])).startswith(
        "[abc123 | claude_code | 2026-03-01 09:05→2026-03-01 11:35 | Fix the login page | auth | 3 | 14 messages"
    )


def test_a_cluster_named_by_no_words_is_said_once() -> None:
    """A cluster whose conversations share no distinctive word is its own topic ('cluster 3'): the demo showed
    'topic:   cluster 3 · cluster 3 · intensity 0.19'."""
    text = render.conversation_list(ConversationList(rows=[row(topic="cluster 3")]), READER)
    assert "  topic:   cluster 3 · intensity 0.46" in text.splitlines()


def test_no_line_is_a_wall_of_values(tokyo: None) -> None:
    hit = SearchHit.model_validate({**row().model_dump(), "score": 0.77, "matches": []})
    text = render.search_result(SearchResult(query="login", rows=[hit]), READER)
    assert "  score:   0.77" in text.splitlines()
    assert max(len(line) for line in text.splitlines()) < 100


def test_a_span_across_zones_names_both(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        # the night the clocks change: 01:30 CET to 03:30 CEST
        text = render.span(
            datetime(2026, 3, 29, 0, 30, tzinfo=UTC), datetime(2026, 3, 29, 1, 30, tzinfo=UTC), READER
        )
    finally:
        monkeypatch.undo()
        time.tzset()
    assert text == "2026-03-29 01:30 CET → 2026-03-29 03:30 CEST"


def _thread(offset: int, shown: int, total: int) -> Thread:
    msgs = [MessageView(seq=offset + i, role="user", text=f"m{offset + i}") for i in range(shown)]
    more = offset + shown if offset + shown < total else None
    return Thread(
        conversation=row(msg_count=total), messages=msgs, offset=offset, total=total, next_offset=more
    )


def test_paging_past_the_end_says_so() -> None:
    assert "tier: personal · no message at offset=100 (48 messages, 0–47)" in render.thread(
        _thread(100, 0, 48)
    )
    people = render.thread(_thread(100, 0, 48), READER)
    assert "  showing: no message at --offset 100 (48 messages, 0–47)" in people.splitlines()
    assert "100–100" not in people
    assert "no message at offset=0 (it has no messages)" in render.thread(_thread(0, 0, 0))


def test_page_and_header_use_the_same_words() -> None:
    text = render.thread(_thread(0, 10, 12), READER)
    assert "  from:    claude_code · 12 messages" in text and "  showing: messages 0–9 of 12" in text
    assert "msgs" not in text and "msgs" not in render.thread(_thread(0, 10, 12))
    assert text.splitlines()[-1] == "… more messages: call again with --offset 10"
    assert "1 message ·" in render.row_header(row(msg_count=1)).replace(" |", " ·")


def test_a_thread_with_more_than_was_said_says_what_the_rest_is() -> None:
    """A row counts the user's and the assistant's messages; a thread also holds tool use, thinking and notes."""
    mixed = Thread(
        conversation=row(msg_count=2),
        messages=[MessageView(seq=i, role="user" if i == 0 else "tool", text=f"m{i}") for i in range(10)],
        offset=0,
        total=10,
    )
    text = render.thread(mixed, READER)
    assert "  from:    claude_code · 2 messages" in text
    assert (
        "  showing: messages 0–9 of 10 (2 by the user and the assistant, 8 system, tool use, thinking or notes)"
        in text
    )
    past = render.thread(mixed.model_copy(update={"messages": [], "offset": 30}))
    assert "no message at offset=30 (10 messages, 0–9; 2 by the user and the assistant, 8 system" in past


HOSTILE = [
    "\x1b[2J\x1b[H",  # CSI: clear the screen
    "\x1b]0;owned\x07",  # OSC: set the window title, ended by BEL
    "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x9b31m",  # C1 CSI
    "\x90qdcs\x9c",  # C1 DCS ... ST
    "a\rb\x08c\x7f",  # carriage return, backspace, DEL
    "\u202egnp.exe\u202c \u2066isolate\u2069 \u200f",  # bidi override, isolate, mark
]


@pytest.mark.parametrize("text", HOSTILE)
def test_visible_leaves_nothing_a_terminal_acts_on(text: str) -> None:
    shown = visible(f"before {text} after\nnext\tline")
    controls = [c for c in shown if unicodedata.category(c) in ("Cc", "Cf") and c not in "\n\t"]
    assert controls == [] and shown.startswith("before ") and shown.endswith(" after\nnext\tline")
    assert visible("日本語 é ✓ — “quotes”") == "日本語 é ✓ — “quotes”"  # text stays text


def test_every_control_character_is_neutralised() -> None:
    """Every C0/C1 control but newline and tab, and every bidi control, over the whole range, not a sample."""
    bidi = {"\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))}
    for code in [*range(0x00, 0x20), *range(0x7F, 0xA0)]:
        char = chr(code)
        assert visible(char) == (char if char in "\n\t" else f"\\x{code:02x}"), hex(code)
    for char in bidi:
        assert unicodedata.category(char) == "Cf" and visible(char) == f"\\u{ord(char):04x}"


def test_a_ghost_memory_for_a_person_is_labelled_and_shows_the_terms_that_count() -> None:
    memory = GhostMemoryRow(
        memory_id=7,
        content="never force-push to main",
        kind="rule",
        scope="project",
        project="webapp",
        score=0.4321,
        breakdown={
            "activation": 0.0331,
            "endorsement": 0.0,
            "correction": -0.1,
            "semantic": 0.499,
            "recency_factor": 0.8,
        },
        last_used_at=START,
    )
    assert render.ghost_row(memory, READER).splitlines() == [
        "never force-push to main",
        "  id:      7 · rule · project:webapp",
        "  score:   0.432 (activation +0.033, correction -0.100, semantic +0.499, recency factor 0.800 applied)",
        f"  used:    {render.when(START, READER)}",
    ]
    # a model keeps the one-line header with every term
    model = render.ghost_row(memory)
    assert model.startswith("[memory_id 7 | rule | project:webapp score=0.432 | last used 2026-03-01 09:05]")
    assert "endorsement=+0.000" in model and "recency_factor=+0.800" in model
    fresh = memory.model_copy(update={"score": 0.1, "breakdown": {"scope_bonus": 0.1, "recency_factor": 1.0}})
    assert (
        "  score:   0.100 (scope bonus +0.100)"
        in render.remember_result(RememberResult(memory=fresh, created=True), READER).splitlines()
    )
