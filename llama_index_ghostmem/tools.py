"""One LlamaIndex ``FunctionTool`` per ghostmem operation, generated from :data:`ghostmem.OPS`, and the tool spec.

Each tool validates its arguments with the operation's pydantic model (``FunctionTool`` does not), gives the model
the same text the LangChain tool gives, and keeps the structured result in ``ToolOutput.raw_output``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ghostmem import OPS, GhostMem, GhostMemError, OpSpec, get_op
from ghostmem.binding import Binding, Closes
from ghostmem.context import OpContext
from ghostmem.embed import Embedder
from ghostmem.strict import strict_schema
from llama_index.core.tools import FunctionTool, ToolOutput
from llama_index.core.tools.function_tool import async_to_sync
from llama_index.core.tools.tool_spec.base import SPEC_FUNCTION_TYPE, BaseToolSpec
from llama_index.core.tools.types import ToolMetadata
from llama_index.core.workflow import Context
from pydantic import BaseModel


def ghostmem_tool(spec: OpSpec[Any, Any], binding: Binding) -> FunctionTool:
    """The ``FunctionTool`` of one operation.

    ``call``/``acall`` return a ``ToolOutput`` whose content is the rendered text and whose ``raw_output`` is the
    result model; a bad argument or unknown id gives ``is_error=True`` and one sentence the model can act on.
    The function takes LlamaIndex's workflow ``Context`` (``ctx``, hidden from the model's schema): an agent hands
    its run's context to the tool, and the call is for the owner (and with ``project_key`` the project) the run's
    store names (:func:`caller_context`), else the binding's. Called outside an agent, no context is needed.
    """

    def failure(arguments: dict[str, Any], exc: GhostMemError) -> ToolOutput:
        return ToolOutput(
            tool_name=spec.name,
            content=str(exc),
            raw_input={"kwargs": arguments},
            raw_output=None,
            is_error=True,
            exception=exc,
        )

    def fn(ctx: Context | None = None, **arguments: Any) -> BaseModel | ToolOutput:
        ctx, arguments = _workflow_context(ctx, arguments)
        try:
            context = async_to_sync(caller_context)(binding, ctx) if ctx is not None else None
            return binding.run(spec, arguments, context).data
        except GhostMemError as exc:
            return failure(arguments, exc)

    async def async_fn(ctx: Context | None = None, **arguments: Any) -> BaseModel | ToolOutput:
        ctx, arguments = _workflow_context(ctx, arguments)
        try:
            return (await binding.arun(spec, arguments, await caller_context(binding, ctx))).data
        except GhostMemError as exc:
            return failure(arguments, exc)

    # FunctionTool finds the parameter to inject the workflow's Context into by its annotation (a class, not the
    # string this module's postponed annotations make of it).
    fn.__annotations__["ctx"] = async_fn.__annotations__["ctx"] = Context

    def callback(raw: BaseModel | ToolOutput) -> str | ToolOutput:
        return raw if isinstance(raw, ToolOutput) else spec.render(raw)

    metadata = (StrictToolMetadata if binding.strict else ToolMetadata)(
        name=spec.name, description=spec.description, fn_schema=binding.args_model(spec)
    )
    return FunctionTool.from_defaults(
        fn=fn,
        async_fn=async_fn,
        tool_metadata=metadata,
        callback=callback,
        partial_params={"ctx": None},  # a call outside an agent (tool.call(...)) has no workflow Context
    )


def _workflow_context(ctx: Any, arguments: dict[str, Any]) -> tuple[Context | None, dict[str, Any]]:
    """The run's workflow ``Context`` and the model's arguments. An agent passes its Context as ``ctx`` after the
    model's arguments; a caller that passes a model's arguments as they come (``tool.call(**args)``) may pass one
    named ``ctx`` that is not a Context: it is the model's, and is refused as any argument the operation does not
    take (it reached ``ctx.store`` and raised AttributeError)."""
    if ctx is None or isinstance(ctx, Context):
        return ctx, arguments
    return None, {**arguments, "ctx": ctx}


async def caller_context(binding: Binding, ctx: Context | None) -> OpContext:
    """Whose memory a call in the workflow run ``ctx`` is for: the values its store holds under the binding's
    ``owner_key`` (``user_id``) and ``project_key``, set by the application before the run
    (``await ctx.store.set("user_id", "alice")``), else the binding's own. The run's ``state`` (which an
    ``AgentWorkflow`` shows the model in its prompts) is not read."""
    if ctx is None:
        return binding.context
    keys = [key for key in (binding.owner_key, binding.project_key) if key is not None]
    return binding.context_for({key: await ctx.store.get(key, default=None) for key in keys})


@dataclass
class StrictToolMetadata(ToolMetadata):
    """Tool metadata whose parameters are the strict schema (:mod:`ghostmem.strict`) of ``fn_schema``.

    ``ToolMetadata`` keeps only some keys of a pydantic schema and would drop ``additionalProperties: false``.
    """

    parameters: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        assert self.fn_schema is not None
        self.parameters = strict_schema(self.fn_schema)

    def get_parameters_dict(self) -> dict[str, Any]:
        return dict(self.parameters)


class GhostMemToolSpec(Closes, BaseToolSpec):
    """Every ghostmem operation as a LlamaIndex tool, for every owner (and optionally one project).

    One spec (one store, one sync and one async pool) serves every user: an agent hands each tool call its run's
    workflow ``Context``, and the call reads and writes the memory of the owner that context's store names
    (``owner_key``, ``user_id`` by default), else of ``owner``.

    Example::

        tools = GhostMemToolSpec(GhostMem(), current_project="webapp").to_tool_list()
        agent = FunctionAgent(tools=tools, llm=llm)  # built once

        ctx = Context(agent)  # per request
        await ctx.store.set("user_id", "alice")
        await agent.run(user_msg="...", ctx=ctx)

    Args:
        store: a :class:`~ghostmem.GhostMem`, a DSN, or ``None`` (embedded server / ``GHOSTMEM_DSN``).
        owner: whose memory the tools read and write when the run's context names none.
        current_project: when set, ghost-memory tools act for this project and the model cannot change it.
        owner_key: the key of the workflow context's store that names a run's owner (default ``"user_id"``).
        project_key: a key of that store naming a run's project (default none: ``current_project``).
        read_only: leave out the operations that write (``remember``, ``give_feedback``).
        ops: only these operations (by name), in this order.
        strict: schemas for strict tool calling (every argument required, optional ones nullable, limits in the
            descriptions; ``OpenAI(strict=True)`` / Anthropic strict tool use); calls are still validated with
            every limit.
        allowed_scopes: the ghost-memory scopes the model may write; default only ``"project"`` when a project
            is bound, any otherwise (see :class:`~ghostmem.binding.Binding`).
    """

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
        self.binding = Binding(
            store,
            owner=owner,
            current_project=current_project,
            embedder=embedder,
            strict=strict,
            allowed_scopes=allowed_scopes,
            owner_key=owner_key,
            project_key=project_key,
        )
        specs = [get_op(name) for name in ops] if ops is not None else list(OPS)
        self._tools = {
            spec.name: ghostmem_tool(spec, self.binding) for spec in specs if not (read_only and spec.writes)
        }
        self.spec_functions: list[SPEC_FUNCTION_TYPE] = list(self._tools)

    def to_tool_list(
        self,
        spec_functions: list[SPEC_FUNCTION_TYPE] | None = None,
        func_to_metadata_mapping: dict[str, ToolMetadata] | None = None,
    ) -> list[FunctionTool]:
        """The tools (all of them, or those named in ``spec_functions``); metadata always comes from the ops."""
        names = [f if isinstance(f, str) else f[0] for f in (spec_functions or self.spec_functions)]
        return [self._tools[name] for name in names]
