"""Ghost memories against a real server: the formula to 1e-6, the scope matrix, the runtime role's boundary,
escapes through the query text, the three flaws of the literal formula, remember and feedback."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from ghostmem import AsyncGhostMem, GhostMem, HashEmbedder, japanese
from ghostmem.context import OpContext
from ghostmem.errors import DatabaseUnavailable, InvalidArgument, NotFound
from ghostmem.ghosts import fill_memory_words, grant_project, revoke_project
from ghostmem.ops import get_op
from ghostmem.program import run_sync
from psycopg import sql
from psycopg.rows import dict_row
from support.adapters import surface_caller
from support.embedders import CountingEmbedder

RUNTIME = "ghostmem_runtime"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
DIMS = 384


def vec(values: list[float]) -> str:
    return "[" + ",".join(repr(x) for x in values) + "]"


def unit(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(DIMS)]
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def remember_at(
    conn: psycopg.Connection[Any],
    owner: str,
    content: str,
    at: datetime = T0,
    scope: str = "global",
    project: str | None = None,
    allowlist: list[str] | None = None,
    embedding: list[float] | None = None,
) -> int:
    emb = embedding or HashEmbedder().embed_query(content)
    row = conn.execute(
        "SELECT (agent.remember_at(%s, %s, %s, 'rule', %s, %s, %s, %s::vector, %s, NULL)).memory_id",
        (at, owner, content, scope, project, allowlist or [], vec(emb), japanese.terms(content)),
    ).fetchone()
    assert row is not None
    return int(row[0])


def ranked(
    conn: psycopg.Connection[Any],
    owner: str,
    at: datetime,
    formula: str,
    claimed: str | None = None,
    query: str = "",
    query_vec: list[float] | None = None,
    bump: bool = False,
    lim: int = 1000,
) -> list[dict[str, Any]]:
    fn = "search_ghost_ranked_at" if bump else "rank_ghosts_at"
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            sql.SQL("SELECT * FROM agent.{}(%s, %s, %s, %s, %s::vector, %s, %s, %s)").format(
                sql.Identifier(fn)
            ),
            (
                at,
                owner,
                claimed,
                query,
                vec(query_vec) if query_vec else None,
                japanese.terms(query),
                formula,
                lim,
            ),
        )
        return cur.fetchall()


def score_of(rows: list[dict[str, Any]], memory_id: int) -> float:
    return next(float(r["score"]) for r in rows if r["memory_id"] == memory_id)


def rank_of(rows: list[dict[str, Any]], memory_id: int) -> int:
    return next(i for i, r in enumerate(rows, 1) if r["memory_id"] == memory_id)


@pytest.fixture
def admin(gm: GhostMem) -> Iterator[psycopg.Connection[Any]]:
    """The migrating (owner) role on the test database, autocommit: what an operator or the bench uses."""
    gm.connect()
    with psycopg.connect(gm.dsn, autocommit=True) as conn:
        yield conn


# -- the formula --------------------------------------------------------------------------------------------------


def literal_score(m: dict[str, Any], claimed: str | None, sim: float, at: datetime) -> float:
    """The reference formula (docs/ghosts.md), written out independently of the SQL."""
    activation = m["activation_count"] + m["overview_count"]
    scope_bonus = 1.0 if claimed is not None and m["project"] == claimed else 0.0
    base = (
        0.2 * activation
        + 0.5 * m["incidents_prevented"]
        + 0.3 * m["endorsements"]
        - 0.4 * m["corrections"]
        - 0.2 * m["prediction_errors"]
        + 0.1 * scope_bonus
    )
    days = (at - m["last_activated_at"]).total_seconds() / 86400
    return base * math.exp(-days / 30) + sim * 0.5


def default_score(m: dict[str, Any], claimed: str | None, sim: float, at: datetime) -> float:
    """The default: saturated signals, decay on the positive part only, overviews not counted."""

    def sat(n: int, k: float) -> float:
        return n / (n + k)

    scope_bonus = 1.0 if claimed is not None and m["project"] == claimed else 0.0
    positive = (
        0.2 * sat(m["activation_count"], 10)
        + 0.5 * sat(m["incidents_prevented"], 2)
        + 0.3 * sat(m["endorsements"], 3)
        + 0.1 * scope_bonus
    )
    negative = 0.4 * sat(m["corrections"], 2) + 0.2 * sat(m["prediction_errors"], 3)
    days = (at - m["last_used_at"]).total_seconds() / 86400
    return positive * math.exp(-days / 30) - negative + sim * 0.5


def cosine_sim(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


@pytest.mark.parametrize("formula", ["literal", "default"])
def test_database_scores_equal_the_formula_computed_in_python(
    admin: psycopg.Connection[Any], owner: str, formula: str
) -> None:
    rng = random.Random(20261129)
    at = T0 + timedelta(days=400)
    for i in range(120):
        scope = rng.choice(["global", "project", "shared-restricted"])
        project = rng.choice(["alpha", "beta", None]) if scope != "project" else rng.choice(["alpha", "beta"])
        allowlist = (
            rng.sample(["alpha", "beta", "gamma"], rng.randint(1, 3)) if scope == "shared-restricted" else []
        )
        mid = remember_at(admin, owner, f"memory {i}", T0, scope, project, allowlist, unit(rng))
        admin.execute(
            "UPDATE agent.ghost_memories SET activation_count = %s, overview_count = %s, endorsements = %s,"
            " corrections = %s, incidents_prevented = %s, prediction_errors = %s,"
            " last_activated_at = %s, last_used_at = %s WHERE memory_id = %s",
            (
                rng.randint(0, 500),
                rng.randint(0, 500),
                rng.randint(0, 40),
                rng.randint(0, 40),
                rng.randint(0, 20),
                rng.randint(0, 20),
                at - timedelta(seconds=rng.uniform(0, 400 * 86400)),
                at - timedelta(seconds=rng.uniform(0, 400 * 86400)),
                mid,
            ),
        )
    with admin.cursor(row_factory=dict_row) as cur:
        stored = {
            r["memory_id"]: r
            for r in cur.execute(
                "SELECT *, embedding::text AS emb FROM agent.ghost_memories WHERE owner = %s", (owner,)
            )
        }
    compare = literal_score if formula == "literal" else default_score
    checked = 0
    for claimed in (None, "alpha", "beta"):
        for query_vec in (None, unit(rng)):
            rows = ranked(admin, owner, at, formula, claimed, "" if query_vec is None else "x", query_vec)
            assert rows, "every claim sees at least the global memories"
            for row in rows:
                m = stored[row["memory_id"]]
                emb = [float(x) for x in m["emb"].strip("[]").split(",")]
                sim = 0.0 if query_vec is None else cosine_sim(emb, [float(f"{x:.7g}") for x in query_vec])
                expected = compare(m, claimed, sim, at)
                assert row["score"] == pytest.approx(expected, abs=1e-6), (formula, claimed, row["memory_id"])
                terms = {k: v for k, v in row["breakdown"].items() if k != "recency_factor"}
                assert sum(terms.values()) == pytest.approx(row["score"], abs=1e-9)
                checked += 1
    assert checked > 300


# -- scopes -------------------------------------------------------------------------------------------------------

SCOPED = [
    ("global", None, []),
    ("global", "alpha", []),
    ("project", "alpha", []),
    ("project", "beta", []),
    ("shared-restricted", None, ["alpha"]),
    ("shared-restricted", "beta", ["alpha", "beta"]),
    ("shared-restricted", None, ["gamma"]),
]


def visible(scope: str, project: str | None, allowlist: list[str], claimed: str | None) -> bool:
    if scope == "global":
        return True
    if scope == "project":
        return claimed is not None and project == claimed
    return claimed is not None and claimed in allowlist


def test_scope_matrix_through_the_function(gm: GhostMem, pg_dsn: str, owner: str) -> None:
    ids: dict[int, tuple[str, str | None, list[str]]] = {}
    for i, (scope, project, allowlist) in enumerate(SCOPED):
        res = gm.remember(
            f"scoped rule number {i} about deployments", scope=scope, project=project, allowlist=allowlist
        )
        ids[res.data.memory.memory_id] = (scope, project, allowlist)
    claims = [None, "alpha", "beta", "gamma", "delta", "ALPHA", "alpha ", "%", "alpha' OR 'x'='x"]
    for claimed in claims:
        expected = {mid for mid, spec in ids.items() if visible(*spec, (claimed or "").strip() or None)}
        for query in ("", "deployments"):
            got = {
                r.memory_id
                for r in gm.search_ghost_memories(query, current_project=claimed, limit=50).data.rows
            }
            assert got == expected, (claimed, query)
    # a bound project wins over the model's claim
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder(), current_project="beta") as bound:
        got = {
            r.memory_id for r in bound.search_ghost_memories("", current_project="alpha", limit=50).data.rows
        }
        assert got == {mid for mid, spec in ids.items() if visible(*spec, "beta")}
        hidden = next(mid for mid, spec in ids.items() if spec == ("project", "alpha", []))
        with pytest.raises(NotFound):
            bound.give_feedback(hidden, "endorse")


def test_scope_bonus_is_one_for_the_claimed_project_only(gm: GhostMem) -> None:
    mid = gm.remember("use the staging cluster", scope="project", project="alpha").data.memory.memory_id
    other = gm.remember("use the blue cluster", project="beta").data.memory.memory_id  # global, from beta
    rows = {r.memory_id: r for r in gm.search_ghost_memories("", current_project="alpha").data.rows}
    assert rows[mid].breakdown["scope_bonus"] == pytest.approx(0.1 * rows[mid].breakdown["recency_factor"])
    assert rows[other].breakdown["scope_bonus"] == 0.0


def test_runtime_role_cannot_touch_the_tables(admin: psycopg.Connection[Any], owner: str) -> None:
    mid = remember_at(admin, owner, "a rule the runtime role must not read")
    forbidden = [
        "SELECT * FROM agent.ghost_memories",
        "SELECT * FROM agent.ghost_feedback",
        "SELECT * FROM agent.role_projects",
        f"UPDATE agent.ghost_memories SET endorsements = 99 WHERE memory_id = {mid}",
        f"DELETE FROM agent.ghost_memories WHERE memory_id = {mid}",
        "INSERT INTO agent.role_projects (role_name, project) VALUES ('x', 'y')",
        f"SELECT agent.bump_activation('{owner}', ARRAY[{mid}]::bigint[], false, now())",
        f"SELECT * FROM agent.rank_ghosts_at(now(), '{owner}', NULL, '', NULL, NULL, 'default', 10)",
        f"SELECT * FROM agent.give_feedback_at(now(), '{owner}', NULL, {mid}, 'endorse', NULL)",
        "SELECT agent.grant_project('postgres', 'x')",
    ]
    for statement in forbidden:
        with admin.transaction():
            admin.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(RUNTIME)))
            with pytest.raises(psycopg.errors.InsufficientPrivilege), admin.transaction():
                admin.execute(statement.encode())
    with admin.transaction():
        admin.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(RUNTIME)))
        rows = admin.execute(
            "SELECT memory_id FROM agent.search_ghost_ranked(%s, NULL, '', NULL, NULL, 'default', 10)",
            (owner,),
        ).fetchall()
        assert rows == [(mid,)]
    row = admin.execute(
        "SELECT endorsements FROM agent.ghost_memories WHERE memory_id = %s", (mid,)
    ).fetchone()
    assert row == (0,)


def test_query_text_cannot_escape(gm: GhostMem, admin: psycopg.Connection[Any], owner: str) -> None:
    for i, (scope, project, allowlist) in enumerate(SCOPED):
        gm.remember(f"guarded rule {i}", scope=scope, project=project, allowlist=allowlist)

    def snapshot() -> list[tuple[Any, ...]]:
        return admin.execute(
            "SELECT memory_id, owner, content, scope, project, allowlist FROM agent.ghost_memories "
            "WHERE owner = %s ORDER BY memory_id",
            (owner,),
        ).fetchall()

    before = snapshot()
    total = admin.execute("SELECT count(*) FROM agent.ghost_memories").fetchone()
    global_ids = {r[0] for r in before if r[3] == "global"}
    attempts = [
        "'; DROP TABLE agent.ghost_memories; --",
        "x') OR 1=1 --",
        "%",
        "_",
        "%%' OR owner <> '",
        ".*",
        "[a-z]+",
        "\\",
        "a:* | !b & (c <-> d)",
        "'' ''' \"",
        "guarded & !rule",
        "会話 ルール",
        "x" * 2000,
        "rule " * 399,
    ]
    for attempt in attempts:
        rows = gm.search_ghost_memories(attempt, limit=50).data.rows
        assert {r.memory_id for r in rows} <= global_ids, attempt
    for bad in ("nul\x00byte", "\x00"):
        with pytest.raises(InvalidArgument, match="NUL"):
            gm.search_ghost_memories(bad)
        with pytest.raises(InvalidArgument, match="NUL"):
            gm.search_ghost_memories("x", current_project=bad)
    with pytest.raises(InvalidArgument, match="query"):
        gm.search_ghost_memories("x" * 2001)
    assert snapshot() == before
    assert admin.execute("SELECT count(*) FROM agent.ghost_memories").fetchone() == total


# -- bumps --------------------------------------------------------------------------------------------------------


def test_every_returned_row_of_a_real_search_is_bumped(gm: GhostMem, admin: psycopg.Connection[Any]) -> None:
    ids = [
        gm.remember(f"rule {w} about caching").data.memory.memory_id for w in ("one", "two", "three", "four")
    ]
    returned = {r.memory_id for r in gm.search_ghost_memories("caching", limit=2).data.rows}
    assert len(returned) == 2
    gm.search_ghost_memories("", limit=3)
    rows = dict(
        (r[0], r[1:])
        for r in admin.execute(
            "SELECT memory_id, activation_count, overview_count FROM agent.ghost_memories WHERE memory_id = ANY(%s)",
            (ids,),
        )
    )
    assert {mid for mid, (uses, _) in rows.items() if uses == 1} == returned
    assert all(uses == 0 for mid, (uses, _) in rows.items() if mid not in returned)
    assert sum(overviews for _, overviews in rows.values()) == 3


def test_results_hold_both_clocks_under_their_own_names(gm: GhostMem, admin: psycopg.Connection[Any]) -> None:
    """An overview resets last_activated_at only; each result reports both, whatever the formula (before 061 the
    field named last_activated_at held last_used_at under the default formula)."""
    owner = gm.owner
    mid = remember_at(admin, owner, "label every alert with its runbook")
    shown_at = T0 + timedelta(days=5)
    ranked(admin, owner, shown_at, "default", bump=True)
    for formula in ("default", "literal"):
        (row,) = ranked(admin, owner, T0 + timedelta(days=6), formula)
        assert (row["memory_id"], row["last_activated_at"], row["last_used_at"]) == (mid, shown_at, T0)
    fed = gm.give_feedback(mid, "endorse").data.memory
    assert fed.last_used_at is not None and fed.last_used_at > T0 and fed.last_activated_at == shown_at
    assert f"last used {fed.last_used_at:%Y-%m-%d}" in gm.give_feedback(mid, "correct").text


def test_a_search_runs_the_query_legs_once(admin: psycopg.Connection[Any], owner: str) -> None:
    """The legs that gather candidates also say which returns the query explains: one run per search."""
    for i in range(30):
        remember_at(admin, owner, f"cache rule {i}")
    query = "cache rule"
    with admin.transaction():
        try:
            admin.execute("SET LOCAL track_functions = 'pl'")
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("counting function calls needs a superuser on this server")
        rows = ranked(
            admin,
            owner,
            T0,
            "default",
            query=query,
            query_vec=HashEmbedder().embed_query(query),
            bump=True,
            lim=5,
        )
        calls = admin.execute(
            "SELECT pg_stat_get_xact_function_calls('agent.query_legs(text, text, text, vector, text[], integer)'::regprocedure)"
        ).fetchone()
    assert len(rows) == 5 and calls == (1,)


# -- the three flaws ----------------------------------------------------------------------------------------------


def test_rich_get_richer_pins_the_literal_formula_not_the_default(
    admin: psycopg.Connection[Any], owner: str
) -> None:
    old = remember_at(admin, owner, "an old rule that once helped")
    admin.execute("SELECT agent.give_feedback_at(%s, %s, NULL, %s, 'endorse', NULL)", (T0, owner, old))
    for formula in ("literal", "default"):
        admin.execute(
            "UPDATE agent.ghost_memories SET overview_count = 0, last_activated_at = %s, last_used_at = %s"
            " WHERE memory_id = %s",
            (T0, T0, old),
        )
        for day in range(60):  # a daily overview of the single top rule
            top = ranked(admin, owner, T0 + timedelta(days=day), formula, bump=True, lim=1)
            assert top[0]["memory_id"] == old
        new = remember_at(
            admin, owner, f"a new rule endorsed by everyone ({formula})", T0 + timedelta(days=60)
        )
        for _ in range(5):
            admin.execute(
                "SELECT agent.give_feedback_at(%s, %s, NULL, %s, 'endorse', NULL)",
                (T0 + timedelta(days=60), owner, new),
            )
        rows = ranked(admin, owner, T0 + timedelta(days=60), formula)
        leader = rows[0]["memory_id"]
        if formula == "literal":
            assert leader == old, "the literal formula keeps the rule its own overviews pumped up"
            assert rows[0]["breakdown"]["activation"] > 5
        else:
            assert leader == new, "the default lets the endorsed rule overtake"
            assert all(0 <= r["breakdown"]["activation"] <= 0.2 for r in rows)
        admin.execute("DELETE FROM agent.ghost_memories WHERE memory_id = %s", (new,))


def test_decay_lifts_penalties_in_the_literal_formula_only(
    admin: psycopg.Connection[Any], owner: str
) -> None:
    corrected = remember_at(admin, owner, "a rule that was wrong again and again")
    neutral = remember_at(admin, owner, "a rule nobody said anything about")
    for _ in range(6):
        admin.execute(
            "SELECT agent.give_feedback_at(%s, %s, NULL, %s, 'correct', NULL)", (T0, owner, corrected)
        )
    later = T0 + timedelta(days=90)
    lit_now, lit_later = (score_of(ranked(admin, owner, t, "literal"), corrected) for t in (T0, later))
    assert lit_later > lit_now + 1.5, "literal: 90 idle days nearly erase six corrections"
    def_now, def_later = (score_of(ranked(admin, owner, t, "default"), corrected) for t in (T0, later))
    assert def_later == pytest.approx(def_now), "default: the penalty stays"
    assert def_later < score_of(ranked(admin, owner, later, "default"), neutral) - 0.3


def test_overviews_count_as_use_in_the_literal_formula_only(
    admin: psycopg.Connection[Any], owner: str
) -> None:
    mid = remember_at(admin, owner, "check the backups weekly")
    at = T0 + timedelta(days=30)
    before = {f: score_of(ranked(admin, owner, at, f), mid) for f in ("literal", "default")}
    for _ in range(10):
        ranked(admin, owner, at, "default", bump=True)
    after = {f: score_of(ranked(admin, owner, at, f), mid) for f in ("literal", "default")}
    assert after["literal"] > before["literal"] + 1.0
    assert after["default"] == pytest.approx(before["default"])


def test_a_return_the_query_does_not_explain_is_not_use(admin: psycopg.Connection[Any], owner: str) -> None:
    """A strong rule returned for an unrelated query (only because of its evidence) is recorded as shown, so the
    default's clock is not reset by it: the loop that would otherwise pin strong rules through searches."""
    strong = remember_at(admin, owner, "verify the backups restore")
    admin.execute(
        "UPDATE agent.ghost_memories SET incidents_prevented = 20, endorsements = 20 WHERE memory_id = %s",
        (strong,),
    )
    related = [
        remember_at(admin, owner, f"deploy pipeline step {w}") for w in ("build", "test", "ship", "watch")
    ]
    query = "deploy pipeline"
    at = T0 + timedelta(days=10)
    rows = ranked(
        admin,
        owner,
        at,
        "default",
        query=query,
        query_vec=HashEmbedder().embed_query(query),
        bump=True,
        lim=3,
    )
    returned = [r["memory_id"] for r in rows]
    assert strong in returned, "its evidence outweighs relevance, so it is returned"
    counts = dict(
        (r[0], r[1:])
        for r in admin.execute(
            "SELECT memory_id, activation_count, overview_count, last_used_at FROM agent.ghost_memories"
            " WHERE owner = %s",
            (owner,),
        )
    )
    assert counts[strong] == (0, 1, T0)
    used = [mid for mid in returned if mid != strong]
    assert used and all(counts[mid][:2] == (1, 0) and counts[mid][2] == at for mid in used)
    assert all(counts[mid][:2] == (0, 0) for mid in related if mid not in returned)


# -- remember and feedback ----------------------------------------------------------------------------------------


def test_remember_validates_scope_arguments(gm: GhostMem) -> None:
    with pytest.raises(InvalidArgument, match="needs `project`"):
        gm.remember("x", scope="project")
    with pytest.raises(InvalidArgument, match="needs `allowlist`"):
        gm.remember("x", scope="shared-restricted", allowlist=[" "])
    with pytest.raises(InvalidArgument, match="only to scope 'shared-restricted'"):
        gm.remember("x", scope="global", allowlist=["alpha"])
    with pytest.raises(InvalidArgument, match="NUL"):
        gm.remember("a\x00b")
    with pytest.raises(InvalidArgument, match="kind"):
        gm.run("remember", {"content": "x", "kind": "spell"})


def test_near_duplicates_strengthen_instead_of_copying(gm: GhostMem) -> None:
    first = gm.remember("Always run the database migrations before the test suite").data
    assert first.created
    again = gm.remember("always run the database migrations before the test suite!").data
    assert not again.created and again.memory.memory_id == first.memory.memory_id
    assert again.memory.breakdown["endorsement"] > first.memory.breakdown["endorsement"]
    elsewhere = gm.remember(
        "Always run the database migrations before the test suite", scope="project", project="alpha"
    ).data
    assert elsewhere.created and elsewhere.memory.memory_id != first.memory.memory_id
    assert gm.remember(
        "Always run the database migrations before the test suite", scope="project", project="beta"
    ).data.created
    assert gm.remember("Never deploy on Fridays").data.created


def test_feedback_moves_the_score_and_unknown_ids_are_not_found(gm: GhostMem, pg_dsn: str) -> None:
    mid = gm.remember("prefer small commits").data.memory.memory_id
    endorsed = gm.give_feedback(mid, "endorse", note="helped with the review").data.memory
    corrected = gm.give_feedback(mid, "correct", note="password=hunter2 in the note").data.memory
    assert corrected.score is not None and endorsed.score is not None and corrected.score < endorsed.score
    assert corrected.breakdown["correction"] < 0
    with gm.connection() as conn:
        notes = [
            r[0]
            for r in conn.execute(
                "SELECT note FROM agent.ghost_feedback WHERE memory_id = %s ORDER BY id", (mid,)
            )
        ]
    assert notes[0] == "helped with the review" and "hunter2" not in notes[1]
    with pytest.raises(NotFound, match="memory_id 999999999"):
        gm.give_feedback(999999999, "endorse")
    stranger = GhostMem(dsn=pg_dsn, owner=f"other-{uuid.uuid4().hex[:8]}", embedder=HashEmbedder())
    with stranger, pytest.raises(NotFound, match=f"memory_id {mid}"):
        stranger.give_feedback(mid, "endorse")
    with pytest.raises(InvalidArgument, match="signal"):
        gm.run("give_feedback", {"memory_id": mid, "signal": "love"})


async def test_async_store_runs_the_same_program(pg_dsn: str, owner: str) -> None:
    async with AsyncGhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as agm:
        mid = (await agm.remember("rotate the keys monthly")).data.memory.memory_id
        rows = (await agm.search_ghost_memories("keys")).data.rows
        assert [r.memory_id for r in rows] == [mid]


# -- the operator's role → project map ----------------------------------------------------------------------------


@pytest.fixture
def login_role(admin: psycopg.Connection[Any], pg_dsn: str) -> Iterator[tuple[str, str]]:
    """A separate login role that is a member of the runtime role (as an application would connect)."""
    role = f"ghostmem_app_{uuid.uuid4().hex[:8]}"
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(RUNTIME), sql.Identifier(role)))
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    info["user"] = role
    try:
        yield role, psycopg.conninfo.make_conninfo(**info)
    finally:
        revoke_project(admin, role)
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def run_as(dsn: str, owner: str, op: str, arguments: dict[str, Any]) -> Any:
    """Run an operation's program on a plain connection of ``dsn`` (the client would migrate first, which an
    application's login role may not do)."""
    spec = get_op(op)
    ctx = OpContext(owner=owner, runtime_role=RUNTIME)
    with psycopg.connect(dsn) as conn:
        return run_sync(spec.program(ctx, spec.parse(arguments)), conn, HashEmbedder())


def test_role_project_map_refuses_claims_outside_it(
    admin: psycopg.Connection[Any], login_role: tuple[str, str], owner: str
) -> None:
    role, dsn = login_role
    assert grant_project(admin, role, "alpha") == ["alpha"]
    remember = {"content": "alpha's own rule", "scope": "project", "project": "alpha"}
    assert run_as(dsn, owner, "remember", remember).created
    rows = run_as(dsn, owner, "search_ghost_memories", {"current_project": "alpha"}).rows
    assert [r.content for r in rows] == ["alpha's own rule"]
    with pytest.raises(InvalidArgument, match="may not act for project 'beta'"):
        run_as(dsn, owner, "search_ghost_memories", {"current_project": "beta"})
    with pytest.raises(InvalidArgument, match="may not act for project 'beta'"):
        run_as(dsn, owner, "remember", {**remember, "project": "beta"})
    # the server itself refuses, whatever the client does
    with psycopg.connect(dsn) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege, match="beta"):
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(RUNTIME)))
        conn.execute("SELECT * FROM agent.search_ghost_ranked(%s, 'beta', '', NULL, NULL)", (owner,))
    # feedback by id with no bound project: only memories visible under a project the role may claim
    betas = remember_at(admin, owner, "beta's rule", scope="project", project="beta")
    restricted = remember_at(
        admin, owner, "shared with beta and alpha", scope="shared-restricted", allowlist=["beta", "alpha"]
    )
    with pytest.raises(NotFound):
        run_as(dsn, owner, "give_feedback", {"memory_id": betas, "signal": "endorse"})
    assert (
        run_as(dsn, owner, "give_feedback", {"memory_id": restricted, "signal": "endorse"}).memory.memory_id
        == restricted
    )
    assert revoke_project(admin, role, "alpha") == []
    assert (
        run_as(dsn, owner, "give_feedback", {"memory_id": betas, "signal": "endorse"}).memory.memory_id
        == betas
    )
    assert run_as(dsn, owner, "search_ghost_memories", {"current_project": "beta"}).rows != []
    with pytest.raises(InvalidArgument, match="no database role"):
        grant_project(admin, "no_such_role_" + uuid.uuid4().hex[:6], "alpha")


def test_a_ghost_search_with_nothing_to_rank_embeds_nothing(pg_dsn: str, owner: str) -> None:
    """A query is embedded only when some memory is visible under the claim: an owner without ghosts (a new home,
    an agent's first call), a claim under which none of its memories is visible, or another owner's memories give
    an empty answer at once (with the real model on a new home, embedding would first prepare it, ~20 s)."""
    counting = CountingEmbedder()
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=counting) as gm:
        assert gm.search_ghost_memories("deploy on fridays").data.rows == []
        assert counting.texts == []
        gm.remember("alpha deploys on Mondays", scope="project", project="alpha")
        counting.texts.clear()
        assert gm.search_ghost_memories("deploy", current_project="beta").data.rows == []
        assert gm.search_ghost_memories("deploy").data.rows == []
        assert counting.texts == []
        found = gm.search_ghost_memories("deploy", current_project="alpha").data.rows
        assert [r.content for r in found] == ["alpha deploys on Mondays"]
        assert counting.texts == ["deploy"]
    with GhostMem(dsn=pg_dsn, owner=f"{owner}-other", embedder=counting) as other:
        assert other.search_ghost_memories("deploy", current_project="alpha").data.rows == []
        assert counting.texts == ["deploy"]


def test_missing_runtime_role_is_explained(gm: GhostMem, pg_dsn: str, owner: str) -> None:
    spec = get_op("search_ghost_memories")
    ctx = OpContext(owner=owner, runtime_role="ghostmem_no_such_role")
    with psycopg.connect(pg_dsn) as conn, pytest.raises(DatabaseUnavailable, match="install_runtime_role"):
        run_sync(spec.program(ctx, spec.parse({})), conn, HashEmbedder())


def test_full_text_gathers_candidates_the_vector_leg_misses(
    admin: psycopg.Connection[Any], owner: str
) -> None:
    rng = random.Random(7)
    query_vec = unit(rng)
    for i in range(150):  # all close to the query: they fill the vector leg's 100 candidates
        near = [q + 0.02 * rng.gauss(0, 1) for q in query_vec]
        remember_at(admin, owner, f"routine note {i}", embedding=near)
    far = [rng.gauss(0, 1) for _ in range(DIMS)]
    target = remember_at(admin, owner, "kubernetes upgrades need a drained node", embedding=far)
    admin.execute(
        "UPDATE agent.ghost_memories SET incidents_prevented = 20, endorsements = 20 WHERE memory_id = %s",
        (target,),
    )
    found = ranked(admin, owner, T0, "default", query="kubernetes", query_vec=query_vec, lim=5)
    assert found[0]["memory_id"] == target
    assert found[0]["breakdown"]["semantic"] < 0.1
    other = ranked(admin, owner, T0, "default", query="routine", query_vec=query_vec, lim=5)
    assert target not in {r["memory_id"] for r in other}


def ghostmem_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GHOSTMEM_EMBED_MODEL": "hash"}
    return subprocess.run(
        [sys.executable, "-m", "ghostmem.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_cli_remember_ghosts_feedback_and_the_project_map(
    admin: psycopg.Connection[Any], login_role: tuple[str, str], pg_dsn: str, owner: str
) -> None:
    common = ["--dsn", pg_dsn, "--owner", owner, "--json"]
    made = ghostmem_cli(
        "remember", "Use feature flags for risky changes", "--scope", "project", "--project", "alpha", *common
    )
    assert made.returncode == 0, made.stderr
    mid = json.loads(made.stdout)["memory"]["memory_id"]
    found = ghostmem_cli("ghosts", "feature flags", "--current-project", "alpha", *common)
    assert [r["memory_id"] for r in json.loads(found.stdout)["rows"]] == [mid]
    assert json.loads(ghostmem_cli("ghosts", *common).stdout)["rows"] == []  # no claim: project memory hidden
    fed = ghostmem_cli("feedback", str(mid), "endorse", "--note", "worked", *common)
    assert json.loads(fed.stdout)["memory"]["breakdown"]["endorsement"] > 0
    unknown = ghostmem_cli("feedback", "999999999", "endorse", "--dsn", pg_dsn, "--owner", owner)
    assert unknown.returncode == 2 and "no ghost memory with memory_id 999999999" in unknown.stderr
    assert "Traceback" not in unknown.stderr

    role, _ = login_role
    granted = ghostmem_cli("grant-project", role, "alpha", "--dsn", pg_dsn, "--json")
    assert json.loads(granted.stdout) == {"role": role, "projects": ["alpha"]}
    assert json.loads(ghostmem_cli("grant-project", role, "beta", "--dsn", pg_dsn, "--json").stdout)[
        "projects"
    ] == [
        "alpha",
        "beta",
    ]
    revoked = ghostmem_cli("revoke-project", role, "--dsn", pg_dsn)
    assert revoked.returncode == 0 and "may claim any project" in revoked.stdout
    missing = ghostmem_cli("grant-project", "no_such_role_zz", "alpha", "--dsn", pg_dsn)
    assert missing.returncode == 2 and "there is no database role" in missing.stderr


def test_real_model_finds_a_rule_by_meaning(pg_dsn: str, owner: str, real_embedder: Any) -> None:
    rules = [
        "Never deploy to production on a Friday afternoon",
        "Run the database migrations before starting the test suite",
        "Keep API keys out of the repository; use the secrets manager",
        "Write the changelog entry in the same pull request",
    ]
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=real_embedder) as store:
        ids = [store.remember(rule).data.memory.memory_id for rule in rules]
        top = store.search_ghost_memories("shipping a release right before the weekend", limit=2).data.rows
        assert top[0].memory_id == ids[0]
        assert top[0].breakdown["semantic"] > top[1].breakdown["semantic"]
        again = store.remember("Never deploy to production on Friday afternoons").data  # cosine distance 0.04
        assert not again.created and again.memory.memory_id == ids[0]
        # the opposite rule is as close as a paraphrase (0.10): the threshold keeps it a memory of its own
        assert store.remember("Always deploy to production on a Friday afternoon").data.created


def test_concurrent_identical_remembers_store_one_memory(pg_dsn: str, owner: str) -> None:
    def remember_once(_: int) -> tuple[int, bool]:
        with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as store:
            data = store.remember("Pin every dependency in the lock file").data
            return data.memory.memory_id, data.created

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(remember_once, range(4)))
    assert len({mid for mid, _ in results}) == 1
    assert sorted(created for _, created in results) == [False, False, False, True]


# -- Japanese words (SudachiPy) -----------------------------------------------------------------------------------

JA_RULE = "毎朝、新聞を読みます"  # "I read the paper every morning": words 新聞, 毎朝, 読む
JA_QUERY = "昨日読んだ"  # "read yesterday": not one character pair in common with the rule; the word 読む is


def _crowd_the_vector_leg(admin: psycopg.Connection[Any], owner: str, query: str) -> None:
    """150 memories nearer the query's vector than any other, which fill the vector leg's 100 candidates: a memory
    is then returned only when the full-text leg finds it."""
    rng = random.Random(11)
    query_vec = HashEmbedder().embed_query(query)
    for i in range(150):
        remember_at(
            admin, owner, f"routine note {i}", embedding=[q + 0.02 * rng.gauss(0, 1) for q in query_vec]
        )


def _strong(admin: psycopg.Connection[Any], memory_id: int) -> None:
    """Signals that rank a memory above the crowd once it is a candidate at all."""
    admin.execute(
        "UPDATE agent.ghost_memories SET incidents_prevented = 20, endorsements = 20 WHERE memory_id = %s",
        (memory_id,),
    )


async def _found_on_every_surface(gm: GhostMem, dsn: str, query: str) -> dict[str, list[str]]:
    """The contents each surface's ghost search returns for ``query`` (limit 3)."""
    found = {"client": [r.content for r in gm.search_ghost_memories(query, limit=3).data.rows]}
    cli = ghostmem_cli("ghosts", query, "--limit", "3", "--dsn", dsn, "--owner", gm.owner, "--json")
    assert cli.returncode == 0, cli.stderr
    found["cli"] = [r["content"] for r in json.loads(cli.stdout)["rows"]]
    for surface in ("langchain", "llamaindex", "mcp"):
        error, text, rows = await surface_caller(surface, gm)(
            "search_ghost_memories", {"query": query, "limit": 3}
        )
        assert not error, text
        found[surface] = rows
    return found


@pytest.mark.skipif(not japanese.available(), reason="needs the [ja] extra (SudachiPy)")
async def test_a_japanese_rule_is_found_by_an_inflected_form_on_every_surface(
    gm: GhostMem, admin: psycopg.Connection[Any], pg_dsn: str, owner: str
) -> None:
    _crowd_the_vector_leg(admin, owner, JA_QUERY)
    rule = gm.remember(JA_RULE).data.memory.memory_id
    english = gm.remember("Rotate the staging keys every month").data.memory.memory_id
    for memory_id in (rule, english):
        _strong(admin, memory_id)
    stored = dict(
        admin.execute(
            "SELECT memory_id, morphemes FROM agent.ghost_memories WHERE memory_id = ANY (%s)",
            ([rule, english],),
        ).fetchall()
    )
    assert stored == {rule: ["ja:新聞", "ja:毎朝", "ja:読む"], english: None}
    # an English memory's lexemes are what they were before words existed
    assert admin.execute(
        "SELECT tsv = ghostmem.lexemes(content) FROM agent.ghost_memories WHERE memory_id = %s", (english,)
    ).fetchone() == (True,)

    for surface, contents in (await _found_on_every_surface(gm, pg_dsn, JA_QUERY)).items():
        assert contents[0] == JA_RULE, surface
    assert [r.memory_id for r in gm.search_ghost_memories("rotating keys", limit=1).data.rows] == [english]

    # the query's words are what found it: without them the same search misses the rule
    with admin.cursor(row_factory=dict_row) as cur:
        cur.execute(
            "SELECT memory_id FROM agent.rank_ghosts_at(%s, %s, NULL, %s, %s::vector, NULL, 'default', 3)",
            (T0, owner, JA_QUERY, vec(HashEmbedder().embed_query(JA_QUERY))),
        )
        assert rule not in {r["memory_id"] for r in cur.fetchall()}

    # a reworded memory gets the new wording's words; retired and restored, it gets them again
    gm.update_memory(rule, "毎晩、雑誌を読んでいる")
    words = admin.execute(
        "SELECT morphemes FROM agent.ghost_memories WHERE memory_id = %s", (rule,)
    ).fetchone()
    assert words == (["ja:居る", "ja:毎晩", "ja:読む", "ja:雑誌"],)
    gm.retire_memory(rule, reason="moved to the wiki")
    gm.restore_memory(rule)
    assert (
        admin.execute("SELECT morphemes FROM agent.ghost_memories WHERE memory_id = %s", (rule,)).fetchone()
        == words
    )
    assert [r.content for r in gm.search_ghost_memories(JA_QUERY, limit=1).data.rows] == [
        "毎晩、雑誌を読んでいる"
    ]


@pytest.mark.skipif(not japanese.available(), reason="needs the [ja] extra (SudachiPy)")
def test_enrich_gives_japanese_words_to_ghost_memories_stored_without_them(
    gm: GhostMem, admin: psycopg.Connection[Any], owner: str
) -> None:
    """A memory written before the [ja] extra (or before migration 105) has character pairs only, until enrich."""
    _crowd_the_vector_leg(admin, owner, JA_QUERY)
    rule = gm.remember(JA_RULE).data.memory.memory_id
    _strong(admin, rule)
    admin.execute("UPDATE agent.ghost_memories SET morphemes = NULL WHERE memory_id = %s", (rule,))
    assert JA_RULE not in [r.content for r in gm.search_ghost_memories(JA_QUERY, limit=3).data.rows]
    gm.enrich()
    assert next(r.content for r in gm.search_ghost_memories(JA_QUERY, limit=3).data.rows) == JA_RULE
    assert fill_memory_words(admin, owner) == 0  # nothing left to fill


def test_an_empty_answer_says_whether_anything_applies_here(gm: GhostMem) -> None:
    """An overview that lists nothing said "None stored yet" even to an agent of a project whose owner keeps its
    rules in another project, and a search on a store without any said only "No ghost memories match": each now says
    that nothing that applies here is stored (whether it asked with words or not); once a rule applies here, the
    overview lists it."""
    nothing = (
        "No ghost memory that applies here is stored yet (none at all, or only other projects'): remember"
    )
    for query, project in (("", None), ("deploy rules", None), ("", "webapp")):
        empty = gm.search_ghost_memories(query=query, current_project=project)
        assert empty.data.none_visible and empty.text.startswith(nothing), (query, project)
    gm.remember(content="Tag every billing release.", scope="project", project="billing")
    for query in ("", "deploy rules"):
        elsewhere = gm.search_ghost_memories(query=query, current_project="webapp")
        assert elsewhere.data.rows == [] and elsewhere.text.startswith(nothing), query
    assert gm.search_ghost_memories(query="", current_project="billing").data.rows
    gm.remember(content="Run the webapp migrations before its tests.", scope="project", project="webapp")
    listed = gm.search_ghost_memories(query="", current_project="webapp")
    assert listed.data.rows and not listed.data.none_visible
