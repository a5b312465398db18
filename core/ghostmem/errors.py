"""The one error hierarchy of ghostmem, and the one table that turns database errors into it.

Every error a user or a model can act on is a :class:`GhostMemError` whose message is one sentence saying what
went wrong and what to do. Bad arguments to an operation are :class:`InvalidArgument` (also a ``ValueError``). A
message that names an operation or an argument is given as parts (:mod:`ghostmem.words`): ``str(error)`` says it in
the tools' words, :meth:`GhostMemError.say` in a surface's own (the ``ghostmem`` command's flags and commands).

Errors of the database driver are translated here, once: :func:`translated` looks them up in
:data:`SQLSTATE_ERRORS` (by SQLSTATE, then its class) and :data:`TYPE_ERRORS` (by exception type). It wraps every
connection ghostmem hands out (``ghostmem.db.checkout``, which every operation, maintenance job and capture call of
the client goes through, and the client's own connections for long jobs), the program drivers
(:func:`ghostmem.program.run_sync` / ``run_async``) and the operator paths on raw connections. A connection that
breaks (the server stopped, restarted or was killed) is one :class:`DatabaseUnavailable` sentence. An error the
tables do not list is one :class:`DatabaseError` sentence with the server's reason and SQLSTATE: a model calling a
tool gets a sentence, never an exception that ends its run, while the psycopg error stays its cause (a bug to fix
shows in the traceback of whoever logs it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from ghostmem.words import TOOL_WORDS, Part, Words


class GhostMemError(Exception):
    """Base class of every error ghostmem raises on purpose; its message is text and :mod:`ghostmem.words` terms."""

    def __init__(self, *parts: Part) -> None:
        self.parts = parts
        super().__init__(TOOL_WORDS.say(*parts))

    def say(self, words: Words) -> str:
        """The message in ``words`` (``str(error)`` is the tools' vocabulary)."""
        return words.say(*self.parts)


class InvalidArgument(GhostMemError, ValueError):
    """An operation was called with an argument it cannot accept; the message says which and why."""


class NotFound(GhostMemError, LookupError):
    """A conversation or memory id that does not exist for this owner."""


class DatabaseUnavailable(GhostMemError):
    """The Postgres server cannot be reached, or lacks something ghostmem needs (an extension, a role)."""


class PermissionDenied(GhostMemError, PermissionError):
    """The database refused the connecting role something (a missing privilege, a project it may not claim)."""


class DatabaseError(GhostMemError):
    """The database did not carry out a call: it cancelled it (a statement or lock timeout), rolled it back (a
    deadlock, a serialization failure, a standby's recovery conflict), or failed in a way ghostmem does not expect
    (the message has the server's reason and SQLSTATE)."""


class SchemaMismatch(GhostMemError):
    """The database was created for another embedding dimension or a newer ghostmem, or is behind this one and the
    connecting role may not migrate it."""


# -- database errors ----------------------------------------------------------------------------------------------

_LOST = (
    "lost the connection to Postgres ({reason}): once the server is back, run it again (an interrupted import "
    "resumes where it stopped)"
)
_REFUSED_VALUE = "the database cannot take a value given ({reason}): change it and try again"

# SQLSTATE (a full code, else its two-character class) → the ghostmem error and its sentence; ``{reason}`` is the
# server's primary message. Our SQL functions raise 22023 and 42704 with sentences written for the reader.
SQLSTATE_ERRORS: dict[str, tuple[type[GhostMemError], str]] = {
    "08": (DatabaseUnavailable, _LOST),  # connection exception
    # admin_shutdown: the server is stopping, or the backend was killed
    "57P01": (DatabaseUnavailable, _LOST),
    "57P02": (DatabaseUnavailable, _LOST),  # crash_shutdown
    "57P03": (
        DatabaseUnavailable,
        "Postgres is not accepting connections yet ({reason}): try again in a moment",
    ),
    "57P04": (DatabaseUnavailable, _LOST),  # database_dropped
    "53": (
        DatabaseUnavailable,
        "the Postgres server ran out of a resource ({reason}): free connections, disk or memory, then try again",
    ),
    # program_limit_exceeded: e.g. "index row size ... exceeds btree version 4 maximum 2704" for a key made of
    # values too long together (a project or a LangGraph namespace of thousands of bytes). psycopg makes it an
    # OperationalError, which is no lost connection: running it again would fail again.
    "54": (
        InvalidArgument,
        "the database cannot hold a value this large ({reason}): make it shorter and try again",
    ),
    "22023": (InvalidArgument, "{reason}"),  # invalid_parameter_value, raised by ghostmem's functions
    "22": (InvalidArgument, _REFUSED_VALUE),  # data exception
    # undefined_object (e.g. an unknown role), raised by ghostmem's functions
    "42704": (InvalidArgument, "{reason}"),
    "57014": (
        DatabaseError,
        "the database cancelled the call ({reason}): try again, or ask for less (a statement_timeout of the "
        "connecting role or the application's pool limits how long one call may run)",
    ),
    "55P03": (DatabaseError, "the database gave up waiting for a lock ({reason}): try again shortly"),
    "40": (
        DatabaseError,
        "the database rolled the call back ({reason}): run it again",
    ),  # transaction rollback
    "42501": (
        PermissionDenied,
        "this database role may not do that ({reason}): ask an administrator for the privilege, or connect "
        "as the role that ran the migrations",
    ),
}

# Errors that carry no SQLSTATE (raised by the driver, not the server), by exception type, most specific first.
# (A pool that hands out no connection in time says so where connections are checked out: ghostmem.db.checkout.)
TYPE_ERRORS: tuple[tuple[type[Exception], type[GhostMemError], str], ...] = (
    (psycopg.OperationalError, DatabaseUnavailable, _LOST),  # server closed the connection unexpectedly, ...
    (psycopg.InterfaceError, DatabaseUnavailable, _LOST),  # the connection is closed
    (psycopg.DataError, InvalidArgument, _REFUSED_VALUE),  # e.g. a NUL byte, which text cannot hold
)


def translate(exc: psycopg.Error) -> GhostMemError:
    """The ghostmem error for a database error: the tables' entry, else a :class:`DatabaseError` naming it."""
    return _listed(exc) or DatabaseError(
        f"the database could not do that ({_reason(exc)}; "
        f"{f'SQLSTATE {exc.sqlstate}' if exc.sqlstate else type(exc).__name__})"
    )


def _listed(exc: psycopg.Error) -> GhostMemError | None:
    """The error the tables give ``exc``, if they list it."""
    reason = _reason(exc)
    code = exc.sqlstate
    for key in (code, code[:2]) if code else ():
        if key in SQLSTATE_ERRORS:
            cls, template = SQLSTATE_ERRORS[key]
            return cls(template.format(reason=reason))
    for kind, cls, template in TYPE_ERRORS:
        if isinstance(exc, kind):
            return cls(template.format(reason=reason))
    return None


@contextmanager
def translated() -> Iterator[None]:
    """Raise the ghostmem error of :data:`SQLSTATE_ERRORS` / :data:`TYPE_ERRORS` for a database error inside."""
    try:
        yield
    except psycopg.Error as exc:
        # Cleanup on a broken connection fails again ("the connection is closed"): the first error explains.
        first = exc
        while isinstance(first.__context__, psycopg.Error):
            first = first.__context__
        raise (_listed(first) or _listed(exc) or translate(first)) from first


def _reason(exc: psycopg.Error) -> str:
    """The server's one-line message (or the driver's), without the DETAIL/HINT lines and a trailing period."""
    primary = exc.diag.message_primary if exc.sqlstate else None
    lines = [line.strip() for line in str(primary or exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text.rstrip(".")
