"""Maintenance of personal memory: import, embed, enrich, forget and watch, each on an explicit connection.

These are the jobs behind ``ghostmem import / embed / enrich / forget`` and the client's methods of the same names
(:meth:`ghostmem.GhostMem.import_paths`, ``embed_pending``, ``enrich``, ``forget``, ``watch``). Each takes the
connection, owner, tier and embedder it works with, and commits as it goes (batch by batch, conversation by
conversation), so an interrupted job keeps what it did and the next run carries on. The importer itself
(:mod:`ghostmem.ingest.runner`) only stores conversations; this module embeds and enriches what it changed.
Switching the embedding model is a schema change and lives in :mod:`ghostmem.reembed`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import Connection, sql

from ghostmem import enrich as enrichment
from ghostmem.capture import TIER as CAPTURED
from ghostmem.embed import Embedder
from ghostmem.embed import load as load_model
from ghostmem.errors import NotFound, PermissionDenied
from ghostmem.ghosts import fill_memory_words
from ghostmem.ingest import runner
from ghostmem.ingest.common import Problem
from ghostmem.ingest.report import ImportReport
from ghostmem.program import run_sync
from ghostmem.progress import Display, display
from ghostmem.records import TIERS
from ghostmem.search import DF_CAP, beginning_with, conv_ids_beginning
from ghostmem.store import embed_pending as embed_batches
from ghostmem.store import fill_morphemes, purge, remember
from ghostmem.words import Arg

logger = logging.getLogger(__name__)

ENRICH_BATCH = 500  # conversations refreshed per transaction
CAPTURE_GRAPH_LOCK_WAIT = "1s"  # the longest a capture's graph build waits for the owner's other writers


@dataclass(frozen=True, slots=True)
class EmbedReport:
    """What :func:`embed_pending` did: messages embedded, in how long (the model's load apart), and conversations
    refreshed after."""

    embedded: int
    seconds: float
    conversations_refreshed: int
    seconds_model_load: float = 0.0

    def render(self) -> str:
        rate = f" ({self.embedded / self.seconds:.0f} messages/s)" if self.embedded and self.seconds else ""
        load = (
            f" after loading the model in {self.seconds_model_load:.1f}s" if self.seconds_model_load else ""
        )
        return (
            f"embedded {self.embedded} messages in {self.seconds:.1f}s{rate}{load}; "
            f"refreshed {self.conversations_refreshed} conversations"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "embedded": self.embedded,
            "seconds": round(self.seconds, 3),
            "seconds_model_load": round(self.seconds_model_load, 3),
            "conversations_refreshed": self.conversations_refreshed,
        }


@dataclass(frozen=True, slots=True)
class _Embedded:
    count: int = 0
    seconds: float = 0.0
    seconds_model_load: float = 0.0


def import_paths(
    conn: Connection[Any],
    owner: str,
    tier: str,
    embedder: Embedder,
    paths: Sequence[str | Path] | None,
    *,
    embed: bool = True,
    enrich: bool = True,
    progress: bool = False,
) -> ImportReport:
    """Import files, folders and export zips (every platform's usual place when ``paths`` is None), then embed and
    enrich what changed.

    Args:
        embed: embed new conversational text after the import (False: lexical search only until
            :func:`embed_pending`).
        enrich: refresh intensity, conversation vectors and clusters of what changed.
        progress: show the steps and progress bars, when stderr is an interactive terminal (:mod:`ghostmem.progress`).
    """
    with display(progress) as shown:
        report = runner.import_paths(conn, owner, tier, paths, display=shown)
        _after_import(conn, owner, tier, embedder, report, shown, embed=embed, enrich=enrich)
    return report


def import_langchain_table(
    conn: Connection[Any],
    owner: str,
    tier: str,
    embedder: Embedder,
    from_dsn: str,
    table: str,
    *,
    embed: bool = True,
    enrich: bool = True,
    progress: bool = False,
) -> ImportReport:
    """Import a langchain-postgres chat history table (incrementally), then embed and enrich what changed."""
    with display(progress) as shown:
        report = runner.import_langchain_table(conn, owner, tier, from_dsn, table)
        _after_import(conn, owner, tier, embedder, report, shown, embed=embed, enrich=enrich)
    return report


def _after_import(
    conn: Connection[Any],
    owner: str,
    tier: str,
    embedder: Embedder,
    report: ImportReport,
    shown: Display,
    *,
    embed: bool,
    enrich: bool,
) -> None:
    """Embed what waits, then enrich what this import changed and what an interrupted one left unenriched."""
    with runner.autocommit(conn):
        if embed:
            done = _embed_messages(conn, owner, embedder, shown, tier=tier)
            report.messages_embedded = done.count
            report.seconds_embed, report.seconds_model_load = done.seconds, done.seconds_model_load
        if enrich:
            started = time.perf_counter()
            ids = sorted(report.conv_ids.union(unenriched(conn, owner, tier)))
            _enrich(conn, owner, tier, ids, shown)
            report.conversations_enriched = len(ids)
            report.seconds_enrich = time.perf_counter() - started
        _after_writes(conn, owner)


def embed_pending(
    conn: Connection[Any], owner: str, embedder: Embedder, *, progress: bool = False
) -> EmbedReport:
    """Embed every conversational message of the owner still without a vector (what an import with
    ``embed=False`` left), then refresh the conversations that need it (:func:`unenriched`). Resumable: each batch
    commits."""
    with runner.autocommit(conn), display(progress) as shown:
        done = _embed_messages(conn, owner, embedder, shown)
        refreshed = 0
        for tier in TIERS:
            ids = unenriched(conn, owner, tier)
            _enrich(conn, owner, tier, ids, shown)
            refreshed += len(ids)
        _after_writes(conn, owner)
    return EmbedReport(done.count, done.seconds, refreshed, done.seconds_model_load)


def _after_writes(conn: Connection[Any], owner: str) -> None:
    """What follows an import's or embedding's last write (its enrichment's): list the common words, merge what the
    enrichment's rewrites of conversations queued in the titles' and projects' indexes (the merge after the graphs
    ran before it), analyze what grew."""
    refresh_common_words(conn, owner)
    merge_pending_lists(conn)
    analyze_new_tables(conn)


def _embed_messages(
    conn: Connection[Any], owner: str, embedder: Embedder, shown: Display, *, tier: str | None = None
) -> _Embedded:
    """Embed what waits: the model's load first, as its own step, then the messages batch by batch."""
    row = conn.execute(
        "SELECT count(*) FROM ghostmem.messages WHERE owner = %s AND (%s::text IS NULL OR tier = %s)"
        " AND embedding IS NULL AND role IN ('user', 'assistant')",
        (owner, tier, tier),
    ).fetchone()
    pending = int(row[0]) if row else 0
    if not pending:
        return _Embedded()
    with shown.step("loading the embedding model") as loading:
        load_model(embedder)
    started = time.perf_counter()
    with shown.bar("embedding", pending, "messages") as bar:
        count = embed_batches(conn, owner, embedder, tier=tier, progress=bar.advance)
    build_project_graphs(conn, owner)
    return _Embedded(count, time.perf_counter() - started, loading.seconds)


def build_project_graphs(conn: Connection[Any], owner: str) -> int:
    """Give each of the owner's projects that has grown past the setting ``project_graph_rows`` its own graph
    (migration 155) and drop the graph of each that has fallen below it (migration 176), and give an owner of at
    least ``recent_graph_rows`` messages a graph of its last ``recent_graph_days`` days, replaced once its day is
    twice that old (migration 210), and each platform holding at least ``platform_graph_rows`` and at most half of the
    owner's messages a graph of its own, dropped outside those bounds (migration 230), in a transaction of its own;
    returns how many were built. Each build blocks writes of the owner's compact vectors (20-50 s per 31,000
    rows), so it runs once per import or embedding, after its batches. A role that may not build them (an
    application's: the function is the schema owner's) skips it: the project is searched as before until the
    owner's next import or embedding builds it (or ``ghostmem maintain``: :func:`maintain`). The steps, what each
    did: :func:`build_search_indexes`; then the GIN pending lists they and the writes queued are merged
    (:func:`merge_pending_lists`)."""
    built = sum(step.count for step in build_search_indexes(conn, owner))
    merge_pending_lists(conn)
    return built


GRAPHS, RECENT_WORDS, SCOPE_WORDS, MERGED, COMMON_WORDS, ANALYZED = (
    "graphs",
    "recent words index",
    "project and platform words indexes",
    "pending pages merged",
    "tiers' common words listed",
    "tables analyzed",
)
# the indexes of the search's large-store speedups, by name (migrations 155/210/230, 240, 250): the ones a step
# built and dropped are those that appeared and disappeared while it ran
_SPEEDUP_INDEXES = r"""
    SELECT c.relname::text FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'ghostmem' AND c.relkind = 'i' AND (c.relname LIKE 'message\_vectors\_graph\_%%'
       OR c.relname LIKE 'messages\_recent\_words\_%%' OR c.relname LIKE 'messages\_words\_%%')
"""


@dataclass(frozen=True, slots=True)
class MaintainStep:
    """One step of :func:`maintain` for one owner (``owner`` None: a step over every owner's tables, run once): how
    many it built or did (indexes built, pages merged, tiers listed, tables analyzed), the indexes it created and
    dropped (names), in how long."""

    owner: str | None
    name: str
    count: int
    seconds: float
    built: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()

    @property
    def did(self) -> bool:
        return bool(self.count or self.built or self.dropped)

    def to_dict(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "step": self.name,
            "count": self.count,
            "built": list(self.built),
            "dropped": list(self.dropped),
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True, slots=True)
class MaintainReport:
    """What :func:`maintain` did, step by step and owner by owner; ``changed`` is False when everything was up to
    date (a second run right after the first)."""

    owners: tuple[str, ...]
    steps: tuple[MaintainStep, ...]

    @property
    def changed(self) -> bool:
        return any(step.did for step in self.steps)

    def render(self) -> str:
        lines = []
        for owner in self.owners:
            mine = [s for s in self.steps if s.owner == owner]
            done = [s for s in mine if s.did]
            seconds = sum(s.seconds for s in mine)
            if not done:
                lines.append(f"owner {owner!r}: nothing to do, every index is up to date ({seconds:.1f}s)")
                continue
            lines.append(f"owner {owner!r} ({seconds:.1f}s):")
            for s in done:
                changes = "".join(
                    f"; {what} {', '.join(names)}"
                    for what, names in (("built", s.built), ("dropped", s.dropped))
                    if names
                )
                lines.append(f"  {s.name}: {s.count}{changes} ({s.seconds:.1f}s)")
        shared = [s for s in self.steps if s.owner is None and s.did]
        if self.owners and shared:
            lines.append("every owner's tables:")
            lines.extend(f"  {s.name}: {s.count} ({s.seconds:.1f}s)" for s in shared)
        return "\n".join(lines) if lines else "no owner has messages: nothing to do"

    def to_dict(self) -> dict[str, Any]:
        return {
            "owners": list(self.owners),
            "changed": self.changed,
            "steps": [step.to_dict() for step in self.steps],
        }


def _speedup_indexes(conn: Connection[Any]) -> set[str]:
    return {r[0] for r in conn.execute(_SPEEDUP_INDEXES)}


def _step(
    conn: Connection[Any], owner: str | None, name: str, run: Callable[[], int], *, indexes: bool
) -> MaintainStep:
    """Run one step (its own transaction) and say what it did; ``indexes``: note the indexes it built and dropped."""
    before = _speedup_indexes(conn) if indexes else set()
    started = time.perf_counter()
    count = run()
    seconds = time.perf_counter() - started
    after = _speedup_indexes(conn) if indexes else set()
    if owner is not None and indexes and (count or after != before):
        with conn.transaction():
            owner_changed(conn, owner)
    return MaintainStep(
        owner, name, count, seconds, tuple(sorted(after - before)), tuple(sorted(before - after))
    )


def build_search_indexes(conn: Connection[Any], owner: str) -> list[MaintainStep]:
    """The owner's steps of :func:`build_project_graphs`, each in a transaction of its own: its graphs (migrations
    155/176/210/230), its recent words index (:func:`build_recent_words`), its projects' and platforms' words
    indexes (:func:`build_scope_words`); what each did. None for a role that may not build the graphs (an
    application's)."""
    if not _may_build_graphs(conn):
        return []
    return [
        _step(conn, owner, GRAPHS, lambda: _run(conn, BUILD_PROJECT_GRAPHS, owner), indexes=True),
        _step(conn, owner, RECENT_WORDS, lambda: build_recent_words(conn, owner), indexes=True),
        _step(conn, owner, SCOPE_WORDS, lambda: build_scope_words(conn, owner), indexes=True),
    ]


# the schema owner's maintenance functions, by signature (an application's login may execute none of them)
BUILD_PROJECT_GRAPHS = "ghostmem.build_project_graphs(text)"
BUILD_RECENT_WORDS = "ghostmem.build_recent_words(text)"
BUILD_SCOPE_WORDS = "ghostmem.build_scope_words(text)"
MERGE_PENDING_LISTS = "ghostmem.merge_pending_lists()"
REFRESH_COMMON_WORDS = "ghostmem.refresh_common_words(text, bigint)"
ANALYZE_NEW_TABLES = "ghostmem.analyze_new_tables()"
MAINTENANCE_FUNCTIONS = (
    BUILD_PROJECT_GRAPHS,
    BUILD_RECENT_WORDS,
    BUILD_SCOPE_WORDS,
    MERGE_PENDING_LISTS,
    REFRESH_COMMON_WORDS,
    ANALYZE_NEW_TABLES,
)


def maintain(conn: Connection[Any], owner: str | None) -> MaintainReport:
    """Bring the owner's (None: every owner's) search speedups up to date, as the end of an import or embedding
    does: its graphs and words indexes built or dropped (:func:`build_search_indexes`), the GIN pending lists
    merged, its tiers' common words listed when due (:func:`refresh_common_words`), the tables analyzed that need
    it (:func:`analyze_new_tables`), each step in a transaction of its own. For a store fed by live capture alone,
    which no import ends (``ghostmem maintain``, from cron or after a bulk capture). Idempotent: a second run
    builds nothing. The steps over every owner's tables (the merge, the analyze) run once, after the owners' own.
    A role that may not run the schema owner's functions (an application's login) raises
    :class:`PermissionDenied`, before anything is done."""
    with runner.autocommit(conn):
        refused = [f for f in MAINTENANCE_FUNCTIONS if not _may_execute(conn, f)]
        if refused:
            role = conn.execute("SELECT current_user").fetchone()
            raise PermissionDenied(
                f"role {role[0] if role else '?'!r} may not maintain the search indexes: "
                f"{', '.join(refused)} are the schema owner's; run it as the role that migrates the schema"
            )
        if owner is None:
            owners = [
                r[0] for r in conn.execute("SELECT DISTINCT owner FROM ghostmem.message_counts ORDER BY 1")
            ]
        else:
            owners = [owner]
        steps = [step for one in owners for step in _maintain_owner(conn, one)]
        if owners:
            steps += [
                _step(conn, None, MERGED, lambda: merge_pending_lists(conn), indexes=False),
                _step(conn, None, ANALYZED, lambda: analyze_new_tables(conn), indexes=False),
            ]
    return MaintainReport(tuple(owners), tuple(steps))


def _maintain_owner(conn: Connection[Any], owner: str) -> list[MaintainStep]:
    """The owner's part of what the end of an import runs after its embedding and enrichment (:func:`_after_import`):
    its indexes and its common words."""
    return [
        *build_search_indexes(conn, owner),
        _step(conn, owner, COMMON_WORDS, lambda: refresh_common_words(conn, owner), indexes=False),
    ]


def merge_pending_lists(conn: Connection[Any]) -> int:
    """Merge what the GIN indexes of messages and conversations have queued (migration 260: every scan of such an
    index reads its whole pending list, up to 32 pages), so that the searches after an import or embedding read
    none; returns the pages merged. A role that may not (an application's) skips it: vacuum merges them."""
    return _run(conn, MERGE_PENDING_LISTS)


def build_recent_words(conn: Connection[Any], owner: str) -> int:
    """Give the owner's graph of its recent messages (migration 210) an index of those messages' words, with the
    same day (migration 240: the lexical leg's conjunction fetch of a search within that time), replace it when the
    graph's day moves and drop it when the graph is gone, in a transaction of its own; returns 1 when it built one.
    It blocks writes of messages while it builds (~1 s at 100,000 messages, ~15 s at a million). A role that may not
    (an application's) skips it: those searches fetch through the owner's whole index until the next import."""
    return _run(conn, BUILD_RECENT_WORDS, owner)


def build_scope_words(conn: Connection[Any], owner: str) -> int:
    """Give each of a large owner's projects and platforms that get a graph of their own an index of their messages'
    words and drop those of scopes that no longer do (migration 250: the lexical leg's conjunction fetch of a search
    filtered by one of them), in a transaction of its own; returns how many it built. It blocks writes of messages
    while it builds (at a million messages 1.3 s a project of 35,000 messages, 7.5 s a platform of 141,000). A role
    that may not (an application's) skips it: those searches fetch through the owner's whole index until the next
    import."""
    return _run(conn, BUILD_SCOPE_WORDS, owner)


def refresh_common_words(conn: Connection[Any], owner: str) -> int:
    """List again, in a transaction of its own, the words held by at least ``search.DF_CAP`` of the owner's messages
    of each tier that is due (migration 220: a tier of at least the setting ``common_words_rows`` messages, never
    listed or grown or shrunk by the share ``common_words_growth`` since), so its searches do not fetch them
    (docs/search.md, "Known-common words not fetched"); returns how many tiers were listed. It blocks writes of
    messages while it counts (0.3-0.5 s at 100,000 messages, 6.5-11.5 s at a million). A role that may not (an application's) skips it:
    its words are fetched as before until the owner's next import or embedding lists them."""
    return _run(conn, REFRESH_COMMON_WORDS, owner, DF_CAP)


def build_captured_project_graph(conn: Connection[Any], owner: str, conv_id: str) -> int:
    """After a live capture of ``conv_id``, in its transaction: when the conversation's project has reached the
    setting ``project_graph_rows`` without a graph of its own, commit the capture and build the owner's graphs
    (:func:`build_project_graphs`, once per project: it blocks that owner's writes while it runs, about a second at
    5,000 messages), so a project filled by capture alone is walked as an imported one is. Else, the usual case, one
    look at a few index rows. The build waits at most :data:`CAPTURE_GRAPH_LOCK_WAIT` for the owner's other
    writers, and a build that fails (the wait over, the connection lost) is logged, not raised: what was captured
    stands, and the project's next capture or import builds the graph. Returns how many graphs were built."""
    if not _may_build_graphs(conn):
        return 0
    due = conn.execute(
        """
        SELECT 1 FROM ghostmem.conversations c
        WHERE c.owner = %s AND c.tier = %s AND c.conv_id = %s AND c.project <> ''
          AND to_regclass('ghostmem.' || ghostmem.project_graph_name(c.owner, c.project)) IS NULL
          AND (SELECT sum(k.n) FROM ghostmem.message_counts k WHERE k.owner = c.owner AND k.project = c.project)
              >= (SELECT s.value::bigint FROM ghostmem.settings s WHERE s.key = 'project_graph_rows')
        """,
        (owner, CAPTURED, conv_id),
    ).fetchone()
    if due is None:
        return 0
    conn.commit()
    try:
        with conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = '{CAPTURE_GRAPH_LOCK_WAIT}'")
            row = conn.execute("SELECT ghostmem.build_project_graphs(%s)", (owner,)).fetchone()
            owner_changed(conn, owner)
    except psycopg.Error as error:
        logger.warning(
            "the graph of a captured project was not built (the next capture or import builds it): %s", error
        )
        return 0
    return int(row[0]) if row else 0


def owner_changed(conn: Connection[Any], owner: str) -> None:
    """Replace the owner's token (migration 274), in the caller's transaction: its search indexes changed, so the
    plan statements' rows processes keep for it are read again (search.py, ``_plan_row``). Writes of messages and
    conversations replace it by their triggers."""
    conn.execute("SELECT ghostmem.owners_changed(ARRAY[%s])", (owner,))


def _may_build_graphs(conn: Connection[Any]) -> bool:
    return _may_execute(conn, BUILD_PROJECT_GRAPHS)


def _may_execute(conn: Connection[Any], function: str) -> bool:
    may = conn.execute("SELECT has_function_privilege(%s, 'EXECUTE')", (function,))
    return may.fetchone() == (True,)


def _run(conn: Connection[Any], function: str, *args: str | int) -> int:
    """Call one of the schema owner's maintenance functions (``function``: its signature, one of
    :data:`MAINTENANCE_FUNCTIONS`) with ``args``, in a transaction of its own; the count it returns, or 0 for a role
    that may not execute it (an application's: the caller's docstring says what then happens instead)."""
    if not _may_execute(conn, function):
        return 0
    schema, name = function.split("(")[0].split(".")
    call = sql.SQL("SELECT {function}({args})").format(
        function=sql.Identifier(schema, name), args=sql.SQL(", ").join(sql.Placeholder() * len(args))
    )
    with conn.transaction():
        row = conn.execute(call, args).fetchone()
    return int(row[0]) if row else 0


def analyze_new_tables(conn: Connection[Any]) -> int:
    """Analyze the tables an import or embedding filled that hold at least the setting ``analyze_new_pages`` pages
    and were never analyzed or last counted at a tenth of their size or less (migration 177), so the first searches after a first import are planned on
    statistics rather than on the tables' sizes alone (docs/formats.md, "Statistics after a first import"); returns
    how many. A role that may not (an application's: the function is the schema owner's) skips it: autovacuum
    analyzes them at its next visit."""
    return _run(conn, ANALYZE_NEW_TABLES)


def unenriched(conn: Connection[Any], owner: str, tier: str) -> list[str]:
    """The conversations whose enrichment is missing or stale: never refreshed, or changed since (the write path
    clears ``intensity`` when it changes a conversation, :func:`ghostmem.store.save_conversation`), or with
    embedded messages but no vector of their own. What an interrupted import or embed left undone."""
    return [
        r[0]
        for r in conn.execute(
            """
            SELECT c.conv_id FROM ghostmem.conversations c
            WHERE c.owner = %s AND c.tier = %s AND (c.intensity IS NULL OR c.embedding IS NULL AND EXISTS (
                SELECT 1 FROM ghostmem.messages m WHERE m.owner = c.owner AND m.tier = c.tier
                  AND m.conv_id = c.conv_id AND m.embedding IS NOT NULL))
            ORDER BY c.conv_id
            """,
            (owner, tier),
        )
    ]


def _enrich(conn: Connection[Any], owner: str, tier: str, conv_ids: Sequence[str], shown: Display) -> None:
    if conv_ids:
        with shown.step(f"enriching {len(conv_ids):,} conversations"):
            refresh(conn, owner, tier, conv_ids, recluster_if_needed=True)


def refresh(
    conn: Connection[Any], owner: str, tier: str, conv_ids: Sequence[str], *, recluster_if_needed: bool
) -> None:
    """Enrich conversations that changed (intensity, conversation vector), and recluster when enough changed.

    ``conn`` must be in autocommit mode: each batch of conversations is its own transaction.
    """
    if not conv_ids:
        return
    for start in range(0, len(conv_ids), ENRICH_BATCH):
        with conn.transaction():
            enrichment.refresh(conn, owner, tier, list(conv_ids[start : start + ENRICH_BATCH]))
    if recluster_if_needed:
        row = conn.execute(
            "SELECT count(*) FROM ghostmem.conversations WHERE owner = %s", (owner,)
        ).fetchone()
        total = int(row[0]) if row else 0
        if len(conv_ids) >= max(5, total // 10):
            with conn.transaction():
                enrichment.recluster(conn, owner)


def enrich(conn: Connection[Any], owner: str) -> int:
    """Refresh every conversation of the owner (intensity, vector, cluster), then recluster from scratch; first,
    messages and ghost memories stored before the ``[ja]`` extra was installed get their Japanese words
    (:func:`store.fill_morphemes`, :func:`ghosts.fill_memory_words`).

    Returns how many conversations were refreshed.
    """
    count = 0
    with runner.autocommit(conn):
        words = fill_morphemes(conn, owner)
        if words:
            logger.info("gave Japanese words to %d messages stored without them", words)
        words = fill_memory_words(conn, owner)
        if words:
            logger.info("gave Japanese words to %d ghost memories stored without them", words)
        for tier in TIERS:
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT conv_id FROM ghostmem.conversations WHERE owner = %s AND tier = %s ORDER BY conv_id",
                    (owner, tier),
                )
            ]
            refresh(conn, owner, tier, ids, recluster_if_needed=False)
            count += len(ids)
        with conn.transaction():
            enrichment.recluster(conn, owner, force=True)
    return count


def forget(conn: Connection[Any], owner: str, conv_id: str, *, force: bool = False) -> list[str]:
    """Delete a conversation (and its subagent conversations), messages and vectors; never import it again.

    Returns the conversation ids removed. An id that is not stored is refused (a typo would otherwise be kept out
    forever, silently) unless ``force``: then it is only kept from ever being imported.
    """
    with conn.transaction():
        if not force and not _known(conn, owner, conv_id):
            # an id copied short: named whole, so that force does not keep out a prefix while the conversation stays
            if ids := run_sync(conv_ids_beginning(owner, conv_id), conn, None):
                raise NotFound(f"no conversation {conv_id!r} is stored; {beginning_with(ids)}")
            raise NotFound(
                f"no conversation {conv_id!r} is stored: check the id (as search results and lists show it), or "
                "force it to keep a conversation out before it is ever imported (",
                Arg("force", "forget", True),
                ")",
            )
        gone = purge(conn, owner, conv_id)
        remember(conn, owner, {conv_id: None, **gone}, "forget")
    return sorted(gone)


def unforget(conn: Connection[Any], owner: str, conv_id: str) -> list[str]:
    """Undo :func:`forget`: ``conv_id`` and the subagent conversations forgotten with it may be imported again.
    Returns the ids let back.

    Their content was deleted, and the files holding it count as read: the owner's import state is reset, so the
    next import reads every file again from the start (which duplicates nothing) and brings them back.
    """
    with conn.transaction():
        rows = conn.execute(
            """
            DELETE FROM ghostmem.forgotten f
            USING ghostmem.forgotten o
            WHERE o.owner = %s AND o.conv_id = %s AND o.reason = 'forget'
              -- its subagent conversations were remembered in the same statement, at the same moment
              AND f.owner = o.owner AND f.reason = 'forget' AND f.forgotten_at = o.forgotten_at
            RETURNING f.conv_id
            """,
            (owner, conv_id),
        ).fetchall()
        if rows:
            conn.execute("DELETE FROM ghostmem.import_state WHERE owner = %s", (owner,))
    if not rows:
        raise NotFound(f"{conv_id!r} was not forgotten: there is nothing to undo")
    return sorted(r[0] for r in rows)


def clear(conn: Connection[Any], owner: str) -> list[str]:
    """Delete every conversation of ``owner`` (both tiers) with its messages and vectors, and its import state and
    forgotten ids: as if it had never imported anything (``ghostmem demo --remove``). Its ghost memories stay.
    Returns the conversation ids removed."""
    with conn.transaction():
        ids = [
            r[0]
            for r in conn.execute("SELECT conv_id FROM ghostmem.conversations WHERE owner = %s", (owner,))
        ]
        gone: dict[str, str] = {}
        for conv_id in ids:
            if conv_id not in gone:
                gone.update(purge(conn, owner, conv_id))
        conn.execute("DELETE FROM ghostmem.import_state WHERE owner = %s", (owner,))
        conn.execute("DELETE FROM ghostmem.forgotten WHERE owner = %s", (owner,))
    return sorted(gone)


def _known(conn: Connection[Any], owner: str, conv_id: str) -> bool:
    """Stored (in any tier), or already kept out."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM ghostmem.conversations WHERE owner = %s AND conv_id = %s)"
        " OR EXISTS (SELECT 1 FROM ghostmem.forgotten WHERE owner = %s AND conv_id = %s)",
        (owner, conv_id, owner, conv_id),
    ).fetchone()
    return bool(row and row[0])


def watch(
    connection: Callable[[], AbstractContextManager[Connection[Any]]],
    owner: str,
    tier: str,
    embedder: Embedder,
    paths: Sequence[str | Path] | None,
    *,
    embed: bool = True,
    interval: float = 30.0,
    on_report: Callable[[ImportReport], None] | None = None,
    rounds: int | None = None,
) -> None:
    """Import, then poll every ``interval`` seconds (a stat per file when nothing changed) until interrupted.

    Each round takes a connection of its own from ``connection()``, so a watch outlives a restart of the server.
    ``on_report`` hears of the rounds that imported something or met problems other than the last round's (a
    folder watched until an export lands in it is said to hold none once); ``rounds`` bounds the loop.
    """
    done = 0
    problems: list[Problem] = []
    try:
        while rounds is None or done < rounds:
            with connection() as conn:
                report = import_paths(conn, owner, tier, embedder, paths, embed=embed)
            if on_report is not None and (
                report.conversations_new
                or report.conversations_updated
                or report.problems not in ([], problems)
            ):
                on_report(report)
            problems = report.problems
            done += 1
            if rounds is None or done < rounds:
                time.sleep(interval)
    except KeyboardInterrupt:  # the way a watch ends
        logger.info("import --watch stopped")
