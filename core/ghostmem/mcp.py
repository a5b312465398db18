"""``ghostmem mcp``: the operations of :data:`ghostmem.OPS` as an MCP server (stdio, or streamable HTTP on loopback).

Each tool has the operation's name, description and input schema (the very schema the LangChain and LlamaIndex
tools show; with ``--strict`` the strict one of :mod:`ghostmem.strict`); a call answers with the rendered text and the result model as structured content. A bad argument
or an unknown id is a tool error with one sentence the model can act on.
"""

from __future__ import annotations

import hmac
import logging
import os
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
    "(search_ghost_memories, remember, give_feedback, update_memory, retire_memory)."
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


async def serve_http(
    binding: Binding, port: int = DEFAULT_PORT, read_only: bool = False, token: str | None = None
) -> None:
    """Serve streamable HTTP at ``http://127.0.0.1:<port>/mcp`` (loopback only: the tools read private memory);
    with ``token``, only to callers that send it as a bearer token."""
    import uvicorn

    app: Any = build_server(binding, read_only=read_only).streamable_http_app(host=LOOPBACK)
    if token is not None:
        app = BearerTokenAuth(app, token)
    config = uvicorn.Config(app, host=LOOPBACK, port=port, log_level="warning", lifespan="on")
    logger.info("ghostmem MCP server at http://%s:%d/mcp", LOOPBACK, port)
    try:
        await uvicorn.Server(config).serve()
    finally:
        await binding.aclose()


# -- the bearer token ---------------------------------------------------------------------------------------------

TOKEN_ENV = "GHOSTMEM_MCP_TOKEN"
MIN_TOKEN_CHARS = 16
_UNAUTHORIZED = b"ghostmem: this MCP server needs its token: send the header Authorization: Bearer <token>\n"


def resolve_token(explicit: str | None) -> str | None:
    """``--token``, else ``GHOSTMEM_MCP_TOKEN``, else none; a token short enough to guess is refused."""
    token = explicit if explicit is not None else os.environ.get(TOKEN_ENV) or None
    if token is not None and len(token.strip()) < MIN_TOKEN_CHARS:
        raise GhostMemError(
            f"the MCP token must be at least {MIN_TOKEN_CHARS} characters (a short one can be guessed): make one "
            "with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    return token.strip() if token is not None else None


class BearerTokenAuth:
    """ASGI middleware: every HTTP (and websocket) request must carry ``Authorization: Bearer <token>``; anything
    else is answered 401 before it reaches the MCP server. The comparison takes the same time wherever the
    candidate differs (``hmac.compare_digest``), so the token cannot be found one character at a time.

    It checks one token, which stands for the server's one owner. Serving several owners by token (each caller
    authenticated as its owner) replaces ``_authorized`` with a lookup that compares the candidate against every
    token and passes the matching owner on in the ASGI scope.
    """

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode("utf-8")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and not self._authorized(scope):
            logger.warning("refused an MCP request without a valid bearer token")
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"www-authenticate", b'Bearer realm="ghostmem"'),
                        (b"content-type", b"text/plain; charset=utf-8"),
                        (b"content-length", str(len(_UNAUTHORIZED)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": _UNAUTHORIZED})
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: dict[str, Any]) -> bool:
        values = [v for k, v in scope.get("headers", []) if k.lower() == b"authorization"]
        if len(values) != 1:
            return False
        scheme, _, candidate = values[0].partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(candidate.strip(), self._token)
