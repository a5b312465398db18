"""Which characters are CJK: the scripts written without spaces between words (kana, Han, Hangul), which search and
enrichment cut into character grams instead of words; and which characters a terminal must never receive raw.

The database's ``ghostmem.cjk_grams`` (migration 020, unchangeable once landed) spells the same ranges in SQL; a
test checks that the function the database runs agrees with :data:`CJK_RANGES`.
"""

from __future__ import annotations

import re

# Hiragana and katakana, CJK extension A, CJK unified ideographs, Hangul syllables, CJK compatibility ideographs.
CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
CJK = re.compile(f"[{CJK_RANGES}]")

# What a terminal acts on instead of showing: C0 controls but newline and tab (ESC starts CSI/OSC sequences, BEL,
# backspace and carriage return overwrite), DEL, C1 controls (U+009B is CSI by itself), and the bidirectional
# overrides, embeddings and isolates that make text read in another order than it is stored (Trojan Source).
TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` safe to print to a terminal: each control character above is shown as its escape (``\\x1b``,
    ``\\u202e``) instead of acting; newlines and tabs stay."""
    return TERMINAL_CONTROLS.sub(lambda m: _escape(ord(m.group())), text)


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
