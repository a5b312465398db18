"""Japanese words for the lexical index, from morphological analysis (SudachiPy, the ``[ja]`` extra).

The database indexes every CJK character and character pair (migration 020), which finds Japanese text without a
dictionary. Words add what pairs cannot: a long word (``マーラー``, ``対流圏``) is one rare lexeme instead of
several common pairs, and inflected forms meet at their normalised form (``聴き`` and ``聞いた`` are both ``聞く``).
:func:`terms` gives the content words of a text — particles, auxiliary verbs, symbols and blanks dropped — each
as its normalised form with the :data:`PREFIX` that keeps it apart from the character grams. The write path stores
them in ``messages.morphemes`` (the tsv trigger adds them, migration 091) and the search adds the query's to its
lexemes, so both sides use the same function. Without SudachiPy both sides get none and the character grams work
alone.
"""

from __future__ import annotations

import functools
from typing import Any

from ghostmem.text import CJK

PREFIX = "ja:"
MAX_CHARS = 200_000  # as ghostmem.lexemes: the rest of a huge text is not indexed
# Sudachi's first part-of-speech level of words that carry no content.
_FUNCTION_POS = frozenset({"助詞", "助動詞", "補助記号", "空白", "記号"})
_CHUNK = 10_000  # SudachiPy refuses inputs above ~49 KB; texts are cut at line breaks into pieces this long


@functools.cache
def _tokenizer() -> Any:
    try:
        from sudachipy import Dictionary, SplitMode
    except ImportError:
        return None
    # The shortest units (mode A): on the JSQuAD tuning split they beat modes B and C (recall@1 0.914 / 0.907 /
    # 0.904), since a compound's parts also match text that uses them apart.
    return Dictionary(dict="core").tokenizer(mode=SplitMode.A)


def available() -> bool:
    """Whether SudachiPy and its dictionary are installed."""
    return _tokenizer() is not None


def _pieces(text: str) -> list[str]:
    pieces: list[str] = []
    while text:
        cut = text.rfind("\n", 0, _CHUNK) + 1 if len(text) > _CHUNK else len(text)
        pieces.append(text[: cut or _CHUNK])
        text = text[cut or _CHUNK :]
    return pieces


def terms(text: str) -> list[str] | None:
    """The prefixed normalised content words of the Japanese in ``text``; None when it has none (or without
    SudachiPy)."""
    tokenizer = _tokenizer()
    if tokenizer is None or not CJK.search(text):
        return None
    found: set[str] = set()
    for piece in _pieces(text[:MAX_CHARS]):
        for m in tokenizer.tokenize(piece):
            if m.part_of_speech()[0] not in _FUNCTION_POS and CJK.search(m.surface()):
                found.add(PREFIX + m.normalized_form())
    return sorted(found) or None
