"""Argument models of the operations. Field descriptions are what a model reads; keep them short and exact.

Every model is flat (no nested models) so LangChain, LlamaIndex and MCP render the same JSON schema. Limits are
part of the schema (``minimum`` / ``maximum``), so a model sees them before it calls. These models are the only
validator of operation arguments: every surface (Python client, CLI, MCP, LangChain, LlamaIndex) parses through
them (:func:`ghostmem.ops.validate`) before anything reaches the database.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from ghostmem.limits import STORED_ID_BYTES
from ghostmem.records import Platform

MAX_DAYS = 36500  # a hundred years: anything larger is a mistake, not a wish
MAX_SEARCH_LIMIT = 50
MAX_LIST_LIMIT = 100
MAX_PAGE = 500
MAX_OFFSET = 2**31 - 1  # message positions are Postgres integers
MAX_MEMORY_ID = 2**63 - 1  # memory ids are Postgres bigints
MAX_QUERY_CHARS = 2000
MAX_CONTENT_CHARS = 4000

GhostKind = Literal["rule", "feedback", "preference", "fact", "warning"]
GhostScope = Literal["global", "project", "shared-restricted"]
FeedbackSignal = Literal["endorse", "correct", "incident_prevented", "prediction_error"]
GhostFormula = Literal["default", "literal"]
SearchMode = Literal["hybrid", "lexical", "vector"]


class OpArgs(BaseModel):
    """Base of every argument model: unknown arguments are an error, strings are stripped."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    @field_validator("*")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        """Postgres text cannot hold NUL: refuse it here instead of failing inside the driver. (Lone surrogates
        never get here: pydantic refuses them as "not a valid string".)"""
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and "\x00" in text:
                raise ValueError(
                    "must not contain NUL characters (\\x00), which text cannot hold: remove them"
                )
        return value


def _days(default: int | None, what: str) -> int | None:
    return Field(default, ge=1, le=MAX_DAYS, description=f"Only {what} active in the last N days.")


class _ProjectFiltered(OpArgs):
    """An operation filtering conversations by ``project``: an empty project is refused by each the same way.
    Taken as a pattern it would keep every conversation that has a project or a title (and drop the rest), which
    is neither no filter nor a project: what a model sending "" meant is not known, so it is told what to send."""

    @field_validator("project", mode="before", check_fields=False)
    @classmethod
    def _project_has_text(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            optional = not cls.model_fields["project"].is_required()
            raise ValueError(
                "empty: give text that the project's path or name, or the conversation's title, contains"
                + (" (or leave it out for every conversation)" if optional else "")
            )
        return value


class SearchPersonalMemoryArgs(_ProjectFiltered):
    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="What to look for: words, a phrase or a question, in any language.",
    )
    days: int | None = _days(None, "conversations")
    platform: Platform | None = Field(None, description="Only conversations from this platform.")
    project: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Only conversations whose project or title contains this text.",
    )
    limit: int = Field(10, ge=1, le=MAX_SEARCH_LIMIT, description="Maximum number of conversations.")
    include_library: bool = Field(False, description="Also search the shared library tier.")
    explain: SkipJsonSchema[bool] = False
    # Benchmarks run one leg alone; not model-visible.
    mode: SkipJsonSchema[SearchMode] = Field(
        "hybrid", description="Search by words and meaning (hybrid), or by one of them alone."
    )

    @field_validator("query")
    @classmethod
    def _query_has_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is empty: pass words to look for (to browse by time, list recent ones)")
        return value


class GetConversationArgs(OpArgs):
    conv_id: str = Field(
        min_length=1, max_length=STORED_ID_BYTES, description="A conv_id from a search or list result."
    )
    offset: int = Field(
        0, ge=0, le=MAX_OFFSET, description="Index of the first message to return (for paging)."
    )
    limit: int = Field(200, ge=1, le=MAX_PAGE, description="Maximum number of messages to return.")


class ListRecentConversationsArgs(_ProjectFiltered):
    days: int = Field(2, ge=1, le=MAX_DAYS, description="Conversations active in the last N days.")
    limit: int = Field(20, ge=1, le=MAX_LIST_LIMIT, description="Maximum number of conversations.")
    platform: Platform | None = Field(None, description="Only conversations from this platform.")
    project: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Only conversations whose project or title contains this text.",
    )


class ListProjectConversationsArgs(_ProjectFiltered):
    project: str = Field(
        min_length=1,
        max_length=200,
        description="Text contained in the project path/name or the title (case-insensitive), e.g. 'my-webapp'.",
    )
    days: int = Field(14, ge=1, le=MAX_DAYS, description="Conversations active in the last N days.")
    limit: int = Field(30, ge=1, le=MAX_LIST_LIMIT, description="Maximum number of conversations.")


class GetConversationSummaryArgs(OpArgs):
    conv_id: str = Field(
        min_length=1, max_length=STORED_ID_BYTES, description="A conv_id from a search or list result."
    )
    max_messages: int = Field(
        12, ge=2, le=50, description="Messages to show: half from the start, half from the end."
    )


class SearchGhostMemoriesArgs(OpArgs):
    query: str = Field(
        "",
        max_length=MAX_QUERY_CHARS,
        description="What the rules should be about; empty for an overview of the top-ranked rules.",
    )
    current_project: str | None = Field(
        None, max_length=200, description="The project you are working in (unlocks its rules)."
    )
    limit: int = Field(10, ge=1, le=MAX_SEARCH_LIMIT, description="Maximum number of memories.")
    # "literal" ranks by the reference formula exactly, flaws included (docs/ghosts.md); not for models.
    formula: SkipJsonSchema[GhostFormula] = Field(
        "default",
        description="The ranking formula: ghostmem's, or the reference formula as written (literal).",
    )


class RememberArgs(OpArgs):
    content: str = Field(
        min_length=1, max_length=MAX_CONTENT_CHARS, description="The rule or lesson, as one clear sentence."
    )
    kind: GhostKind = Field("rule", description="What sort of memory this is.")
    scope: GhostScope = Field(
        "global",
        description="global: everywhere; project: only in its project; shared-restricted: only in the "
        "projects of its allowlist.",
    )
    project: str | None = Field(
        None, max_length=200, description="The project a project-scoped memory belongs to."
    )
    allowlist: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="Projects allowed to see a shared-restricted memory.",
    )


class GiveFeedbackArgs(OpArgs):
    memory_id: int = Field(ge=1, le=MAX_MEMORY_ID, description="The memory_id of a ghost memory.")
    signal: FeedbackSignal = Field(
        description="endorse: it helped; correct: it was wrong; incident_prevented: it stopped a mistake; "
        "prediction_error: it predicted wrongly."
    )
    note: str | None = Field(None, max_length=MAX_CONTENT_CHARS, description="Why, in a sentence.")


class UpdateMemoryArgs(OpArgs):
    memory_id: int = Field(ge=1, le=MAX_MEMORY_ID, description="The memory_id of the ghost memory to reword.")
    content: str = Field(
        min_length=1,
        max_length=MAX_CONTENT_CHARS,
        description="The corrected rule or lesson, as one sentence.",
    )
    reason: str | None = Field(
        None, max_length=MAX_CONTENT_CHARS, description="Why it changes, in a sentence."
    )


class RetireMemoryArgs(OpArgs):
    memory_id: int = Field(ge=1, le=MAX_MEMORY_ID, description="The memory_id of the ghost memory to retire.")
    reason: str = Field(
        min_length=1, max_length=MAX_CONTENT_CHARS, description="Why it is wrong or no longer applies."
    )
