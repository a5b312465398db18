"""One LangChain tool per ghostmem operation, generated from :data:`ghostmem.OPS`, and the toolkit that holds them.

Nothing here restates a name, description or argument: each tool reads them from its :class:`~ghostmem.OpSpec`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from ghostmem import OPS, GhostMem, GhostMemError, OpSpec, get_op
from ghostmem.binding import Binding, Closes
from ghostmem.context import OpContext
from ghostmem.embed import Embedder
from ghostmem.ops import validation_error_parts
from ghostmem.words import TOOL_WORDS
from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, BaseToolkit, ToolException
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class GhostMemTool(Closes, BaseTool):
    """A ghostmem operation as a LangChain tool.

    The model reads the rendered text; code reads the structured result as the tool message's ``artifact``.
    Bad arguments and unknown ids come back to the model as one sentence it can act on (``status="error"``).

    Args:
        op: the operation's name, e.g. ``"search_personal_memory"``.
        store: a :class:`~ghostmem.GhostMem`, a DSN, or ``None`` (embedded server / ``GHOSTMEM_DSN``).
        owner: whose memory (fixed by the application, never chosen by the model).
        current_project: binds the project ghost memories are read and written for.
        strict: a schema for strict tool calling (``bind_tools(..., strict=True)``): every argument required,
            optional ones nullable, limits in the descriptions; calls are still validated with every limit.
        allowed_scopes: the ghost-memory scopes the model may write; default only ``"project"`` when a project
            is bound (see :class:`~ghostmem.binding.Binding`).
        binding: share one :class:`~ghostmem.binding.Binding` (its pools) between tools instead.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    op: str
    binding: Binding = Field(exclude=True, repr=False)
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: bool | str | Callable[[ToolException], str] | None = True

    def __init__(
        self,
        op: str,
        store: GhostMem | str | None = None,
        *,
        owner: str | None = None,
        current_project: str | None = None,
        embedder: Embedder | str | None = None,
        strict: bool = False,
        allowed_scopes: Sequence[str] | None = None,
        binding: Binding | None = None,
        **kwargs: Any,
    ) -> None:
        spec = get_op(op)
        binding = binding or Binding(
            store,
            owner=owner,
            current_project=current_project,
            embedder=embedder,
            strict=strict,
            allowed_scopes=allowed_scopes,
        )
        kwargs.setdefault("handle_validation_error", _validation_message(spec))
        super().__init__(
            op=spec.name,
            binding=binding,
            name=spec.name,
            description=spec.description,
            # A strict schema is a dict: LangChain passes the call's arguments through unvalidated (a strict
            # model sends null for an argument left at its default), and the binding validates them.
            args_schema=binding.json_schema(spec) if binding.strict else binding.args_model(spec),
            **kwargs,
        )

    @property
    def spec(self) -> OpSpec[Any, Any]:
        return get_op(self.op)

    @property
    def owner(self) -> str:
        """Whose memory this tool reads and writes when the call's config names no owner."""
        return self.binding.owner

    def _run(
        self,
        config: RunnableConfig,
        run_manager: CallbackManagerForToolRun | None = None,
        **arguments: Any,
    ) -> tuple[str, BaseModel]:
        try:
            result = self.binding.run(self.spec, arguments, call_context(self.binding, config))
        except GhostMemError as exc:
            raise ToolException(str(exc)) from exc
        return result.text, result.data

    async def _arun(
        self,
        config: RunnableConfig,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **arguments: Any,
    ) -> tuple[str, BaseModel]:
        try:
            result = await self.binding.arun(self.spec, arguments, call_context(self.binding, config))
        except GhostMemError as exc:
            raise ToolException(str(exc)) from exc
        return result.text, result.data


def call_context(binding: Binding, config: RunnableConfig) -> OpContext:
    """Whose memory (and with ``project_key`` which project) a LangChain / LangGraph call is for: its
    ``config["configurable"]``, else LangGraph's runtime ``context`` (``graph.invoke(..., context=...)``, a mapping
    or an object such as a ``context_schema`` dataclass), else what ``binding`` was built with."""
    return binding.context_for(config.get("configurable"), _runtime_context())


def _runtime_context() -> Any:
    """The ``context`` of the LangGraph run this call belongs to (None outside a graph, or without LangGraph)."""
    try:
        from langgraph.runtime import get_runtime

        return getattr(get_runtime(), "context", None)
    except (ImportError, RuntimeError, KeyError):  # not inside a graph run
        return None


def _validation_message(spec: OpSpec[Any, Any]) -> Callable[[ValidationError], str]:
    """LangChain validates against ``args_schema`` before ``_run``: answer in the same words ghostmem would."""

    def message(exc: ValidationError) -> str:
        return TOOL_WORDS.say(*validation_error_parts(spec.name, exc))

    return message


class GhostMemToolkit(Closes, BaseToolkit):
    """Every ghostmem operation as a tool, for every owner (and optionally one project).

    One toolkit (one store, one sync and one async pool) serves every user of an application: each call reads and
    writes the memory of the owner its config names, ``config={"configurable": {"user_id": ...}}`` (LangGraph
    passes an agent's config on to its tools), else its LangGraph runtime context's (``context=...``, same key),
    else of ``owner`` (see :func:`call_context`).

    Example::

        toolkit = GhostMemToolkit(GhostMem(), current_project="webapp")
        agent = create_agent(model, tools=toolkit.get_tools())
        agent.invoke({"messages": [...]}, config={"configurable": {"user_id": "alice"}})

    Args:
        store: a :class:`~ghostmem.GhostMem`, a DSN, or ``None`` (embedded server / ``GHOSTMEM_DSN``).
        owner: whose memory the tools read and write when a call's config names none.
        current_project: when set, ghost-memory tools act for this project and the model cannot change it.
        read_only: leave out the operations that write (``remember``, ``give_feedback``).
        ops: only these operations (by name), in this order.
        strict: schemas for strict tool calling (see :class:`GhostMemTool`).
        allowed_scopes: the ghost-memory scopes the model may write; default only ``"project"`` when a project
            is bound, any otherwise (see :class:`~ghostmem.binding.Binding`).
        owner_key: the ``configurable`` key that names a call's owner (default ``"user_id"``).
        project_key: a ``configurable`` key that names a call's project (default none: ``current_project``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    binding: Binding = Field(exclude=True, repr=False)
    ops: tuple[str, ...]

    def __init__(
        self,
        store: GhostMem | str | None = None,
        *,
        owner: str | None = None,
        current_project: str | None = None,
        embedder: Embedder | str | None = None,
        read_only: bool = False,
        ops: Sequence[str] | None = None,
        strict: bool = False,
        allowed_scopes: Sequence[str] | None = None,
        owner_key: str = "user_id",
        project_key: str | None = None,
    ) -> None:
        names = tuple(get_op(name).name for name in ops) if ops is not None else tuple(s.name for s in OPS)
        if read_only:
            names = tuple(name for name in names if not get_op(name).writes)
        super().__init__(  # type: ignore[call-arg]  # pydantic fields of this subclass
            binding=Binding(
                store,
                owner=owner,
                current_project=current_project,
                embedder=embedder,
                strict=strict,
                allowed_scopes=allowed_scopes,
                owner_key=owner_key,
                project_key=project_key,
            ),
            ops=names,
        )

    def get_tools(self) -> list[BaseTool]:
        return [GhostMemTool(name, binding=self.binding) for name in self.ops]
