"""The embedded server's memory setting: a quarter of the machine, within bounds, or what the user says."""

from __future__ import annotations

import pytest
from ghostmem.db import server


@pytest.mark.parametrize(
    ("memory_mb", "expected"),
    [(256, "128MB"), (2048, "512MB"), (24 * 1024, "4096MB"), (256 * 1024, "4096MB")],
)
def test_shared_buffers_is_a_quarter_of_memory_within_bounds(
    monkeypatch: pytest.MonkeyPatch, memory_mb: int, expected: str
) -> None:
    monkeypatch.delenv("GHOSTMEM_SHARED_BUFFERS", raising=False)
    page = 4096
    values = {"SC_PAGE_SIZE": page, "SC_PHYS_PAGES": memory_mb * 2**20 // page}
    monkeypatch.setattr(server.os, "sysconf", lambda name: values[name])
    assert server.shared_buffers() == expected


def test_shared_buffers_can_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GHOSTMEM_SHARED_BUFFERS", "512MB")
    assert server.shared_buffers() == "512MB"
