"""LangChain retrievers over personal memory (conversations) and over ghost memories (learned rules)."""

from __future__ import annotations

from typing import Any

from ghostmem import GhostMem, OpSpec, get_op
from ghostmem.binding import Binding, Closes, passages
from ghostmem.context import OpContext
from ghostmem.embed import Embedder
from ghostmem.records import Platform
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, ensure_config
from pydantic import BaseModel, ConfigDict, Field

from langchain_ghostmem.tools import call_context

SEARCH = get_op("search_personal_memory")
GHOSTS = get_op("search_ghost_memories")


class _GhostMemBaseRetriever(Closes, BaseRetriever):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    binding: Binding = Field(exclude=True, repr=False)
    k: int = 4

    def __init__(
        self,
        store: GhostMem | str | None = None,
        *,
        owner: str | None = None,
        current_project: str | None = None,
        embedder: Embedder | str | None = None,
        binding: Binding | None = None,
        **kwargs: Any,
    ) -> None:
        binding = binding or Binding(store, owner=owner, current_project=current_project, embedder=embedder)
        super().__init__(binding=binding, **kwargs)  # type: ignore[call-arg]  # pydantic fields

    # A retriever's own methods do not see the call: hand on whose memory it is for (its config, else the
    # runtime context of the LangGraph run it is part of; see call_context).
    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        context = call_context(self.binding, ensure_config(config))
        return super().invoke(input, config, call=context, **kwargs)

    async def ainvoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        context = call_context(self.binding, ensure_config(config))
        return await super().ainvoke(input, config, call=context, **kwargs)

    def _run(
        self, spec: OpSpec[Any, Any], arguments: dict[str, Any], call: OpContext | None
    ) -> list[Document]:
        return _documents(self.binding.run(spec, arguments, call).data)

    async def _arun(
        self, spec: OpSpec[Any, Any], arguments: dict[str, Any], call: OpContext | None
    ) -> list[Document]:
        return _documents((await self.binding.arun(spec, arguments, call)).data)


class GhostMemRetriever(_GhostMemBaseRetriever):
    """Past conversations as documents: one per matching conversation, best first.

    ``page_content`` is the conversation's best-matching messages (or its first message); ``metadata`` holds the
    row header fields (conv_id, platform, dates, title, project, topic, cluster, msg_count, intensity, score).

    Example::

        retriever = GhostMemRetriever(GhostMem(), owner="alice", k=5, days=30)
        docs = retriever.invoke("why did the migration fail")
    """

    days: int | None = None
    platform: Platform | None = None
    project: str | None = None
    include_library: bool = False

    def _arguments(self, query: str, k: int | None) -> dict[str, Any]:
        return {
            "query": query,
            "limit": k or self.k,
            "days": self.days,
            "platform": self.platform,
            "project": self.project,
            "include_library": self.include_library,
        }

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        call: OpContext | None = None,
    ) -> list[Document]:
        return self._run(SEARCH, self._arguments(query, k), call)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        call: OpContext | None = None,
    ) -> list[Document]:
        return await self._arun(SEARCH, self._arguments(query, k), call)


class GhostMemoryRetriever(_GhostMemBaseRetriever):
    """Ghost memories (the rules and lessons an agent learned) as documents, ranked by ghostmem's formula.

    ``page_content`` is the memory; ``metadata`` holds memory_id, kind, scope, score and its per-term breakdown.
    Retrieving counts as using a memory (it raises its activation), exactly like the tool.
    """

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        call: OpContext | None = None,
    ) -> list[Document]:
        return self._run(GHOSTS, {"query": query, "limit": k or self.k}, call)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        call: OpContext | None = None,
    ) -> list[Document]:
        return await self._arun(GHOSTS, {"query": query, "limit": k or self.k}, call)


def _documents(data: BaseModel) -> list[Document]:
    return [Document(page_content=p.text, metadata=p.metadata, id=p.id) for p in passages(data)]
