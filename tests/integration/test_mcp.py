"""The MCP server for real: spawned over stdio and over streamable HTTP, listed and called with the mcp client."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import httpx2
import pytest
from ghostmem import OPS, GhostMem
from ghostmem.binding import Binding
from ghostmem.mcp import build_server, token_hash
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
def _http_server(
    gm: GhostMem, pg_dsn: str, env: dict[str, str] | None = None, *, args: tuple[str, ...] = ()
) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ghostmem.cli", "mcp", "--http", "--port", str(port), "--dsn", pg_dsn,
         "--owner", gm.owner, "--project", "webapp", *args],
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
    assert stdio.returncode == 2 and "protect --http" in stdio.stderr
    both = ghostmem(
        "mcp", "--http", "--token", TOKEN, "--tokens", "/nonexistent", "--dsn", pg_dsn,
        env={"GHOSTMEM_EMBED_MODEL": "hash"},
    )  # fmt: skip
    assert both.returncode == 2 and "not both" in both.stderr


def _token(path: Path, owner: str) -> str:
    """A token made by ``ghostmem mcp-token`` as an operator makes one (the first line it prints)."""
    made = ghostmem("mcp-token", owner, "--tokens", str(path))
    assert made.returncode == 0, made.stderr
    return made.stdout.splitlines()[0]


def _mcp_client(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    return Client(streamable_http_client(url, http_client=http))


async def test_http_server_with_a_tokens_file_serves_each_caller_its_own_memory(
    gm: GhostMem, pg_dsn: str, tmp_path: Path
) -> None:
    """One server, a token per owner: each caller reads and writes only its own memory, whatever it sends as
    arguments or session; the file holds hashes only; a revoked token is refused without a restart."""
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    tokens = tmp_path / "tokens"
    alice_token, bob_token = _token(tokens, alice), _token(tokens, bob)
    stored = tokens.read_text()
    assert alice_token not in stored and bob_token not in stored and token_hash(alice_token) in stored
    assert tokens.stat().st_mode & 0o077 == 0
    with GhostMem(dsn=pg_dsn, owner=alice, embedder=gm.embedder) as alice_gm:
        seed_conversations(alice_gm)
    secret = "Alice's deploy key rotates on Fridays."

    with _http_server(gm, pg_dsn, args=("--tokens", str(tokens))) as url:
        async with _mcp_client(url, alice_token) as client:
            wrote = await client.call_tool("remember", {"content": secret, "scope": "project"})
            assert not wrote.is_error, wrote.content
            assert (
                len(
                    (await client.call_tool("list_recent_conversations", {"days": 7})).structured_content[
                        "rows"
                    ]
                )
                == 4
            )
        async with _mcp_client(url, bob_token) as client:
            mine = await client.call_tool("search_ghost_memories", {"query": "deploy key rotates"})
            assert not mine.is_error and mine.structured_content["rows"] == []
            recent = await client.call_tool("list_recent_conversations", {"days": 7})
            assert recent.structured_content["rows"] == []  # neither alice's nor the server's --owner's
            for claim in ({"owner": alice}, {"user_id": alice}, {"_meta": {"user_id": alice}}):
                refused = await client.call_tool("search_ghost_memories", {"query": "deploy key", **claim})
                assert refused.is_error and secret not in refused.content[0].text, claim
            bobs = await client.call_tool("remember", {"content": "Bob prefers tabs.", "scope": "project"})
            assert not bobs.is_error

        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        search = {
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "search_ghost_memories", "arguments": {"query": "deploy key rotates"}},
        }  # fmt: skip
        with httpx.Client(timeout=60) as http:
            # alice's session continued with bob's token runs for bob: the owner is the request's, not the session's
            opened = http.post(
                url, headers={**headers, "Authorization": f"Bearer {alice_token}"}, json=INITIALIZE
            )
            session = {
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-06-18",
            }
            http.post(
                url, headers={**headers, **session, "Authorization": f"Bearer {alice_token}"},
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            )  # fmt: skip
            hijack = http.post(
                url, headers={**headers, **session, "Authorization": f"Bearer {bob_token}"}, json=search
            )
            assert hijack.is_success and "rotates on Fridays" not in hijack.text, hijack.text
            as_alice = http.post(
                url, headers={**headers, **session, "Authorization": f"Bearer {alice_token}"}, json=search
            )
            assert "rotates on Fridays" in as_alice.text
            # what a reader of the tokens file (or of a log) could try: the hash as the token, the owner's name
            for wrong in (
                token_hash(alice_token),
                token_hash(alice_token).removeprefix("sha256:"),
                alice,
                alice_token[:-1],
            ):
                assert (
                    http.post(
                        url, headers={**headers, "Authorization": f"Bearer {wrong}"}, json=INITIALIZE
                    ).status_code
                    == 401
                )
            # revoking alice (her line removed) refuses her next request, with no restart; bob still gets in
            tokens.write_text(
                "".join(line + "\n" for line in stored.splitlines() if not line.startswith(alice))
            )
            assert (
                http.post(
                    url, headers={**headers, "Authorization": f"Bearer {alice_token}"}, json=INITIALIZE
                ).status_code
                == 401
            )
            assert http.post(
                url, headers={**headers, "Authorization": f"Bearer {bob_token}"}, json=INITIALIZE
            ).is_success
            # a file that stops parsing refuses everyone until it is fixed
            tokens.write_text(stored + "not a valid line\n")
            assert (
                http.post(
                    url, headers={**headers, "Authorization": f"Bearer {bob_token}"}, json=INITIALIZE
                ).status_code
                == 401
            )

    with GhostMem(dsn=pg_dsn, owner=alice, embedder=gm.embedder) as alice_gm:
        assert [
            r.content for r in alice_gm.search_ghost_memories(query="", current_project="webapp").data.rows
        ] == [secret]
    assert gm.search_ghost_memories(query="", current_project="webapp").data.rows == []


def test_mcp_token_into_a_missing_directory_is_one_sentence_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "tokens"
    made = ghostmem("mcp-token", "alice", "--tokens", str(missing))
    assert made.returncode == 2 and made.stdout == "" and "Traceback" not in made.stderr
    assert made.stderr.strip().splitlines() == [
        f"ghostmem: error: cannot create the MCP tokens file {missing}: the directory {missing.parent} does not "
        f"exist (create it first: `mkdir -m 700 {missing.parent}`)"
    ]
    assert not missing.parent.exists()  # a mistyped path is not made up
    directory = ghostmem("mcp-token", "alice", "--tokens", str(tmp_path))  # a directory, not a file
    assert directory.returncode == 2 and directory.stdout == "" and "Traceback" not in directory.stderr
    assert len(directory.stderr.strip().splitlines()) == 1 and str(tmp_path) in directory.stderr
    missing.parent.mkdir(mode=0o700)
    again = ghostmem("mcp-token", "alice", "--tokens", str(missing))
    assert again.returncode == 0 and (missing.stat().st_mode & 0o777) == 0o600


def test_a_malformed_tokens_file_is_refused_with_its_line(gm: GhostMem, pg_dsn: str, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# operators\nalice {token_hash('x' * 32)}\nbob s3cret-in-clear-text\n")
    bad = ghostmem(
        "mcp", "--http", "--tokens", str(tokens), "--dsn", pg_dsn, env={"GHOSTMEM_EMBED_MODEL": "hash"}
    )
    assert bad.returncode == 2 and f"{tokens}:3: expected 'OWNER sha256:" in bad.stderr
    assert "Traceback" not in bad.stderr
    again = ghostmem("mcp-token", "carol", "--tokens", str(tokens))
    assert again.returncode == 2 and f"{tokens}:3" in again.stderr and "carol" not in tokens.read_text()
    spaced = ghostmem("mcp-token", "carol smith", "--tokens", str(tmp_path / "other"))
    assert spaced.returncode == 2 and "no spaces" in spaced.stderr
