"""Bounded readers for the files platforms write: JSON lines, and JSON documents streamed record by record.

A hostile or broken file must never stop an import, exhaust memory or take quadratic time. So every record — a JSONL
line, one element of an exported array, a whole session document — is found in one linear pass over the bytes,
at most :data:`MAX_RECORD_BYTES` of it is held, nesting deeper than :data:`MAX_DEPTH` is refused before anything is
decoded (so no parser recursion can run away), bytes that are not UTF-8 are reported (and replaced by U+FFFD), and
a record that cannot be read is one :class:`Record` with its ``error``; the reader then goes on with the next one.

The document scanner only tracks strings and brackets (a regex consumes each whole string at C speed); the JSON
itself is decoded per record by :func:`json.loads`, which also rejects what the scanner let through malformed.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

MAX_RECORD_BYTES = 64 << 20  # one line, one exported conversation, one session document
MAX_DEPTH = (
    100  # platforms nest ~10 levels; json and the parsers recurse, so deeper input is refused up front
)
_CHUNK = 1 << 16

# Everything up to the next bracket outside strings (whole strings included): the scan stops only at brackets,
# at the opening quote of a string that runs past the buffer, or at the buffer's end.
_TO_BRACKET = re.compile(rb'(?:[^"\[\]{}]+|"[^"\\]*(?:\\[\s\S][^"\\]*)*")*')
# The rest of a string (stops before its closing quote, or before a backslash that is the buffer's last byte).
_STRING_REST = re.compile(rb'[^"\\]*(?:\\[\s\S][^"\\]*)*')
_VALUE_START = re.compile(rb"[^\s,]")
_SCALAR_END = re.compile(rb"[\s,\]]")
_DECODER = json.JSONDecoder()
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
_FIRST_WINDOW = 256


@dataclass(slots=True)
class Record:
    """One JSON value read from a file: its ``value`` when it decoded, else ``error`` (then it is skipped)."""

    number: int  # 1-based line where it starts
    end: int  # byte offset just after it
    index: int = 0  # position in the document's root array (0 for a JSONL line or a single object)
    value: Any = None
    error: str | None = None
    warning: str | None = None  # read, but repaired: bytes that were not UTF-8
    partial: bool = False  # the last line, still without its newline: not consumed, read again next time

    def consume(self, state: dict[str, Any]) -> None:
        """Record in a parser's state that the file was read up to and including this line."""
        if not self.partial:
            state["offset"], state["line"] = self.end, self.number


def deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest in ``value`` more than ``limit`` levels (iterative: no recursion to run away)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def _too_deep(raw: bytes, value: Any, floor: int) -> bool:
    # a record with fewer opening brackets than the limit cannot nest deeper (two counts at C speed decide most)
    if raw.count(b"[") + raw.count(b"{") + floor <= MAX_DEPTH:
        return False
    return isinstance(value, dict | list) and deeper_than(value, MAX_DEPTH - floor)


def decode(raw: bytes, *, floor: int = 0) -> tuple[Any, str | None, str | None]:
    """(value, error, warning) of one record's bytes, within the size and depth limits.

    ``floor``: how deep the record already stands in its document (1 for an element of the root array).
    """
    if len(raw) > MAX_RECORD_BYTES:
        return None, too_large(len(raw)), None
    warning = None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", errors="replace")
        warning = f"bytes that are not UTF-8 (the first at byte {exc.start} of the record) replaced by U+FFFD"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:  # one problem per record: the malformed JSON, not also its bytes
        return None, f"malformed JSON ({exc.msg})", None
    except RecursionError:
        return None, too_deep(), None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        return None, f"malformed JSON ({exc})", None
    if _too_deep(raw, value, floor):
        return None, too_deep(), None
    return value, None, warning


def too_large(size: int) -> str:
    return f"record of {size / 2**20:.0f} MB is larger than the {MAX_RECORD_BYTES >> 20} MB limit; skipped"


def too_deep() -> str:
    return f"nested more than {MAX_DEPTH} levels deep; skipped"


def read_lines(fh: IO[bytes], *, offset: int = 0, first_line: int = 1) -> Iterator[Record]:
    """JSON lines from ``offset`` on; a final line without a newline comes as a ``partial`` error (retried later).

    A line longer than :data:`MAX_RECORD_BYTES` is skipped without being held; one that is not JSON comes with its
    error, so the caller reports it and goes on.
    """
    fh.seek(offset)
    number, pos = first_line - 1, offset
    while raw := fh.readline(MAX_RECORD_BYTES + 1):
        size = len(raw)
        oversize = size > MAX_RECORD_BYTES and not raw.endswith(b"\n")
        while oversize and not raw.endswith(b"\n"):
            raw = fh.readline(_CHUNK)  # the rest of an oversized line, read and dropped
            if not raw:
                break
            size += len(raw)
        if not raw.endswith(b"\n"):  # a live session is still writing it, or the file was cut short
            if oversize or raw.strip():
                yield Record(number + 1, pos, error="incomplete last line; read again once it is complete",
                             partial=True)  # fmt: skip
            return
        number += 1
        pos += size
        if oversize:
            yield Record(number, pos, error=too_large(size))
            continue
        stripped = raw.strip()
        if stripped:
            yield Record(number, pos, 0, *decode(stripped))


def read_document(fh: IO[bytes], *, budget: int | None = None) -> Iterator[Record]:
    """The records of a JSON document: each element of a root array, or the root object as the one record.

    Linear in the file's size, holding at most one record (within :data:`MAX_RECORD_BYTES`). A truncated or
    malformed document ends with an error record; every record before it was yielded. ``budget`` stops the scan
    after that many bytes (content detection reads only the start).
    """
    scanner = _Scanner(fh, budget)
    yield from scanner.records()


class _Scanner:
    """The state of one pass over a document: a buffer window, the record being collected, its depth."""

    def __init__(self, fh: IO[bytes], budget: int | None) -> None:
        self._fh = fh
        self._budget = budget
        self.buf = b""
        self.i = 0  # scan position in buf
        self.base = 0  # file offset of buf[0]
        self.lines = 0  # newlines before buf[0]
        self.eof = False
        self.start = -1  # where the record being collected starts in buf (-1: none)
        self.parts: list[bytes] = []
        self.size = 0
        self.counted = 0  # newlines in buf before self.counted_to (line numbers are counted once, forwards)
        self.counted_to = 0
        self.window = _FIRST_WINDOW  # how many bytes the fast path decodes at first (twice the last record)

    def refill(self) -> bool:
        """Move the window past what was scanned; False at the end of the file (or of the budget)."""
        done = self.buf[: self.i]
        if self.start >= 0:
            self._keep(self.buf[self.start : self.i])
            self.start = 0
        self.lines += done.count(b"\n")
        self.base += self.i
        self.counted = self.counted_to = 0
        if self.eof or (self._budget is not None and self.base >= self._budget):
            self.buf, self.i = self.buf[self.i :], 0
            return False
        chunk = self._fh.read(_CHUNK)
        self.eof = not chunk
        self.buf, self.i = self.buf[self.i :] + chunk, 0
        return bool(chunk)

    def fill(self, want: int) -> None:
        """Make the buffer hold ``want`` bytes from the scan position on (fewer at the end of the file)."""
        need = want - (len(self.buf) - self.i)
        if need <= 0 or self.eof or (self._budget is not None and self.base + len(self.buf) >= self._budget):
            return
        self.line_at(self.i)
        self.lines += self.counted
        self.base += self.i
        self.counted = self.counted_to = 0
        more = self._fh.read(max(need, _CHUNK))
        self.eof = not more
        self.buf, self.i = self.buf[self.i :] + more, 0

    def fast(self, index: int, floor: int) -> Record | None:
        """The object, array or string at the scan position decoded by :mod:`json` at C speed, or None when it
        is not valid within the limits (then the scanner walks it and says what is wrong)."""
        window = self.window
        while True:
            self.fill(window)
            head = self.buf[self.i : self.i + window]
            try:  # not final: a character the window cuts in two is no error
                text, clean = codecs.utf_8_decode(head, "strict", False)[0], True
            except UnicodeDecodeError:
                text, clean = head.decode("utf-8", errors="surrogateescape"), False
            try:
                value, end = _DECODER.raw_decode(text)
            except RecursionError:
                return None
            except ValueError:
                if window >= MAX_RECORD_BYTES or len(self.buf) - self.i < window:
                    return None  # malformed, truncated or too large: the scanner finds its end
                window *= 2
                continue
            size = len(text[:end].encode("utf-8", errors="surrogateescape")) if not text.isascii() else end
            if size > MAX_RECORD_BYTES:
                return None
            raw = self.buf[self.i : self.i + size]
            number = self.line_at(self.i)
            self.i += size
            self.window = max(_FIRST_WINDOW, 2 * size)
            if not clean and _ESCAPED_BYTE.search(text, 0, end) is not None:  # bytes that are not UTF-8
                return Record(number, self.base + self.i, index, *decode(raw, floor=floor))
            if _too_deep(raw, value, floor):
                return Record(number, self.base + self.i, index, error=too_deep())
            return Record(number, self.base + self.i, index, value)

    def _keep(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.size <= MAX_RECORD_BYTES:
            self.parts.append(piece)
        else:
            self.parts.clear()  # too large: only its length is still counted

    def line_at(self, index: int) -> int:
        if index > self.counted_to:
            self.counted += self.buf.count(b"\n", self.counted_to, index)
            self.counted_to = index
        return self.lines + self.counted + 1

    def begin(self, at: int) -> int:
        self.start, self.parts, self.size = at, [], 0
        return self.line_at(at)

    def finish(self, number: int, index: int, *, too_deep_: bool, floor: int = 0) -> Record:
        self._keep(self.buf[self.start : self.i])
        raw, size = b"".join(self.parts), self.size
        self.start, self.parts, self.size = -1, [], 0
        end = self.base + self.i
        if size > MAX_RECORD_BYTES:
            return Record(number, end, index, error=too_large(size))
        if too_deep_:
            return Record(number, end, index, error=too_deep())
        return Record(number, end, index, *decode(raw, floor=floor))

    def next_value(self) -> int:
        """Position of the next value's first byte (skipping whitespace and commas), -1 at the end."""
        while True:
            m = _VALUE_START.search(self.buf, self.i)
            if m is not None:
                self.i = m.start()
                return self.i
            self.i = len(self.buf)
            if not self.refill():
                return -1

    def records(self) -> Iterator[Record]:
        if self.next_value() < 0:
            yield Record(1, 0, error="empty document")
            return
        if self.buf.startswith(b"\xef\xbb\xbf", self.i):  # a UTF-8 byte order mark
            self.i += 3
            if self.next_value() < 0:
                yield Record(1, 0, error="empty document")
                return
        first = self.buf[self.i : self.i + 1]
        if first == b"{":
            yield self.fast(0, 0) or self.container(0, floor=0)
            return
        if first != b"[":
            yield Record(self.line_at(self.i), 0, error="not a JSON object or array")
            return
        self.i += 1
        index = 0
        while True:
            if self.next_value() < 0:
                yield Record(self.line_at(self.i), self.base + self.i, index,
                             error="the document ends inside its array (truncated?)")  # fmt: skip
                return
            c = self.buf[self.i : self.i + 1]
            if c == b"]":
                return
            if c in (b"{", b"[", b'"'):
                record = self.fast(index, 1) or self.container(index, floor=1)
            else:
                record = self.scalar(index)
            yield record
            if record.error is not None and record.error.startswith("the document ends"):
                return
            index += 1

    def scalar(self, index: int) -> Record:
        number = self.begin(self.i)
        while (m := _SCALAR_END.search(self.buf, self.i)) is None:
            self.i = len(self.buf)
            if not self.refill():
                break
        if m is not None:
            self.i = m.start()
        return self.finish(number, index, too_deep_=False)

    def container(self, index: int, *, floor: int) -> Record:
        """The value starting at the scan position (an object, array or string), up to its end."""
        number = self.begin(self.i)
        depth = deepest = 0
        in_string = self.buf[self.i] == 0x22  # a string on its own (an element of the root array)
        self.i += in_string
        while True:
            if in_string:
                m = _STRING_REST.match(self.buf, self.i)
                assert m is not None  # the pattern matches the empty string
                self.i = m.end()
                if self.i < len(self.buf) and self.buf[self.i] == 0x22:  # the closing quote
                    self.i += 1
                    in_string = False
                    if depth == 0:
                        return self.finish(number, index, too_deep_=False)
                    continue
            else:
                m = _TO_BRACKET.match(self.buf, self.i)
                assert m is not None
                self.i = m.end()
                if self.i < len(self.buf):
                    c = self.buf[self.i]
                    self.i += 1
                    if c == 0x22:  # a string that runs past the buffer
                        in_string = True
                    elif c in (0x5B, 0x7B):  # [ {
                        depth += 1
                        deepest = max(deepest, depth)
                    else:
                        depth -= 1
                        if depth == 0:
                            return self.finish(
                                number, index, too_deep_=floor + deepest > MAX_DEPTH, floor=floor
                            )
                    continue
            if not self.refill():
                self.start, self.parts, self.size = -1, [], 0
                return Record(number, self.base + self.i, index,
                              error="the document ends inside this record (truncated?)")  # fmt: skip
