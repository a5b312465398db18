"""Ghost memories: ranking in the database, feedback that tunes it, scopes enforced by the server.

Every operation here runs as the runtime role (``OpContext.runtime_role``), switched to with ``SET LOCAL ROLE``
inside the operation's transaction: that role may execute the API functions of migration ``040`` and may not read
or write the tables, so scope visibility, ranking and activation bumps are decided by the database alone.

The project an operation acts for is ``OpContext.current_project`` when the application bound one (the model's
own argument is then ignored), else the model's ``current_project`` / ``project`` argument. The server refuses a
claim outside the login role's project map (``ghostmem grant-project``); the client asks first, so the refusal
arrives as one clear :class:`~ghostmem.errors.InvalidArgument`.
"""

from __future__ import annotations

import logging
from typing import Any

from psycopg import Connection, sql

from ghostmem import japanese
from ghostmem.args import (
    GiveFeedbackArgs,
    RememberArgs,
    RetireMemoryArgs,
    SearchGhostMemoriesArgs,
    UpdateMemoryArgs,
)
from ghostmem.context import OpContext
from ghostmem.db import vector
from ghostmem.db.roles import operator
from ghostmem.embed import Embedder
from ghostmem.errors import DatabaseUnavailable, InvalidArgument, NotFound
from ghostmem.limits import STORED_PROJECT_BYTES, utf8_bytes
from ghostmem.models import FeedbackResult, GhostList, GhostMemoryRow, MemoryChange, RememberResult
from ghostmem.program import Embed, Program, Query, Row
from ghostmem.redact import redact
from ghostmem.text import CJK_RANGES
from ghostmem.words import Arg, Op

logger = logging.getLogger(__name__)

ROW_FIELDS = (
    "memory_id",
    "content",
    "kind",
    "scope",
    "project",
    "allowlist",
    "score",
    "created_at",
    "last_activated_at",
    "last_used_at",
)
# The breakdown's keys in the formula's order: the terms (they sum to the score), then the recency factor.
TERMS = (
    "activation",
    "incident_prevention",
    "endorsement",
    "correction",
    "pred_error",
    "scope_bonus",
    "semantic",
    "recency_factor",
)


def search_ghost_memories(ctx: OpContext, args: SearchGhostMemoriesArgs) -> Program[GhostList]:
    """Ranked ghost memories visible under the claimed project; an empty query is the top-ranked overview.

    Every returned row is bumped by the database in the same transaction (an overview as an overview, which
    the default ranking does not count as use). A query is embedded only when some memory is visible to rank: a
    store without ghosts (a new home, an agent's first call) answers at once, without preparing the model.
    """
    claimed = _claimed(ctx, args.current_project)
    query = args.query.strip()
    yield from _act_as_runtime(ctx, claimed)
    visible = "SELECT agent.has_visible_ghosts(%s, %s) AS any"
    vector = None
    if query:
        found = yield Query(visible, (ctx.owner, claimed))
        if not found[0]["any"]:
            return GhostList(query=query, current_project=claimed, rows=[], none_visible=True)
        vector = yield Embed(query)
    rows = yield Query(
        "SELECT * FROM agent.search_ghost_ranked(%s, %s, %s, %s::vector, %s, %s, %s)",
        (ctx.owner, claimed, query, vector, japanese.terms(query), args.formula, args.limit),
    )
    # an overview that lists nothing: is there nothing at all here, or nothing its ranking keeps?
    none = not rows and not query and not (yield Query(visible, (ctx.owner, claimed)))[0]["any"]
    return GhostList(query=query, current_project=claimed, rows=[_memory(r) for r in rows], none_visible=none)


def remember(ctx: OpContext, args: RememberArgs) -> Program[RememberResult]:
    """Store a memory, or strengthen the near-duplicate of the same owner and scope (``created=False``).

    Only a scope the application allows (``OpContext.allowed_scopes``) is written: an agent bound to one project
    cannot plant a global rule, or one allowlisted to another project, unless the application said it may.
    """
    if ctx.allowed_scopes is not None and args.scope not in ctx.allowed_scopes:
        allowed = " or ".join(repr(s) for s in sorted(ctx.allowed_scopes)) or "no"
        raise InvalidArgument(
            Op("remember"),
            f": this agent may store only {allowed} memories, not {args.scope!r} ones (the application "
            "decides which scopes its agents may write)",
        )
    project = _claimed(ctx, args.project)
    if args.scope == "project" and not project:
        raise InvalidArgument(
            Op("remember"),
            ": scope 'project' needs `",
            Arg("project", "remember"),
            "`, the project the memory belongs to",
        )
    allowlist = [p.strip() for p in args.allowlist if p.strip()]
    if args.scope == "shared-restricted" and not allowlist:
        raise InvalidArgument(
            Op("remember"),
            ": scope 'shared-restricted' needs `",
            Arg("allowlist", "remember"),
            "`, the projects allowed to see the memory",
        )
    if args.scope != "shared-restricted" and allowlist:
        raise InvalidArgument(
            Op("remember"),
            ": `",
            Arg("allowlist", "remember"),
            f"` applies only to scope 'shared-restricted' (scope is {args.scope!r})",
        )
    content = redact(args.content)
    vector = yield Embed(content)
    yield from _act_as_runtime(ctx, project)
    rows = yield Query(
        "SELECT * FROM agent.remember(%s, %s, %s, %s, %s, %s, %s::vector, %s)",
        (ctx.owner, content, args.kind, args.scope, project, allowlist, vector, japanese.terms(content)),
    )
    return RememberResult(memory=_memory(rows[0]), created=bool(rows[0]["created"]))


def give_feedback(ctx: OpContext, args: GiveFeedbackArgs) -> Program[FeedbackResult]:
    """Count one feedback signal on a memory and return it with its new score breakdown."""
    note = redact(args.note) if args.note else None
    claimed = ctx.current_project
    yield from _act_as_runtime(ctx, claimed)
    rows = yield Query(
        "SELECT * FROM agent.give_feedback(%s, %s, %s, %s, %s)",
        (ctx.owner, claimed, args.memory_id, args.signal, note),
    )
    if not rows:
        raise NotFound(
            Op("give_feedback"),
            f": there is no ghost memory with memory_id {args.memory_id} here; use a memory_id from a ",
            Op("search_ghost_memories"),
            " result",
        )
    return FeedbackResult(memory=_memory(rows[0]), signal=args.signal)


def update_memory(ctx: OpContext, args: UpdateMemoryArgs) -> Program[MemoryChange]:
    """Reword a memory: same id, signals and feedback, a new vector; the old wording is kept in its history."""
    content = redact(args.content)
    reason = redact(args.reason) if args.reason else None
    vector = yield Embed(content)
    claimed = ctx.current_project
    yield from _act_as_runtime(ctx, claimed)
    rows = yield Query(
        "SELECT * FROM agent.update_memory(%s, %s, %s, %s, %s::vector, %s, %s)",
        (ctx.owner, claimed, args.memory_id, content, vector, japanese.terms(content), reason),
    )
    if not rows:
        raise _not_changeable(Op("update_memory"), args.memory_id)
    return MemoryChange(memory=_memory(rows[0]), action="updated")


def retire_memory(ctx: OpContext, args: RetireMemoryArgs) -> Program[MemoryChange]:
    """Take a wrong or outdated memory out of every search; it is kept (who, when, why) for the operator."""
    reason = redact(args.reason)
    claimed = ctx.current_project
    yield from _act_as_runtime(ctx, claimed)
    rows = yield Query(
        "SELECT * FROM agent.retire_memory(%s, %s, %s, %s)", (ctx.owner, claimed, args.memory_id, reason)
    )
    if not rows:
        raise _not_changeable(Op("retire_memory"), args.memory_id)
    return MemoryChange(memory=_memory(rows[0]), action="retired")


def _not_changeable(op: Op, memory_id: int) -> NotFound:
    return NotFound(
        op,
        f": there is no ghost memory with memory_id {memory_id} that you may change here; use a memory_id from a ",
        Op("search_ghost_memories"),
        " result (a project-bound agent changes only its project's memories)",
    )


def restore_memory(conn: Connection[Any], owner: str, memory_id: int, embedder: Embedder) -> str:
    """Operator: put a retired memory back (same id, signals and feedback, a fresh vector); returns its text."""
    rows = operator(
        conn,
        "SELECT memory ->> 'content' FROM agent.retired_ghosts WHERE owner = %s AND memory_id = %s::bigint",
        (owner, str(memory_id)),
        "restore a retired memory",
    )
    if not rows:
        raise NotFound(f"there is no retired ghost memory {memory_id} of owner {owner!r}")
    content = str(rows[0][0])
    with conn.transaction():
        conn.execute(
            "SELECT agent.restore_memory(%s, %s, %s, %s)",
            (owner, memory_id, vector(embedder.embed_query(content)), japanese.terms(content)),
        )
    return content


def fill_memory_words(conn: Connection[Any], owner: str) -> int:
    """Operator: give the Japanese words to the owner's ghost memories stored without them (written before the
    ``[ja]`` extra was installed, or before migration 105); the tsv trigger adds them to the memory's lexemes.
    Returns how many memories got words. Without SudachiPy there is nothing to add and nothing is read; a role
    that may not write the memories (an application's login) leaves them to the schema's owner."""
    if not japanese.available():
        return 0
    with conn.transaction():
        allowed = conn.execute("SELECT has_table_privilege('agent.ghost_memories', 'UPDATE')").fetchone()
        if not (allowed and allowed[0]):
            logger.info(
                "ghost memories get their Japanese words when the schema's owner runs `ghostmem enrich`"
            )
            return 0
        rows = conn.execute(
            "SELECT memory_id, content FROM agent.ghost_memories"
            " WHERE owner = %s AND morphemes IS NULL AND content ~ %s FOR UPDATE",
            (owner, f"[{CJK_RANGES}]"),
        ).fetchall()
        found = [(words, mid, owner) for mid, content in rows if (words := japanese.terms(content))]
        if found:
            conn.cursor().executemany(
                "UPDATE agent.ghost_memories SET morphemes = %s WHERE memory_id = %s AND owner = %s", found
            )
    return len(found)


def grant_project(conn: Connection[Any], role: str, project: str) -> list[str]:
    """Operator: let the login role ``role`` claim ``project``; once a role has a map, claims outside it are
    refused by the server. Returns every project the role may now claim."""
    if (size := utf8_bytes(project)) > STORED_PROJECT_BYTES:
        raise InvalidArgument(
            f"the project {project[:40]!r}… is {size:,} bytes, longer than the {STORED_PROJECT_BYTES:,} bytes ghostmem"
            " keeps of a project in a role's map: grant a shorter name"
        )
    _map(conn, "SELECT agent.grant_project(%s, %s)", (role, project))
    return claimable_projects(conn, role)


def revoke_project(conn: Connection[Any], role: str, project: str | None = None) -> list[str]:
    """Operator: take ``project`` (or, with None, the whole map) away from ``role``; returns what is left (an
    empty map means the role may claim any project again)."""
    _map(conn, "SELECT agent.revoke_project(%s, %s)", (role, project))
    return claimable_projects(conn, role)


def claimable_projects(conn: Connection[Any], role: str) -> list[str]:
    """The projects mapped to ``role`` (empty: no map, every claim is accepted)."""
    rows = _map(
        conn, "SELECT project FROM agent.role_projects WHERE role_name = %s ORDER BY project", (role,)
    )
    return [str(r[0]) for r in rows]


def _map(conn: Connection[Any], statement: str, params: tuple[str | None, ...]) -> list[tuple[Any, ...]]:
    return operator(conn, statement, params, "change the role → project map")


def _claimed(ctx: OpContext, argument: str | None) -> str | None:
    """The bound project wins over the model's argument; blank means none."""
    project = ctx.current_project if ctx.current_project is not None else argument
    project = project.strip() if project else None
    return project or None


def _act_as_runtime(ctx: OpContext, claimed: str | None) -> Program[None]:
    """Switch this transaction to the runtime role, then have the server check the project claim."""
    if ctx.runtime_role:
        rows = yield Query(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s) AS present, "
            "EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s AND pg_has_role(oid, 'MEMBER')) "
            "AS member",
            (ctx.runtime_role, ctx.runtime_role),
        )
        if not rows[0]["member"]:
            problem = "does not exist" if not rows[0]["present"] else "is not granted to the connecting role"
            raise DatabaseUnavailable(
                f"the ghost-memory runtime role {ctx.runtime_role!r} {problem}: as an administrator run "
                f"SELECT agent.install_runtime_role('{ctx.runtime_role}') in this database"
            )
        yield Query(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(ctx.runtime_role)), fetch="none")
    rows = yield Query("SELECT agent.claim_refusal(%s) AS refusal", (claimed,))
    if rows[0]["refusal"]:
        raise InvalidArgument(str(rows[0]["refusal"]))


def _memory(row: Row) -> GhostMemoryRow:
    fields: dict[str, Any] = {name: row[name] for name in ROW_FIELDS}
    fields["allowlist"] = list(row["allowlist"] or [])
    breakdown = row["breakdown"] or {}
    fields["breakdown"] = {k: float(breakdown[k]) for k in TERMS if k in breakdown}
    return GhostMemoryRow(**fields)
