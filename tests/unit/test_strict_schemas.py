"""Strict-mode tool schemas, checked against the JSON Schema subset each provider documents for strict tool calling.

The subsets are written down here from the providers' documentation (what a schema may contain; anything else is
refused when the tools are sent):

* OpenAI strict function calling uses the Structured Outputs subset,
  https://platform.openai.com/docs/guides/structured-outputs#supported-schemas : types string, number, boolean,
  integer, object, array, enum, anyOf (not at the root); string ``pattern``/``format``; number ``multipleOf``,
  ``maximum``, ``exclusiveMaximum``, ``minimum``, ``exclusiveMinimum``; array ``minItems``/``maxItems``; ``$defs``
  and ``$ref``; every object ``additionalProperties: false`` with every property in ``required`` (an optional
  field is a union with null). Not supported: ``minLength``/``maxLength``, ``default``, ``allOf``, ``not``,
  ``if``/``then``/``else``, ``patternProperties`` and the other keywords outside that list.
* Anthropic strict tool use, https://platform.claude.com/docs/en/build-with-claude/structured-outputs#json-schema-limitations
  (linked from https://platform.claude.com/docs/en/agents-and-tools/tool-use/strict-tool-use): all basic types,
  ``enum`` of primitives, ``const``, ``anyOf``, ``allOf``, local ``$ref``/``$defs``/``definitions``,
  ``required``, ``additionalProperties: false``, string ``format`` (date-time, time, date, duration, email,
  hostname, uri, ipv4, ipv6, uuid), array ``minItems`` of 0 or 1. Not supported: numerical constraints
  (``minimum``, ``maximum``, ``multipleOf``), string constraints (``minLength``, ``maxLength``), other array
  constraints, recursive schemas, ``additionalProperties`` other than false.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from ghostmem import OPS, get_op
from ghostmem.binding import Binding
from ghostmem.strict import strict_arguments, strict_schema
from langchain_core.utils.function_calling import convert_to_openai_tool

from langchain_ghostmem import GhostMemToolkit
from llama_index_ghostmem import GhostMemToolSpec

BASE = {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf"}
ANNOTATIONS = {"description", "title"}
TYPES = {"string", "number", "boolean", "integer", "object", "array", "null"}


@dataclass(frozen=True)
class Subset:
    name: str
    keywords: frozenset[str]
    min_items: frozenset[int] | None = None  # the values minItems may take (None: any)


OPENAI = Subset(
    "OpenAI",
    frozenset(
        BASE
        | ANNOTATIONS
        | {"$defs", "$ref", "pattern", "format", "multipleOf", "maximum", "exclusiveMaximum"}
        | {"minimum", "exclusiveMinimum", "minItems", "maxItems"}
    ),
)
ANTHROPIC = Subset(
    "Anthropic",
    frozenset(BASE | ANNOTATIONS | {"allOf", "$ref", "$defs", "definitions", "format", "minItems"}),
    min_items=frozenset({0, 1}),
)


def violations(schema: dict[str, Any], subset: Subset, where: str = "$") -> list[str]:
    """Every place where ``schema`` leaves ``subset`` (empty: the provider accepts it)."""
    found = [
        f"{where}: {key!r} is not in {subset.name}'s subset" for key in schema if key not in subset.keywords
    ]
    types = schema.get("type", [])
    for kind in [types] if isinstance(types, str) else types:
        if kind not in TYPES:
            found.append(f"{where}: type {kind!r}")
    if "enum" in schema and not all(
        v is None or isinstance(v, str | int | float | bool) for v in schema["enum"]
    ):
        found.append(f"{where}: enum of non-primitives")
    if subset.min_items is not None and "minItems" in schema and schema["minItems"] not in subset.min_items:
        found.append(f"{where}: minItems {schema['minItems']}")
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            found.append(f"{where}: additionalProperties must be false")
        if set(schema.get("required", ())) != set(schema.get("properties", {})):
            found.append(f"{where}: every property must be required")
        for name, prop in schema.get("properties", {}).items():
            found += violations(prop, subset, f"{where}.{name}")
    for i, variant in enumerate(schema.get("anyOf", [])):
        found += violations(variant, subset, f"{where}.anyOf[{i}]")
    if isinstance(schema.get("items"), dict):
        found += violations(schema["items"], subset, f"{where}.items")
    return found


def root_violations(schema: dict[str, Any], subset: Subset) -> list[str]:
    root = (
        [] if schema.get("type") == "object" and "anyOf" not in schema else ["$: the root must be an object"]
    )
    return root + violations(schema, subset)


def strict_surfaces(project: str | None) -> dict[str, dict[str, dict[str, Any]]]:
    """Each surface's strict parameters, per operation (building them opens no connection)."""
    return {
        "binding": {
            spec.name: Binding(current_project=project, strict=True).json_schema(spec) for spec in OPS
        },
        "langchain": {
            t.name: convert_to_openai_tool(t, strict=True)["function"]["parameters"]
            for t in GhostMemToolkit(current_project=project, strict=True).get_tools()
        },
        "llamaindex": {
            str(t.metadata.name): t.metadata.to_openai_tool()["function"]["parameters"]
            for t in GhostMemToolSpec(current_project=project, strict=True).to_tool_list()
        },
    }


@pytest.mark.parametrize("project", [None, "webapp"], ids=["unbound", "bound-project"])
@pytest.mark.parametrize("subset", [OPENAI, ANTHROPIC], ids=lambda s: s.name)
def test_every_strict_schema_is_in_the_providers_subset(project: str | None, subset: Subset) -> None:
    for surface, schemas in strict_surfaces(project).items():
        assert list(schemas) == [spec.name for spec in OPS], surface
        for name, schema in schemas.items():
            assert root_violations(schema, subset) == [], (surface, name)


@pytest.mark.parametrize("subset", [OPENAI, ANTHROPIC], ids=lambda s: s.name)
def test_the_checker_refuses_what_the_default_schemas_hold(subset: Subset) -> None:
    """The default schemas keep their limits and defaults: exactly what strict mode refuses."""
    default = Binding().json_schema(OPS[0])
    assert "maxLength" in default["properties"]["query"]
    problems = root_violations(default, subset)
    assert any("every property must be required" in p for p in problems)
    assert any("'default'" in p for p in problems)
    assert any("'maxLength'" in p for p in problems)


def test_the_same_strict_schema_on_every_surface() -> None:
    surfaces = strict_surfaces("webapp")
    for spec in OPS:
        assert surfaces["langchain"][spec.name] == surfaces["binding"][spec.name], spec.name
        assert surfaces["llamaindex"][spec.name] == surfaces["binding"][spec.name], spec.name


def test_limits_and_defaults_move_into_descriptions() -> None:
    schema = strict_schema(get_op("search_personal_memory").args_model)["properties"]
    assert schema["query"] == {
        "type": "string",
        "description": "What to look for: words, a phrase or a question, in any language. "
        "(not empty; at most 2000 characters)",
    }
    assert schema["limit"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert schema["limit"]["description"].endswith("(at least 1; at most 50; null for the default, 10)")
    assert schema["platform"]["anyOf"][1] == {"type": "null"}
    assert "null for none" in schema["days"]["description"]


def test_strict_nulls_mean_the_default_and_required_ones_stay_errors() -> None:
    model = get_op("search_personal_memory").args_model
    sent = {
        "query": "x",
        "days": None,
        "platform": None,
        "project": None,
        "limit": None,
        "include_library": None,
    }
    assert strict_arguments(model, sent) == {"query": "x"}
    assert strict_arguments(model, {"query": None}) == {"query": None}  # the model then says query is missing
