"""LangChain retrievers: the standard suite for both, and what their documents carry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from ghostmem import GhostMem
from ghostmem.binding import Binding
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests
from support.adapters import RULE, seed_conversations, seed_rule

from langchain_ghostmem import GhostMemoryRetriever, GhostMemRetriever


class _Bound:
    binding: Binding

    @pytest.fixture(autouse=True)
    async def _store(self, gm: GhostMem) -> AsyncIterator[None]:
        self.seed(gm)
        self.binding = Binding(gm)
        yield
        await self.binding.aclose()

    def seed(self, gm: GhostMem) -> None:
        raise NotImplementedError

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"binding": self.binding}


class TestGhostMemRetrieverStandard(_Bound, RetrieversIntegrationTests):
    def seed(self, gm: GhostMem) -> None:
        seed_conversations(gm)

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return GhostMemRetriever

    @property
    def retriever_query_example(self) -> str:
        # The standard tests ask for k = 3 documents: three conversations must be relevant (search pads nothing).
        return "database migrations, vault tokens and a guanciale recipe"


class TestGhostMemoryRetrieverStandard(_Bound, RetrieversIntegrationTests):
    def seed(self, gm: GhostMem) -> None:
        for content in (
            RULE,
            "Never run database migrations on Fridays.",
            "Database backups must be tested monthly.",
            "Ask before dropping a database table.",
        ):
            seed_rule(gm, content)

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return GhostMemoryRetriever

    @property
    def retriever_query_example(self) -> str:
        return "database"


def test_conversation_documents_carry_the_row_header(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    docs = GhostMemRetriever(gm, k=2).invoke("carbonara guanciale pecorino")
    assert docs[0].id == ids["carbonara"]
    assert "guanciale" in docs[0].page_content
    meta = docs[0].metadata
    assert meta["conv_id"] == ids["carbonara"] and meta["platform"] == "claude_code"
    assert meta["msg_count"] == 2 and meta["score"] > 0


def test_filters_narrow_the_search(gm: GhostMem) -> None:
    ids = seed_conversations(gm)
    docs = GhostMemRetriever(gm, k=4, project="infra").invoke("tokens migrations recipe")
    assert [d.id for d in docs] == [ids["vault"]]


async def test_ghost_documents_async(gm: GhostMem) -> None:
    memory_id = seed_rule(gm)
    retriever = GhostMemoryRetriever(gm, k=3)
    docs = await retriever.ainvoke("migrations before the integration tests")
    assert docs[0].page_content == RULE
    assert docs[0].metadata["memory_id"] == memory_id
    assert "breakdown" in docs[0].metadata
    await retriever.binding.aclose()
