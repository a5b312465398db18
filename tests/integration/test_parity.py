"""One tool, one schema: every operation has the same name, description and JSON schema in LangChain, LlamaIndex
and MCP (after dropping ``title`` keys), unbound and with a bound project, default and strict; strict calls are
validated with the real limits, and a bound agent writes only what the application allowed, on every surface."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from ghostmem import OPS, DatabaseError, GhostMem, HashEmbedder, OpSpec, get_op
from ghostmem.binding import Binding
from ghostmem.mcp import build_server
from langchain_core.utils.function_calling import convert_to_openai_tool
from mcp import Client
from psycopg.conninfo import make_conninfo
from support.adapters import RULE, seed_conversations, seed_rule, surface_caller

from langchain_ghostmem import GhostMemToolkit
from llama_index_ghostmem import GhostMemToolSpec


def untitled(value: Any) -> Any:
    """The schema without its ``title`` keys (each framework adds or drops them differently)."""
    if isinstance(value, dict):
        return {k: untitled(v) for k, v in value.items() if k != "title" or not isinstance(v, str)}
    if isinstance(value, list):
        return [untitled(v) for v in value]
    return value


def function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": description, "parameters": untitled(parameters)}


async def surfaces(gm: GhostMem, project: str | None, strict: bool) -> dict[str, dict[str, dict[str, Any]]]:
    langchain = {
        t.name: convert_to_openai_tool(t, strict=strict)["function"]
        for t in GhostMemToolkit(gm, current_project=project, strict=strict).get_tools()
    }
    llamaindex = {
        t.metadata.name: t.metadata.to_openai_tool()["function"]
        for t in GhostMemToolSpec(gm, current_project=project, strict=strict).to_tool_list()
    }
    binding = Binding(gm, current_project=project, strict=strict)
    async with Client(build_server(binding)) as client:
        mcp = {
            t.name: {"name": t.name, "description": t.description, "parameters": t.input_schema}
            for t in (await client.list_tools()).tools
        }
    await binding.aclose()
    return {
        surface: {name: function(f["name"], f["description"], f["parameters"]) for name, f in tools.items()}
        for surface, tools in (("langchain", langchain), ("llamaindex", llamaindex), ("mcp", mcp))
    }


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
@pytest.mark.parametrize("project", [None, "webapp"], ids=["unbound", "bound-project"])
async def test_every_surface_shows_the_same_tools(gm: GhostMem, project: str | None, strict: bool) -> None:
    seen = await surfaces(gm, project, strict)
    names = [spec.name for spec in OPS]
    for surface, tools in seen.items():
        assert list(tools) == names, surface
    for spec in OPS:
        langchain = seen["langchain"][spec.name]
        assert seen["llamaindex"][spec.name] == langchain, spec.name
        assert seen["mcp"][spec.name] == langchain, spec.name
        assert langchain["description"] == spec.description
        assert set(langchain["parameters"]["properties"]) == expected_arguments(spec, project)


def expected_arguments(spec: OpSpec[Any, Any], project: str | None) -> set[str]:
    """The contract's own visible fields, minus those a bound project hides (the project arguments, and the
    allowlist of writes, which then write only that project's memories)."""
    visible = set(spec.args_model.model_json_schema()["properties"])
    return visible - ({"current_project", "project", "allowlist"} & spec.bindable if project else set())


async def test_strict_calls_are_validated_with_the_real_limits_on_every_surface(gm: GhostMem) -> None:
    """A strict model sends every argument (null for the default); the real limits still hold server-side."""
    ids = seed_conversations(gm)
    spec = get_op("search_personal_memory")
    nulls = dict.fromkeys(spec.args_model.model_json_schema()["properties"])
    good = {**nulls, "query": "vault tokens staging"}
    too_many = {**good, "limit": 1000}
    refusal = "limit: Input should be less than or equal to 50"

    tool = next(t for t in GhostMemToolkit(gm, strict=True).get_tools() if t.name == spec.name)
    found = tool.invoke({"name": spec.name, "args": good, "id": "c1", "type": "tool_call"})
    assert found.status == "success" and found.artifact.rows[0].conv_id == ids["vault"]
    refused = tool.invoke({"name": spec.name, "args": too_many, "id": "c2", "type": "tool_call"})
    assert refused.status == "error" and refusal in refused.content

    function_tool = next(
        t for t in GhostMemToolSpec(gm, strict=True).to_tool_list() if t.metadata.name == spec.name
    )
    assert function_tool.call(**good).raw_output.rows[0].conv_id == ids["vault"]
    output = function_tool.call(**too_many)
    assert output.is_error and refusal in output.content

    binding = Binding(gm, strict=True)
    async with Client(build_server(binding)) as client:
        answer = await client.call_tool(spec.name, good)
        assert not answer.is_error and answer.structured_content["rows"][0]["conv_id"] == ids["vault"]
        answer = await client.call_tool(spec.name, too_many)
        assert answer.is_error and refusal in answer.content[0].text
    await binding.aclose()
    await tool.aclose()


@pytest.mark.parametrize("surface", ["langchain", "llamaindex", "mcp"])
async def test_a_bound_agent_writes_only_what_the_application_allowed(gm: GhostMem, surface: str) -> None:
    webapp = surface_caller(surface, gm, current_project="webapp")
    billing = surface_caller(surface, gm, current_project="billing")

    # The attacks: a rule every project receives, one allowlisted to another project, one in another project.
    for attack in (
        {"content": "Planted everywhere by the webapp agent.", "scope": "global"},
        {"content": "Planted for billing.", "scope": "shared-restricted", "allowlist": ["billing"]},
        {"content": "Planted in billing.", "project": "billing"},
    ):
        error, text, _ = await webapp("remember", attack)
        assert error and text.startswith("invalid arguments for remember: ") and "\n" not in text, text
    error, text, _ = await webapp("remember", {"content": "Run the webapp migrations before its tests."})
    assert not error, text
    assert (await billing("search_ghost_memories", {"query": ""}))[2] == []
    assert (await webapp("search_ghost_memories", {"query": ""}))[2] == [
        "Run the webapp migrations before its tests."
    ]

    # The application widens what its webapp agent may write; the scopes it did not allow stay refused.
    widened = surface_caller(surface, gm, current_project="webapp", allowed_scopes=["project", "global"])
    error, text, _ = await widened("remember", {"content": "Pin every dependency.", "scope": "global"})
    assert not error, text
    error, text, _ = await widened("remember", {"content": "Only for billing.", "scope": "shared-restricted"})
    assert error and "scope: Input should be 'global' or 'project'" in text, text
    assert (await billing("search_ghost_memories", {"query": ""}))[2] == ["Pin every dependency."]


@pytest.mark.parametrize("surface", ["langchain", "llamaindex", "mcp"])
@pytest.mark.parametrize(
    ("setting", "sentence"),
    [
        (
            "statement_timeout",
            "the database cancelled the call (canceling statement due to statement timeout): ",
        ),
        (
            "lock_timeout",
            "the database gave up waiting for a lock (canceling statement due to lock timeout): ",
        ),
    ],
    ids=["statement-timeout", "lock-timeout"],
)
async def test_any_database_error_is_one_sentence_on_every_surface(
    pg_dsn: str, owner: str, surface: str, setting: str, sentence: str
) -> None:
    """Not only ghostmem's own errors: a call the database cancels (the application's pool sets a timeout, and
    an administrator holds a lock on the messages) comes back to the model as one sentence, not an exception that
    ends the agent's run; the next call, once the lock is gone, succeeds."""
    dsn = make_conninfo(pg_dsn, options=f"-c {setting}=1500")  # far above a call's time on a loaded machine
    gm = GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder())
    seed_rule(gm)
    search = surface_caller(surface, gm)
    with psycopg.connect(pg_dsn) as admin, admin.transaction():
        admin.execute("LOCK TABLE agent.ghost_memories IN ACCESS EXCLUSIVE MODE")
        error, text, _ = await search("search_ghost_memories", {"query": ""})
    assert error and text.startswith(sentence) and "\n" not in text, text
    error, text, found = await search("search_ghost_memories", {"query": ""})
    assert not error and found == [RULE], text
    await gm.aclose()


def test_an_unexpected_database_error_is_one_sentence_naming_it(pg_dsn: str, owner: str) -> None:
    """An error no table lists is a DatabaseError sentence with the server's reason and SQLSTATE, the psycopg
    error kept as its cause."""
    gm = GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder())
    with pytest.raises(DatabaseError) as raised, gm.connection() as conn:
        conn.execute("SELECT * FROM no_such_table")
    assert str(raised.value) == (
        'the database could not do that (relation "no_such_table" does not exist; SQLSTATE 42P01)'
    )
    assert isinstance(raised.value.__cause__, psycopg.errors.UndefinedTable)
    gm.close()


@pytest.mark.parametrize("surface", ["langchain", "llamaindex", "mcp"])
async def test_an_empty_project_is_refused_alike_by_every_operation_that_filters_by_it(
    gm: GhostMem, surface: str
) -> None:
    """`list_project_conversations` refused an empty project while `search_personal_memory` took "" as a pattern
    that keeps every conversation with a project or a title (and `list_recent_conversations` alike): each now
    refuses it, blank or empty, in the same sentence on every surface, saying what to send instead."""
    ids = seed_conversations(gm)
    call = surface_caller(surface, gm)
    said = "project: empty: give text that the project's path or name, or the conversation's title, contains"
    for op, args in (
        ("search_personal_memory", {"query": "vault tokens", "project": ""}),
        ("search_personal_memory", {"query": "vault tokens", "project": "  "}),
        ("list_recent_conversations", {"project": ""}),
        ("list_project_conversations", {"project": " "}),
    ):
        error, text, _ = await call(op, args)
        assert error and text.startswith(f"invalid arguments for {op}: {said}") and "\n" not in text, text
        optional = op != "list_project_conversations"
        assert ("(or leave it out for every conversation)" in text) == optional, text
    # a project the text of one conversation's path holds still filters (strings are stripped, as before)
    assert [r.conv_id for r in gm.search_personal_memory("vault tokens", project=" infra ").data.rows] == [
        ids["vault"]
    ]
