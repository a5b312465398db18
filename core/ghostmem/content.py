"""What a captured message keeps of what an application held: its blocks as JSON, inline media as references.

LangChain and LlamaIndex messages carry more than text: content blocks (text, images, audio, files), tool calls
and tool artifacts (often pydantic models with datetimes, enums, nested models). Live capture stores a message's
searchable text in the message row and everything else in its ``meta``, made JSON by pydantic's JSON mode here.
Media sent inline (base64 strings, ``data:`` URLs) are replaced by a reference — their SHA-256, size and media type
— so a screenshot does not put megabytes into the database; media given by URL or id keep their URL or id.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from pydantic_core import to_jsonable_python

INLINE_MIN_CHARS = 512  # a shorter base64 value is kept as it is
_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?:;[\w=-]+)*;base64,", re.IGNORECASE)
_INLINE_KEYS = frozenset({"base64", "data", "image", "audio", "video"})
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s_-]+$")


def reference(data: str, mime_type: str | None = None) -> dict[str, Any]:
    """What is kept of inline media: enough to recognise it, not the bytes."""
    ref: dict[str, Any] = {
        "omitted": "inline media",
        "sha256": hashlib.sha256(data.encode("utf-8", errors="replace")).hexdigest(),
        "chars": len(data),
    }
    if mime_type:
        ref["mime_type"] = mime_type
    return ref


def _strip_media(value: Any, key: str | None = None) -> Any:
    if isinstance(value, dict):
        mime = value.get("mime_type") or value.get("image_mimetype") or value.get("format")
        return {k: _strip_media(v, k) if not (k in _INLINE_KEYS and _inline(v)) else reference(v, mime)
                for k, v in value.items()}  # fmt: skip
    if isinstance(value, list):
        return [_strip_media(v) for v in value]
    if isinstance(value, str) and len(value) >= INLINE_MIN_CHARS and (found := _DATA_URL.match(value)):
        return reference(value, found["mime"])
    return value


def _inline(value: Any) -> bool:
    """A long string of base64 characters (the body of inline media)."""
    return (
        isinstance(value, str)
        and len(value) >= INLINE_MIN_CHARS
        and (_DATA_URL.match(value) is not None or _BASE64.match(value[:4096]) is not None)
    )


def to_json(value: Any) -> Any:
    """``value`` as JSON data (pydantic's JSON mode; what it cannot serialise becomes its ``repr``), inline media
    replaced by references."""
    return _strip_media(to_jsonable_python(value, fallback=repr, bytes_mode="base64"))


def is_reference(value: Any) -> bool:
    return isinstance(value, dict) and value.get("omitted") == "inline media" and "sha256" in value


def describe(kind: str, ref: dict[str, Any]) -> str:
    """A reference in words, for a framework that cannot hold a block without its bytes."""
    mime = f"{ref['mime_type']}, " if ref.get("mime_type") else ""
    return f"[{kind} not kept: {mime}sha256 {str(ref['sha256'])[:16]}, {ref.get('chars')} characters inline]"
