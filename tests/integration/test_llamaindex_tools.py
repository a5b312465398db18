"""LlamaIndex tools, tool spec and retrievers against the real database."""

from __future__ import annotations

from typing import Any

import pytest
from ghostmem import OPS, GhostMem
from ghostmem.models import SearchResult
from llama_index.core.schema import QueryBundle
from support.adapters import RULE, seed_conversations, seed_rule

from langchain_ghostmem import GhostMemTool
from llama_index_ghostmem import GhostMemoryRetriever, GhostMemRetriever, GhostMemToolSpec, ghostmem_tool


def _tools(gm: GhostMem, **kwargs: Any) -> dict[str, Any]:
    return {t.metadata.name: t for t in GhostMemToolSpec(gm, **kwargs).to_tool_list()}


def test_tool_output_is_the_text_and_raw_output_the_result(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    out = _tools(gm)["search_personal_memory"].call(query="vault tokens staging", limit=2)
    assert not out.is_error
    assert isinstance(out.raw_output, SearchResult)
    assert out.raw_output.rows[0].conv_id == ids["vault"]
    # Exactly the text the LangChain tool gives the model.
    same = GhostMemTool("search_personal_memory", gm).invoke({"query": "vault tokens staging", "limit": 2})
    assert out.content == same


async def test_acall_uses_the_async_store(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    spec = GhostMemToolSpec(gm)
    out = await spec.to_tool_list(["get_conversation_summary"])[0].acall(
        conv_id=ids["deploy"], max_messages=2
    )
    assert out.raw_output.conversation.conv_id == ids["deploy"]
    assert out.raw_output.head[0].text.startswith("The nightly deploy")
    assert spec.binding.astore._pools.opened()
    await spec.aclose()


@pytest.mark.parametrize(
    ("op", "args", "fragment"),
    [
        (
            "search_personal_memory",
            {"query": "x", "days": -3},
            "days: Input should be greater than or equal to 1",
        ),
        ("search_personal_memory", {"query": 42}, "query: Input should be a valid string"),
        ("list_recent_conversations", {"colour": "red"}, "colour: Extra inputs are not permitted"),
        ("get_conversation", {"conv_id": "no-such-conversation"}, "no-such-conversation"),
        ("search_personal_memory", {"query": "a\x00b"}, "NUL"),
    ],
)
def test_arguments_are_validated_and_errors_are_one_sentence(
    gm: GhostMem, op: str, args: dict[str, Any], fragment: str
) -> None:
    out = _tools(gm)[op].call(**args)
    assert out.is_error
    assert fragment in out.content
    assert "\n" not in out.content and "Traceback" not in out.content
    assert out.raw_output is None


def test_bound_project_disappears_from_the_schema(gm: GhostMem) -> None:
    tools = _tools(gm, current_project="webapp")
    params = tools["search_ghost_memories"].metadata.get_parameters_dict()
    assert "current_project" not in params["properties"]
    assert "project" not in tools["remember"].metadata.get_parameters_dict()["properties"]
    out = tools["search_ghost_memories"].call(query="x", current_project="other")
    assert out.is_error and "current_project: Extra inputs are not permitted" in out.content


def test_spec_lists_every_operation_and_read_only_drops_writers(gm: GhostMem) -> None:
    assert list(_tools(gm)) == [s.name for s in OPS]
    assert list(_tools(gm, read_only=True)) == [s.name for s in OPS if not s.writes]
    single = ghostmem_tool(OPS[2], GhostMemToolSpec(gm).binding)
    assert single.metadata.description == OPS[2].description


def test_retriever_returns_scored_nodes(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    nodes = GhostMemRetriever(gm, similarity_top_k=2).retrieve("carbonara guanciale or vault")
    assert len(nodes) == 2
    assert nodes[0].node.node_id == ids["carbonara"]
    assert "guanciale" in nodes[0].node.get_content()
    assert nodes[0].score is not None and nodes[0].score >= (nodes[1].score or 0)
    assert nodes[0].node.metadata["platform"] == "claude_code"


async def test_retriever_aretrieve_is_async(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    retriever = GhostMemRetriever(gm, similarity_top_k=1, project="infra")
    nodes = await retriever.aretrieve(QueryBundle("tokens"))
    assert [n.node.node_id for n in nodes] == [ids["vault"]]
    assert retriever.binding.astore._pools.opened()
    await retriever.binding.aclose()


def test_ghost_memory_retriever(gm: GhostMem) -> None:
    memory_id = seed_rule(gm)
    nodes = GhostMemoryRetriever(gm, similarity_top_k=3).retrieve("migrations before integration tests")
    assert nodes[0].node.get_content() == RULE
    assert nodes[0].node.node_id == str(memory_id)
