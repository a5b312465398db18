"""``ghostmem mcp``: the operations of :data:`ghostmem.OPS` as an MCP server (stdio, or streamable HTTP on loopback).

Each tool has the operation's name, description and input schema (the very schema the LangChain and LlamaIndex
tools show; with ``--strict`` the strict one of :mod:`ghostmem.strict`); a call answers with the rendered text and the result model as structured content. A bad argument
or an unknown id is a tool error with one sentence the model can act on.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from pathlib import Path
from typing import Any

from ghostmem import __version__
from ghostmem.binding import Binding
from ghostmem.context import checked_owner
from ghostmem.errors import GhostMemError, InvalidArgument
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


def build_server(binding: Binding, *, read_only: bool = False, per_caller: bool = False) -> Server[Any]:
    """An MCP server over ``binding`` (whose owner and bound project the model cannot change).

    With ``per_caller`` every call runs for the owner :class:`BearerTokenAuth` authenticated the HTTP request as
    (never the binding's owner, never an argument: the tools' schemas have no owner and refuse unknown
    arguments); a call that reaches the server without one is refused."""
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
        caller = _caller(ctx)
        if per_caller and caller is None:
            return _error("this server serves each caller's own memory: authenticate with your bearer token")
        try:
            context = binding.context_for({binding.owner_key: caller} if caller is not None else None)
            result = await binding.arun(spec, params.arguments, context)
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


def _caller(ctx: ServerRequestContext[Any]) -> str | None:
    """The owner the HTTP request was authenticated as (by :class:`BearerTokenAuth`); None over stdio."""
    scope = getattr(ctx.request, "scope", None)
    owner = scope.get(OWNER_SCOPE_KEY) if isinstance(scope, dict) else None
    return owner if isinstance(owner, str) else None


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
    binding: Binding, port: int = DEFAULT_PORT, read_only: bool = False, callers: Callers | None = None
) -> None:
    """Serve streamable HTTP at ``http://127.0.0.1:<port>/mcp`` (loopback only: the tools read private memory);
    with ``callers``, only to requests carrying one of their bearer tokens, each for its token's owner."""
    import uvicorn

    server = build_server(binding, read_only=read_only, per_caller=callers is not None)
    app: Any = server.streamable_http_app(host=LOOPBACK)
    if callers is not None:
        app = BearerTokenAuth(app, callers)
    config = uvicorn.Config(app, host=LOOPBACK, port=port, log_level="warning", lifespan="on")
    logger.info("ghostmem MCP server at http://%s:%d/mcp", LOOPBACK, port)
    try:
        await uvicorn.Server(config).serve()
    finally:
        await binding.aclose()


# -- bearer tokens: who is calling, and so whose memory -------------------------------------------------------------

TOKEN_ENV = "GHOSTMEM_MCP_TOKEN"
TOKENS_ENV = "GHOSTMEM_MCP_TOKENS"
MIN_TOKEN_CHARS = 16
OWNER_SCOPE_KEY = "ghostmem.owner"
_UNAUTHORIZED = b"ghostmem: this MCP server needs its token: send the header Authorization: Bearer <token>\n"
_HASH_PREFIX = "sha256:"


def resolve_token(explicit: str | None) -> str | None:
    """``--token``, else ``GHOSTMEM_MCP_TOKEN``, else none; a token short enough to guess is refused."""
    token = explicit if explicit is not None else os.environ.get(TOKEN_ENV) or None
    if token is not None and len(token.strip()) < MIN_TOKEN_CHARS:
        raise GhostMemError(
            f"the MCP token must be at least {MIN_TOKEN_CHARS} characters (a short one can be guessed): make one "
            "with `ghostmem mcp-token OWNER` or `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    return token.strip() if token is not None else None


def resolve_callers(token: str | None, tokens_file: str | None, owner: str) -> Callers | None:
    """Who may call an HTTP server: a tokens file (``--tokens``, else ``GHOSTMEM_MCP_TOKENS``), each token for its
    owner; else one token (``--token``, else ``GHOSTMEM_MCP_TOKEN``) for ``owner``; else anyone, as ``owner``."""
    path = tokens_file if tokens_file is not None else os.environ.get(TOKENS_ENV) or None
    if path is not None:
        if token is not None:
            raise GhostMemError("give --token (one owner) or --tokens (a token per owner), not both")
        return Callers(path=Path(path))
    single = resolve_token(token)
    return Callers(token=single, owner=owner) if single is not None else None


def token_hash(token: str) -> str:
    """What a tokens file stores of a token: ``sha256:<hex>`` (a leaked file does not hold the tokens; they are
    random, so a fast hash cannot be searched back)."""
    return _HASH_PREFIX + hashlib.sha256(token.strip().encode("utf-8")).hexdigest()


class Callers:
    """The owners a server's callers are, by the hash of their bearer token.

    Either one token for one owner (``--token`` / ``GHOSTMEM_MCP_TOKEN`` and the server's ``--owner``), or a
    tokens file an operator keeps (``--tokens FILE`` / ``GHOSTMEM_MCP_TOKENS``): one ``OWNER sha256:HEX`` line per
    token (``ghostmem mcp-token OWNER --tokens FILE`` appends one), ``#`` comments and blank lines allowed. The
    file is read again when it changes, so a token is added or revoked without restarting the server; a file
    that stops parsing refuses every caller until it is fixed (a revoked token never comes back by mistake).
    """

    def __init__(
        self, *, token: str | None = None, owner: str | None = None, path: Path | None = None
    ) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._owners: list[tuple[bytes, str]] = []
        if token is not None:
            if owner is None:
                raise GhostMemError("a single MCP token needs the owner it stands for")
            self._owners = [(token_hash(token).encode(), owner)]
        elif path is not None:
            self._owners = _read_tokens(path)
            self._stamp = _stamp(path)

    def owner_of(self, candidate: bytes) -> str | None:
        """The owner whose token ``candidate`` is, or None. Every entry is compared, each in constant time, so
        neither a token nor how many entries match can be found by timing."""
        digest = (_HASH_PREFIX + hashlib.sha256(candidate.strip()).hexdigest()).encode()
        found = None
        for hashed, owner in self._current():
            if hmac.compare_digest(digest, hashed):
                found = owner
        return found

    def _current(self) -> list[tuple[bytes, str]]:
        if self.path is None:
            return self._owners
        try:
            stamp = _stamp(self.path)
            if stamp != self._stamp:
                self._owners, self._stamp = _read_tokens(self.path), stamp
        except (OSError, GhostMemError) as exc:
            logger.error("refusing every MCP caller until the tokens file reads again: %s", exc)
            self._owners, self._stamp = [], None
        return self._owners


def _stamp(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_mtime_ns, info.st_size


def _read_tokens(path: Path) -> list[tuple[bytes, str]]:
    """The ``(hash, owner)`` entries of a tokens file; a malformed line is one sentence with file:line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise GhostMemError(f"cannot read the MCP tokens file {path}: {exc}") from exc
    entries: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        parts = text.split()
        hashed = parts[-1].lower() if len(parts) == 2 else ""
        if not (hashed.startswith(_HASH_PREFIX) and _is_sha256(hashed[len(_HASH_PREFIX) :])):
            raise GhostMemError(
                f"{path}:{number}: expected 'OWNER sha256:<64 hex digits>' (make one with `ghostmem mcp-token OWNER "
                f"--tokens {path}`)"
            )
        if hashed in entries:
            raise GhostMemError(f"{path}:{number}: this token is already listed (for {entries[hashed]!r})")
        try:
            checked_owner(parts[0])
        except InvalidArgument as exc:
            raise GhostMemError(f"{path}:{number}: {exc}") from None
        entries[hashed] = parts[0]
    return [(hashed.encode(), owner) for hashed, owner in entries.items()]


def _is_sha256(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def add_token(path: Path, owner: str) -> str:
    """Make a new random token for ``owner``, append its hash to the tokens file ``path`` (created readable by its
    owner only) and return the token, which is shown this once and stored nowhere."""
    if not owner.strip() or any(c.isspace() for c in owner) or "#" in owner:
        raise GhostMemError(f"an owner in the MCP tokens file has no spaces or '#' (got {owner!r})")
    checked_owner(owner)
    if path.exists():
        _read_tokens(path)  # refuse to append to a file the server would refuse
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except FileNotFoundError:
        # Like ssh-keygen -f or htpasswd -c: a path the operator names is not made up; a mistyped directory
        # would otherwise put the tokens where nobody looks (and where the server is not pointed).
        raise GhostMemError(
            f"cannot create the MCP tokens file {path}: the directory {path.parent} does not exist "
            f"(create it first: `mkdir -m 700 {path.parent}`)"
        ) from None
    except OSError as exc:
        raise GhostMemError(f"cannot write the MCP tokens file {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "a", encoding="utf-8") as out:
        out.write(f"{owner} {token_hash(token)}\n")
    return token


class BearerTokenAuth:
    """ASGI middleware: every HTTP (and websocket) request must carry ``Authorization: Bearer <token>`` of one of
    the :class:`Callers`; anything else is answered 401 before it reaches the MCP server. The owner the token
    stands for goes on in the request's ASGI scope (``ghostmem.owner``), where the tools read whose memory a call
    is for: per request, so a session started with one token and continued with another runs for the other.
    """

    def __init__(self, app: Any, callers: Callers) -> None:
        self.app = app
        self.callers = callers

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        owner = self._owner(scope) if scope["type"] in ("http", "websocket") else None
        if scope["type"] in ("http", "websocket") and owner is None:
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
        if owner is not None:
            scope = {**scope, OWNER_SCOPE_KEY: owner}
        await self.app(scope, receive, send)

    def _owner(self, scope: dict[str, Any]) -> str | None:
        values = [v for k, v in scope.get("headers", []) if k.lower() == b"authorization"]
        if len(values) != 1:
            return None
        scheme, _, candidate = values[0].partition(b" ")
        if scheme.lower() != b"bearer" or not candidate.strip():
            return None
        return self.callers.owner_of(candidate)
