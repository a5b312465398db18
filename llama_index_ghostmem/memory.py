"""A LlamaIndex memory block: the past conversations and ghost memories relevant to the chat, put into ``Memory``."""

from __future__ import annotations

from typing import Any, cast

from ghostmem import GhostMem, get_op
from ghostmem.binding import Binding
from ghostmem.embed import Embedder
from ghostmem.models import GhostList, SearchResult
from llama_index.core.base.llms.types import ChatMessage, TextBlock
from llama_index.core.memory.memory import BaseMemoryBlock
from pydantic import ConfigDict, Field

SEARCH = get_op("search_personal_memory")
GHOSTS = get_op("search_ghost_memories")


class GhostMemMemoryBlock(BaseMemoryBlock[str]):
    """Past conversations and learned rules relevant to the latest messages, as one text block of ``Memory``.

    On every ``Memory.get`` the block searches personal memory with the text of the last ``context_window``
    messages (the current session's own conversation left out: it is in the chat history already) and ranks ghost
    memories for it; both come back in the text a ghostmem tool gives a model. Nothing is written: capture the
    conversation with :class:`~llama_index_ghostmem.GhostMemChatStore`.

    Example::

        block = GhostMemMemoryBlock(GhostMem(), owner="alice", current_project="webapp")
        memory = Memory.from_defaults(session_id="support-42", memory_blocks=[block])

    Args:
        store: a :class:`~ghostmem.GhostMem`, a DSN, or ``None`` (embedded server / ``GHOSTMEM_DSN``).
        owner: whose memory.
        current_project: the project ghost memories are ranked for.
        conversations: how many past conversations (0: none).
        memories: how many ghost memories (0: none).
        days: only conversations of the last ``days`` days.
        context_window: how many of the latest messages make the query.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = "ghostmem"
    description: str | None = "Past conversations and learned rules relevant to the chat (ghostmem)."
    accept_short_term_memory: bool = False
    binding: Binding = Field(exclude=True, repr=False)
    conversations: int = Field(default=3, ge=0, le=50)
    memories: int = Field(default=3, ge=0, le=50)
    days: int | None = Field(default=None, ge=1)
    context_window: int = Field(default=2, ge=1)

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

    async def _aget(
        self, messages: list[ChatMessage] | None = None, session_id: str | None = None, **block_kwargs: Any
    ) -> str:
        query = "\n".join(
            text for m in (messages or [])[-self.context_window :] if (text := _text(m))
        ).strip()
        if not query:
            return ""
        parts: list[str] = []
        if self.conversations:
            result = await self.binding.arun(
                SEARCH, {"query": query, "limit": self.conversations + 1, "days": self.days}
            )
            found = cast(SearchResult, result.data)
            rows = [r for r in found.rows if r.conv_id != session_id][: self.conversations]
            if rows:
                parts.append(SEARCH.render(found.model_copy(update={"rows": rows})))
        if self.memories:
            ghosts = await self.binding.arun(GHOSTS, {"query": query, "limit": self.memories})
            if cast(GhostList, ghosts.data).rows:
                parts.append(ghosts.text)
        return "\n\n".join(parts)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Nothing to keep: the conversation is captured by the chat store, and the block only reads."""


def _text(message: ChatMessage) -> str:
    """A message's text blocks, one per line (images, audio and tool calls carry no searchable words)."""
    return "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock)).strip()
