"""Live capture of a LangChain conversation into personal memory (platform ``langchain``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ghostmem import GhostMem
from ghostmem.binding import Binding, Closes
from ghostmem.embed import Embedder
from ghostmem.records import Platform
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from langchain_ghostmem.messages import from_record, to_record

PLATFORM: Platform = "langchain"


class GhostMemChatMessageHistory(Closes, BaseChatMessageHistory):
    """A LangChain chat history stored as a conversation in ghostmem's personal memory.

    Every message added is committed at once (and embedded), so ``search_personal_memory`` and
    ``list_recent_conversations`` find the conversation right after. Works with ``RunnableWithMessageHistory``.

    Example::

        history = GhostMemChatMessageHistory("support-42", GhostMem(), owner="alice", project="webapp")
        history.add_user_message("The nightly export fails with a timeout")

    Args:
        session_id: the conversation's ``conv_id`` in ghostmem.
        store: a :class:`~ghostmem.GhostMem`, a DSN, or ``None`` (embedded server / ``GHOSTMEM_DSN``).
        owner: whose memory.
        title: the conversation's title (default: its first user message).
        project: the project the conversation is about (``list_project_conversations`` finds it by this).
    """

    def __init__(
        self,
        session_id: str,
        store: GhostMem | str | None = None,
        *,
        owner: str | None = None,
        title: str | None = None,
        project: str | None = None,
        embedder: Embedder | str | None = None,
        binding: Binding | None = None,
    ) -> None:
        if not session_id or not session_id.strip():
            raise ValueError("session_id must be a non-empty string")
        self.session_id = session_id
        self.binding = binding or Binding(store, owner=owner, embedder=embedder)
        self.title = title
        self.project = project

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return [
            from_record(r)
            for r in self.binding.store.capture_messages(self.session_id, owner=self.binding.owner)
        ]

    async def aget_messages(self) -> list[BaseMessage]:
        return await asyncio.to_thread(lambda: self.messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        self.binding.store.capture_append(
            self.session_id,
            [to_record(m) for m in messages],
            platform=PLATFORM,
            title=self.title,
            project=self.project,
            owner=self.binding.owner,
        )

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await asyncio.to_thread(self.add_messages, messages)

    def clear(self) -> None:
        self.binding.store.capture_delete(self.session_id, owner=self.binding.owner)

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)
