"""The embedded server's memory setting: a quarter of the machine (or of a container's limit), within bounds, or
what the user says."""

from __future__ import annotations

from pathlib import Path

import pytest
from ghostmem.db import server

PAGE = 4096


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No GHOSTMEM_SHARED_BUFFERS, and cgroup limit files under ``tmp_path`` (absent until a test writes one)."""
    monkeypatch.delenv("GHOSTMEM_SHARED_BUFFERS", raising=False)
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    monkeypatch.setattr(server, "_CGROUP_MEMORY_LIMITS", (v2, v1))
    return tmp_path


def _physical(monkeypatch: pytest.MonkeyPatch, memory_mb: int) -> None:
    values = {"SC_PAGE_SIZE": PAGE, "SC_PHYS_PAGES": memory_mb * 2**20 // PAGE}
    monkeypatch.setattr(server.os, "sysconf", lambda name: values[name])


@pytest.mark.parametrize(
    ("memory_mb", "expected"),
    [(256, "128MB"), (2048, "512MB"), (24 * 1024, "4096MB"), (256 * 1024, "4096MB")],
)
def test_shared_buffers_is_a_quarter_of_memory_within_bounds(
    monkeypatch: pytest.MonkeyPatch, machine: Path, memory_mb: int, expected: str
) -> None:
    _physical(monkeypatch, memory_mb)
    assert server.shared_buffers() == expected


def test_a_container_limit_counts_as_the_memory(monkeypatch: pytest.MonkeyPatch, machine: Path) -> None:
    _physical(monkeypatch, 64 * 1024)
    (machine / "memory.max").write_text("max\n")  # cgroup v2 without a limit
    (machine / "memory.limit_in_bytes").write_text(f"{2 * 2**30}\n")  # cgroup v1: 2GB
    assert server.shared_buffers() == "512MB"
    (machine / "memory.max").write_text(f"{1 * 2**30}\n")  # cgroup v2: 1GB
    assert server.shared_buffers() == "256MB"


def test_shared_buffers_can_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GHOSTMEM_SHARED_BUFFERS", "512MB")
    assert server.shared_buffers() == "512MB"
