"""Live capture of LlamaIndex conversations into personal memory (platform ``llamaindex``).

Each chat store key is a conversation (its ``conv_id``); every change is committed and embedded at once, so
``search_personal_memory`` and ``list_recent_conversations`` find it right after.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ghostmem import GhostMem
from ghostmem.binding import Binding, Closes
from ghostmem.capture import (
    append_messages,
    conversation_ids,
    delete_conversation,
    load_messages,
    lock_conversation,
    save_messages,
)
from ghostmem.content import describe, is_reference, to_json
from ghostmem.embed import Embedder
from ghostmem.records import MessageRecord, Platform, Role
from llama_index.core.llms import ChatMessage, MessageRole, TextBlock
from llama_index.core.storage.chat_store.base import BaseChatStore
from psycopg import Connection
from pydantic import ConfigDict, Field

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


class GhostMemChatStore(Closes, BaseChatStore):
    """A LlamaIndex chat store kept in ghostmem's personal memory (use it with ``ChatMemoryBuffer``).

    Example::

        store = GhostMemChatStore(GhostMem(), owner="alice", project="webapp")
        memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="support-42")

    Args:
        store: a :class:`~ghostmem.GhostMem`, a DSN, or ``None`` (embedded server / ``GHOSTMEM_DSN``).
        owner: whose memory.
        project: the project these conversations are about.
    """

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
        super().__init__(binding=binding, project=project)  # type: ignore[call-arg]  # pydantic fields

    @classmethod
    def class_name(cls) -> str:
        return "GhostMemChatStore"

    def _records(self, key: str) -> list[MessageRecord]:
        store = self.binding.store
        with store.connection() as conn:
            return load_messages(conn, store.owner, key)

    def _save(self, conn: Connection[Any], key: str, records: list[MessageRecord]) -> None:
        store = self.binding.store
        save_messages(
            conn, store.owner, key, PLATFORM, records, embedder=store.embedder, project=self.project
        )

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        with self.binding.store.connection() as conn:
            self._save(conn, key, [_to_record(m) for m in messages])

    def get_messages(self, key: str) -> list[ChatMessage]:
        return [_from_record(r) for r in self._records(key)]

    def add_message(self, key: str, message: ChatMessage) -> None:
        store = self.binding.store
        with store.connection() as conn:
            append_messages(
                conn,
                store.owner,
                key,
                PLATFORM,
                [_to_record(message)],
                embedder=store.embedder,
                project=self.project,
            )

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        store = self.binding.store
        with store.connection() as conn:
            lock_conversation(conn, store.owner, key)
            records = load_messages(conn, store.owner, key)
            delete_conversation(conn, store.owner, key)
        return [_from_record(r) for r in records] or None

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        return self._remove(key, lambda n: idx)

    def delete_last_message(self, key: str) -> ChatMessage | None:
        return self._remove(key, lambda n: n - 1)

    def _remove(self, key: str, position: Callable[[int], int]) -> ChatMessage | None:
        """Remove one message (its index computed from the current length) in one locked transaction."""
        store = self.binding.store
        with store.connection() as conn:
            lock_conversation(conn, store.owner, key)
            records = load_messages(conn, store.owner, key)
            idx = position(len(records))
            if not 0 <= idx < len(records):
                return None
            removed = records.pop(idx)
            self._save(conn, key, records)
        return _from_record(removed)

    def get_keys(self) -> list[str]:
        store = self.binding.store
        with store.connection() as conn:
            return conversation_ids(conn, store.owner, PLATFORM)


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
