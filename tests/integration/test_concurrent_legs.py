"""A search's two legs at the same time on two pooled connections (program.Concurrent, db.spare): the same results
as on one connection, a spare only where that is safe, always given back clean, and no way to another owner's
rows."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ghostmem import AsyncGhostMem, GhostMem, HashEmbedder, db
from ghostmem.args import SearchPersonalMemoryArgs
from ghostmem.capture import append_messages
from ghostmem.errors import InvalidArgument
from ghostmem.program import Concurrent, Program, Query, run_async, run_sync
from ghostmem.records import MessageRecord
from ghostmem.search import search_personal_memory
from support.conversations import conversation, import_generic
from support.copies import owners_of_the_same_ids

# Every kind of search the split changes: the filters, a speaker named (its bonus), a question asking when (its
# bonus), a word no message holds, and the single-leg modes (one statement, as before).
SEARCHES: list[dict[str, Any]] = [
    {"query": "vacuum freeze postgres"},
    {"query": "deploy staging friday", "days": 30},
    {"query": "deploy staging friday", "days": 7},
    {"query": "deploy notes", "platform": "generic"},
    {"query": "deploy notes", "project": "ops"},
    {"query": "deploy notes", "project": "ops", "days": 30},
    {"query": "what did ann say about the deploy"},
    {"query": "when did we deploy staging"},
    {"query": "zyzzyva"},
    {"query": "vacuum freeze postgres", "mode": "lexical"},
    {"query": "vacuum freeze postgres", "mode": "vector"},
]


@pytest.fixture
def owner_store(pg_dsn: str, owner: str, tmp_path: Path) -> str:
    """An owner's store of conversations over a few topics, days, projects and a named speaker."""
    convs = [
        conversation(
            "pg", "postgres maintenance", 2, ["how do I vacuum freeze postgres", "run VACUUM FREEZE"]
        ),
        conversation(
            "dep", "staging deploy", 3, ["we deploy staging on friday", "deploy notes: it went fine"], "ops"
        ),
        conversation(
            "old", "old deploy", 40, ["the deploy of last year", "deploy notes from the old days"], "ops"
        ),
        conversation("misc", "cooking", 5, ["a recipe for bread", "knead the dough"]),
    ]
    convs += [
        conversation(f"n{i}", f"note {i}", i, [f"deploy note {i} about staging", f"vacuum log {i}"], "ops")
        for i in range(12)
    ]
    convs[1]["messages"][0]["speaker"] = "ann"
    with GhostMem(dsn=pg_dsn, owner=owner, embedder=HashEmbedder()) as gm:
        import_generic(gm, tmp_path / "c.jsonl", convs)
    return owner


def _store(pg_dsn: str, owner: str, size: int, **kwargs: Any) -> GhostMem:
    return GhostMem(
        dsn=pg_dsn, owner=owner, embedder=HashEmbedder(), pool_min_size=size, pool_max_size=size, **kwargs
    )


def _results(gm: GhostMem) -> list[dict[str, Any]]:
    return [gm.run("search_personal_memory", {**s, "explain": True}).data.model_dump() for s in SEARCHES]


def _requests(pool: Any) -> int:
    return int(pool.get_stats().get("requests_num", 0))


def _wait_until_idle(pool: Any) -> None:
    """Until every connection of ``pool`` is back (a pool opens its min_size connections in the background)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        stats = pool.get_stats()
        if stats["pool_available"] == stats["pool_size"] == pool.min_size:
            return
        time.sleep(0.01)
    raise AssertionError(pool.get_stats())


def test_a_search_finds_the_same_with_a_spare_as_on_one_connection(pg_dsn: str, owner_store: str) -> None:
    """Every search of SEARCHES gives the same hits, scores, matches and explanations whether its legs ran at once
    on two connections (a pool of two: each hybrid search took a spare) or in one statement on one (a pool of one,
    and a connection run without a pool), and finds what it should."""
    with _store(pg_dsn, owner_store, 2) as two:
        two.connect()
        _wait_until_idle(two.pool)
        before = _requests(two.pool)
        spared = _results(two)
        hybrid = sum(1 for s in SEARCHES if s.get("mode", "hybrid") == "hybrid" and s["query"] != "zyzzyva")
        # one checkout per search, one spare per hybrid search with messages in scope
        assert _requests(two.pool) - before >= len(SEARCHES) + hybrid - 1
    with _store(pg_dsn, owner_store, 1) as one:
        alone = _results(one)
        with one.connection() as conn:
            plain = [
                run_sync(
                    search_personal_memory(one.context, SearchPersonalMemoryArgs(**s, explain=True)),
                    conn,
                    one.embedder,
                ).model_dump()
                for s in SEARCHES
            ]
    assert spared == alone == plain
    found = {
        s["query"] + str(s.get("days", s.get("project", ""))): [h["conv_id"] for h in r["rows"]]
        for s, r in zip(SEARCHES, spared, strict=True)
    }
    assert found["vacuum freeze postgres"][0] == "pg"
    assert "dep" in found["deploy staging friday7"] and "old" not in found["deploy staging friday7"]
    assert set(found["deploy notesops"]) <= {"dep", "old", *(f"n{i}" for i in range(12))}
    assert found["zyzzyva"] == []


def test_an_async_search_finds_the_same_with_a_spare(pg_dsn: str, owner_store: str) -> None:
    """The async client awaits both legs together on two connections of its pool, with the same results."""

    async def results(size: int) -> tuple[list[dict[str, Any]], int]:
        async with AsyncGhostMem(
            dsn=pg_dsn, owner=owner_store, embedder=HashEmbedder(), pool_min_size=size, pool_max_size=size
        ) as agm:
            pool = await agm.apool()
            deadline = time.monotonic() + 10
            while pool.get_stats()["pool_available"] < size and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            before = _requests(pool)
            out = [
                (await agm.run("search_personal_memory", {**s, "explain": True})).data.model_dump()
                for s in SEARCHES
            ]
            return out, _requests(pool) - before

    spared, taken = asyncio.run(results(2))
    alone, single = asyncio.run(results(1))
    assert spared == alone
    assert single == len(SEARCHES) and taken > len(SEARCHES)


def _counting_spare(pool: Any, used: list[int]) -> Any:
    """``db.spare(pool)``, recording the backend of each spare lent."""

    @__import__("contextlib").contextmanager
    def spare() -> Iterator[psycopg.Connection[Any] | None]:
        with db.spare(pool) as conn:
            if conn is not None:
                used.append(conn.info.backend_pid)
            yield conn

    return spare


def test_a_transaction_that_wrote_finds_its_own_message_in_both_legs(pg_dsn: str, owner_store: str) -> None:
    """A search inside a transaction that wrote a message finds it through both legs (lexical and vector ranks),
    although a spare was free: rows read on another connection, which cannot see the write, are not used."""
    with _store(pg_dsn, owner_store, 2) as gm:
        gm.connect()
        _wait_until_idle(gm.pool)
        used: list[int] = []
        with gm.connection() as conn:
            append_messages(
                conn, gm.owner, "fresh", "generic",
                [MessageRecord(native_id="0", role="user", text="quokka habitat survey results")],
                embedder=gm.embedder,
            )  # fmt: skip
            args = SearchPersonalMemoryArgs(query="quokka habitat survey", explain=True)
            result = run_sync(
                search_personal_memory(gm.context, args), conn, gm.embedder, _counting_spare(gm.pool, used)
            )
            conn.rollback()
        assert used  # a spare was free, and lent
        assert [h.conv_id for h in result.rows][:1] == ["fresh"]
        explain = result.rows[0].explain or {}
        assert explain["lexical_rank"] == 1 and explain["vector_rank"] == 1, explain
        assert gm.search_personal_memory("quokka habitat survey").data.rows == []  # it was never committed
        assert gm.pool.get_stats()["pool_available"] == 2


def test_a_repeatable_read_search_reads_only_its_snapshot(pg_dsn: str, owner_store: str) -> None:
    """Under REPEATABLE READ a search reads its transaction's snapshot: a message committed by another connection
    after the snapshot was taken changes neither leg's ranks (a spare's own snapshot would rank it first by meaning
    and push every other message down), so the search finds what it found before the write."""
    query = "deploy notes staging friday"
    with _store(pg_dsn, owner_store, 2) as gm, _store(pg_dsn, owner_store, 1) as writer:
        gm.connect()
        _wait_until_idle(gm.pool)
        used: list[int] = []
        args = SearchPersonalMemoryArgs(query=query, explain=True)
        with gm.connection() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            before = run_sync(search_personal_memory(gm.context, args), conn, gm.embedder)  # the snapshot
            with writer.connection() as other:
                append_messages(
                    other, writer.owner, "later", "generic",
                    [MessageRecord(native_id="0", role="user", text=query)],
                    embedder=writer.embedder,
                )  # fmt: skip
            after = run_sync(
                search_personal_memory(gm.context, args), conn, gm.embedder, _counting_spare(gm.pool, used)
            )
        assert used and before.rows and after == before
        assert gm.search_personal_memory(query, explain=True).data.rows[0].conv_id == "later"


def test_a_pool_of_one_searches_without_waiting(pg_dsn: str, owner_store: str) -> None:
    """With a pool of one (its only connection is the search's), the legs run in the search's one statement: no
    request for a second connection waits, and a short pool timeout is never reached."""
    with _store(pg_dsn, owner_store, 1, pool_timeout=0.5) as gm:
        for s in SEARCHES:
            gm.run("search_personal_memory", s)
        stats = gm.pool.get_stats()
    assert (
        stats["pool_size"] == 1
        and stats.get("requests_queued", 0) == 0
        and stats.get("requests_errors", 0) == 0
    )
    assert stats["requests_num"] == len(SEARCHES)


def _legs(*queries: str) -> Program[Any]:
    rows = yield Concurrent(tuple(Query(q) for q in queries))
    return rows


@pytest.mark.parametrize("failing", [0, 1])
def test_a_failing_leg_gives_every_connection_back_clean(pg_dsn: str, owner: str, failing: int) -> None:
    """A statement that fails on the caller's connection (0) or on the spare (1) comes out as its ghostmem error once
    the other statement ended; the spare is back in the pool, idle (not in a failed transaction), and the next
    search runs."""
    queries = ["SELECT pg_sleep(0.1) AS x", "SELECT pg_sleep(0.1) AS x"]
    queries[failing] = "SELECT 1 / 0 AS x"
    with _store(pg_dsn, owner, 2) as gm:
        gm.connect()
        _wait_until_idle(gm.pool)
        with pytest.raises(InvalidArgument, match="division by zero"), gm.connection() as conn:
            run_sync(_legs(*queries), conn, gm.embedder, partial(db.spare, gm.pool))
        _wait_until_idle(gm.pool)
        with gm.pool.connection() as a, gm.pool.connection() as b:
            assert {a.info.transaction_status, b.info.transaction_status} == {
                psycopg.pq.TransactionStatus.IDLE
            }
        assert gm.search_personal_memory("anything").data.rows == []


def test_a_failing_async_leg_gives_every_connection_back_clean(pg_dsn: str, owner: str) -> None:
    """The async twin: the spare's failure comes out as its ghostmem error, and the pool has both connections back
    idle."""

    async def run() -> None:
        async with AsyncGhostMem(
            dsn=pg_dsn, owner=owner, embedder=HashEmbedder(), pool_min_size=2, pool_max_size=2
        ) as agm:
            pool = await agm.apool()
            while pool.get_stats()["pool_available"] < 2:
                await asyncio.sleep(0.01)
            async with db.acheckout(pool) as conn:
                with pytest.raises(InvalidArgument, match="division by zero"):
                    await run_async(
                        _legs("SELECT pg_sleep(0.1) AS x", "SELECT 1 / 0 AS x"),
                        conn, agm.embedder, partial(db.aspare, pool),
                    )  # fmt: skip
                await conn.rollback()
            assert pool.get_stats()["pool_available"] == 2
            async with pool.connection() as a, pool.connection() as b:
                assert (
                    a.info.transaction_status
                    == b.info.transaction_status
                    == psycopg.pq.TransactionStatus.IDLE
                )

    asyncio.run(run())


def test_a_spare_never_shows_another_owners_message_of_the_same_id(pg_dsn: str, tmp_path: Path) -> None:
    """Two owners holding the same message ids (as test_search's attack): with the legs on two connections, each
    leg statement and the fusion statement bind the owner, so ann's hits show only her messages."""
    texts = owners_of_the_same_ids(pg_dsn, tmp_path)
    owners = list(texts)
    with _store(pg_dsn, owners[0], 2) as gm:
        _wait_until_idle(gm.pool)
        before = _requests(gm.pool)
        for query in ("friday deploy staging secret", "when did ann deploy on friday", "hunter2 password"):
            shown = [m.text for hit in gm.search_personal_memory(query).data.rows for m in hit.matches]
            assert set(shown) <= set(texts[owners[0]]), (query, shown)
        assert _requests(gm.pool) - before == 6  # every search took a spare


def test_a_killed_spare_costs_the_search_nothing_and_the_pool_recovers(pg_dsn: str, owner_store: str) -> None:
    """The spare's backend terminated while its statement runs: the statement runs again on the caller's connection
    and the step gets its rows as if no spare had been lent (a spare never fails a search); the dead connection is
    replaced, and the next searches run, spares and all."""
    marker = f"spare-{uuid.uuid4().hex[:8]}"
    with _store(pg_dsn, owner_store, 2) as gm:
        gm.connect()
        _wait_until_idle(gm.pool)
        killed: list[int] = []

        def kill() -> None:
            with psycopg.connect(pg_dsn, autocommit=True) as admin:
                for _ in range(300):
                    row = admin.execute(
                        "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE %s"
                        " AND query NOT LIKE '%%pg_stat_activity%%' AND state = 'active'",
                        (f"%{marker}%",),
                    ).fetchone()
                    if row:
                        killed.append(row[0])
                        return
                    time.sleep(0.005)

        killer = threading.Thread(target=kill)
        killer.start()
        spares: list[int] = []
        with gm.connection() as conn:
            rows = run_sync(
                _legs("SELECT 1 AS x", f"SELECT 2 AS x, pg_sleep(0.3) IS NULL AS slept /* {marker} */"),
                conn, gm.embedder, _counting_spare(gm.pool, spares),
            )  # fmt: skip
            caller = conn.info.backend_pid
        killer.join()
        assert killed == spares and caller not in killed  # the spare was killed, not the caller's connection
        assert rows == [[{"x": 1}], [{"x": 2, "slept": False}]]
        for _ in range(3):
            assert [h.conv_id for h in gm.search_personal_memory("vacuum freeze postgres").data.rows][:1] == [
                "pg"
            ]
        _wait_until_idle(gm.pool)


def test_a_lock_held_by_the_callers_transaction_does_not_hang_its_search(
    pg_dsn: str, owner_store: str
) -> None:
    """A caller's transaction that holds a lock its search's reads need (LOCK TABLE ... ACCESS EXCLUSIVE, then a
    search): the spare would wait for it forever, a wait in the client that the server's deadlock detector cannot
    see. It gives up after SPARE_LOCK_TIMEOUT and its leg runs on the caller's connection: the search returns what
    it returns without a spare, in well under a second."""
    args = SearchPersonalMemoryArgs(query="deploy notes staging", explain=True)
    with _store(pg_dsn, owner_store, 2) as gm:
        gm.connect()
        _wait_until_idle(gm.pool)
        with gm.connection() as conn:
            expected = run_sync(search_personal_memory(gm.context, args), conn, gm.embedder)
        outcome: list[Any] = []
        used: list[int] = []

        def search() -> None:
            with gm.connection() as conn:
                conn.execute(
                    "LOCK TABLE ghostmem.messages, ghostmem.message_vectors, ghostmem.message_bits"
                    " IN ACCESS EXCLUSIVE MODE"
                )
                outcome.append(
                    run_sync(
                        search_personal_memory(gm.context, args),
                        conn,
                        gm.embedder,
                        _counting_spare(gm.pool, used),
                    )
                )

        worker = threading.Thread(target=search)
        started = time.monotonic()
        worker.start()
        worker.join(timeout=10)
        if worker.is_alive():  # free the spare, so that the suite goes on, then fail
            with psycopg.connect(pg_dsn, autocommit=True) as admin:
                admin.execute("SELECT pg_cancel_backend(p) FROM unnest(%s::int[]) AS p", (used,))
            worker.join()
            pytest.fail("the search waited for its spare, which waited for the caller's own lock")
        assert used and outcome == [expected]
        assert time.monotonic() - started < 2
        _wait_until_idle(gm.pool)
