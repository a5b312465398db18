"""THE contract: one :class:`OpSpec` per operation. Every surface (Python API, CLI, MCP, LangChain, LlamaIndex)
reads names, descriptions, argument schemas and renderings from here and restates none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel, ValidationError, create_model

from ghostmem import ghosts, render, search
from ghostmem.args import (
    GetConversationArgs,
    GetConversationSummaryArgs,
    GiveFeedbackArgs,
    ListProjectConversationsArgs,
    ListRecentConversationsArgs,
    OpArgs,
    RememberArgs,
    RetireMemoryArgs,
    SearchGhostMemoriesArgs,
    SearchPersonalMemoryArgs,
    UpdateMemoryArgs,
)
from ghostmem.context import OpContext
from ghostmem.errors import InvalidArgument
from ghostmem.models import (
    ConversationList,
    ConversationSummary,
    FeedbackResult,
    GhostList,
    MemoryChange,
    RememberResult,
    SearchResult,
    Thread,
)
from ghostmem.program import Program
from ghostmem.render import Renderer
from ghostmem.words import Arg, Op, Part

A = TypeVar("A", bound=OpArgs)
R = TypeVar("R", bound=BaseModel)
M = TypeVar("M", bound=OpArgs)


@dataclass(frozen=True, slots=True)
class OpResult(Generic[R]):
    """What an operation returns: ``text`` for a model to read, ``data`` (its result model) for code."""

    op: str
    text: str
    data: R

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "text": self.text, "data": self.data.model_dump(mode="json")}


class Effect(Enum):
    """What an operation does to the database: the one fact that decides where it may run.

    ``READS``: reads stored memory and nothing else; ``RECORDS_USE``: reads, and records that it returned what it
    did (ghost ranking's use counts); ``WRITES``: changes stored memory. Only ``READS`` may run on a read replica
    (a standby applies nothing but the primary's changes); the others run on the primary. A read-only MCP server
    or toolkit leaves out ``WRITES`` only: recording use is not changing what is remembered.
    """

    READS = "reads"
    RECORDS_USE = "records use"
    WRITES = "writes"


@dataclass(frozen=True)
class OpSpec(Generic[A, R]):
    """One operation: what a model sees (name, description, args schema) and how it runs."""

    name: str
    description: str
    args_model: type[A]
    result_model: type[R]
    program: Callable[[OpContext, A], Program[R]]
    render: Renderer[R]
    cli_name: str
    effect: Effect
    cli_positional: tuple[str, ...] = ()
    bindable: frozenset[str] = field(default_factory=frozenset)
    cli_aliases: Mapping[str, str] = field(default_factory=dict)  # field → an extra, shorter CLI flag

    @property
    def writes(self) -> bool:
        """Whether it changes stored memory (a read-only server leaves it out)."""
        return self.effect is Effect.WRITES

    def cli_flag(self, name: str) -> str:
        """The command line's flag for argument ``name``: its alias, else ``--name-with-dashes``."""
        return self.cli_aliases.get(name, "--" + name.replace("_", "-"))

    def parse(self, arguments: Mapping[str, Any] | A | None) -> A:
        """Validate raw arguments into the args model; a bad argument raises :class:`InvalidArgument`."""
        if isinstance(arguments, self.args_model):
            return arguments
        return validate(self.name, self.args_model, cast(Mapping[str, Any] | None, arguments))

    def public_args_model(self, bound: frozenset[str] | set[str] = frozenset()) -> type[OpArgs]:
        """The args model a model sees when the application has bound some arguments (they disappear)."""
        hidden = set(bound) & self.bindable
        if not hidden:
            return self.args_model
        fields: dict[str, Any] = {
            name: (info.annotation, info)
            for name, info in self.args_model.model_fields.items()
            if name not in hidden
        }
        model: type[OpArgs] = create_model(
            self.args_model.__name__, __base__=OpArgs, __doc__=self.args_model.__doc__, **fields
        )
        return model


def validate(op_name: str, model: type[M], arguments: Mapping[str, Any] | None) -> M:
    """``arguments`` parsed by ``model`` (an operation's args model, or its public variant): the one validator
    of every surface. Anything wrong raises :class:`InvalidArgument` with one sentence."""
    try:
        return model.model_validate(dict(arguments or {}))
    except ValidationError as exc:
        raise InvalidArgument(*validation_error_parts(op_name, exc)) from None
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(Op(op_name), f": arguments must be an object of named values ({exc})") from None


def validation_error_parts(op_name: str, exc: ValidationError) -> list[Part]:
    """One line a caller can act on: which argument, what is wrong, what was given (the argument as an
    :class:`~ghostmem.words.Arg` term, so each surface names it its way)."""
    parts: list[Part] = ["invalid arguments for ", Op(op_name), ": "]
    for i, err in enumerate(exc.errors(include_url=False)):
        loc = err["loc"]
        named = bool(loc) and isinstance(loc[0], str) and loc[0].isidentifier()
        where: list[Part] = [Arg(str(loc[0]), op_name)] if named else []
        rest = loc[1:] if named else loc
        if rest or not where:
            where.append(("." if where else "") + (".".join(_name(p) for p in rest) or "arguments"))
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        given = err.get("input")
        shown = "" if err["type"] == "missing" else f" (got {_short(given)})"
        parts += ["; " if i else "", *where, f": {msg}{shown}"]
    return parts


def _name(part: int | str) -> str:
    """An argument name as given, quoted when it is not a plain name (a model may send any key)."""
    text = str(part)
    return text if text.isidentifier() or isinstance(part, int) else _short(text)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


OPS: tuple[OpSpec[Any, Any], ...] = (
    OpSpec(
        name="search_personal_memory",
        description=(
            "Search the user's past conversations with AI assistants (Claude Code, Codex, Gemini, ChatGPT, "
            "Claude.ai, LangChain/LlamaIndex apps) by meaning and by words, in any language. Returns the best "
            "matching conversations, each with a header [conv_id | platform | started→ended | title | topic | "
            "cluster | messages | intensity] and the messages that matched. Use it to recall what was discussed, "
            "decided or tried before. Narrow with days, platform or project. Then read one with "
            "get_conversation_summary or get_conversation. A hit's score (0-1) says how much of the query it "
            "holds (its share of the query's words, its closeness in meaning): below 0.5 it matches only part "
            "of it."
        ),
        args_model=SearchPersonalMemoryArgs,
        result_model=SearchResult,
        program=search.search_personal_memory,
        render=render.search_result,
        cli_name="search",
        effect=Effect.READS,
        cli_positional=("query",),
    ),
    OpSpec(
        name="get_conversation",
        description=(
            "Read a whole conversation, message by message in order, by its conv_id. Long threads come in pages: "
            "pass offset (and limit) to continue where the previous page ended. Looks in personal memory first, "
            "then in the shared library, and says which one answered."
        ),
        args_model=GetConversationArgs,
        result_model=Thread,
        program=search.get_conversation,
        render=render.thread,
        cli_name="show",
        effect=Effect.READS,
        cli_positional=("conv_id",),
    ),
    OpSpec(
        name="list_recent_conversations",
        description=(
            "List the user's most recent conversations, newest activity first (by time, not by relevance). "
            "Use it for 'what was I working on yesterday'. Optional platform and project filters. When nothing is "
            "that recent, it shows the most recent before the window and the days that list them."
        ),
        args_model=ListRecentConversationsArgs,
        result_model=ConversationList,
        program=search.list_recent_conversations,
        render=render.conversation_list,
        cli_name="recent",
        effect=Effect.READS,
    ),
    OpSpec(
        name="list_project_conversations",
        description=(
            "List conversations about one project: those whose project path/name or title contains the given "
            "text (case-insensitive), newest first. Use it to catch up on a codebase or a piece of work. When "
            "nothing is that recent, it shows the most recent before the window and the days that list them."
        ),
        args_model=ListProjectConversationsArgs,
        result_model=ConversationList,
        program=search.list_project_conversations,
        render=render.conversation_list,
        cli_name="project",
        effect=Effect.READS,
        cli_positional=("project",),
    ),
    OpSpec(
        name="get_conversation_summary",
        description=(
            "Get a short view of one conversation: title, platform, dates, message count, topic and cluster, "
            "plus its first and last messages. Cheaper than get_conversation (max_messages of them in all); "
            "use it to decide whether a conversation is worth reading in full."
        ),
        args_model=GetConversationSummaryArgs,
        result_model=ConversationSummary,
        program=search.get_conversation_summary,
        render=render.summary,
        cli_name="summary",
        effect=Effect.READS,
        cli_positional=("conv_id",),
    ),
    OpSpec(
        name="search_ghost_memories",
        description=(
            "Recall the rules, lessons and feedback this agent has accumulated (ghost memories), ranked by how "
            "useful they proved, how recently they were used and how well they match the query. Call it before "
            "acting on a task to follow what was learned; an empty query gives the top rules overall. Each "
            "result has a memory_id for give_feedback and a score breakdown."
        ),
        args_model=SearchGhostMemoriesArgs,
        result_model=GhostList,
        program=ghosts.search_ghost_memories,
        render=render.ghost_list,
        cli_name="ghosts",
        cli_positional=("query",),
        effect=Effect.RECORDS_USE,
        bindable=frozenset({"current_project"}),
        cli_aliases={"current_project": "--project"},
    ),
    OpSpec(
        name="remember",
        description=(
            "Store a new ghost memory: a rule, lesson, preference or warning worth following next time, as one "
            "self-contained sentence. A near-duplicate of an existing memory strengthens it instead of adding a "
            "copy. Scope it to a project, or restrict it to an allowlist of projects, when it must not apply "
            "everywhere."
        ),
        args_model=RememberArgs,
        result_model=RememberResult,
        program=ghosts.remember,
        render=render.remember_result,
        cli_name="remember",
        cli_positional=("content",),
        effect=Effect.WRITES,
        bindable=frozenset({"project", "allowlist"}),
    ),
    OpSpec(
        name="give_feedback",
        description=(
            "Tell ghostmem how a ghost memory worked out, so its ranking learns: endorse (it helped), correct "
            "(it was wrong or misleading), incident_prevented (it stopped a mistake), prediction_error (what it "
            "predicted did not happen). Returns the memory with its new score breakdown."
        ),
        args_model=GiveFeedbackArgs,
        result_model=FeedbackResult,
        program=ghosts.give_feedback,
        render=render.feedback_result,
        cli_name="feedback",
        cli_positional=("memory_id", "signal"),
        effect=Effect.WRITES,
    ),
    OpSpec(
        name="update_memory",
        description=(
            "Correct the wording of a ghost memory that is partly wrong or unclear: it keeps its memory_id, its "
            "feedback and its history (the old wording is kept), and is found by its new wording. Give the "
            "whole new sentence and, in `reason`, why."
        ),
        args_model=UpdateMemoryArgs,
        result_model=MemoryChange,
        program=ghosts.update_memory,
        render=render.memory_change,
        cli_name="update-memory",
        cli_positional=("memory_id", "content"),
        effect=Effect.WRITES,
    ),
    OpSpec(
        name="retire_memory",
        description=(
            "Retire a ghost memory that is wrong, outdated or was never meant to be followed: no search returns "
            "it any more. It is kept with who retired it, when and why (`reason`, required), and only an "
            "operator can restore it."
        ),
        args_model=RetireMemoryArgs,
        result_model=MemoryChange,
        program=ghosts.retire_memory,
        render=render.memory_change,
        cli_name="retire-memory",
        cli_positional=("memory_id",),
        effect=Effect.WRITES,
    ),
)

OPS_BY_NAME: dict[str, OpSpec[Any, Any]] = {op.name: op for op in OPS}


def get_op(name: str) -> OpSpec[Any, Any]:
    try:
        return OPS_BY_NAME[name]
    except KeyError:
        raise InvalidArgument(f"unknown operation {name!r}; known: {', '.join(OPS_BY_NAME)}") from None
