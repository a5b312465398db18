"""The ``ghostmem`` command run as a user runs it: a new process, its output captured (through pipes, or on a
pseudo-terminal as at an interactive shell)."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from dataclasses import dataclass

_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def ghostmem(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``ghostmem ARGS`` in a new process with ``env`` added to this one's environment."""
    return subprocess.run(
        [sys.executable, "-m", "ghostmem.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


@dataclass(frozen=True, slots=True)
class TerminalRun:
    returncode: int
    raw: str  # everything written to the terminal, escape sequences included
    frames: list[str]  # every state a line was drawn in (escapes removed): what a person saw go by
    lines: list[str]  # what stays on the screen: each line's last state


def ghostmem_on_terminal(*args: str, env: dict[str, str], timeout: float = 300) -> TerminalRun:
    """``ghostmem ARGS`` with stdin, stdout and stderr on a pseudo-terminal (``env`` replaces the environment)."""
    import pty

    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ghostmem.cli", *args], stdin=child, stdout=child, stderr=child, env=env
    )
    os.close(child)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(main, 1 << 16)
                except OSError:  # the child closed its side
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            elif proc.poll() is not None:
                break
        returncode = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()
    raw = b"".join(chunks).decode("utf-8", errors="replace")
    text = _ESCAPE.sub("", raw).replace("\r\n", "\n")
    frames, lines = [], []
    for line in text.split("\n"):
        states = [s for s in line.split("\r") if s.strip()]
        frames += states
        lines.append(states[-1] if states else "")
    return TerminalRun(returncode, raw, frames, lines)
