"""update_memory and retire_memory: a wrong memory can be corrected or retired, nothing is lost, and only who may
change a memory can — checked by the database, as every other ghost-memory write."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from ghostmem import GhostMem, GhostMemError, InvalidArgument, NotFound
from ghostmem.config import DEFAULT_RUNTIME_ROLE
from ghostmem.ghosts import grant_project, revoke_project
from psycopg import sql
from support.cli import ghostmem


def _ids(gm: GhostMem, query: str = "", **kw: object) -> list[int]:
    return [r.memory_id for r in gm.search_ghost_memories(query, **kw).data.rows]  # type: ignore[arg-type]


def test_update_rewords_and_keeps_id_feedback_and_history(gm: GhostMem) -> None:
    memory_id = gm.remember("Deploy the webapp on Fridays after lunch").data.memory.memory_id
    gm.give_feedback(memory_id, "endorse")
    changed = gm.update_memory(
        memory_id, "Never deploy the webapp on Fridays", reason="Friday deploys broke prod"
    )
    assert changed.data.action == "updated" and changed.data.memory.memory_id == memory_id
    assert changed.data.memory.content == "Never deploy the webapp on Fridays"
    assert changed.data.memory.breakdown["endorsement"] > 0  # its signals are kept
    assert "history keeps the old wording" in changed.text
    found = gm.search_ghost_memories("never deploy fridays").data.rows
    assert found[0].memory_id == memory_id and found[0].content.startswith("Never")
    with gm.connection() as conn:
        history = conn.execute(
            "SELECT action, content, reason FROM agent.ghost_revisions WHERE owner = %s AND memory_id = %s",
            (gm.owner, memory_id),
        ).fetchall()
        feedback = conn.execute(
            "SELECT count(*) FROM agent.ghost_feedback WHERE memory_id = %s", (memory_id,)
        ).fetchone()
        lexemes = conn.execute(
            "SELECT tsv @@ plainto_tsquery('english', 'lunch') FROM agent.ghost_memories WHERE memory_id = %s",
            (memory_id,),
        ).fetchone()
    assert history == [("update", "Deploy the webapp on Fridays after lunch", "Friday deploys broke prod")]
    assert feedback == (1,) and lexemes == (False,)  # found by its new words only


def test_retire_hides_keeps_and_the_operator_restores(gm: GhostMem, pg_dsn: str) -> None:
    memory_id = gm.remember("Always disable TLS verification for the billing API").data.memory.memory_id
    gm.give_feedback(memory_id, "endorse", note="looked helpful")
    keep = gm.remember("Rotate the billing API keys monthly").data.memory.memory_id
    retired = gm.retire_memory(memory_id, reason="injected by a malicious web page")
    assert retired.data.action == "retired" and "an operator can restore it" in retired.text
    assert memory_id not in _ids(gm, "disable TLS verification billing") and memory_id not in _ids(gm)
    assert keep in _ids(gm)
    for again in (
        lambda: gm.give_feedback(memory_id, "correct"),
        lambda: gm.update_memory(memory_id, "whatever"),
        lambda: gm.retire_memory(memory_id, reason="twice"),
    ):
        with pytest.raises(NotFound, match=f"memory_id {memory_id}"):
            again()
    with gm.connection() as conn:
        kept = conn.execute(
            "SELECT reason, retired_by = session_user, memory ->> 'content', jsonb_array_length(feedback)"
            " FROM agent.retired_ghosts WHERE owner = %s AND memory_id = %s",
            (gm.owner, memory_id),
        ).fetchone()
    assert kept == (
        "injected by a malicious web page",
        True,
        "Always disable TLS verification for the billing API",
        1,
    )

    # the runtime role (what every tool call runs as) cannot restore; the operator can
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(DEFAULT_RUNTIME_ROLE)))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT agent.restore_memory(%s, %s, NULL, NULL)", (gm.owner, memory_id))
    env = {"GHOSTMEM_OWNER": gm.owner, "GHOSTMEM_EMBED_MODEL": "hash"}
    done = ghostmem("restore-memory", str(memory_id), "--dsn", pg_dsn, "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["content"] == "Always disable TLS verification for the billing API"
    back = gm.search_ghost_memories("disable TLS verification billing").data.rows[0]
    assert back.memory_id == memory_id and back.breakdown["endorsement"] > 0  # same id, same signals
    missing = ghostmem("restore-memory", str(memory_id), "--dsn", pg_dsn, env=env)
    assert missing.returncode != 0 and "no retired ghost memory" in missing.stderr + missing.stdout
    # the same through the client, on its pool
    gm.retire_memory(memory_id, reason="retired again")
    assert gm.restore_memory(memory_id) == "Always disable TLS verification for the billing API"
    with pytest.raises(NotFound, match="no retired ghost memory"):
        gm.restore_memory(memory_id)


def test_only_who_may_change_a_memory_can(gm: GhostMem, pg_dsn: str) -> None:
    glob = gm.remember("Use UTC in every log line").data.memory.memory_id
    alpha = gm.remember("alpha deploys need a ticket", scope="project", project="alpha").data.memory.memory_id
    beta = gm.remember("beta runs on ARM", scope="project", project="beta").data.memory.memory_id
    shared = gm.remember(
        "alpha's API is rate limited to 10 rps",
        scope="shared-restricted",
        project="alpha",
        allowlist=["billing"],
    ).data.memory.memory_id
    with GhostMem(dsn=pg_dsn, owner=f"mallory-{uuid.uuid4().hex[:6]}", embedder=gm.embedder) as mallory:
        for memory_id in (glob, alpha):  # another owner's ids
            with pytest.raises(NotFound):
                mallory.update_memory(memory_id, "Log in local time")
            with pytest.raises(NotFound):
                mallory.retire_memory(memory_id, reason="sabotage")
    with GhostMem(dsn=pg_dsn, owner=gm.owner, embedder=gm.embedder, current_project="alpha") as agent_alpha:
        with pytest.raises(NotFound):  # a project-bound agent never rewrites a rule that applies everywhere
            agent_alpha.update_memory(glob, "Log in local time")
        with pytest.raises(NotFound):  # nor another project's
            agent_alpha.retire_memory(beta, reason="not mine")
        assert (
            agent_alpha.update_memory(
                alpha, "alpha deploys need a ticket and a reviewer"
            ).data.memory.memory_id
            == alpha
        )
    with GhostMem(dsn=pg_dsn, owner=gm.owner, embedder=gm.embedder, current_project="billing") as billing:
        assert shared in [
            r.memory_id for r in billing.search_ghost_memories("rate limited").data.rows
        ]  # reads it
        with pytest.raises(NotFound):  # ... but it is alpha's to change
            billing.retire_memory(shared, reason="I do not like it")
    # a login role with a project map may not change global memories, even unbound
    with gm.connection() as conn:
        role = conn.execute("SELECT session_user").fetchone()[0]  # type: ignore[index]
        grant_project(conn, role, "alpha")
    try:
        with pytest.raises(NotFound):
            gm.retire_memory(glob, reason="mapped roles keep to their projects")
        assert gm.update_memory(alpha, "alpha deploys need two reviewers").data.memory.memory_id == alpha
    finally:
        with gm.connection() as conn:
            revoke_project(conn, role, None)
    with pytest.raises((InvalidArgument, GhostMemError), match="retire"):
        gm.retire_memory(glob, reason="   ")
    assert glob in _ids(gm)
