"""LlamaIndex retrievers over personal memory (conversations) and over ghost memories (learned rules)."""

from __future__ import annotations

import copy
from typing import Any, Self

from ghostmem import GhostMem, get_op
from ghostmem.binding import Binding, Closes, passages
from ghostmem.embed import Embedder
from ghostmem.records import Platform
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import BaseModel

SEARCH = get_op("search_personal_memory")
GHOSTS = get_op("search_ghost_memories")


class _CallerRetriever(Closes, BaseRetriever):
    binding: Binding

    def for_call(self, owner: str | None = None, current_project: str | None = None) -> Self:
        """This retriever for one caller: ``owner`` (and ``current_project``) instead of the built ones, on the
        same store and pools (nothing opened, nothing to close). LlamaIndex retrievers take no per-call
        configuration; in a workflow step, ``retriever.for_call(await ctx.store.get("user_id"))``."""
        view = copy.copy(self)
        view.binding = self.binding.for_call(self.binding.caller(owner, current_project))
        return view


class GhostMemRetriever(_CallerRetriever):
    """Past conversations as nodes: one per matching conversation, best first, scored by hybrid relevance.

    A node's text is the conversation's best-matching messages (or its first message); its metadata the row
    header fields (conv_id, platform, dates, title, project, topic, cluster, msg_count, intensity).

    Example::

        retriever = GhostMemRetriever(GhostMem(), owner="alice", similarity_top_k=5)
        engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
    """

    def __init__(
        self,
        store: GhostMem | str | None = None,
        *,
        owner: str | None = None,
        embedder: Embedder | str | None = None,
        binding: Binding | None = None,
        similarity_top_k: int = 4,
        days: int | None = None,
        platform: Platform | None = None,
        project: str | None = None,
        include_library: bool = False,
        **kwargs: Any,
    ) -> None:
        self.binding = binding or Binding(store, owner=owner, embedder=embedder)
        self.arguments: dict[str, Any] = {
            "limit": similarity_top_k,
            "days": days,
            "platform": platform,
            "project": project,
            "include_library": include_library,
        }
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return _nodes(self.binding.run(SEARCH, {**self.arguments, "query": query_bundle.query_str}).data)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = await self.binding.arun(SEARCH, {**self.arguments, "query": query_bundle.query_str})
        return _nodes(result.data)


class GhostMemoryRetriever(_CallerRetriever):
    """Ghost memories (the rules an agent learned) as nodes, ranked and scored by ghostmem's formula.

    Retrieving counts as using a memory (it raises its activation), exactly like the tool.
    """

    def __init__(
        self,
        store: GhostMem | str | None = None,
        *,
        owner: str | None = None,
        current_project: str | None = None,
        embedder: Embedder | str | None = None,
        binding: Binding | None = None,
        similarity_top_k: int = 4,
        **kwargs: Any,
    ) -> None:
        self.binding = binding or Binding(
            store, owner=owner, current_project=current_project, embedder=embedder
        )
        self.similarity_top_k = similarity_top_k
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        arguments = {"query": query_bundle.query_str, "limit": self.similarity_top_k}
        return _nodes(self.binding.run(GHOSTS, arguments).data)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        arguments = {"query": query_bundle.query_str, "limit": self.similarity_top_k}
        return _nodes((await self.binding.arun(GHOSTS, arguments)).data)


# What an LLM reads of a node's metadata: when and where a conversation happened, what a rule applies to. The
# rest (ids, counts, clusters, scores and their breakdown) is bookkeeping for code, and is never embedded either.
LLM_METADATA = frozenset({"title", "platform", "started_at", "ended_at", "project", "kind", "scope"})


def _nodes(data: BaseModel) -> list[NodeWithScore]:
    return [
        NodeWithScore(
            node=TextNode(
                id_=p.id,
                text=p.text,
                metadata=p.metadata,
                excluded_llm_metadata_keys=[k for k in p.metadata if k not in LLM_METADATA],
                excluded_embed_metadata_keys=list(p.metadata),
            ),
            score=p.score,
        )
        for p in passages(data)
    ]
