"""Live capture of LlamaIndex conversations into personal memory (platform ``llamaindex``).

Each chat store key is a conversation (its ``conv_id``); every change is committed and embedded at once, so
``search_personal_memory`` and ``list_recent_conversations`` find it right after.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from ghostmem import GhostMem
from ghostmem.binding import Binding, Closes
from ghostmem.capture import (
    append_messages,
    conversation_ids,
    load_messages,
    lock_conversation,
    save_messages,
)
from ghostmem.content import describe, is_reference, to_json
from ghostmem.embed import Embedder
from ghostmem.records import MessageRecord, Platform, Role
from llama_index.core.llms import ChatMessage, MessageRole, TextBlock
from llama_index.core.storage.chat_store.base import BaseChatStore
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore, MessageStatus
from pydantic import BaseModel, ConfigDict, Field

PLATFORM: Platform = "llamaindex"
_ROLES: dict[str, Role] = {
    MessageRole.USER.value: "user",
    MessageRole.ASSISTANT.value: "assistant",
    MessageRole.CHATBOT.value: "assistant",
    MessageRole.MODEL.value: "assistant",
    MessageRole.SYSTEM.value: "system",
    MessageRole.DEVELOPER.value: "system",
    MessageRole.TOOL.value: "tool",
    MessageRole.FUNCTION.value: "tool",
}


class _BoundStore(Closes, BaseModel):
    """What both chat stores hold: the binding to a store (and its owner) and the project they record for."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    binding: Binding = Field(exclude=True, repr=False)
    project: str | None = None

    def __init__(
        self,
        store: GhostMem | str | None = None,
        *,
        owner: str | None = None,
        project: str | None = None,
        embedder: Embedder | str | None = None,
        binding: Binding | None = None,
    ) -> None:
        binding = binding or Binding(store, owner=owner, embedder=embedder)
        super().__init__(binding=binding, project=project)


class GhostMemChatStore(_BoundStore, BaseChatStore):
    """A LlamaIndex chat store kept in ghostmem's personal memory (use it with ``ChatMemoryBuffer``).

    Example::

        store = GhostMemChatStore(GhostMem(), owner="alice", project="webapp")
        memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="support-42")

    Args:
        store: a :class:`~ghostmem.GhostMem`, a DSN, or ``None`` (embedded server / ``GHOSTMEM_DSN``).
        owner: whose memory.
        project: the project these conversations are about.
    """

    @classmethod
    def class_name(cls) -> str:
        return "GhostMemChatStore"

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        self.binding.store.capture_replace(
            key,
            [_to_record(m) for m in messages],
            platform=PLATFORM,
            project=self.project,
            owner=self.binding.owner,
        )

    def get_messages(self, key: str) -> list[ChatMessage]:
        return [_from_record(r) for r in self.binding.store.capture_messages(key, owner=self.binding.owner)]

    def add_message(self, key: str, message: ChatMessage) -> None:
        self.binding.store.capture_append(
            key, [_to_record(message)], platform=PLATFORM, project=self.project, owner=self.binding.owner
        )

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        return [
            _from_record(r) for r in self.binding.store.capture_delete(key, owner=self.binding.owner)
        ] or None

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        if idx < 0:  # a position from the start; a negative one removes nothing
            return None
        return self._remove(key, idx)

    def delete_last_message(self, key: str) -> ChatMessage | None:
        return self._remove(key, -1)

    def _remove(self, key: str, index: int) -> ChatMessage | None:
        removed = self.binding.store.capture_remove(
            key, index, platform=PLATFORM, project=self.project, owner=self.binding.owner
        )
        return None if removed is None else _from_record(removed)

    def get_keys(self) -> list[str]:
        return self.binding.store.capture_ids(PLATFORM, owner=self.binding.owner)


def _to_record(message: ChatMessage) -> MessageRecord:
    """Search reads the text blocks, one per line; ``meta`` keeps the role, the extras and (unless the message is
    one text block, its text) every block in order, made JSON by :func:`ghostmem.content.to_json`."""
    role = str(message.role.value)
    shape: dict[str, Any] = {"role": role, "additional_kwargs": to_json(message.additional_kwargs)}
    if not (len(message.blocks) == 1 and isinstance(message.blocks[0], TextBlock)):
        shape["blocks"] = to_json(message.blocks)
    return MessageRecord(
        native_id="",
        role=_ROLES.get(role, "meta"),
        text="\n".join(b.text for b in message.blocks if isinstance(b, TextBlock)),
        raw_role=role,
        meta={"llamaindex": shape},
    )


def _from_record(record: MessageRecord) -> ChatMessage:
    shape = record.meta.get("llamaindex") or {"role": record.raw_role or record.role, "additional_kwargs": {}}
    if "blocks" in shape:
        return ChatMessage.model_validate(
            {
                "role": shape["role"],
                "blocks": [_kept_block(b) for b in shape["blocks"]],
                "additional_kwargs": shape["additional_kwargs"],
            }
        )
    return ChatMessage(role=shape["role"], content=record.text, additional_kwargs=shape["additional_kwargs"])


def _kept_block(block: dict[str, Any]) -> dict[str, Any]:
    """A stored block as LlamaIndex can hold it: one whose inline bytes were not kept becomes a text block
    saying what it was (LlamaIndex's media blocks cannot exist without their bytes, path or URL)."""
    ref = next((v for v in block.values() if is_reference(v)), None)
    if ref is None:
        return block
    return {"block_type": "text", "text": describe(str(block.get("block_type", "media")), ref)}


class GhostMemMemoryStore(_BoundStore, AsyncDBChatStore):
    """The chat store of LlamaIndex's ``Memory``, kept in ghostmem's personal memory.

    ``Memory.from_defaults(chat_store=...)`` keeps its short-term queue here: a session is a conversation (its
    ``conv_id`` the session id, platform ``llamaindex``) and every message — active, or archived when ``Memory``
    flushes it out of the queue — stays one of its messages, searchable as soon as it is added. A message's status
    is kept in its ``meta`` (``meta.llamaindex.status``, absent while active). Adding appends only the new messages;
    archiving, deleting and replacing rewrite the session (rows and embeddings of unchanged messages are kept).

    Example::

        memory = Memory.from_defaults(session_id="support-42", chat_store=GhostMemMemoryStore(GhostMem()),
                                      memory_blocks=[GhostMemMemoryBlock(GhostMem())])
    """

    @classmethod
    def class_name(cls) -> str:
        return "GhostMemMemoryStore"

    def _in_transaction(
        self, key: str, change: Callable[[list[MessageRecord]], tuple[list[MessageRecord], Any]]
    ) -> Any:
        """Read the session, let ``change`` compute (what to store, what to return), store it — one locked
        transaction, so two writers of one session take turns."""
        store = self.binding.store
        with store.connection() as conn:
            lock_conversation(conn, store.owner, key)
            records = load_messages(conn, store.owner, key)
            kept, answer = change(records)
            if kept != records:
                save_messages(
                    conn, store.owner, key, PLATFORM, kept, embedder=store.embedder, project=self.project
                )
        return answer

    def _selected(self, key: str, status: MessageStatus | None) -> list[MessageRecord]:
        store = self.binding.store
        with store.connection() as conn:
            records = load_messages(conn, store.owner, key)
        return [r for r in records if status is None or _status(r) == status.value]

    async def get_messages(
        self,
        key: str,
        status: MessageStatus | None = MessageStatus.ACTIVE,
        limit: int | None = None,
        offset: int | None = None,
    ) -> list[ChatMessage]:
        records = (await asyncio.to_thread(self._selected, key, status))[offset or 0 :]
        return [_from_record(r) for r in (records if limit is None else records[:limit])]

    async def count_messages(self, key: str, status: MessageStatus | None = MessageStatus.ACTIVE) -> int:
        return len(await asyncio.to_thread(self._selected, key, status))

    async def add_message(
        self, key: str, message: ChatMessage, status: MessageStatus = MessageStatus.ACTIVE
    ) -> None:
        await self.add_messages(key, [message], status)

    def _append(self, key: str, messages: list[ChatMessage], status: MessageStatus) -> None:
        store = self.binding.store
        records = [_with_status(_to_record(m), status) for m in messages]
        with store.connection() as conn:
            append_messages(
                conn, store.owner, key, PLATFORM, records, embedder=store.embedder, project=self.project
            )

    async def add_messages(
        self, key: str, messages: list[ChatMessage], status: MessageStatus = MessageStatus.ACTIVE
    ) -> None:
        await asyncio.to_thread(self._append, key, messages, status)

    async def set_messages(
        self, key: str, messages: list[ChatMessage], status: MessageStatus = MessageStatus.ACTIVE
    ) -> None:
        records = [_with_status(_to_record(m), status) for m in messages]
        await asyncio.to_thread(self._in_transaction, key, lambda _: (records, None))

    async def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Delete the message at position ``idx`` of the session (any status) and return it."""

        def change(records: list[MessageRecord]) -> tuple[list[MessageRecord], MessageRecord | None]:
            if not 0 <= idx < len(records):
                return records, None
            return records[:idx] + records[idx + 1 :], records[idx]

        removed = await asyncio.to_thread(self._in_transaction, key, change)
        return _from_record(removed) if removed else None

    async def delete_messages(self, key: str, status: MessageStatus | None = None) -> None:
        await asyncio.to_thread(
            self._in_transaction,
            key,
            lambda records: ([r for r in records if status is not None and _status(r) != status.value], None),
        )

    async def delete_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        def change(records: list[MessageRecord]) -> tuple[list[MessageRecord], list[MessageRecord]]:
            oldest = [r for r in records if _status(r) == MessageStatus.ACTIVE.value][: max(n, 0)]
            return [r for r in records if not any(r is o for o in oldest)], oldest

        return [_from_record(r) for r in await asyncio.to_thread(self._in_transaction, key, change)]

    async def archive_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        def change(records: list[MessageRecord]) -> tuple[list[MessageRecord], list[MessageRecord]]:
            oldest = [r for r in records if _status(r) == MessageStatus.ACTIVE.value][: max(n, 0)]
            kept = [
                _with_status(r, MessageStatus.ARCHIVED) if any(r is o for o in oldest) else r for r in records
            ]
            return kept, oldest

        return [_from_record(r) for r in await asyncio.to_thread(self._in_transaction, key, change)]

    async def get_keys(self) -> list[str]:
        def keys() -> list[str]:
            store = self.binding.store
            with store.connection() as conn:
                return conversation_ids(conn, store.owner, PLATFORM)

        return await asyncio.to_thread(keys)


def _status(record: MessageRecord) -> str:
    return str((record.meta.get("llamaindex") or {}).get("status", MessageStatus.ACTIVE.value))


def _with_status(record: MessageRecord, status: MessageStatus) -> MessageRecord:
    shape = {k: v for k, v in (record.meta.get("llamaindex") or {}).items() if k != "status"}
    if status != MessageStatus.ACTIVE:
        shape["status"] = status.value
    return dataclasses.replace(record, meta={**record.meta, "llamaindex": shape})
