"""LangChain messages as ghostmem message records and back, losing nothing a search or a replay needs.

A record's ``text`` is what search reads: the message's text parts, one per line. Its ``meta["langchain"]`` is
the rest of the message in LangChain's dict shape (``message_to_dict``) made JSON by
:func:`ghostmem.content.to_json`: content blocks in order (a plain string content is the text itself), tool calls, the tool artifact (a ghostmem result model comes back as its JSON), name, id,
usage; inline images become references. :func:`from_record` rebuilds the message from it.
"""

from __future__ import annotations

from typing import Any

from ghostmem.content import to_json
from ghostmem.records import MessageRecord, Role
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

ROLES: dict[str, Role] = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def text_of(message: BaseMessage) -> str:
    """The message's text parts (plain strings and ``text`` blocks), in order, one per line."""
    if isinstance(message.content, str):
        return message.content
    parts = [
        part if isinstance(part, str) else str(part.get("text") or "")
        for part in message.content
        if isinstance(part, str) or (isinstance(part, dict) and part.get("type") == "text")
    ]
    return "\n".join(p for p in parts if p)


def to_record(message: BaseMessage) -> MessageRecord:
    shape = message_to_dict(message)
    if isinstance(message.content, str):  # the text itself: kept once, in the record's (redacted) text
        shape["data"] = {k: v for k, v in shape["data"].items() if k != "content"}
    return MessageRecord(
        native_id="",
        role=ROLES.get(message.type, "meta"),
        text=text_of(message),
        raw_role=message.type,
        speaker=message.name,
        meta={"langchain": to_json(shape)},
    )


def from_record(record: MessageRecord) -> BaseMessage:
    shape: dict[str, Any] = record.meta.get("langchain") or {
        "type": "human" if record.role == "user" else "ai",
        "data": {"content": record.text},
    }
    data = dict(shape.get("data") or {})
    data.setdefault("content", record.text)  # a plain-text message
    return messages_from_dict([{"type": shape["type"], "data": data}])[0]
