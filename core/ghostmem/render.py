"""What a model reads: row headers, excerpts and bounded text for every result model.

Every list row is the header ``[conv_id | platform | started→ended | title | topic | cluster | messages |
intensity]`` followed by a snippet of the first message on the next line. Times are UTC ``YYYY-MM-DD HH:MM``.
Every text is bounded (:mod:`ghostmem.limits`), so one tool call never floods a model's context, and every cut is
marked.

Every rendering takes a :class:`Reader`: who reads it decides the words of its hints (:mod:`ghostmem.words`: a
model is told to call again with ``offset=200``, a person at the command line ``--offset 200``) and, for a person,
the layout: a conversation's fields one per line with their labels, times in the local time zone with the zone
named. (What a terminal must not interpret is neutralised where text reaches it: ``ghostmem.text.visible``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from ghostmem.limits import (
    ANSWER_CHARS,
    SHOWN_MATCH_CHARS,
    SHOWN_MEMORY_CHARS,
    SHOWN_MESSAGE_CHARS,
    SHOWN_SNIPPET_CHARS,
    SHOWN_SUMMARY_CHARS,
    SHOWN_TITLE_CHARS,
)
from ghostmem.models import (
    ConversationList,
    ConversationRow,
    ConversationSummary,
    FeedbackResult,
    GhostList,
    GhostMemoryRow,
    MemoryChange,
    MessageView,
    RememberResult,
    SearchResult,
    Thread,
    unnamed_cluster_topic,
)
from ghostmem.records import clip
from ghostmem.words import TOOL_WORDS, Arg, Op, Words

R_contra = TypeVar("R_contra", contravariant=True)


@dataclass(frozen=True, slots=True)
class Reader:
    """Who reads a rendering; the default is a model (or code) calling the tools."""

    words: Words = TOOL_WORDS
    person: bool = False  # labelled fields, one per line; local times with their zone


FOR_MODELS = Reader()


class Renderer(Protocol[R_contra]):
    """A result model's rendering (each operation has one: ``OpSpec.render``)."""

    def __call__(self, result: R_contra, reader: Reader = FOR_MODELS, /) -> str: ...


def when(ts: datetime | None, reader: Reader = FOR_MODELS) -> str:
    """``YYYY-MM-DD HH:MM`` in UTC for a model; in the local time zone, named, for a person."""
    if ts is None:
        return "?"
    if reader.person:
        return ts.astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def span(start: datetime | None, end: datetime | None, reader: Reader = FOR_MODELS) -> str:
    if not reader.person:
        return f"{when(start)}→{when(end)}"
    first, last = when(start, reader), when(end, reader)
    if start and end and first.rsplit(" ", 1)[-1] == last.rsplit(" ", 1)[-1]:
        first = first.rsplit(" ", 1)[0]  # the zone once, at the end
    return f"{first} → {last}"


def _count(n: int) -> str:
    return f"{n} message" + ("" if n == 1 else "s")


def row_header(row: ConversationRow) -> str:
    intensity = f"{row.intensity:.2f}" if row.intensity is not None else "-"
    cluster = str(row.cluster) if row.cluster is not None else "-"
    fields = [
        row.conv_id,
        row.platform,
        span(row.started_at, row.ended_at),
        clip(row.title, SHOWN_TITLE_CHARS) or "(untitled)",
        row.topic or "-",
        cluster,
        _count(row.msg_count),
        intensity,
    ]
    return "[" + " | ".join(fields) + "]"


def conversation_row(row: ConversationRow, reader: Reader = FOR_MODELS) -> str:
    if reader.person:
        return "\n".join(labelled(row, reader))
    return f"{row_header(row)}\n  {clip(row.snippet, SHOWN_SNIPPET_CHARS)}"


def labelled(
    row: ConversationRow, reader: Reader, extra: Sequence[tuple[str, str]] = (), *, snippet: bool = True
) -> list[str]:
    """A conversation for a person: its title, then one labelled field per line (``extra`` after the dates; the
    first message's snippet unless its messages follow)."""
    facts = [row.platform, _count(row.msg_count)]
    if row.tier != "personal":
        facts.append(f"{row.tier} tier")
    about = [row.topic or "no topic yet"]
    # a cluster no words name is its own topic: shown once
    if row.cluster is not None and row.topic != unnamed_cluster_topic(row.cluster):
        about.append(f"cluster {row.cluster}")
    if row.intensity is not None:
        about.append(f"intensity {row.intensity:.2f}")
    fields = [
        ("id", row.conv_id),
        ("from", " · ".join(facts)),
        ("when", span(row.started_at, row.ended_at, reader)),
        *extra,
        ("project", row.project or ""),
        ("topic", " · ".join(about)),
        ("starts", clip(row.snippet, SHOWN_SNIPPET_CHARS) if snippet else ""),
    ]
    title = clip(row.title, SHOWN_TITLE_CHARS) or "(untitled)"
    return [title] + [f"  {label + ':':<9}{value}" for label, value in fields if value]


def message_line(
    msg: MessageView, limit: int = SHOWN_MESSAGE_CHARS, *, flat: bool = False, reader: Reader = FOR_MODELS
) -> str:
    """``#seq time role[:speaker]: text`` with the text cut to ``limit``; ``flat`` makes it one line (excerpts).

    A cut excerpt ends in an ellipsis; a cut thread message also says how much of it was shown, so a reader knows
    the rest exists (``+``: the statement read only part of it, the message is longer still).
    """
    # the importers begin a tool call's text with its tool's name (so that the words find it): said once, there
    named = msg.speaker and not (msg.role == "tool_call" and msg.text.startswith(f"{msg.speaker} "))
    who = f"{msg.role}:{msg.speaker}" if named else msg.role
    if flat:
        text = clip(msg.text, limit)
        if msg.truncated and not text.endswith("…"):
            text += "…"
    elif len(msg.text) > limit or msg.truncated:
        shown = min(len(msg.text), limit - 1)
        total = f"{len(msg.text):,}{'+' if msg.truncated else ''}"
        text = f"{msg.text[:shown]}… [cut: {shown:,} of {total} characters shown]"
    else:
        text = msg.text
    return f"#{msg.seq} {when(msg.ts, reader)} {who}: {text}"


def _bounded(lines: list[str]) -> str:
    out: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        if used + len(line) > ANSWER_CHARS:
            out.append(f"… {len(lines) - i} more lines cut to keep this answer short")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


def _nothing_stored(reader: Reader) -> str:
    """What an empty list or search says when the owner holds nothing at all: no filter, window or other words
    would find anything, so the hint is how to bring conversations in."""
    if reader.person:
        return (
            "No conversations are stored yet: `ghostmem import` reads those of Claude Code, Codex, Gemini and "
            "Cursor from their usual places, and files, folders or export zips you give it (ChatGPT, Claude.ai)."
        )
    return "The user's personal memory holds no conversations yet (none has been imported or captured)."


def conversation_list(result: ConversationList, reader: Reader = FOR_MODELS) -> str:
    if result.rows:
        return _bounded([conversation_row(r, reader) for r in result.rows])
    if result.nothing_stored:  # "widen --days, drop a filter" to a person who has imported nothing yet
        return _nothing_stored(reader)
    if not result.before:
        return reader.words.say(
            "No conversations match. Widen `",
            Arg("days"),
            "`, drop a filter, or use ",
            Op("search_personal_memory"),
            ".",
        )
    window = f"{result.days} day{'s' if result.days != 1 else ''}"
    shown = len(result.before)
    if result.widen_to is None:  # none of them has a time: no window lists them
        its = "its messages" if shown == 1 else "their messages"
        head = (
            f"No conversations active in the last {window}. "
            f"{'One conversation has' if shown == 1 else f'{shown} conversations have'} no time (none of {its}"
            " carries one):"
        )
    else:
        untimed = any(r.ended_at is None for r in result.before)
        head = reader.words.say(
            f"No conversations active in the last {window}. The "
            f"{'most recent one' if shown == 1 else f'{shown} most recent'} before that, newest first"
            f"{', those without a time last' if untimed else ''} (`",
            Arg("days", value=result.widen_to),
            f"` lists {'those with one' if untimed else 'them'}):",
        )
    return _bounded([head, *(conversation_row(r, reader) for r in result.before)])


def search_result(result: SearchResult, reader: Reader = FOR_MODELS) -> str:
    # not "fewer filters or a wider time window" to one who has imported nothing yet
    if result.nothing_stored:
        return f"Nothing relevant to {result.query!r}. {_nothing_stored(reader)}"
    if not result.rows:
        return (
            f"Nothing relevant to {result.query!r}: no conversation shares its words or comes close in meaning."
            " Try other words, fewer filters or a wider time window."
        )
    lines: list[str] = []
    for hit in result.rows:
        if reader.person:
            lines += labelled(hit, reader, [("score", f"{hit.score:.2f}")])
        else:
            lines.append(f"{row_header(hit)} score={hit.score:.2f}")
            lines.append(f"  {clip(hit.snippet, SHOWN_SNIPPET_CHARS)}")
        if hit.explain is not None:
            lines.append(f"  why: {explain_line(hit.explain)}")
        for match in hit.matches:
            lines.append(f"  > {message_line(match, SHOWN_MATCH_CHARS, flat=True, reader=reader)}")
    return _bounded(lines)


def explain_line(explain: dict[str, Any]) -> str:
    """Each leg's rank and score for a hit's best message (``-`` when a leg did not find it), then the evidence its
    shown score comes from: the best message's word coverage and cosine, and the hit's relevance."""

    def leg(rank: Any, value: Any, what: str) -> str:
        return f"#{rank} ({what} {value:.3f})" if rank is not None and value is not None else "-"

    def share(value: Any) -> str:
        return "-" if value is None else f"{value:.2f}"

    line = (
        f"lexical {leg(explain.get('lexical_rank'), explain.get('lexical_score'), 'bm25')}"
        f" · vector {leg(explain.get('vector_rank'), explain.get('vector_distance'), 'distance')}"
        f" · fused {explain.get('fused', 0):.4f} (message #{explain.get('message_seq')})"
    )
    if explain.get("evidence"):
        words, cosine = explain["evidence"][0]
        line += (
            f" · words {share(words)} · cosine {share(cosine)} → relevance {share(explain.get('relevance'))}"
        )
    return line


def thread(result: Thread, reader: Reader = FOR_MODELS) -> str:
    conv = result.conversation
    # a row's count is of what the user and the assistant said; the thread also holds the rest
    others = result.total - conv.msg_count
    mix = f"{conv.msg_count} by the user and the assistant, {others} system, tool use, thinking or notes"
    if result.messages:
        page = f"messages {result.offset}–{result.offset + len(result.messages) - 1} of {result.total}"
        page += f" ({mix})" if others > 0 else ""
    else:  # paged past the end (or an empty conversation)
        last = (
            f" ({_count(result.total)}, 0–{result.total - 1}{f'; {mix}' if others > 0 else ''})"
            if result.total
            else " (it has no messages)"
        )
        page = reader.words.say("no message at ", Arg("offset", "get_conversation", result.offset), last)
    if reader.person:
        lines = labelled(conv, reader, [("tier", conv.tier), ("showing", page)], snippet=False)
    else:
        lines = [row_header(conv), f"tier: {conv.tier} · {page}"]
    lines += [message_line(m, reader=reader) for m in result.messages]
    if result.next_offset is not None:
        lines.append(
            reader.words.say(
                "… more messages: call again with ", Arg("offset", "get_conversation", result.next_offset)
            )
        )
    return _bounded(lines)


def summary(result: ConversationSummary, reader: Reader = FOR_MODELS) -> str:
    conv = result.conversation
    if reader.person:
        lines = labelled(conv, reader, snippet=False)
    else:
        lines = [row_header(conv)] + ([f"project: {conv.project}"] if conv.project else [])
    lines += [message_line(m, SHOWN_SUMMARY_CHARS, flat=True, reader=reader) for m in result.head]
    if result.omitted:
        lines.append(
            reader.words.say(
                f"… {result.omitted} messages omitted (", Op("get_conversation"), " reads them) …"
            )
        )
    lines += [message_line(m, SHOWN_SUMMARY_CHARS, flat=True, reader=reader) for m in result.tail]
    return _bounded(lines)


def ghost_row(row: GhostMemoryRow, reader: Reader = FOR_MODELS) -> str:
    where = row.scope if row.scope == "global" else f"{row.scope}:{row.project or ','.join(row.allowlist)}"
    if reader.person:
        return "\n".join(_ghost_labelled(row, where, reader))
    score = f" score={row.score:.3f}" if row.score is not None else ""
    used = f" | last used {when(row.last_used_at, reader)}" if row.last_used_at else ""
    terms = " ".join(f"{k}={v:+.3f}" for k, v in row.breakdown.items())
    return (
        f"[memory_id {row.memory_id} | {row.kind} | {where}{score}{used}] {clip(row.content, SHOWN_MEMORY_CHARS)}"
        + (f"\n  ({terms})" if terms else "")
    )


def _ghost_labelled(row: GhostMemoryRow, where: str, reader: Reader) -> list[str]:
    """A ghost memory for a person: its words, then labelled fields; of the score's terms, those that count."""
    terms = [
        f"{k.replace('_', ' ')} {v:+.3f}"
        for k, v in row.breakdown.items()
        if k != "recency_factor" and f"{v:+.3f}" not in ("+0.000", "-0.000")
    ]  # they add up to the score; the recency factor is already in them
    if (recency := f"{row.breakdown.get('recency_factor', 1.0):.3f}") != "1.000":
        terms.append(f"recency factor {recency} applied")
    score = f"{row.score:.3f}" if row.score is not None else ""
    fields = [
        ("id", f"{row.memory_id} · {row.kind} · {where}"),
        ("score", f"{score} ({', '.join(terms)})" if score and terms else score),
        ("used", when(row.last_used_at, reader) if row.last_used_at else ""),
    ]
    return [clip(row.content, SHOWN_MEMORY_CHARS)] + [
        f"  {label + ':':<9}{value}" for label, value in fields if value
    ]


def ghost_list(result: GhostList, reader: Reader = FOR_MODELS) -> str:
    if (
        result.none_visible
    ):  # "None stored yet" was said to an overview of a project whose rules are elsewhere
        return reader.words.say(
            "No ghost memory that applies here is stored yet (none at all, or only other projects'): ",
            Op("remember"),
            " stores one.",
        )
    if not result.rows:
        return "No ghost memories match."
    return _bounded([ghost_row(r, reader) for r in result.rows])


def remember_result(result: RememberResult, reader: Reader = FOR_MODELS) -> str:
    verb = "Stored" if result.created else "Strengthened the existing near-duplicate"
    return f"{verb}: {ghost_row(result.memory, reader)}"


def feedback_result(result: FeedbackResult, reader: Reader = FOR_MODELS) -> str:
    return f"Recorded {result.signal}: {ghost_row(result.memory, reader)}"


def memory_change(result: MemoryChange, reader: Reader = FOR_MODELS) -> str:
    if result.action == "retired":
        return (
            f"Retired (no search returns it; an operator can restore it): {ghost_row(result.memory, reader)}"
        )
    return f"Updated (its history keeps the old wording): {ghost_row(result.memory, reader)}"
