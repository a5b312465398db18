"""The one error hierarchy of ghostmem.

Every error a user or a model can act on is a :class:`GhostMemError` whose message is one sentence saying what
went wrong and what to do. Bad arguments to an operation are :class:`InvalidArgument` (also a ``ValueError``).
"""

from __future__ import annotations


class GhostMemError(Exception):
    """Base class of every error ghostmem raises on purpose."""


class InvalidArgument(GhostMemError, ValueError):
    """An operation was called with an argument it cannot accept; the message says which and why."""


class NotFound(GhostMemError, LookupError):
    """A conversation or memory id that does not exist for this owner."""


class DatabaseUnavailable(GhostMemError):
    """The Postgres server cannot be reached, or lacks something ghostmem needs (an extension, a role)."""


class SchemaMismatch(GhostMemError):
    """The database was created for another embedding dimension or a newer ghostmem, or is behind this one and the
    connecting role may not migrate it."""
