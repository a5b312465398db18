"""The ``ghostmem`` command run as a user runs it: a new process, its output captured."""

from __future__ import annotations

import os
import subprocess
import sys


def ghostmem(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``ghostmem ARGS`` in a new process with ``env`` added to this one's environment."""
    return subprocess.run(
        [sys.executable, "-m", "ghostmem.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )
