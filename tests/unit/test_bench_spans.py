"""bench.scale's server time: statements that ran at the same time on two connections count once."""

from __future__ import annotations

import pytest

from bench.scale import TimedConnection


@pytest.mark.parametrize(
    ("spans", "covered"),
    [
        ([], 0.0),
        ([(0.0, 1.0), (2.0, 3.5)], 2.5),  # one after the other: the sum
        ([(0.0, 2.0), (0.5, 3.0)], 3.0),  # two legs overlapping: their union
        ([(0.0, 4.0), (1.0, 2.0), (5.0, 6.0)], 5.0),  # one inside another
        ([(1.0, 2.0), (0.0, 1.0)], 2.0),  # in any order, touching
    ],
)
def test_statements_at_the_same_time_count_once(spans: list[tuple[float, float]], covered: float) -> None:
    timed = TimedConnection(None, list(spans))  # type: ignore[arg-type]
    assert timed.covered() == pytest.approx(covered)
