"""An application's login role: what an operator grants it so that it can use ghostmem without migrating.

The administrator migrates as the role that owns the schemas; ``grant_app`` (``ghostmem grant-app ROLE``) gives an
application's login exactly what the personal-memory statements need and membership in the runtime role (ghost
memories), through ``ghostmem.grant_app`` of migration ``062`` (``220`` keeps the writes of the known-common words
from it) (docs/ghosts.md, "Roles and privileges").
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from ghostmem.errors import PermissionDenied, translated


def grant_app(conn: Connection[Any], role: str, runtime_role: str, *, read_only: bool = False) -> None:
    """Let the login ``role`` read (and unless ``read_only``, write) personal memory and use ghost memories."""
    operator(
        conn,
        "SELECT ghostmem.grant_app(%s, %s, %s)",
        (role, runtime_role, read_only),
        "grant an application its privileges",
    )


def revoke_app(conn: Connection[Any], role: str, runtime_role: str) -> None:
    """Take back everything ``grant_app`` gave ``role``."""
    operator(
        conn,
        "SELECT ghostmem.revoke_app(%s, %s)",
        (role, runtime_role),
        "take an application's privileges back",
    )


def operator(
    conn: Connection[Any], statement: str, params: tuple[str | bool | None, ...], what: str
) -> list[tuple[Any, ...]]:
    """Run an operator's statement (one of ghostmem's functions for operators); the server's refusals become one
    sentence each (``ghostmem.errors``' table: an unknown role or a bad value is an :class:`InvalidArgument`); a
    role that does not own the schemas is told who may ``what``."""
    try:
        with translated(), conn.transaction():
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description else []
    except PermissionDenied:
        raise PermissionDenied(
            f"only the role that owns ghostmem's schemas (the one that ran `ghostmem migrate`) may {what}"
        ) from None
