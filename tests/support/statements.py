"""The SQL statements an operation's program sends, recorded as they go (for tests that read or EXPLAIN them)."""

from __future__ import annotations

from typing import Any

from ghostmem.program import Params, Program, Query
from psycopg import Connection


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
