"""Japanese words for the lexical index (SudachiPy): content words as normalised forms, particles dropped."""

from __future__ import annotations

import pytest
from ghostmem import japanese

pytestmark = pytest.mark.skipif(not japanese.available(), reason="needs the [ja] extra (SudachiPy)")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "マーラーの交響曲を聴きました。",
            ["マーラー", "交響", "曲", "聞く"],
        ),  # 聴き -> 聞く; の, を, ました dropped
        ("昨日の会話をまとめてください", ["下さる", "会話", "昨日", "纏める"]),
        ("本を読んだ", ["本", "読む"]),
        ("東京都に住んでいる", ["住む", "居る", "東京", "都"]),
    ],
)
def test_known_sentences(text: str, expected: list[str]) -> None:
    assert japanese.terms(text) == [japanese.PREFIX + word for word in expected]


def test_text_without_japanese_has_no_words() -> None:
    assert japanese.terms("plain English, fibonacci.py") is None
    assert japanese.terms("の、を。") is None  # particles and symbols only


def test_mixed_text_keeps_only_the_japanese_words() -> None:
    assert japanese.terms("deploy の設定を確認 v2") == ["ja:確認", "ja:設定"]


def test_a_huge_text_without_line_breaks_is_cut_not_refused() -> None:
    # SudachiPy refuses inputs above ~49 KB; 300,000 characters (900 KB) in one line must still be indexed
    found = japanese.terms("日本語の文章です" * 37_500)
    assert found is not None and "ja:文章" in found
