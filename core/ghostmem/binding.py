"""What an application binds when it hands ghostmem's operations to a model: whose memory, and which project.

LangChain tools, LlamaIndex tools and the MCP server all hold one :class:`Binding`: a sync and an async store on
the same settings and embedder, the context every call runs in, and the set of arguments the application fixed
(they disappear from the model-visible schema, so the model can neither see nor change them).

What the model may write follows the binding too: with a bound project, ``remember`` writes only memories scoped
to that project (its ``scope`` offers only ``project``, ``allowlist`` leaves the schema) unless the application
allows more scopes (``allowed_scopes``); the operation itself refuses any other scope, on every surface.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, create_model

from ghostmem.args import GhostScope, OpArgs
from ghostmem.client import AsyncGhostMem, GhostMem
from ghostmem.context import OpContext
from ghostmem.embed import Embedder
from ghostmem.errors import InvalidArgument
from ghostmem.models import GhostList, SearchResult
from ghostmem.ops import OpResult, OpSpec, validate
from ghostmem.strict import strict_arguments, strict_schema

# Arguments that stand for "the project the agent works in": bound together when the application binds a project.
PROJECT_ARGUMENTS = frozenset({"current_project", "project"})
SCOPES: tuple[str, ...] = get_args(GhostScope)


class Binding:
    """A sync store, its async twin, the context calls run in and the arguments the application bound.

    One binding serves every owner: the store (and its pools) is shared, and whose memory a call reads and writes
    is part of the call's context (:meth:`context_for`), never of the pool. The owner given here is the default;
    a call names another through its configuration (``configurable[owner_key]``, LangChain's and LangGraph's
    ``config={"configurable": {"user_id": ...}}``), and likewise the project with ``project_key``.

    Args:
        store: a :class:`GhostMem` (used as it is, whatever its own owner), a DSN, or ``None`` for the embedded
            server (or ``GHOSTMEM_DSN``).
        owner: whose memory by default; defaults to the store's owner (or ``GHOSTMEM_OWNER``).
        current_project: binds the project ghost-memory operations act for; ``current_project`` (and
            ``remember``'s ``project``) are then removed from the tools' schemas. ``None`` keeps the store's.
        owner_key: the key of a call's ``configurable`` that names its owner (default ``"user_id"``).
        project_key: the key of a call's ``configurable`` that names its project (default none); setting it
            binds the project arguments as ``current_project`` does.
        embedder: the embedder of a store built here (ignored when a store is given).
        strict: show schemas for strict tool calling (:mod:`ghostmem.strict`: every argument required, optional
            ones nullable, no limit keywords); the arguments of a call are still validated with every limit.
        allowed_scopes: the ghost-memory scopes the model may write (``"global"``, ``"project"``,
            ``"shared-restricted"``). Default: only ``"project"`` when a project is bound, any otherwise. The
            schema's ``scope`` offers only these (``allowlist`` leaves it unless ``"shared-restricted"`` is one).
    """

    def __init__(
        self,
        store: GhostMem | str | None = None,
        *,
        owner: str | None = None,
        current_project: str | None = None,
        embedder: Embedder | str | None = None,
        strict: bool = False,
        allowed_scopes: Iterable[str] | None = None,
        owner_key: str = "user_id",
        project_key: str | None = None,
    ) -> None:
        self.strict = strict
        self.owner_key, self.project_key = owner_key, project_key
        # A store the application passed in is the application's to close.
        self._owns_store = not isinstance(store, GhostMem)
        self.store = store if isinstance(store, GhostMem) else GhostMem(dsn=store, embedder=embedder)
        self.astore: AsyncGhostMem = self.store.aio  # one async pool per store, shared by every binding on it
        project = self.store.context.current_project if current_project is None else current_project
        scopes = _allowed_scopes(allowed_scopes, project if project_key is None else project_key)
        self.context = dataclasses.replace(
            self.store.context,
            owner=owner or self.store.owner,
            current_project=project,
            allowed_scopes=scopes,
        )
        self.scopes = scopes
        # The scope a model's remember gets when it names none: global where allowed, else one it may write.
        self.defaults: dict[str, Any] = {}
        if scopes is not None:
            self.defaults["scope"] = "global" if "global" in scopes else min(scopes, default="project")
        bound = PROJECT_ARGUMENTS if project is not None or project_key is not None else frozenset()
        if scopes is not None and "shared-restricted" not in scopes:
            bound |= {"allowlist"}
        self.bound: frozenset[str] = bound
        self._models: dict[str, type[OpArgs]] = {}
        self._view = False  # a for_call view shares (and never closes) its parent's stores

    @property
    def owner(self) -> str:
        """Whose memory a call without an owner of its own reads and writes."""
        return self.context.owner

    @property
    def current_project(self) -> str | None:
        return self.context.current_project

    def context_for(self, *sources: Any) -> OpContext:
        """The context of one call: the owner (and, with ``project_key``, the project) named by the first of
        ``sources`` that names one, else the binding's. A source is a mapping or an object with attributes: a
        call's ``configurable``, LangGraph's runtime ``context``, a LlamaIndex workflow's store, the caller an MCP
        token authenticated. The application sets these, never the model."""
        named = {
            field: _first_named(sources, key)
            for key, field in ((self.owner_key, "owner"), (self.project_key, "current_project"))
            if key is not None
        }
        return self.caller(**named)

    def caller(self, owner: object = None, current_project: object = None) -> OpContext:
        """The binding's context with ``owner`` and ``current_project`` where given (a non-empty string or an
        integer id; anything else is refused in one sentence)."""
        changes: dict[str, Any] = {}
        for field, value in (("owner", owner), ("current_project", current_project)):
            if value is None:
                continue
            named = identity_named(value)
            if named is None:
                key = self.owner_key if field == "owner" else self.project_key or field
                raise InvalidArgument(
                    f"the call's {key!r} must be a non-empty string or an integer id (got {value!r:.40})"
                )
            changes[field] = named
        return dataclasses.replace(self.context, **changes) if changes else self.context

    def for_call(self, context: OpContext) -> Binding:
        """A binding that runs every call in ``context`` (one caller's owner and project) on this binding's stores,
        pools and schemas: built per request at no cost, and closing it closes nothing."""
        view = copy.copy(self)
        view.context, view._view = context, True
        return view

    def args_model(self, spec: OpSpec[Any, Any]) -> type[OpArgs]:
        """The argument model a model sees for ``spec`` (bound arguments removed), built once per operation."""
        if spec.name not in self._models:
            model = spec.public_args_model(self.bound)
            if self.scopes is not None and "scope" in model.model_fields:
                # The model is shown only the scopes it may write (its default one of them).
                info = model.model_fields["scope"]
                allowed: Any = Literal.__getitem__(tuple(sorted(self.scopes)))
                field = Field(self.defaults["scope"], description=info.description)
                model = create_model(
                    model.__name__, __base__=model, __doc__=model.__doc__, scope=(allowed, field)
                )
            self._models[spec.name] = model
        return self._models[spec.name]

    def json_schema(self, spec: OpSpec[Any, Any]) -> dict[str, Any]:
        """The input schema in the shape function-calling APIs use (no top-level title or extras flag), or
        with ``strict`` the strict one."""
        if self.strict:
            return strict_schema(self.args_model(spec))
        schema = self.args_model(spec).model_json_schema()
        schema.pop("title", None)
        schema.pop("additionalProperties", None)
        return schema

    def validate(self, spec: OpSpec[Any, Any], arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Check model-supplied arguments against the public schema; returns only the arguments given."""
        model = self.args_model(spec)
        if self.strict and isinstance(arguments, Mapping):
            arguments = strict_arguments(model, arguments)
        parsed = validate(spec.name, model, arguments)
        return parsed.model_dump(include=parsed.model_fields_set)

    def run(
        self, spec: OpSpec[Any, Any], arguments: Mapping[str, Any] | None, context: OpContext | None = None
    ) -> OpResult[BaseModel]:
        """Run ``spec`` with model-supplied arguments, in ``context`` (default: the binding's)."""
        return self.store.run(spec.name, self._arguments(spec, arguments), context=context or self.context)

    async def arun(
        self, spec: OpSpec[Any, Any], arguments: Mapping[str, Any] | None, context: OpContext | None = None
    ) -> OpResult[BaseModel]:
        return await self.astore.run(
            spec.name, self._arguments(spec, arguments), context=context or self.context
        )

    def _arguments(self, spec: OpSpec[Any, Any], arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """The model's arguments, checked, with the binding's defaults for those it left out."""
        defaults = {k: v for k, v in self.defaults.items() if k in spec.args_model.model_fields}
        return {**defaults, **self.validate(spec, arguments)}

    def close(self) -> None:
        """Close the pools this binding opened, sync and async (a store the application passed in stays open: the
        application closes it, ``gm.close()`` / ``await gm.aclose()``)."""
        if self._owns_store and not self._view:
            self.store.close()

    async def aclose(self) -> None:
        """:meth:`close` from async code."""
        if self._owns_store and not self._view:
            await self.store.aclose()


class Closes:
    """``close()`` / ``aclose()`` for an adapter object that holds a :class:`Binding` (tools, retrievers, chat
    stores): every object that may open a pool can close it."""

    binding: Binding

    def close(self) -> None:
        """Close the pools this object opened (``await aclose()`` from async code)."""
        self.binding.close()

    async def aclose(self) -> None:
        await self.binding.aclose()


def identity_named(value: object) -> str | None:
    """The owner or project a call's ``user_id`` (or other key) names: a non-empty string (stripped) or an integer
    id, else None."""
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
        return None
    return str(value).strip()


def _first_named(sources: Iterable[Any], key: str) -> Any:
    """The value of ``key`` in the first source that has one (mappings by item, other objects by attribute)."""
    for source in sources:
        if source is None:
            continue
        value = source.get(key) if isinstance(source, Mapping) else getattr(source, key, None)
        if value is not None:
            return value
    return None


def _allowed_scopes(given: Iterable[str] | None, project: str | None) -> frozenset[str] | None:
    """The scopes the model may write: as given, else only ``project`` when a project is bound (by name or by a
    configuration key), else any."""
    if given is None:
        return frozenset({"project"}) if project is not None else None
    scopes = frozenset([given] if isinstance(given, str) else given)
    unknown = sorted(scopes - set(SCOPES))
    if unknown:
        raise InvalidArgument(
            f"allowed_scopes: unknown scope {unknown[0]!r}; the scopes are {', '.join(SCOPES)}"
        )
    return scopes


@dataclass(frozen=True, slots=True)
class Passage:
    """One retrieved item in the shape retrievers hand out (a LangChain ``Document``, a LlamaIndex node)."""

    id: str
    text: str
    score: float | None
    metadata: dict[str, Any]


def passages(data: BaseModel) -> list[Passage]:
    """Conversations of a :class:`SearchResult` or memories of a :class:`GhostList` as passages, best first.

    A conversation's text is its best-matching messages (else its first message); its metadata the row header
    fields. A memory's text is the memory; its metadata its kind, scope, score and score breakdown.
    """
    if isinstance(data, SearchResult):
        return [
            Passage(
                id=hit.conv_id,
                text="\n".join(m.text for m in hit.matches) or hit.snippet or hit.title or "",
                score=hit.score,
                metadata=hit.model_dump(mode="json", exclude={"matches", "explain"}, exclude_none=True),
            )
            for hit in data.rows
        ]
    if isinstance(data, GhostList):
        return [
            Passage(
                id=str(row.memory_id),
                text=row.content,
                score=row.score,
                metadata=row.model_dump(mode="json", exclude={"content"}, exclude_none=True),
            )
            for row in data.rows
        ]
    raise TypeError(f"no passages in a {type(data).__name__}")
