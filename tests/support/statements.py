"""The SQL statements an operation's program sends, recorded as they go (for tests that read or EXPLAIN them)."""

from __future__ import annotations

import re
from typing import Any

from ghostmem.program import Params, Program, Query
from psycopg import Connection

_PARAMETER = re.compile(r"%\((\w+)\)s")


def recording(program: Program[Any], conn: Connection[Any], seen: list[tuple[str, Params]]) -> Program[Any]:
    """``program`` as it is, with the text (as sent on ``conn``) and parameters of each composed statement it
    sends appended to ``seen``."""
    reply: Any = None
    try:
        while True:
            step = program.send(reply)
            if isinstance(step, Query) and not isinstance(step.text, bytes | str):
                seen.append((step.text.as_string(conn), step.params))
            reply = yield step
    except StopIteration as done:
        return done.value


def generic_plan(conn: Connection[Any], text: str) -> str:
    """``EXPLAIN (GENERIC_PLAN)`` of a statement recorded by :func:`recording`: the plan a prepared statement gets
    with ``plan_cache_mode = force_generic_plan`` (its ``%(name)s`` parameters become ``$1``, ``$2``, ...)."""
    names: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    numbered = _PARAMETER.sub(placeholder, text)
    rows = conn.execute(f"EXPLAIN (GENERIC_PLAN, COSTS OFF) {numbered}".encode())
    return "\n".join(str(r[0]) for r in rows)
