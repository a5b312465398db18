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
from ghostmem.embed import Embedder
from ghostmem.strict import strict_schema
from llama_index.core.tools import FunctionTool, ToolOutput
from llama_index.core.tools.tool_spec.base import SPEC_FUNCTION_TYPE, BaseToolSpec
from llama_index.core.tools.types import ToolMetadata
from pydantic import BaseModel


def ghostmem_tool(spec: OpSpec[Any, Any], binding: Binding) -> FunctionTool:
    """The ``FunctionTool`` of one operation.

    ``call``/``acall`` return a ``ToolOutput`` whose content is the rendered text and whose ``raw_output`` is the
    result model; a bad argument or unknown id gives ``is_error=True`` and one sentence the model can act on.
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

    def fn(**arguments: Any) -> BaseModel | ToolOutput:
        try:
            return binding.run(spec, arguments).data
        except GhostMemError as exc:
            return failure(arguments, exc)

    async def async_fn(**arguments: Any) -> BaseModel | ToolOutput:
        try:
            return (await binding.arun(spec, arguments)).data
        except GhostMemError as exc:
            return failure(arguments, exc)

    def callback(raw: BaseModel | ToolOutput) -> str | ToolOutput:
        return raw if isinstance(raw, ToolOutput) else spec.render(raw)

    metadata = (StrictToolMetadata if binding.strict else ToolMetadata)(
        name=spec.name, description=spec.description, fn_schema=binding.args_model(spec)
    )
    return FunctionTool.from_defaults(fn=fn, async_fn=async_fn, tool_metadata=metadata, callback=callback)


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
    """Every ghostmem operation as a LlamaIndex tool, bound to one owner (and optionally one project).

    Example::

        tools = GhostMemToolSpec(GhostMem(), owner="alice", current_project="webapp").to_tool_list()
        agent = FunctionAgent(tools=tools, llm=llm)

    Args:
        store: a :class:`~ghostmem.GhostMem`, a DSN, or ``None`` (embedded server / ``GHOSTMEM_DSN``).
        owner: whose memory the tools read and write.
        current_project: when set, ghost-memory tools act for this project and the model cannot change it.
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
    ) -> None:
        self.binding = Binding(
            store,
            owner=owner,
            current_project=current_project,
            embedder=embedder,
            strict=strict,
            allowed_scopes=allowed_scopes,
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
