"""The argument models are the one validator of every surface: an unstorable argument is refused in one sentence
before anything connects.

Every store here points at a port where no server listens: had an argument got past validation, the surface would
have answered "cannot connect" instead of naming the argument.
"""

from __future__ import annotations

from typing import Any

import pytest
from ghostmem import AsyncGhostMem, GhostMem, HashEmbedder, InvalidArgument
from ghostmem.args import GiveFeedbackArgs, RememberArgs, SearchGhostMemoriesArgs
from ghostmem.binding import Binding
from ghostmem.cli import main
from ghostmem.context import OpContext
from ghostmem.mcp import build_server
from langchain_core.messages import ToolMessage
from mcp import Client
from pydantic import ValidationError

from langchain_ghostmem import GhostMemTool
from llama_index_ghostmem import GhostMemToolSpec

DEAD = "postgresql://nobody@127.0.0.1:1/none"
NUL = "must not contain NUL characters"

# (operation, arguments, the argument named in the refusal): each text argument that reaches a statement
CASES = [
    ("search_personal_memory", {"query": "deploy\x00"}, "query"),
    ("search_personal_memory", {"query": "deploy", "project": "web\x00app"}, "project"),
    ("get_conversation", {"conv_id": "abc\x00"}, "conv_id"),
    ("get_conversation_summary", {"conv_id": "\x00"}, "conv_id"),
    ("list_recent_conversations", {"project": "p\x00"}, "project"),
    ("list_project_conversations", {"project": "\x00p"}, "project"),
    ("search_ghost_memories", {"query": "flags\x00"}, "query"),
    ("search_ghost_memories", {"current_project": "p\x00"}, "current_project"),
    ("remember", {"content": "x\x00y"}, "content"),
    ("remember", {"content": "x", "scope": "project", "project": "p\x00"}, "project"),
    ("remember", {"content": "x", "scope": "shared-restricted", "allowlist": ["ok", "b\x00d"]}, "allowlist"),
    ("give_feedback", {"memory_id": 1, "signal": "endorse", "note": "\x00"}, "note"),
]
IDS = [f"{op}-{name}" for op, _, name in CASES]


def _store() -> GhostMem:
    return GhostMem(dsn=DEAD, owner="o", embedder=HashEmbedder())


@pytest.mark.parametrize(("op", "arguments", "name"), CASES, ids=IDS)
def test_python_run(op: str, arguments: dict[str, Any], name: str) -> None:
    with pytest.raises(InvalidArgument, match=f"invalid arguments for {op}: {name}: {NUL}"):
        _store().run(op, arguments)


@pytest.mark.parametrize(("op", "arguments", "name"), CASES, ids=IDS)
def test_python_methods(op: str, arguments: dict[str, Any], name: str) -> None:
    with pytest.raises(InvalidArgument, match=f"{name}: {NUL}"):
        getattr(_store(), op)(**arguments)


@pytest.mark.parametrize(("op", "arguments", "name"), CASES, ids=IDS)
async def test_async_run(op: str, arguments: dict[str, Any], name: str) -> None:
    with pytest.raises(InvalidArgument, match=f"{name}: {NUL}"):
        await AsyncGhostMem(dsn=DEAD, owner="o", embedder=HashEmbedder()).run(op, arguments)


@pytest.mark.parametrize(("op", "arguments", "name"), CASES, ids=IDS)
def test_langchain_tool(op: str, arguments: dict[str, Any], name: str) -> None:
    tool = GhostMemTool(op, _store())
    message = tool.invoke({"name": tool.name, "args": arguments, "id": "call-1", "type": "tool_call"})
    assert isinstance(message, ToolMessage) and message.status == "error"
    assert f"{name}: {NUL}" in message.content and "\n" not in message.content


@pytest.mark.parametrize(("op", "arguments", "name"), CASES, ids=IDS)
def test_llamaindex_tool(op: str, arguments: dict[str, Any], name: str) -> None:
    tools = {t.metadata.name: t for t in GhostMemToolSpec(_store()).to_tool_list()}
    out = tools[op].call(**arguments)
    assert out.is_error and f"{name}: {NUL}" in out.content and "\n" not in out.content


async def test_mcp_server() -> None:
    binding = Binding(_store())
    async with Client(build_server(binding)) as client:
        for op, arguments, name in CASES:
            result = await client.call_tool(op, arguments)
            assert result.is_error and f"{name}: {NUL}" in result.content[0].text, (op, name)


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["search", "deploy\x00"], "query"),
        (["search", "deploy", "--project", "web\x00app"], "project"),
        (["show", "abc\x00"], "conv_id"),
        (["recent", "--project", "p\x00"], "project"),
        (["remember", "x\x00y"], "content"),
    ],
)
def test_cli(argv: list[str], name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--dsn", DEAD, "--owner", "o"]) == 2
    err = capsys.readouterr().err
    assert f"{name}: {NUL}" in err and len(err.strip().splitlines()) == 1 and "cannot connect" not in err


def test_bound_values_are_checked_where_the_application_binds_them() -> None:
    """The owner and the bound project never pass through an args model: their context refuses NUL itself."""
    with pytest.raises(InvalidArgument, match=f"current_project {NUL}"):
        GhostMem(dsn=DEAD, owner="o", current_project="p\x00")
    with pytest.raises(InvalidArgument, match=f"owner {NUL}"):
        OpContext(owner="a\x00b")
    with pytest.raises(InvalidArgument, match=f"current_project {NUL}"):
        Binding(_store(), current_project="\x00")


def test_models_refuse_at_construction() -> None:
    """Code that builds an args model itself gets the same refusal (nothing checks again further down)."""
    for build in (
        lambda: SearchGhostMemoriesArgs(query="a\x00"),
        lambda: RememberArgs(content="x", scope="shared-restricted", allowlist=["a\x00"]),
        lambda: GiveFeedbackArgs(memory_id=1, signal="correct", note="\x00"),
    ):
        with pytest.raises(ValidationError, match=NUL):
            build()
