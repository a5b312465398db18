"""What a model reads: the exact row header, bounded text, and the messages of empty results."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from ghostmem import limits, render
from ghostmem.models import (
    ConversationList,
    ConversationSummary,
    MessageView,
    SearchHit,
    SearchResult,
    Thread,
)
from hypothesis import given
from hypothesis import strategies as st
from support.conversations import START, row


def test_row_header_is_exact() -> None:
    assert render.row_header(row()) == (
        "[abc123 | claude_code | 2026-03-01 09:05→2026-03-01 11:35 | Fix the login page | auth | 3 | 14 messages | 0.46]"
    )


def test_row_header_of_missing_fields() -> None:
    bare = row(
        started_at=None, ended_at=None, title=None, topic=None, cluster=None, intensity=None, msg_count=0
    )
    assert render.row_header(bare) == "[abc123 | claude_code | ?→? | (untitled) | - | - | 0 messages | -]"


def test_times_are_utc() -> None:
    tokyo = timezone(timedelta(hours=9))
    shifted = row(started_at=datetime(2026, 3, 1, 18, 5, tzinfo=tokyo), ended_at=None)
    assert "2026-03-01 09:05→?" in render.row_header(shifted)


def test_list_row_is_header_then_snippet() -> None:
    text = render.conversation_list(ConversationList(rows=[row()]))
    header, snippet = text.split("\n")
    assert header == render.row_header(row())
    assert snippet == "  the login page breaks on Safari"


def test_long_titles_and_snippets_are_clipped() -> None:
    long = row(title="t" * 500, snippet="s" * 5000)
    header, snippet = render.conversation_row(long).split("\n")
    assert f"| {'t' * (limits.SHOWN_TITLE_CHARS - 1)}… |" in header
    assert len(snippet.strip()) == limits.SHOWN_SNIPPET_CHARS


def test_clip_never_cuts_short_text() -> None:
    assert render.clip("a  b\n c", 10) == "a b c"
    assert render.clip(None, 10) == ""
    assert render.clip("abcdefghij", 5) == "abcd…"


@given(
    st.text(alphabet=st.sampled_from("abé中 \n\t\u3000\u00a0\x1c"), max_size=400),
    st.integers(min_value=1, max_value=60),
)
def test_clip_is_the_collapsed_text_cut_to_its_limit(text: str, limit: int) -> None:
    """Whatever start of the text clip reads, its line is the whole text's, whitespace collapsed, cut to ``limit``
    with an ellipsis (the alphabet: words, ASCII and other Unicode whitespace, long runs of either)."""
    flat = " ".join(text.split())
    expected = flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
    assert render.clip(text, limit) == expected


def test_clip_reads_a_huge_text_no_further_than_its_line() -> None:
    class Counting(str):
        read = 0

        def __getitem__(self, key: Any) -> str:
            Counting.read = max(Counting.read, key.stop or len(self))
            return str.__getitem__(self, key)

    # 3.4 MB of words each followed by 30 spaces: the 40-character line needs the first 9 words (306 characters)
    assert render.clip(Counting(("word" + " " * 30) * 100_000), 40) == ("word " * 8)[:39].rstrip() + "…"
    assert 0 < Counting.read <= 4 * 306


def test_empty_results_say_what_to_do() -> None:
    assert "search_personal_memory" in render.conversation_list(ConversationList(rows=[]))
    assert "'zeppelin'" in render.search_result(SearchResult(query="zeppelin", rows=[]))


def _hit(i: int, text: str = "a match", explain: dict[str, object] | None = None) -> SearchHit:
    return SearchHit(
        **row(conv_id=f"c{i}").model_dump(),
        score=0.5 / (i + 1),
        matches=[MessageView(seq=4, role="user", speaker="Ann", ts=START, text=text)],
        explain=explain,
    )


def test_search_hit_shows_score_and_matches() -> None:
    lines = render.search_result(SearchResult(query="q", rows=[_hit(0)])).split("\n")
    assert lines[0] == render.row_header(row(conv_id="c0")) + " score=0.50"
    assert lines[2] == "  > #4 2026-03-01 09:05 user:Ann: a match"


def test_explain_line_names_each_leg() -> None:
    explain = {
        "lexical_rank": 2,
        "lexical_score": 3.25,
        "vector_rank": None,
        "vector_distance": None,
        "fused": 0.0161,
        "message_seq": 4,
    }
    text = render.search_result(SearchResult(query="q", rows=[_hit(0, explain=explain)]))
    assert "  why: lexical #2 (bm25 3.250) · vector - · fused 0.0161 (message #4)\n" in text
    explain.update(evidence=[[0.391, None], [0.2, 0.31]], relevance=0.4675)
    text = render.search_result(SearchResult(query="q", rows=[_hit(0, explain=explain)]))
    assert "· fused 0.0161 (message #4) · words 0.39 · cosine - → relevance 0.47\n" in text


def test_answers_are_bounded() -> None:
    hits = [_hit(i, text="x" * 5000) for i in range(50)]
    text = render.search_result(SearchResult(query="q", rows=hits))
    assert len(text) <= limits.ANSWER_CHARS + 200
    assert text.endswith("more lines cut to keep this answer short")
    assert max(len(line) for line in text.split("\n")) < limits.SHOWN_MATCH_CHARS + 100


def test_thread_says_how_to_continue() -> None:
    msgs = [MessageView(seq=i, role="assistant", text=f"m{i}") for i in range(10, 12)]
    text = render.thread(
        Thread(conversation=row(msg_count=30), messages=msgs, offset=10, total=30, next_offset=12)
    )
    lines = text.split("\n")
    assert lines[1] == "tier: personal · messages 10–11 of 30"
    assert lines[-1] == "… more messages: call again with offset=12"


def test_summary_marks_the_omitted_middle() -> None:
    head = [MessageView(seq=0, role="user", text="first")]
    tail = [MessageView(seq=9, role="assistant", text="last")]
    text = render.summary(
        ConversationSummary(conversation=row(project="acme/web"), head=head, tail=tail, omitted=8)
    )
    lines = text.split("\n")
    assert lines[1] == "project: acme/web"
    assert lines[3] == "… 8 messages omitted (get_conversation reads them) …"
    assert lines[2].endswith("user: first") and lines[4].endswith("assistant: last")


def test_excerpts_are_one_line_but_threads_keep_their_lines() -> None:
    code = MessageView(seq=1, role="assistant", text="try:\n    x()\nexcept E:\n    pass")
    hit = SearchHit(**row().model_dump(), score=1.0, matches=[code])
    assert "  > #1 ? assistant: try: x() except E: pass" in render.search_result(
        SearchResult(query="q", rows=[hit])
    )
    summary = ConversationSummary(conversation=row(), head=[code], tail=[], omitted=0)
    assert render.summary(summary).split("\n")[1] == "#1 ? assistant: try: x() except E: pass"
    thread = Thread(conversation=row(), messages=[code], offset=0, total=1)
    assert "try:\n    x()" in render.thread(thread)


def test_a_cut_thread_message_says_how_much_was_shown() -> None:
    long = MessageView(seq=3, role="assistant", text="y" * 15_000)
    line = render.message_line(long)
    shown = limits.SHOWN_MESSAGE_CHARS - 1
    assert line.endswith(f"{'y' * 10}… [cut: {shown:,} of 15,000 characters shown]")
    # the statement read only part of it: the message is longer than what came back
    cut_in_sql = MessageView(seq=3, role="assistant", text="y" * limits.READ_THREAD_CHARS, truncated=True)
    assert render.message_line(cut_in_sql).endswith(
        f"[cut: {shown:,} of {limits.READ_THREAD_CHARS:,}+ characters shown]"
    )
    short_but_truncated = MessageView(seq=3, role="assistant", text="abc", truncated=True)
    assert render.message_line(short_but_truncated).endswith(": abc… [cut: 3 of 3+ characters shown]")
    assert render.message_line(MessageView(seq=3, role="user", text="whole")).endswith(": whole")
    assert render.message_line(short_but_truncated, flat=True).endswith(": abc…")


def test_a_tool_calls_name_is_shown_once() -> None:
    """An importer's tool call begins with its tool's name (Claude Code, Codex, Gemini): the label says the role
    alone; a speaker the text does not begin with is still named (`ghostmem show` printed `tool_call:Bash: Bash`)."""
    call = MessageView(seq=3, role="tool_call", speaker="Bash", text='Bash {"command": "ls"}')
    assert render.message_line(call).endswith(' tool_call: Bash {"command": "ls"}')
    assert render.message_line(call, flat=True).endswith(' tool_call: Bash {"command": "ls"}')
    captured = MessageView(seq=4, role="tool_call", speaker="Bash", text='{"command": "ls"}')
    assert render.message_line(captured).endswith(' tool_call:Bash: {"command": "ls"}')
    prefix = MessageView(seq=5, role="tool_call", speaker="Bash", text="Bashful {}")
    assert render.message_line(prefix).endswith(" tool_call:Bash: Bashful {}")
    named = MessageView(seq=6, role="user", speaker="ann", text="ann here")
    assert render.message_line(named).endswith(" user:ann: ann here")


def test_nothing_is_shown_that_was_not_read() -> None:
    """Each text's shown limit fits in what its statement reads, and that in what is stored, so a cut is always the
    renderer's to mark."""
    assert limits.SHOWN_MESSAGE_CHARS <= limits.READ_THREAD_CHARS
    assert limits.SHOWN_MATCH_CHARS <= limits.READ_MATCH_CHARS
    assert limits.SHOWN_SUMMARY_CHARS <= limits.READ_SUMMARY_CHARS
    for read in (limits.READ_THREAD_CHARS, limits.READ_MATCH_CHARS, limits.READ_SUMMARY_CHARS):
        assert read <= min(limits.STORED_MESSAGE_CHARS, limits.STORED_TOOL_CHARS)
    assert limits.SHOWN_TITLE_CHARS <= limits.STORED_TITLE_CHARS
