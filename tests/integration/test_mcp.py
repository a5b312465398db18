"""The MCP server for real: spawned over stdio and over streamable HTTP, listed and called with the mcp client."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import httpx2
import pytest
from ghostmem import OPS, GhostMem
from ghostmem.binding import Binding
from ghostmem.mcp import build_server
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from support.adapters import seed_conversations
from support.cli import ghostmem


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


@contextmanager
def _http_server(gm: GhostMem, pg_dsn: str, env: dict[str, str] | None = None) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ghostmem.cli", "mcp", "--http", "--port", str(port), "--dsn", pg_dsn,
         "--owner", gm.owner, "--project", "webapp"],
        env={**_env(), **(env or {})},
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


@pytest.fixture
def http_server(gm: GhostMem, pg_dsn: str) -> Iterator[str]:
    with _http_server(gm, pg_dsn) as url:
        yield url


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


TOKEN = "s3cret-token-for-the-test-0123456789"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"},
    },
}


async def test_http_server_with_a_token_refuses_every_request_without_it(gm: GhostMem, pg_dsn: str) -> None:
    """What a local process or a browser page would try: no header, a wrong token (shorter, longer, one character
    off, the right one as a prefix), another scheme, the token twice; each is 401 and never reaches the tools."""
    seed_conversations(gm)
    wrong = [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Bearer {TOKEN[:-1]}X"},
        {"Authorization": f"Bearer {TOKEN[:8]}"},
        {"Authorization": f"Bearer {TOKEN}extra"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
        {"Cookie": f"token={TOKEN}"},
    ]
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with _http_server(gm, pg_dsn, {"GHOSTMEM_MCP_TOKEN": TOKEN}) as url:
        with httpx.Client(timeout=60) as http:
            for extra in wrong:
                for method in ("POST", "GET", "DELETE"):
                    res = http.request(method, url, headers={**headers, **extra}, json=INITIALIZE)
                    assert res.status_code == 401, (method, extra, res.text)
                    assert res.headers["www-authenticate"].startswith("Bearer")
                    assert "Authorization: Bearer" in res.text and TOKEN not in res.text
            twice = http.post(
                url, headers=[*headers.items(), ("Authorization", f"Bearer {TOKEN}"), ("Authorization", "Bearer x")],
                json=INITIALIZE,
            )  # fmt: skip
            assert twice.status_code == 401
            assert http.post(
                url, headers={**headers, "Authorization": f"Bearer {TOKEN}"}, json=INITIALIZE
            ).is_success

        transport = streamable_http_client(
            url, http_client=httpx2.AsyncClient(headers={"Authorization": f"bearer {TOKEN}"}, timeout=120)
        )
        async with Client(transport) as client:
            assert {t.name for t in (await client.list_tools()).tools} == {s.name for s in OPS}
            recent = await client.call_tool("list_recent_conversations", {"days": 7})
            assert not recent.is_error and len(recent.structured_content["rows"]) == 4


def test_token_is_checked_before_the_server_starts(gm: GhostMem, pg_dsn: str) -> None:
    short = ghostmem(
        "mcp", "--http", "--token", "short", "--dsn", pg_dsn, env={"GHOSTMEM_EMBED_MODEL": "hash"}
    )
    assert (
        short.returncode == 2 and "at least 16 characters" in short.stderr and "Traceback" not in short.stderr
    )
    stdio = ghostmem("mcp", "--token", TOKEN, "--dsn", pg_dsn, env={"GHOSTMEM_EMBED_MODEL": "hash"})
    assert stdio.returncode == 2 and "--token protects --http" in stdio.stderr
