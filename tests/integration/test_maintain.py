"""``ghostmem maintain`` (maintenance.maintain, GhostMem.maintain): a store fed by live capture alone, which no import
ends, gets from it what the end of an import builds for the owner (the recent graph 210, the platform graphs 230,
the recent words index 240, the platform words indexes 250, the tiers' common words 220, the merged pending lists
260), each step reported; the search reads them afterwards; a second run builds nothing and says so; another
owner's indexes are never touched; an application's login is refused in one sentence, non-zero, nothing built."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder
from ghostmem.args import SearchPersonalMemoryArgs
from ghostmem.errors import PermissionDenied
from ghostmem.records import MessageRecord
from support.cli import ghostmem
from support.databases import app_login, graph_store
from support.statements import conjunction_search

SIZE = 12  # project_graph_rows and platform_graph_rows here
OWNER_ROWS = 40  # recent_graph_rows, recent_words_rows, platform_words_rows and common_words_rows here
SAID = ["deploy plan for the release", "the deploy plan is ready", "rollback steps", "release notes drafted"]
QUERY = "deploy plan release"
OWNER, OTHER = "o'brien %s", "o'brien %s\\"  # one the other's prefix, quotes, `%`, a backslash
PLATFORMS = ("langchain", "llamaindex")  # 24 messages each of 48: each at most half, each a graph of its own


def _digest(owner: str, sep: str, scope: str) -> str:
    return hashlib.sha256(f"{len(owner)}{sep}{owner}{scope}".encode()).hexdigest()[:40]


def owners_indexes(owner: str) -> set[str]:
    """The names migrations 210, 230, 240 and 250 give a capture-fed owner's recent graph, platform graphs,
    recent words index and platform words indexes, computed here on their own."""
    return {
        "message_vectors_graph_" + _digest(owner, ":", ""),
        "messages_recent_words_" + _digest(owner, ":", ""),
        *("message_vectors_graph_" + _digest(owner, ";", p) for p in PLATFORMS),
        *("messages_words_" + _digest(owner, ";", p) for p in PLATFORMS),
    }


def indexes(dsn: str) -> dict[str, int]:
    """Every speedup index (graphs, recent and scope words): name -> oid (a rebuilt one has a new oid)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT relname, oid::int8 FROM pg_class WHERE relkind = 'i' AND relnamespace = 'ghostmem'::regnamespace"
            " AND (relname LIKE 'message\\_vectors\\_graph\\_%' OR relname LIKE 'messages\\_recent\\_words\\_%'"
            " OR relname LIKE 'messages\\_words\\_%')"
        ).fetchall()
    return {r[0]: r[1] for r in rows}


def listed_tiers(dsn: str, owner: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM ghostmem.common_words_counted WHERE owner = %s", (owner,)
        ).fetchone()
    return int(row[0]) if row else 0


def capture(dsn: str, owner: str) -> None:
    """48 messages of ``owner`` by live capture alone, no project (so no capture builds a graph), on two platforms."""
    with GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder()) as gm:
        for i in range(4):
            said = [
                MessageRecord(native_id="", role="user", text=f"{SAID[j % 4]} {i} {j}") for j in range(SIZE)
            ]
            gm.capture_append(f"c{i}", said, platform=PLATFORMS[i % 2])  # type: ignore[arg-type]


def maintain(dsn: str, owner: str, *more: str) -> tuple[int, Any, str]:
    done = ghostmem("--dsn", dsn, "--owner", owner, "--json", "maintain", *more)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


@pytest.fixture
def store(server_dsn: str) -> Iterator[str]:
    with graph_store(server_dsn, "ghostmem_maint", "project_graph_rows", SIZE) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for key, value in (
                ("platform_graph_rows", SIZE),
                ("recent_graph_rows", OWNER_ROWS),
                ("recent_words_rows", OWNER_ROWS),
                ("platform_words_rows", OWNER_ROWS),
                ("common_words_rows", OWNER_ROWS),
            ):
                conn.execute("UPDATE ghostmem.settings SET value = %s WHERE key = %s", (str(value), key))
        capture(dsn, OWNER)
        yield dsn


def _reads(dsn: str, owner: str) -> set[str]:
    """The GIN indexes of words a hybrid search of ``owner`` filtered by the first platform fetches through."""
    with GhostMem(dsn=dsn, owner=owner, embedder=HashEmbedder()) as gm:
        args = SearchPersonalMemoryArgs(query=QUERY, mode="hybrid", limit=20, platform=PLATFORMS[0])
        rows, read = conjunction_search(gm, args, r"messages_(?:owner_words|words_[0-9a-f]{40})")
    assert rows
    return read


def test_a_captured_store_gets_its_indexes_from_maintain_and_a_second_run_does_nothing(store: str) -> None:
    """Capture alone leaves the owner without its speedups (the search reads no index of the platform's words);
    `ghostmem maintain` builds them, reports each step (names built, tiers listed, seconds), the search then reads
    the platform's own index; a second run reports nothing to do, and builds, drops and lists nothing."""
    assert indexes(store) == {}
    assert listed_tiers(store, OWNER) == 0
    assert not any(name.startswith("messages_words_") for name in _reads(store, OWNER))
    code, report, _ = maintain(store, OWNER)
    assert code == 0, report
    assert report["owners"] == [OWNER] and report["changed"] is True
    built = {name for step in report["steps"] for name in step["built"]}
    assert built == owners_indexes(OWNER) == set(indexes(store))
    by_step = {step["step"]: step for step in report["steps"]}
    assert by_step["graphs"]["count"] == 3 and by_step["project and platform words indexes"]["count"] == 2
    assert by_step["recent words index"]["count"] == 1
    assert by_step["tiers' common words listed"]["count"] == 1
    assert all(step["seconds"] >= 0 and not step["dropped"] for step in report["steps"])
    assert listed_tiers(store, OWNER) == 1
    with psycopg.connect(store, autocommit=True) as conn:
        conn.execute(
            "VACUUM ANALYZE ghostmem.messages"
        )  # as autovacuum does (too small for analyze_new_pages)
    assert _reads(store, OWNER) == {"messages_words_" + _digest(OWNER, ";", PLATFORMS[0])}
    before = indexes(store)
    code, again, _ = maintain(store, OWNER)
    assert code == 0 and again["changed"] is False
    assert all(s["count"] == 0 and not s["built"] and not s["dropped"] for s in again["steps"]), again
    assert indexes(store) == before
    text = ghostmem("--dsn", store, "--owner", OWNER, "maintain")
    assert text.returncode == 0 and "nothing to do" in text.stdout, text


def test_maintain_never_touches_another_owners_indexes(store: str) -> None:
    """Another owner (the first's name its prefix) fed the same way keeps its indexes, the same ones (oids),
    through the first owner's run, and gets none it did not have; every owner's run (--every-owner) builds the
    others' and runs the steps over every owner's tables once."""
    capture(store, OTHER)
    assert maintain(store, OTHER)[0] == 0
    theirs = {n: oid for n, oid in indexes(store).items() if n in owners_indexes(OTHER)}
    assert set(theirs) == owners_indexes(OTHER)
    code, report, _ = maintain(store, OWNER)
    assert code == 0 and report["owners"] == [OWNER]
    after = indexes(store)
    assert {n: after[n] for n in theirs} == theirs
    assert set(after) == owners_indexes(OWNER) | owners_indexes(OTHER)
    assert {s["owner"] for s in report["steps"]} == {OWNER, None}
    capture(store, "carol")
    code, report, _ = maintain(store, OWNER, "--every-owner")
    assert code == 0 and set(report["owners"]) >= {OWNER, OTHER, "carol"}
    # the merge and the analyze work on every owner's tables: once a run, not once an owner
    store_wide = [(s["step"], s["owner"]) for s in report["steps"] if s["owner"] not in report["owners"]]
    assert store_wide == [("pending pages merged", None), ("tables analyzed", None)], report["steps"]
    assert {n for s in report["steps"] for n in s["built"]} == owners_indexes("carol")
    assert {n: indexes(store)[n] for n in theirs} == theirs


def test_an_applications_login_is_refused_and_nothing_is_built(store: str) -> None:
    """The application's login may run none of the schema owner's functions: the command says so in one sentence
    and exits non-zero (with --json, the error object), the client raises PermissionDenied, and nothing is built
    or listed."""
    with app_login(store) as app:
        done = ghostmem("--dsn", app, "--owner", OWNER, "maintain")
        assert done.returncode == 2 and done.stdout == ""
        assert "may not maintain the search indexes" in done.stderr and "schema owner" in done.stderr, (
            done.stderr
        )
        code, error, _ = maintain(app, OWNER)
        assert code == 2 and error["type"] == "PermissionDenied", error
        with GhostMem(dsn=app, owner=OWNER, embedder=HashEmbedder()) as gm, pytest.raises(PermissionDenied):
            gm.maintain(every_owner=True)
    assert indexes(store) == {}
    assert listed_tiers(store, OWNER) == 0
