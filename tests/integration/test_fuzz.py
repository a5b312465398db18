"""Hypothesis throws hostile arguments at every tool through both adapters.

Whatever arrives (wrong types, huge strings, any Unicode, NUL bytes, SQL fragments, negative or enormous numbers,
unknown keys), a tool answers with a result of its result model or with one clean line the model can act on —
never a traceback — and a read operation never changes what is stored.
"""

from __future__ import annotations

from typing import Any

import pytest
from ghostmem import OPS, GhostMem, OpSpec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.adapters import counts, seed_conversations, seed_rule

from langchain_ghostmem import GhostMemToolkit
from llama_index_ghostmem import GhostMemToolSpec

SQL = [
    "'; DROP TABLE ghostmem.messages; --",
    "1 OR 1=1",
    "\\' UNION SELECT * FROM agent.ghost_memories --",
    "%s %(owner)s {}",
    "$$; DELETE FROM ghostmem.conversations; $$",
    "conv-deploy' --",
]
text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=20),  # surrogates too
    st.sampled_from(SQL),
    st.just("会話 検索 ✓ \u202e\u200b"),
    st.integers(1, 5000).map(lambda n: "x" * n),
    st.text(max_size=10).map(lambda s: s + "\x00" + s),
)
scalar = st.one_of(
    text,
    st.integers(-(10**12), 10**12),
    st.sampled_from([0, -1, 1, 2**63, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
value = st.one_of(
    scalar, st.lists(scalar, max_size=4), st.dictionaries(st.text(max_size=5), scalar, max_size=3)
)


def arguments(spec: OpSpec[Any, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Some of the op's own argument names (with any values) plus, sometimes, names it does not have."""
    names = list(spec.args_model.model_fields)
    known = st.dictionaries(st.sampled_from(names), value, max_size=len(names))
    unknown = st.dictionaries(st.text(min_size=1, max_size=12), value, max_size=2)
    return st.tuples(known, unknown, st.booleans()).map(lambda t: {**t[0], **t[1]} if t[2] else t[0])


def clean_error(op: str, content: str) -> None:
    assert content, op
    assert "\n" not in content and "Traceback" not in content, content
    assert len(content) < 2000, content


FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("spec", OPS, ids=lambda s: s.name)
def test_langchain_tools_never_leak_a_traceback(gm: GhostMem, spec: OpSpec[Any, Any]) -> None:
    seed_conversations(gm)
    seed_rule(gm)
    tool = next(t for t in GhostMemToolkit(gm).get_tools() if t.name == spec.name)
    before = counts(gm)

    @FUZZ
    @given(args=arguments(spec))
    def run(args: dict[str, Any]) -> None:
        message = tool.invoke({"name": spec.name, "args": args, "id": "fuzz", "type": "tool_call"})
        if message.status == "error":
            clean_error(spec.name, message.content)
        else:
            assert isinstance(message.artifact, spec.result_model)
            assert isinstance(message.content, str) and message.content
        if not spec.writes:
            assert counts(gm) == before, f"{spec.name} changed stored data with {args!r}"

    run()


@pytest.mark.parametrize("spec", OPS, ids=lambda s: s.name)
def test_llamaindex_tools_never_leak_a_traceback(gm: GhostMem, spec: OpSpec[Any, Any]) -> None:
    seed_conversations(gm)
    seed_rule(gm)
    tool = GhostMemToolSpec(gm).to_tool_list([spec.name])[0]
    before = counts(gm)

    @FUZZ
    @given(args=arguments(spec))
    def run(args: dict[str, Any]) -> None:
        output = tool.call(**args)
        if output.is_error:
            clean_error(spec.name, output.content)
            assert output.raw_output is None
        else:
            assert isinstance(output.raw_output, spec.result_model)
            assert output.content
        if not spec.writes:
            assert counts(gm) == before, f"{spec.name} changed stored data with {args!r}"

    run()
