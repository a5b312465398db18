"""An application's login role: what an operator grants it so that it can use ghostmem without migrating.

The administrator migrates as the role that owns the schemas; ``grant_app`` (``ghostmem grant-app ROLE``) gives an
application's login exactly what the personal-memory statements need and membership in the runtime role (ghost
memories), through ``ghostmem.grant_app`` of migration ``062`` (docs/ghosts.md, "Roles and privileges").
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection, errors

from ghostmem.errors import GhostMemError, InvalidArgument


def grant_app(conn: Connection[Any], role: str, runtime_role: str, *, read_only: bool = False) -> None:
    """Let the login ``role`` read (and unless ``read_only``, write) personal memory and use ghost memories."""
    _operator(conn, "SELECT ghostmem.grant_app(%s, %s, %s)", (role, runtime_role, read_only))


def revoke_app(conn: Connection[Any], role: str, runtime_role: str) -> None:
    """Take back everything ``grant_app`` gave ``role``."""
    _operator(conn, "SELECT ghostmem.revoke_app(%s, %s)", (role, runtime_role))


def _operator(conn: Connection[Any], statement: str, params: tuple[str | bool, ...]) -> None:
    try:
        with conn.transaction():
            conn.execute(statement, params)
    except errors.UndefinedObject as exc:
        raise InvalidArgument(str(exc.diag.message_primary or exc)) from None
    except errors.InsufficientPrivilege:
        raise GhostMemError(
            "only the role that owns ghostmem's schemas (the one that ran `ghostmem migrate`) may grant an "
            "application its privileges"
        ) from None
