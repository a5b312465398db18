"""The reading operations on imported data: lists, threads, summaries, the personal→library fallback, bad args."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ghostmem import GhostMem
from ghostmem.cli import main, sample_exports
from ghostmem.errors import InvalidArgument, NotFound
from ghostmem.records import MessageRecord
from support.conversations import conversation, ids, import_generic

FIXTURES = sample_exports()


@pytest.fixture
def store(gm: GhostMem, tmp_path: Path) -> GhostMem:
    import_generic(
        gm,
        tmp_path / "convs.jsonl",
        [
            conversation(
                "fresh",
                "Fixing the login page",
                0.1,
                ["the login page breaks", "clear the cookie"],
                "acme/My-Webapp",
            ),
            conversation("day-old", "Budget for JSAS2026", 1.5, ["plan the JSAS2026 budget", "ok"], None),
            conversation(
                "week-old", "Vacuum tuning", 6, ["autovacuum is slow", "raise the cost limit"], "ops/db"
            ),
            conversation("old", "Percent signs 100%_done", 40, ["an old thread", "yes"], "misc"),
            conversation(
                "long", "A long thread", 3, [f"message number {i}" for i in range(25)], "acme/my-webapp"
            ),
        ],
    )
    return gm


def test_recent_is_newest_activity_first_within_days(store: GhostMem) -> None:
    assert ids(store.list_recent_conversations(days=2)) == ["fresh", "day-old"]
    assert ids(store.list_recent_conversations(days=10)) == ["fresh", "day-old", "long", "week-old"]
    assert ids(store.list_recent_conversations(days=100, limit=2)) == ["fresh", "day-old"]


def test_recent_filters_by_project_and_platform(store: GhostMem) -> None:
    assert ids(store.list_recent_conversations(days=10, project="WEBAPP")) == ["fresh", "long"]
    assert ids(store.list_recent_conversations(days=10, platform="generic")) == [
        "fresh",
        "day-old",
        "long",
        "week-old",
    ]
    assert ids(store.list_recent_conversations(days=10, platform="codex")) == []


def test_project_is_a_case_insensitive_substring_of_title_or_project(store: GhostMem) -> None:
    assert ids(store.list_project_conversations("my-webapp")) == ["fresh", "long"]
    assert ids(store.list_project_conversations("jsas2026")) == ["day-old"]  # title only
    assert ids(store.list_project_conversations("ops/db")) == ["week-old"]
    assert ids(store.list_project_conversations("misc")) == []  # older than the default 14 days
    assert ids(store.list_project_conversations("misc", days=60)) == ["old"]


def test_old_history_is_shown_when_the_default_window_is_empty(gm: GhostMem, tmp_path: Path) -> None:
    """History imported from long ago: recent (2 days) and project (14 days) say their window is empty, show the
    most recent conversations before it, and name the window that lists them; that window does. Conversations none
    of whose messages has a time come after them (no window lists them)."""
    old = [
        conversation(f"old-{n}", f"Thread {n}", 400 + 10 * n, ["what we said", "and answered"], "acme/shop")
        for n in range(7)
    ]
    undated = [
        conversation("timeless", "No time", 0, ["x", "y"]),
        conversation("undated", "Thread 6 again", 0, ["z"]),
    ]
    import_generic(gm, tmp_path / "history.jsonl", [*old, *undated])
    with (
        gm.connection() as conn
    ):  # a conversation without any time is never in a window; it comes after these
        conn.execute(
            "UPDATE ghostmem.conversations SET started_at = NULL, ended_at = NULL WHERE owner = %s"
            " AND conv_id IN ('timeless', 'undated')",
            (gm.owner,),
        )
    for result in (gm.list_recent_conversations(), gm.list_project_conversations("shop")):
        data = result.data
        assert data.rows == [] and data.days in (2, 14)
        assert [r.conv_id for r in data.before] == [
            "old-0",
            "old-1",
            "old-2",
            "old-3",
            "old-4",
        ]  # newest first
        assert data.widen_to == 441  # the fifth ended 440 days ago (and some minutes): 441 days list it
        lines = result.text.splitlines()
        assert lines[0] == (
            f"No conversations active in the last {data.days} days. The 5 most recent before that, newest first"
            " (`days=441` lists them):"
        )
        assert lines[1].startswith("[old-0 | generic | ")
    wider = gm.list_recent_conversations(days=441, limit=5).data
    assert [r.conv_id for r in wider.rows] == [
        "old-0",
        "old-1",
        "old-2",
        "old-3",
        "old-4",
    ] and not wider.before
    assert (
        gm.list_recent_conversations(days=440).data.rows[-1].conv_id == "old-3"
    )  # one day less: not the fifth
    one = gm.list_recent_conversations(limit=1)
    assert [r.conv_id for r in one.data.before] == ["old-0"] and "The most recent one before that" in one.text
    nothing = gm.list_project_conversations(
        "no-such-project"
    )  # filters hold for what is shown before the window
    assert nothing.data.before == [] and nothing.text.startswith("No conversations match.")
    # a project imported without times (a generic export, an app's log) was never listed: "No conversations match"
    timeless = gm.list_project_conversations("no time")
    assert [r.conv_id for r in timeless.data.before] == ["timeless"] and timeless.data.widen_to is None
    assert timeless.text.splitlines()[0] == (
        "No conversations active in the last 14 days. One conversation has no time (none of its messages carries one):"
    )
    mixed = gm.list_project_conversations("thread 6")
    assert [r.conv_id for r in mixed.data.before] == ["old-6", "undated"] and mixed.data.widen_to == 461
    assert mixed.text.splitlines()[0] == (
        "No conversations active in the last 14 days. The 2 most recent before that, newest first, those without a"
        " time last (`days=461` lists those with one):"
    )


def test_project_wildcards_are_literal(store: GhostMem) -> None:
    # Only one title holds a literal "%" and a literal "_"; as wildcards they would match every row.
    assert ids(store.list_project_conversations("%", days=60)) == ["old"]
    assert ids(store.list_project_conversations("_", days=60)) == ["old"]
    assert ids(store.list_project_conversations("\\", days=60)) == []
    assert ids(store.list_project_conversations("100%_d", days=60)) == ["old"]


def test_list_rows_render_the_exact_header(store: GhostMem) -> None:
    result = store.list_recent_conversations(days=1)
    row = result.data.rows[0]
    first, second = result.text.splitlines()[:2]
    assert first == (
        f"[fresh | generic | {row.started_at:%Y-%m-%d %H:%M}→{row.ended_at:%Y-%m-%d %H:%M} | Fixing the login page"
        f" | {row.topic or '-'} | {'-' if row.cluster is None else row.cluster} | 2 messages | "
        f"{'-' if row.intensity is None else format(row.intensity, '.2f')}]"
    )
    assert second == "  the login page breaks"


def test_get_conversation_pages_in_order(store: GhostMem) -> None:
    first = store.get_conversation("long", limit=10)
    data = first.data
    assert (data.total, data.offset, data.next_offset) == (25, 0, 10)
    assert [m.text for m in data.messages] == [f"message number {i}" for i in range(10)]
    assert data.conversation.tier == "personal"
    assert "offset=10" in first.text
    last = store.get_conversation("long", offset=20, limit=10).data
    assert [m.seq for m in last.messages] == list(range(20, 25))
    assert last.next_offset is None
    assert store.get_conversation("long", offset=30).data.messages == []


def test_personal_first_then_library(gm: GhostMem, tmp_path: Path) -> None:
    import_generic(gm, tmp_path / "p.jsonl", [conversation("shared", "mine", 1, ["my own copy"])])
    import_generic(
        gm,
        tmp_path / "l.jsonl",
        [
            conversation("shared", "library copy", 1, ["the library copy"]),
            conversation("lib-only", "curated", 1, ["curated"]),
        ],
        tier="library",
    )
    mine = gm.get_conversation("shared").data
    assert (mine.conversation.tier, mine.messages[0].text) == ("personal", "my own copy")
    curated = gm.get_conversation("lib-only")
    assert curated.data.conversation.tier == "library"
    assert "tier: library" in curated.text
    assert gm.get_conversation_summary("lib-only").data.conversation.tier == "library"
    # Lists are personal memory only.
    assert "lib-only" not in ids(gm.list_recent_conversations(days=5))


def test_unknown_conversation_suggests_search(store: GhostMem) -> None:
    for call in (store.get_conversation, store.get_conversation_summary):
        with pytest.raises(NotFound) as err:
            call("no-such-id")
        assert "search_personal_memory" in str(err.value)
        assert "\n" not in str(err.value)


def test_an_id_given_short_names_the_owners_ids_that_begin_with_it(
    gm: GhostMem, tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An id copied short (as `ghostmem show 5560` for the demo's 55604662-…) is not found, and the error names the
    owner's conv_ids that begin with it (library ones too), at most three, literally (`%` and `_` are not
    wildcards); never another owner's; an id beginning no conversation id still suggests search. The CLI says it in
    the same words, and forget does too (instead of offering force, which would keep out the prefix alone)."""
    convs = [
        conversation(i, "t", 1, ["hello"])
        for i in ("55604662-aaaa", "a%b_c", "axbyc", "b1", "b2", "b3", "b4")
    ]
    import_generic(gm, tmp_path / "a.jsonl", convs)
    import_generic(gm, tmp_path / "l.jsonl", [conversation("lib-5", "t", 1, ["hi"])], tier="library")
    other = GhostMem(dsn=pg_dsn, owner=f"{gm.owner}-other", embedder=gm.embedder)
    import_generic(other, tmp_path / "o.jsonl", [conversation("5560-theirs", "t", 1, ["theirs"])])
    for call in (gm.get_conversation, gm.get_conversation_summary):
        for given, named in (
            ("5560", "conv_ids beginning with it: '55604662-aaaa' (give one whole)"),
            ("a%", "conv_ids beginning with it: 'a%b_c' (give one whole)"),
            ("b", "conv_ids beginning with it: 'b1', 'b2', 'b3' and more (give more of the id)"),
            ("lib", "conv_ids beginning with it: 'lib-5' (give one whole)"),
        ):
            with pytest.raises(NotFound) as err:
                call(given)
            assert str(err.value) == f"no conversation {given!r} in personal memory or the library; {named}"
        with pytest.raises(NotFound) as err:
            other.get_conversation("55604662")
        assert "search_personal_memory" in str(err.value) and "aaaa" not in str(err.value)
    assert main(["--dsn", gm.dsn, "--owner", gm.owner, "show", "5560"]) == 2
    assert "conv_ids beginning with it: '55604662-aaaa' (give one whole)" in capsys.readouterr().err
    # forget: a short id would be kept out with --force while the conversation stays; it names the whole id instead
    with pytest.raises(NotFound) as err:
        gm.forget("5560")
    assert (
        str(err.value)
        == "no conversation '5560' is stored; conv_ids beginning with it: '55604662-aaaa' (give one whole)"
    )
    with pytest.raises(NotFound) as err:
        other.forget("55604662")
    assert "force" in str(err.value) and "aaaa" not in str(err.value)
    assert gm.get_conversation("55604662-aaaa").data.conversation.conv_id == "55604662-aaaa"
    other.close()


def test_summary_takes_head_and_tail_halves(store: GhostMem) -> None:
    data = store.get_conversation_summary("long", max_messages=6).data
    assert [m.seq for m in data.head] == [0, 1, 2]
    assert [m.seq for m in data.tail] == [22, 23, 24]
    assert data.omitted == 19
    odd = store.get_conversation_summary("long", max_messages=5).data
    assert (len(odd.head), len(odd.tail), odd.omitted) == (3, 2, 20)
    text = store.get_conversation_summary("long", max_messages=6).text
    assert "19 messages omitted" in text


def test_summary_of_a_short_thread_shows_each_message_once(store: GhostMem) -> None:
    data = store.get_conversation_summary("fresh", max_messages=12).data
    seqs = [m.seq for m in data.head + data.tail]
    assert seqs == [0, 1]
    assert data.omitted == 0


def test_summary_bounds_each_message(gm: GhostMem, tmp_path: Path) -> None:
    import_generic(gm, tmp_path / "big.jsonl", [conversation("big", "big", 1, ["word " * 5000, "short"])])
    data = gm.get_conversation_summary("big").data
    assert data.head[0].truncated and len(data.head[0].text) <= 1000
    assert len(gm.get_conversation_summary("big").text) < 3000


@pytest.mark.parametrize(
    ("op", "args", "fragment"),
    [
        ("list_recent_conversations", {"days": -1}, "days"),
        ("list_recent_conversations", {"days": 10**9}, "days"),
        ("list_recent_conversations", {"limit": 1000}, "limit"),
        ("list_recent_conversations", {"platform": "myspace"}, "platform"),
        ("list_project_conversations", {"project": ""}, "project"),
        ("list_recent_conversations", {"project": " "}, "project"),
        ("search_personal_memory", {"query": "x", "project": ""}, "project"),
        ("get_conversation", {"conv_id": "x", "offset": -1}, "offset"),
        ("get_conversation_summary", {"conv_id": "x", "max_messages": 1}, "max_messages"),
        ("search_personal_memory", {"query": "   "}, "query"),
        ("search_personal_memory", {"query": "x", "limit": 51}, "limit"),
    ],
)
def test_bad_arguments_give_one_line(gm: GhostMem, op: str, args: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        gm.run(op, args)
    message = str(err.value)
    assert "\n" not in message and fragment in message and op in message


def test_bundled_exports_list_and_read(gm: GhostMem) -> None:
    report = gm.import_paths([FIXTURES])
    assert report.ok
    rows = gm.list_recent_conversations(days=36500, limit=100).data.rows
    platforms = {r.platform for r in rows}
    assert {"claude_code", "codex", "chatgpt"} <= platforms
    ends = [r.ended_at for r in rows if r.ended_at is not None]
    assert ends == sorted(ends, reverse=True)
    only_codex = gm.list_recent_conversations(days=36500, platform="codex").data.rows
    assert only_codex and all(r.platform == "codex" for r in only_codex)
    thread = gm.get_conversation(rows[0].conv_id).data
    assert thread.total >= len(thread.messages) > 0
    assert [m.seq for m in thread.messages] == sorted(m.seq for m in thread.messages)


def test_a_store_with_nothing_yet_says_so_not_to_widen_the_window(
    gm: GhostMem, capsys: pytest.CaptureFixture[str]
) -> None:
    """A newcomer's first `ghostmem recent` (before any import) was told to widen --days and drop a filter it never
    gave: with no filter and not one conversation stored, the list says nothing is stored yet, and how to import."""
    empty = gm.list_recent_conversations()
    assert empty.data.nothing_stored and empty.text.startswith(
        "The user's personal memory holds no conversations"
    )
    assert main(["--dsn", gm.dsn, "--owner", gm.owner, "recent"]) == 0
    assert capsys.readouterr().out.startswith("No conversations are stored yet: `ghostmem import` reads")
    for filtered in (gm.list_recent_conversations(platform="codex"), gm.list_project_conversations("shop")):
        assert not filtered.data.nothing_stored and filtered.text.startswith("No conversations match.")
    gm.capture_append("c", [MessageRecord(native_id="", role="user", text="hello")], platform="langchain")
    assert not gm.list_recent_conversations(days=1).data.nothing_stored


@pytest.mark.parametrize(
    ("mode", "query"),
    [("hybrid", "vacuum"), ("lexical", "vacuum"), ("vector", "vacuum"), ("hybrid", "会話の履歴")],
)
def test_a_search_of_a_store_with_nothing_yet_says_so_not_to_widen_the_filters(
    gm: GhostMem, capsys: pytest.CaptureFixture[str], mode: str, query: str
) -> None:
    """A newcomer's first search (before any import) was told to try "fewer filters or a wider time window": in
    every way a search plans (both legs, words alone, meaning alone, a CJK query that skips the vector leg), with
    filters or without, an owner holding nothing is told so; once it holds something, a search that finds nothing
    under a filter is told to widen it again."""
    for filters in ({}, {"days": 7}, {"platform": "codex"}, {"project": "shop"}):
        empty = gm.search_personal_memory(query, mode=mode, **filters)
        assert empty.data.rows == [] and empty.data.nothing_stored, filters
        assert empty.text == (
            f"Nothing relevant to {query!r}. The user's personal memory holds no conversations yet (none has been"
            " imported or captured)."
        )
    assert main(["--dsn", gm.dsn, "--owner", gm.owner, "search", query, "--mode", mode, "--days", "3"]) == 0
    assert capsys.readouterr().out.startswith(
        f"Nothing relevant to {query!r}. No conversations are stored yet: `ghostmem import` reads"
    )
    # an empty project is refused at the command line as by the operation (the CLI reads the same contract)
    assert main(["--dsn", gm.dsn, "--owner", gm.owner, "search", query, "--project", ""]) == 2
    assert capsys.readouterr().err.startswith(
        "ghostmem: error: invalid arguments for `ghostmem search`: --project: empty: give text that the project's"
    )
    gm.capture_append("c", [MessageRecord(native_id="", role="user", text="hello")], platform="langchain")
    for filters in ({"platform": "codex"}, {"project": "shop"}):
        filtered = gm.search_personal_memory(query, mode=mode, **filters)
        assert not filtered.data.nothing_stored and filtered.text.endswith(
            "Try other words, fewer filters or a wider time window."
        )
