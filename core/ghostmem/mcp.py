"""``ghostmem mcp``: the operations of :data:`ghostmem.OPS` as an MCP server (stdio, or streamable HTTP on loopback).

Each tool has the operation's name, description and input schema (the very schema the LangChain and LlamaIndex
tools show; with ``--strict`` the strict one of :mod:`ghostmem.strict`); a call answers with the rendered text and the result model as structured content. A bad argument
or an unknown id is a tool error with one sentence the model can act on.
"""

from __future__ import annotations

import logging
from typing import Any

from ghostmem import __version__
from ghostmem.binding import Binding
from ghostmem.errors import GhostMemError
from ghostmem.ops import OPS, OPS_BY_NAME

try:
    import mcp_types as types
    from mcp.server import Server, ServerRequestContext
    from mcp.server.stdio import stdio_server
except ImportError as exc:  # `ghostmem mcp` prints this sentence instead of a traceback
    raise GhostMemError("the MCP server needs the [mcp] extra: pip install 'ghostmem[mcp]'") from exc

logger = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 8765
INSTRUCTIONS = (
    "ghostmem is the user's long-term memory: their past conversations with AI assistants "
    "(search_personal_memory, list_recent_conversations, ...) and the rules this agent learned "
    "(search_ghost_memories, remember, give_feedback)."
)


def tools(binding: Binding, *, read_only: bool = False) -> list[types.Tool]:
    """The MCP tool list: one tool per operation (only the readers with ``read_only``), bound arguments removed."""
    return [
        types.Tool(
            name=spec.name,
            description=spec.description,
            input_schema=binding.json_schema(spec),
            output_schema=spec.result_model.model_json_schema(),
            annotations=types.ToolAnnotations(read_only_hint=not spec.writes, open_world_hint=False),
        )
        for spec in OPS
        if not (read_only and spec.writes)
    ]


def build_server(binding: Binding, *, read_only: bool = False) -> Server[Any]:
    """An MCP server over ``binding`` (whose owner and bound project the model cannot change)."""
    listed = tools(binding, read_only=read_only)
    served = {tool.name: OPS_BY_NAME[tool.name] for tool in listed}
    schemas = {tool.name: tool.input_schema for tool in listed}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spec = served.get(params.name)
        if spec is None:
            return _error(f"unknown tool {params.name!r}; known: {', '.join(served)}")
        try:
            result = await binding.arun(spec, params.arguments)
        except GhostMemError as exc:
            return _error(str(exc))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.text)],
            structured_content=result.data.model_dump(mode="json"),
        )

    return Server(
        "ghostmem",
        version=__version__,
        instructions=INSTRUCTIONS,
        get_tool_input_schema=schemas.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


async def serve_stdio(binding: Binding, read_only: bool = False) -> None:
    """Serve over stdin/stdout until the client closes the connection."""
    server = build_server(binding, read_only=read_only)
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await binding.aclose()


async def serve_http(binding: Binding, port: int = DEFAULT_PORT, read_only: bool = False) -> None:
    """Serve streamable HTTP at ``http://127.0.0.1:<port>/mcp`` (loopback only: the tools read private memory)."""
    import uvicorn

    app = build_server(binding, read_only=read_only).streamable_http_app(host=LOOPBACK)
    config = uvicorn.Config(app, host=LOOPBACK, port=port, log_level="warning", lifespan="on")
    logger.info("ghostmem MCP server at http://%s:%d/mcp", LOOPBACK, port)
    try:
        await uvicorn.Server(config).serve()
    finally:
        await binding.aclose()
