"""The ghost-memory programs without a database: what they ask for, in which order, and what they refuse."""

from __future__ import annotations

from typing import Any

import pytest
from ghostmem import ghosts, japanese
from ghostmem.args import GiveFeedbackArgs, RememberArgs, SearchGhostMemoriesArgs
from ghostmem.context import OpContext
from ghostmem.errors import DatabaseUnavailable, InvalidArgument
from ghostmem.ops import get_op
from ghostmem.program import Embed, Program, Query

ROLE_OK = [{"present": True, "member": True}]
NO_REFUSAL = [{"refusal": None}]
VISIBLE = [{"any": True}]
MEMORY = {
    "memory_id": 7,
    "content": "run the migrations first",
    "kind": "rule",
    "scope": "project",
    "project": "alpha",
    "allowlist": [],
    "score": 0.25,
    "breakdown": {"semantic": 0.0, "recency_factor": 1.0, "activation": 0.05, "scope_bonus": 0.1},
    "created_at": None,
    "last_activated_at": None,
    "last_used_at": None,
    "created": True,
}


def drive(program: Program[Any], replies: list[Any]) -> tuple[list[Any], Any]:
    """Run ``program`` feeding ``replies`` in order; returns the steps it yielded and its result."""
    steps: list[Any] = []
    reply: Any = None
    try:
        while True:
            step = program.send(reply)
            steps.append(step)
            reply = replies[len(steps) - 1]
    except StopIteration as done:
        return steps, done.value


def test_formula_is_not_model_visible() -> None:
    schema = get_op("search_ghost_memories").args_model.model_json_schema()
    assert "formula" not in schema["properties"]
    assert SearchGhostMemoriesArgs().formula == "default"
    with pytest.raises(InvalidArgument, match="formula"):
        get_op("search_ghost_memories").parse({"formula": "secret"})


def test_search_switches_role_then_checks_the_claim_then_calls_the_api() -> None:
    ctx = OpContext(owner="o", runtime_role="ghostmem_runtime")
    steps, result = drive(
        ghosts.search_ghost_memories(
            ctx, SearchGhostMemoriesArgs(query=" deploys ", current_project="alpha")
        ),
        [ROLE_OK, None, NO_REFUSAL, VISIBLE, [0.0, 1.0], [MEMORY]],
    )
    assert "SET LOCAL ROLE" in steps[1].text.as_string()
    assert steps[2].params == ("alpha",)
    assert "has_visible_ghosts" in steps[3].text and steps[3].params == ("o", "alpha")
    assert isinstance(steps[4], Embed) and steps[4].text == "deploys"
    # the vector as embedded; an English query has no Japanese words
    assert steps[5].params == ("o", "alpha", "deploys", [0.0, 1.0], None, "default", 10)
    assert result.rows[0].memory_id == 7
    assert list(result.rows[0].breakdown) == ["activation", "scope_bonus", "semantic", "recency_factor"]


@pytest.mark.skipif(not japanese.available(), reason="needs the [ja] extra (SudachiPy)")
def test_japanese_words_go_with_the_query_and_the_content() -> None:
    ctx = OpContext(owner="o")
    steps, _ = drive(
        ghosts.search_ghost_memories(ctx, SearchGhostMemoriesArgs(query="昨日読んだ")),
        [NO_REFUSAL, VISIBLE, [1.0], []],
    )
    assert steps[-1].params[4] == ["ja:昨日", "ja:読む"]
    steps, _ = drive(
        ghosts.remember(ctx, RememberArgs(content="毎朝、新聞を読みます")), [[1.0], NO_REFUSAL, [MEMORY]]
    )
    assert steps[-1].params[7] == ["ja:新聞", "ja:毎朝", "ja:読む"]


def test_an_empty_query_embeds_nothing() -> None:
    steps, result = drive(
        ghosts.search_ghost_memories(OpContext(owner="o"), SearchGhostMemoriesArgs()),
        [NO_REFUSAL, [], [{"any": False}]],
    )
    assert not any(isinstance(s, Embed) for s in steps)
    assert steps[1].params[3] is None and result.rows == []
    # an overview that lists nothing asks whether anything applies here at all (its hint says what is true)
    assert "has_visible_ghosts" in steps[2].text and result.none_visible
    _, kept_elsewhere = drive(
        ghosts.search_ghost_memories(OpContext(owner="o"), SearchGhostMemoriesArgs()),
        [NO_REFUSAL, [], VISIBLE],
    )
    assert not kept_elsewhere.none_visible
    steps, listed = drive(
        ghosts.search_ghost_memories(OpContext(owner="o"), SearchGhostMemoriesArgs()), [NO_REFUSAL, [MEMORY]]
    )
    assert len(steps) == 2 and not listed.none_visible  # a list is not asked about


def test_a_query_with_no_memory_visible_embeds_nothing_and_calls_no_search() -> None:
    steps, result = drive(
        ghosts.search_ghost_memories(OpContext(owner="o"), SearchGhostMemoriesArgs(query="deploys")),
        [NO_REFUSAL, [{"any": False}]],
    )
    assert len(steps) == 2 and not any(isinstance(s, Embed) for s in steps)
    assert result.query == "deploys" and result.rows == [] and result.none_visible


def test_a_bound_project_wins_over_the_models_argument() -> None:
    ctx = OpContext(owner="o", current_project="bound")
    steps, _ = drive(
        ghosts.search_ghost_memories(ctx, SearchGhostMemoriesArgs(current_project="claimed")),
        [NO_REFUSAL, [], VISIBLE],
    )
    assert steps[0].params == ("bound",) and steps[1].params[1] == "bound"
    steps, _ = drive(
        ghosts.remember(ctx, RememberArgs(content="x", scope="project", project="other")),
        [[1.0], NO_REFUSAL, [MEMORY]],
    )
    assert steps[-1].params[4] == "bound"


def test_refusals_and_a_missing_role_raise_clear_errors() -> None:
    program = ghosts.search_ghost_memories(OpContext(owner="o"), SearchGhostMemoriesArgs(current_project="b"))
    with pytest.raises(InvalidArgument, match="may not act"):
        drive(program, [[{"refusal": "role r may not act for project 'b'"}]])
    ctx = OpContext(owner="o", runtime_role="gone")
    with pytest.raises(DatabaseUnavailable, match=r"does not exist.*install_runtime_role"):
        drive(
            ghosts.give_feedback(ctx, GiveFeedbackArgs(memory_id=1, signal="endorse")),
            [[{"present": False, "member": False}]],
        )
    with pytest.raises(DatabaseUnavailable, match="not granted"):
        drive(
            ghosts.give_feedback(ctx, GiveFeedbackArgs(memory_id=1, signal="endorse")),
            [[{"present": True, "member": False}]],
        )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"content": "x", "scope": "project"}, "needs `project`"),
        ({"content": "x", "scope": "shared-restricted"}, "needs `allowlist`"),
        ({"content": "x", "scope": "shared-restricted", "allowlist": ["", " "]}, "needs `allowlist`"),
        ({"content": "x", "allowlist": ["a"]}, "only to scope"),
    ],
)
def test_remember_refuses_before_touching_the_database(arguments: dict[str, Any], message: str) -> None:
    program = ghosts.remember(OpContext(owner="o"), RememberArgs(**arguments))
    with pytest.raises(InvalidArgument, match=message):
        next(program)


def test_feedback_notes_are_redacted_before_they_are_sent() -> None:
    note = "leaked AKIAIOSFODNN7EXAMPLE in the logs"
    steps, _ = drive(
        ghosts.give_feedback(
            OpContext(owner="o"), GiveFeedbackArgs(memory_id=3, signal="correct", note=note)
        ),
        [NO_REFUSAL, [MEMORY]],
    )
    sent = steps[-1].params[4]
    assert "AKIAIOSFODNN7EXAMPLE" not in sent and sent.startswith("leaked ")
    assert all(isinstance(s, Query) for s in steps)


def test_remember_refuses_a_scope_the_application_did_not_allow() -> None:
    """The operation itself checks, whatever surface (or direct Python call) sent the arguments."""
    ctx = OpContext(owner="o", current_project="webapp", allowed_scopes=frozenset({"project"}))
    for scope, extra in (("global", {}), ("shared-restricted", {"allowlist": ["billing"]})):
        with pytest.raises(InvalidArgument, match=f"may store only 'project' memories, not '{scope}' ones"):
            drive(ghosts.remember(ctx, RememberArgs(content="x", scope=scope, **extra)), [])  # type: ignore[arg-type]
    steps, _ = drive(
        ghosts.remember(ctx, RememberArgs(content="x", scope="project")), [[1.0], NO_REFUSAL, [MEMORY]]
    )
    assert steps[-1].params[3:5] == ("project", "webapp")
