"""The marker rule, by itself: every invisible character Unicode knows is looked through, look-alikes are not."""

from __future__ import annotations

import sys
import unicodedata

from ghostmem.store import has_marker


def test_every_format_and_control_character_inside_the_marker_is_looked_through() -> None:
    hidden = [
        chr(c)
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in ("Cf", "Cc") and not chr(c).isspace()
    ]
    assert len(hidden) > 150
    missed = [f"U+{ord(ch):04X}" for ch in hidden if not has_marker(f"ghost{ch}mem:ign{ch}ore")]
    assert missed == []


def test_case_width_and_spacing_variants_match_and_near_misses_do_not() -> None:
    assert (
        has_marker("GHOSTMEM:IGNORE")
        and has_marker("x ghostmem :  ignore y")
        and has_marker("ghostmem:\nignore")
    )
    assert has_marker("ｇｈｏｓｔｍｅｍ：ｉｇｎｏｒｅ")
    assert (
        not has_marker("ghostmem ignore")
        and not has_marker("ghost mem:ignore")
        and not has_marker("ghostmem:ign")
    )
    assert not has_marker("ghostmem:ign ore")
