"""Binding (what adapters share) without a database: argument checks, bound arguments, owner and store reuse."""

from __future__ import annotations

import dataclasses

import pytest
from ghostmem import GhostMem, HashEmbedder, InvalidArgument, get_op
from ghostmem.binding import Binding

DSN = "postgresql://nobody@127.0.0.1:1/none"  # never connected to: nothing here runs an operation


def test_validate_keeps_only_the_arguments_given() -> None:
    binding = Binding(DSN, embedder=HashEmbedder())
    assert binding.validate(get_op("search_personal_memory"), {"query": "  hi  ", "limit": 3}) == {
        "query": "hi",
        "limit": 3,
    }


@pytest.mark.parametrize(
    ("op", "args", "fragment"),
    [
        ("search_personal_memory", {"query": "a\x00b"}, "query: must not contain NUL characters"),
        ("remember", {"content": "x", "allowlist": ["ok", "b\x00d"]}, "allowlist: must not contain NUL"),
        (
            "remember",
            {"content": "x", "allowlist": ["ok", "bad\ud800"]},
            "allowlist.1: Input should be a valid string",
        ),
        ("list_recent_conversations", {"a\nb": 1}, "'a\\nb': Extra inputs are not permitted"),
        ("list_recent_conversations", ["days", 3], "arguments must be an object"),
    ],
)
def test_unstorable_or_malformed_arguments_are_one_line(op: str, args: object, fragment: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        Binding(DSN, embedder=HashEmbedder()).validate(get_op(op), args)  # type: ignore[arg-type]
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_bound_project_leaves_the_schema_and_is_refused_as_an_argument() -> None:
    binding = Binding(DSN, embedder=HashEmbedder(), current_project="webapp")
    spec = get_op("search_ghost_memories")
    assert "current_project" not in binding.json_schema(spec)["properties"]
    assert "title" not in binding.json_schema(spec)
    assert binding.args_model(spec) is binding.args_model(spec)
    with pytest.raises(InvalidArgument, match="current_project: Extra inputs are not permitted"):
        binding.validate(spec, {"current_project": "other"})
    assert binding.context.current_project == "webapp"


def test_a_given_store_serves_every_owner_and_project() -> None:
    """Owner and project are the binding's context, not its store's: no new store (no new pool) per owner."""
    store = GhostMem(dsn=DSN, owner="alice", embedder=HashEmbedder())
    assert Binding(store).store is store and Binding(store).owner == "alice"
    other = Binding(store, owner="bob", current_project="p")
    assert other.store is store
    assert (other.owner, other.current_project) == ("bob", "p")
    assert other.astore.embedder is store.embedder and other.astore.settings is store.settings
    assert (store.owner, store.context.current_project) == ("alice", None)


def test_a_calls_configuration_names_its_owner_and_project() -> None:
    binding = Binding(DSN, embedder=HashEmbedder(), owner="fallback", project_key="project_id")
    assert binding.context_for(None).owner == "fallback"
    assert binding.context_for({"thread_id": "t"}) is binding.context
    call = binding.context_for({"user_id": " alice ", "project_id": "webapp"})
    assert (call.owner, call.current_project, call.allowed_scopes) == ("alice", "webapp", {"project"})
    assert "current_project" not in binding.json_schema(get_op("search_ghost_memories"))["properties"]
    assert binding.context_for({"user_id": 42}).owner == "42"  # an application's integer user id
    for bad in ("", "  ", True, 4.2, ["alice"], {"id": "alice"}):
        with pytest.raises(InvalidArgument, match="'user_id' must be a non-empty string or an integer id"):
            binding.context_for({"user_id": bad})
    with pytest.raises(InvalidArgument, match="must not contain NUL"):
        binding.context_for({"user_id": "a\x00b"})


def test_the_first_source_naming_an_owner_wins_and_others_fill_in() -> None:
    """A call's configurable before LangGraph's runtime context (a mapping or an object with attributes)."""
    binding = Binding(DSN, embedder=HashEmbedder(), owner="fallback", project_key="project_id")

    @dataclasses.dataclass
    class Runtime:
        user_id: str | None = None
        project_id: str | None = None

    call = binding.context_for({"user_id": "alice"}, Runtime("bob", "billing"))
    assert (call.owner, call.current_project) == ("alice", "billing")
    assert binding.context_for({"thread_id": "t"}, Runtime("bob")).owner == "bob"
    assert binding.context_for(None, {"user_id": "carol"}).owner == "carol"
    assert binding.context_for(None, Runtime()) is binding.context


def test_a_bound_project_narrows_the_scope_of_writes_unless_the_application_allows_more() -> None:
    remember = get_op("remember")
    bound = Binding(DSN, embedder=HashEmbedder(), current_project="webapp")
    schema = bound.json_schema(remember)["properties"]
    assert set(schema) == {"content", "kind", "scope"}
    assert (schema["scope"]["const"], schema["scope"]["default"]) == ("project", "project")
    assert bound.context.allowed_scopes == {"project"}
    assert bound._arguments(remember, {"content": "x"}) == {"content": "x", "scope": "project"}
    assert bound._arguments(remember, {"content": "x", "scope": "project"}) == {
        "content": "x",
        "scope": "project",
    }
    with pytest.raises(InvalidArgument, match="scope: Input should be 'project'"):
        bound.validate(remember, {"content": "x", "scope": "global"})
    with pytest.raises(InvalidArgument, match="allowlist: Extra inputs are not permitted"):
        bound.validate(remember, {"content": "x", "allowlist": ["billing"]})

    widened = Binding(
        DSN, embedder=HashEmbedder(), current_project="webapp", allowed_scopes=["project", "global"]
    )
    schema = widened.json_schema(remember)["properties"]
    assert (schema["scope"]["enum"], schema["scope"]["default"]) == (["global", "project"], "global")
    assert "allowlist" not in schema
    assert Binding(DSN, embedder=HashEmbedder()).context.allowed_scopes is None
    with pytest.raises(InvalidArgument, match="allowed_scopes: unknown scope 'everywhere'"):
        Binding(DSN, embedder=HashEmbedder(), allowed_scopes=["everywhere"])
