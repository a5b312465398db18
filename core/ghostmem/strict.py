"""Tool schemas for strict tool calling (OpenAI strict function calling, Anthropic strict tool use).

Both providers constrain the model's output to the schema, and both accept only a subset of JSON Schema: every
property listed in ``required`` (an optional one is nullable instead), ``additionalProperties: false``, and no
length or range keywords (``minLength``, ``maxLength``, ``minimum``, ``maximum``, ``default``, ...). The strict
schema of an operation is its argument model's schema in that subset, the same for both providers; the limits and
defaults it cannot carry move into each property's description, so the model still reads them.

A strict call sends every argument, ``null`` for "not given": :func:`strict_arguments` drops those nulls so that
the operation's defaults apply, and the arguments are then validated against the real model, limits included
(:meth:`ghostmem.binding.Binding.validate`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

# Keywords neither provider's strict subset has, and how the description says what they said instead.
_LIMITS: dict[str, Callable[[Any], str]] = {
    "minLength": lambda n: "not empty" if n == 1 else f"at least {n} characters",
    "maxLength": lambda n: f"at most {n} characters",
    "minimum": lambda n: f"at least {n}",
    "maximum": lambda n: f"at most {n}",
    "minItems": lambda n: f"at least {n} items",
    "maxItems": lambda n: f"at most {n} items",
}
_DROPPED = ("title", "default")


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The input schema of ``model`` that strict tool calling accepts (see the module docstring)."""
    schema = model.model_json_schema()
    required = set(schema.get("required", ()))
    properties = {
        name: _strict_property(prop, nullable=name not in required)
        for name, prop in schema["properties"].items()
    }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def strict_arguments(model: type[BaseModel], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` without the nulls a strict call sends for optional arguments it leaves at their default."""
    fields = model.model_fields
    return {
        name: value
        for name, value in arguments.items()
        if value is not None or name not in fields or fields[name].is_required()
    }


def _strict_property(prop: dict[str, Any], *, nullable: bool) -> dict[str, Any]:
    notes: list[str] = []
    variants = []
    for variant in prop.get("anyOf") or [prop]:
        kept = {
            k: v for k, v in variant.items() if k not in _LIMITS and k not in _DROPPED and k != "description"
        }
        notes += [say(variant[key]) for key, say in _LIMITS.items() if key in variant]
        variants.append(kept)
    if nullable:
        default = prop.get("default")
        notes.append(
            "null for none" if default in (None, []) else f"null for the default, {json.dumps(default)}"
        )
        if {"type": "null"} not in variants:
            variants.append({"type": "null"})
    description = prop.get("description", "")
    if notes:
        description = f"{description} ({'; '.join(notes)})".strip()
    shaped: dict[str, Any] = variants[0] if len(variants) == 1 else {"anyOf": variants}
    return {**shaped, "description": description}
