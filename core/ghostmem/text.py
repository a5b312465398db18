"""Which characters are CJK: the scripts written without spaces between words (kana, Han, Hangul), which search and
enrichment cut into character grams instead of words.

The database's ``ghostmem.cjk_grams`` (migration 020, unchangeable once landed) spells the same ranges in SQL; a
test checks that the function the database runs agrees with :data:`CJK_RANGES`.
"""

from __future__ import annotations

import re

# Hiragana and katakana, CJK extension A, CJK unified ideographs, Hangul syllables, CJK compatibility ideographs.
CJK_RANGES = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
CJK = re.compile(f"[{CJK_RANGES}]")
