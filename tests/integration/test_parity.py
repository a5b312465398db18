"""One tool, one schema: every operation has the same name, description and JSON schema in LangChain, LlamaIndex
and MCP (after dropping ``title`` keys), unbound and with a bound project."""

from __future__ import annotations

from typing import Any

import pytest
from ghostmem import OPS, GhostMem, OpSpec
from ghostmem.binding import Binding
from ghostmem.mcp import build_server
from langchain_core.utils.function_calling import convert_to_openai_tool
from mcp import Client

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


async def surfaces(gm: GhostMem, project: str | None) -> dict[str, dict[str, dict[str, Any]]]:
    langchain = {
        t.name: convert_to_openai_tool(t)["function"]
        for t in GhostMemToolkit(gm, current_project=project).get_tools()
    }
    llamaindex = {
        t.metadata.name: t.metadata.to_openai_tool()["function"]
        for t in GhostMemToolSpec(gm, current_project=project).to_tool_list()
    }
    binding = Binding(gm, current_project=project)
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


@pytest.mark.parametrize("project", [None, "webapp"], ids=["unbound", "bound-project"])
async def test_every_surface_shows_the_same_tools(gm: GhostMem, project: str | None) -> None:
    seen = await surfaces(gm, project)
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
    """The contract's own visible fields (bound ones removed): the schema is derived, never restated."""
    visible = set(spec.args_model.model_json_schema()["properties"])
    return visible - ({"current_project", "project"} & spec.bindable if project else set())
