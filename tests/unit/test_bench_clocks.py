"""bench.peers' statement clock: how it pairs the starts and stops a driver hook reports, and what ``take`` drops."""

from __future__ import annotations

import pytest

from bench import peers


def test_a_statement_clock_pairs_starts_and_stops_in_order_and_take_resets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    monkeypatch.setattr(peers.time, "perf_counter", lambda: now[0])
    clock = peers.StatementClock()
    clock.start()  # statement 1 at t = 0
    now[0] = 2.0
    clock.start()  # statement 2 at t = 2
    now[0] = 3.0
    clock.stop()  # ends statement 1, the first started: 3 s
    clock.add(0.5)  # a span the hook measured itself
    assert clock.take() == 3.5 and clock.count == 2
    now[0] = 10.0
    clock.stop()  # statement 2 was still open at take: dropped, not added to the next figure
    assert clock.take() == 0.0
    clock.stop()  # a stop without a start adds nothing
    assert clock.take() == 0.0
