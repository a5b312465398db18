"""What an operation knows about its caller: whose memory, and what the application bound."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ghostmem.errors import InvalidArgument
from ghostmem.limits import STORED_OWNER_BYTES, utf8_bytes


@dataclass(frozen=True, slots=True)
class OpContext:
    """Set by the application when it builds a store or the tools; the model never chooses these.

    Attributes:
        owner: whose memory is read and written.
        current_project: when bound, the project ghost-memory operations act for; the model's own
            ``current_project`` argument is then removed from its schema and ignored.
        runtime_role: the database role ghost-memory functions run as (it may execute the API functions
            and may not read the tables).
        allowed_scopes: the scopes ``remember`` may write (``None``: any). An application that binds a project
            lets the model write only memories of that project unless it allows more (:class:`~ghostmem.binding.Binding`).
    """

    owner: str
    current_project: str | None = None
    runtime_role: str | None = None
    allowed_scopes: frozenset[str] | None = None

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, str) and "\x00" in value:
                raise InvalidArgument(f"{field.name} must not contain NUL characters (\\x00): remove them")
        checked_owner(self.owner)


def checked_owner(owner: str) -> str:
    """``owner``, when it is at most :data:`~ghostmem.limits.STORED_OWNER_BYTES` bytes; else one sentence.

    Every way an owner comes in calls it before anything is written under it: the settings (``GhostMem(owner=...)``,
    ``--owner``, ``GHOSTMEM_OWNER``), an operation's context (so a call's ``user_id`` through the tools, the
    middleware or MCP), live capture's ``owner=``, the LangGraph store's namespaces and the MCP tokens file.
    """
    size = utf8_bytes(owner)
    if size > STORED_OWNER_BYTES:
        raise InvalidArgument(
            f"the owner {owner[:40]!r}… is {size:,} bytes, longer than the {STORED_OWNER_BYTES:,} bytes ghostmem "
            "keeps of an owner (it leads every key of its memory): name it by a shorter id, such as a user id or a "
            "hash of the name"
        )
    return owner
