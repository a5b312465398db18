"""The operations contract: the documented defaults, bounded descriptions, clear argument errors."""

from __future__ import annotations

import pytest
from ghostmem import OPS, InvalidArgument, get_op

DEFAULTS = {
    "search_personal_memory": {
        "days": None,
        "platform": None,
        "project": None,
        "limit": 10,
        "include_library": False,
    },
    "get_conversation": {"offset": 0, "limit": 200},
    "list_recent_conversations": {"days": 2, "limit": 20, "platform": None, "project": None},
    "list_project_conversations": {"days": 14, "limit": 30},
    "get_conversation_summary": {"max_messages": 12},
    "search_ghost_memories": {"query": "", "current_project": None, "limit": 10},
}


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_defaults(name: str) -> None:
    fields = get_op(name).args_model.model_fields
    for arg, default in DEFAULTS[name].items():
        assert fields[arg].default == default, (name, arg)


@pytest.mark.parametrize("spec", OPS, ids=lambda s: s.name)
def test_descriptions_fit_every_framework(spec) -> None:  # type: ignore[no-untyped-def]
    assert 80 < len(spec.description) <= 1024
    schema = spec.args_model.model_json_schema()
    assert "explain" not in schema.get("properties", {})
    for name, prop in schema["properties"].items():
        assert prop.get("description"), f"{spec.name}.{name} has no description"
        assert "$ref" not in str(prop), "tool arguments must stay flat"


@pytest.mark.parametrize(
    ("name", "args", "fragment"),
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
        ("search_personal_memory", {"query": "   "}, "query"),
        ("search_personal_memory", {}, "query: Field required"),
        ("list_recent_conversations", {"days": 10**9}, "days: Input should be less than or equal to 36500"),
        ("get_conversation", {"conv_id": "a", "offset": -1}, "offset"),
        # beyond what the database's integer columns hold (found by the fuzz tests: the server refused it)
        (
            "get_conversation",
            {"conv_id": "a", "offset": 2**63},
            "offset: Input should be less than or equal to",
        ),
        ("give_feedback", {"memory_id": 2**63, "signal": "endorse"}, "memory_id: Input should be less than"),
        ("give_feedback", {"memory_id": 1, "signal": "like"}, "signal"),
        ("remember", {"content": "x", "color": "red"}, "color: Extra inputs are not permitted"),
    ],
)
def test_bad_arguments_give_one_clear_line(name: str, args: dict, fragment: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InvalidArgument) as err:
        get_op(name).parse(args)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"invalid arguments for {name}: ")
    assert fragment in message


def test_unknown_operation() -> None:
    with pytest.raises(InvalidArgument, match="unknown operation 'drop_tables'"):
        get_op("drop_tables")


def test_bound_arguments_leave_the_schema() -> None:
    spec = get_op("search_ghost_memories")
    public = spec.public_args_model({"current_project"})
    assert "current_project" not in public.model_json_schema()["properties"]
    assert spec.public_args_model(set()) is spec.args_model
