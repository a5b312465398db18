"""The MCP server for real: spawned over stdio and over streamable HTTP, listed and called with the mcp client."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from ghostmem import OPS, GhostMem
from ghostmem.binding import Binding
from ghostmem.mcp import build_server
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from support.adapters import seed_conversations


def _env() -> dict[str, str]:
    return {**os.environ, "GHOSTMEM_EMBED_MODEL": "hash"}


async def test_stdio_server_lists_and_calls_tools(gm: GhostMem, pg_dsn: str) -> None:
    ids = seed_conversations(gm)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ghostmem.cli", "mcp", "--dsn", pg_dsn, "--owner", gm.owner, "--read-only"],
        env=_env(),
    )
    async with Client(params, read_timeout_seconds=120) as client:
        listed = await client.list_tools()
        readers = [s for s in OPS if not s.writes]
        assert [t.name for t in listed.tools] == [s.name for s in readers]
        assert {t.name: t.description for t in listed.tools} == {s.name: s.description for s in readers}

        result = await client.call_tool(
            "search_personal_memory", {"query": "vault tokens staging", "limit": 2}
        )
        assert not result.is_error
        assert result.content[0].text.startswith(f"[{ids['vault']} | claude_code |")
        assert result.structured_content["rows"][0]["conv_id"] == ids["vault"]

        bad = await client.call_tool("list_recent_conversations", {"days": -1})
        assert bad.is_error
        assert "days: Input should be greater than or equal to 1" in bad.content[0].text

        missing = await client.call_tool("get_conversation", {"conv_id": "nope-404"})
        assert missing.is_error and "nope-404" in missing.content[0].text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(gm: GhostMem, pg_dsn: str) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ghostmem.cli", "mcp", "--http", "--port", str(port), "--dsn", pg_dsn,
         "--owner", gm.owner, "--project", "webapp"],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_http_server_on_loopback_with_a_bound_project(http_server: str, gm: GhostMem) -> None:
    seed_conversations(gm)
    async with Client(http_server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "current_project" not in tools["search_ghost_memories"].input_schema["properties"]
        assert "project" not in tools["remember"].input_schema["properties"]
        stored = await client.call_tool(
            "remember", {"content": "Webapp deploys need a flag.", "scope": "project"}
        )
        assert not stored.is_error, stored.content
        assert stored.structured_content["memory"]["project"] == "webapp"
        recent = await client.call_tool("list_recent_conversations", {"days": 7})
        assert len(recent.structured_content["rows"]) == 4


async def test_in_process_schemas_and_annotations(gm: GhostMem) -> None:
    binding = Binding(gm)
    async with Client(build_server(binding)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for spec in OPS:
            assert tools[spec.name].input_schema == binding.json_schema(spec)
            assert tools[spec.name].annotations.read_only_hint is (not spec.writes)
        unknown = await client.call_tool("drop_tables", {})
        assert unknown.is_error and "unknown tool 'drop_tables'" in unknown.content[0].text
    await binding.aclose()


async def test_read_only_server_hides_and_refuses_writers(gm: GhostMem) -> None:
    binding = Binding(gm)
    async with Client(build_server(binding, read_only=True)) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == [s.name for s in OPS if not s.writes]
        refused = await client.call_tool("remember", {"content": "sneaky write"})
        assert refused.is_error and "unknown tool 'remember'" in refused.content[0].text
    await binding.aclose()
    assert gm.search_ghost_memories(query="").data.rows == []
