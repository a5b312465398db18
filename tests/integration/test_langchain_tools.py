"""LangChain tools against the real database: the standard suites for every tool, artifacts, errors, binding."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from ghostmem import OPS, GhostMem, HashEmbedder
from ghostmem.binding import Binding
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests
from support.adapters import seed_conversations, seed_rule

from langchain_ghostmem import GhostMemTool, GhostMemToolkit

OP_NAMES = [spec.name for spec in OPS]


def example_arguments(op: str, gm: GhostMem) -> dict[str, Any]:
    """Arguments a model could send to ``op`` that succeed on freshly seeded data."""
    if op in {"search_ghost_memories", "remember", "give_feedback", "update_memory", "retire_memory"}:
        memory_id = seed_rule(gm)
        return {
            "search_ghost_memories": {"query": "migrations before tests"},
            "remember": {"content": "Never scan the production network of this client.", "kind": "warning"},
            "give_feedback": {"memory_id": memory_id, "signal": "endorse", "note": "it saved a deploy"},
            "update_memory": {"memory_id": memory_id, "content": "Run the migrations before every test run."},
            "retire_memory": {"memory_id": memory_id, "reason": "the pipeline migrates on its own now"},
        }[op]
    ids = seed_conversations(gm)
    return {
        "search_personal_memory": {"query": "deploy migrations", "limit": 3},
        "get_conversation": {"conv_id": ids["deploy"]},
        "list_recent_conversations": {"days": 7},
        "list_project_conversations": {"project": "webapp"},
        "get_conversation_summary": {"conv_id": ids["deploy"], "max_messages": 2},
    }[op]


class _PerOp:
    """Runs the standard suite once per operation, each on its own owner and freshly seeded data."""

    op: str
    dsn: str
    binding: Binding
    example: dict[str, Any]

    @pytest.fixture(autouse=True, params=OP_NAMES)
    async def _per_op(self, request: pytest.FixtureRequest, gm: GhostMem, pg_dsn: str) -> AsyncIterator[None]:
        self.op = request.param
        self.dsn = pg_dsn
        self.binding = Binding(gm)
        self.example = example_arguments(self.op, gm)
        yield
        await self.binding.aclose()

    @property
    def tool_constructor(self) -> type[BaseTool]:
        return GhostMemTool

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return {"op": self.op, "binding": self.binding}

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return self.example

    @property
    def init_from_env_params(self) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        """GHOSTMEM_OWNER configures whose memory a tool built from a bare DSN serves."""
        params = {"op": self.op, "store": self.dsn, "embedder": HashEmbedder()}
        return {"GHOSTMEM_OWNER": "owner-from-env"}, params, {"owner": "owner-from-env", "name": self.op}


class TestGhostMemToolsUnit(_PerOp, ToolsUnitTests):
    pass


class TestGhostMemToolsIntegration(_PerOp, ToolsIntegrationTests):
    pass


def _call(tool: BaseTool, args: dict[str, Any]) -> ToolMessage:
    message = tool.invoke({"name": tool.name, "args": args, "id": "call-1", "type": "tool_call"})
    assert isinstance(message, ToolMessage)
    return message


def test_search_tool_gives_text_and_structured_rows(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    tool = GhostMemTool("search_personal_memory", gm)
    message = _call(tool, {"query": "vault tokens staging cluster", "limit": 2})
    assert message.status == "success"
    assert message.artifact.rows[0].conv_id == ids["vault"]
    assert message.content.startswith(f"[{ids['vault']} | claude_code |")
    assert "rotate the vault tokens" in message.content


async def test_async_tool_runs_on_the_async_store(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    tool = GhostMemTool("get_conversation", gm)
    message = await tool.ainvoke(
        {"name": tool.name, "args": {"conv_id": ids["deploy"]}, "id": "1", "type": "tool_call"}
    )
    assert [m.text for m in message.artifact.messages][1].startswith("Move the migrate step")
    assert tool.binding.astore._pools.opened(), "ainvoke must use the async pool, not a thread"
    await tool.binding.aclose()


def test_empty_result_is_an_empty_artifact_and_a_hint(gm: GhostMem) -> None:
    message = _call(GhostMemTool("list_recent_conversations", gm), {"days": 1, "platform": "codex"})
    assert message.status == "success"
    assert message.artifact.rows == []
    assert "No conversations match" in message.content
    message = _call(GhostMemTool("list_recent_conversations", gm), {"days": 1})  # nothing stored at all
    assert message.artifact.rows == [] and message.artifact.nothing_stored
    assert (
        message.content
        == "The user's personal memory holds no conversations yet (none has been imported or captured)."
    )


@pytest.mark.parametrize(
    ("op", "args", "fragment"),
    [
        (
            "search_personal_memory",
            {"query": "x", "days": -3},
            "days: Input should be greater than or equal to 1",
        ),
        (
            "search_personal_memory",
            {"query": "x", "limit": 10_000},
            "limit: Input should be less than or equal to 50",
        ),
        ("search_personal_memory", {"query": "x", "platform": "myspace"}, "platform: Input should be"),
        ("list_recent_conversations", {"colour": "red"}, "colour: Extra inputs are not permitted"),
        ("list_recent_conversations", {"bad\nkey": 1}, "'bad\\nkey': Extra inputs are not permitted"),
        ("get_conversation", {"conv_id": "no-such-conversation"}, "no-such-conversation"),
        ("give_feedback", {"memory_id": 987654321, "signal": "endorse"}, "987654321"),
    ],
)
def test_bad_arguments_come_back_as_one_sentence(
    gm: GhostMem, op: str, args: dict[str, Any], fragment: str
) -> None:
    message = _call(GhostMemTool(op, gm), args)
    assert message.status == "error"
    assert fragment in message.content
    assert "Traceback" not in message.content and "\n" not in message.content


def test_bound_project_is_hidden_and_enforced(gm: GhostMem) -> None:
    toolkit = GhostMemToolkit(gm, current_project="webapp")
    tools = {t.name: t for t in toolkit.get_tools()}
    assert "current_project" not in tools["search_ghost_memories"].args
    assert "project" not in tools["remember"].args and "allowlist" not in tools["remember"].args
    assert (
        tools["remember"].args["scope"]["const"] == "project"
    )  # a bound agent writes that project's memories
    stored = _call(
        tools["remember"], {"content": "Deploys of webapp need a feature flag.", "scope": "project"}
    )
    assert stored.status == "success", stored.content
    assert stored.artifact.memory.project == "webapp"
    # The model cannot claim another project through the hidden argument.
    refused = _call(tools["search_ghost_memories"], {"query": "feature flag", "current_project": "other"})
    assert refused.status == "error" and "current_project: Extra inputs are not permitted" in refused.content
    # Another project's tools do not see the project-scoped memory; the bound project's do.
    other = {t.name: t for t in GhostMemToolkit(gm, current_project="other").get_tools()}
    assert _call(other["search_ghost_memories"], {"query": "feature flag"}).artifact.rows == []
    found = _call(tools["search_ghost_memories"], {"query": "feature flag"}).artifact.rows
    assert [r.content for r in found] == ["Deploys of webapp need a feature flag."]


def test_toolkit_owner_is_fixed_by_the_application(gm: GhostMem) -> None:
    seed_conversations(gm)
    mine = {t.name: t for t in GhostMemToolkit(gm).get_tools()}
    stranger = {t.name: t for t in GhostMemToolkit(gm, owner=gm.owner + "-stranger").get_tools()}
    assert len(_call(mine["list_recent_conversations"], {"days": 7}).artifact.rows) == 4
    assert _call(stranger["list_recent_conversations"], {"days": 7}).artifact.rows == []
    assert "owner" not in mine["list_recent_conversations"].args


def test_read_only_toolkit_has_no_writers(gm: GhostMem) -> None:
    names = [t.name for t in GhostMemToolkit(gm, read_only=True).get_tools()]
    assert names == [s.name for s in OPS if not s.writes]
    assert "remember" not in names and "give_feedback" not in names
