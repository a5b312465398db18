"""The import loop: sources → parsers → :func:`ghostmem.store.save_conversation`, incremental and resumable.

Per source file, ``ghostmem.import_state`` remembers size, mtime, the offset of the last complete line (append-only
JSONL) or a content hash (whole documents), so unchanged files are not read and grown transcripts are read from
where the last run stopped. Each conversation is committed on its own; a file's state is written once the file is
done, so a killed run re-reads that file and the upserts (by native id) make the second pass add nothing twice.
Concurrent imports serialise per file and per conversation on advisory locks.

The importer works on the connection, owner and tier it is given and knows nothing of the client; embedding and
enriching what an import changed is :mod:`ghostmem.maintenance`'s part.
"""

from __future__ import annotations

import hashlib
import logging
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import psycopg
from psycopg import Connection
from psycopg.types.json import Jsonb

from ghostmem.errors import InvalidArgument
from ghostmem.ingest import chatgpt, claude_ai, claude_code, codex, cursor, gemini, generic, langchain_pg
from ghostmem.ingest.common import Item, Parsed, Problem, TitleHint
from ghostmem.ingest.report import ImportReport
from ghostmem.ingest.sources import SUFFIXES, Source, default_locations, iter_sources, stat_of
from ghostmem.limits import STORED_PATH_BYTES, STORED_TITLE_CHARS
from ghostmem.progress import Display
from ghostmem.records import TIERS, TITLE_FROM_SUMMARY, ConversationRecord, clip, shortened
from ghostmem.store import (
    IGNORE_MARKER,
    SaveResult,
    has_marker,
    ignore,
    save_conversation,
    scrub,
    scrub_json,
)

logger = logging.getLogger(__name__)

Parser = Callable[[Source, dict[str, Any]], Iterator[Item]]
PARSERS: dict[str, Parser] = {
    "generic": generic.parse,
    "claude_code": claude_code.parse,
    "codex": codex.parse,
    "gemini": gemini.parse,
    "chatgpt": chatgpt.parse,
    "claude_ai": claude_ai.parse,
    "cursor": cursor.parse,
}
_HEAD_BYTES = 4096
_PIPELINE = psycopg.Pipeline.is_supported()  # libpq >= 14 (the binary wheel has it)
# What the database or the write path refuses because of one record's content (a value it cannot hold, an id longer
# than ghostmem keeps): that record is a problem, its transaction rolls back, the import goes on.
_REFUSED = (psycopg.DataError, psycopg.IntegrityError, psycopg.errors.ProgramLimitExceeded, InvalidArgument)


def check_tier(tier: str) -> None:
    if tier not in TIERS:
        raise InvalidArgument(f"unknown tier {tier!r}: use one of {', '.join(TIERS)}")


@contextmanager
def autocommit(conn: Connection[Any]) -> Iterator[Connection[Any]]:
    """The connection in autocommit mode (each ``conn.transaction()`` block commits on its own), then restored.

    Commits do not wait for the WAL flush (``synchronous_commit = off``): one commit per conversation would
    otherwise cost an fsync each. A server crash can lose only the last moment's commits, never consistency,
    and the next import re-reads what was lost (the file's state is written after its conversations).
    """
    previous = conn.autocommit
    conn.autocommit = True
    conn.execute("SET synchronous_commit = off")
    try:
        yield conn
    finally:
        conn.execute("RESET synchronous_commit")
        conn.autocommit = previous


def import_paths(
    conn: Connection[Any],
    owner: str,
    tier: str,
    paths: Sequence[str | Path] | None,
    *,
    display: Display | None = None,
) -> ImportReport:
    """Import conversations from files, folders and export zips (every platform's usual place when ``paths`` is None).

    Each conversation commits on its own (the connection is in autocommit mode meanwhile). Embedding and enrichment
    of what changed are :func:`ghostmem.maintenance.import_paths`'s part.

    Args:
        display: where the files' progress is shown (:func:`ghostmem.progress.display`; default: nowhere).
    """
    check_tier(tier)
    report = ImportReport()
    targets = [Path(p).expanduser() for p in paths] if paths is not None else default_locations()
    with autocommit(conn):
        started = time.perf_counter()
        seen = {
            r[0]: (r[1], r[2])
            for r in conn.execute(
                "SELECT path, size, mtime_ns FROM ghostmem.import_state WHERE owner = %s AND tier = %s",
                (owner, tier),
            )
        }

        def unchanged(key: str, size: int, mtime_ns: int) -> bool:
            if seen.get(state_key(key)) == (size, mtime_ns):
                report.files_unchanged += 1
                return True
            return False

        def skipped(problem: Problem) -> None:
            report.files_skipped += 1
            report.problems.append(problem)

        sources = list(iter_sources(targets, skipped, unchanged))
        if not sources and not report.files_unchanged and not report.problems:
            report.problems.append(_nothing_found(targets, given=paths is not None))
        with (display or Display()).bar("importing", len(sources), "files") as bar:
            for source in sources:
                label = f"importing {source.platform} {source.path.name}"[:60]

                def tick(done: int, label: str = label) -> None:  # a big export shows its conversations go by
                    bar.describe(f"{label} · {done:,} conversations")

                bar.describe(label)
                _import_source(conn, owner, tier, source, report, tick)
                bar.advance(1)
        _done(conn, owner, tier, report, started)
    return report


def _nothing_found(looked: Sequence[Path], *, given: bool) -> Problem:
    """Why an import read nothing: the paths given hold no file of a known format, or (discovering) the usual
    places do not exist, or those that do hold no conversation (a platform installed but never used)."""
    home = Path.home()
    where = ", ".join(f"~/{p.relative_to(home)}" if p.is_relative_to(home) else str(p) for p in looked)
    if given:
        kinds = ", ".join(SUFFIXES)
        return Problem(where, 0, (
            f"no conversations found: no {kinds} file here (or in its folders, hidden ones left out) is an export"
            " or transcript ghostmem reads (docs/formats.md lists them)"
        ))  # fmt: skip
    elsewhere = (
        "give paths to import, or set CLAUDE_CONFIG_DIR or CODEX_HOME where Claude Code or Codex keep theirs"
    )
    if not looked:
        usual = "~/.claude/projects, ~/.codex/sessions, ~/.gemini/tmp and Cursor's storage"
        return Problem(
            "(default locations)", 0, f"no conversations found: {usual} do not exist here ({elsewhere})"
        )
    return Problem(
        "(default locations)",
        0,
        f"no conversations found in {where} (the usual places that exist here; {elsewhere})",
    )


def import_langchain_table(
    conn: Connection[Any], owner: str, tier: str, from_dsn: str, table: str
) -> ImportReport:
    """Import a langchain-postgres ``PostgresChatMessageHistory`` table (``schema.table`` or ``table``) by DSN.

    Incremental: the highest row id read is remembered, later runs read only newer rows.
    """
    check_tier(tier)
    report = ImportReport()
    key = state_key(langchain_pg.source_key(from_dsn, table))
    with autocommit(conn):
        started = time.perf_counter()
        row = conn.execute(
            "SELECT state FROM ghostmem.import_state WHERE owner = %s AND tier = %s AND path = %s",
            (owner, tier, key),
        ).fetchone()
        state: dict[str, Any] = dict(row[0]) if row else {}
        try:
            for item in langchain_pg.read_table(from_dsn, table, state):
                _handle(conn, owner, tier, key, item, report)
        except psycopg.Error as exc:
            report.files_skipped += 1
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            report.problems.append(Problem(key, 0, f"cannot read the table: {reason}"))
        else:
            last = int(state.get("last_id", 0))
            _save_state(conn, owner, tier, key, last, 0, last, None, state)
            report.files_read += 1
        _done(conn, owner, tier, report, started)
    return report


def _done(conn: Connection[Any], owner: str, tier: str, report: ImportReport, started: float) -> None:
    """After the conversations are committed: the cross-file fix-ups, then the import's duration."""
    report.conv_ids.update(resolve_gemini_projects(conn, owner, tier))
    report.seconds_import = time.perf_counter() - started


def resolve_gemini_projects(conn: Connection[Any], owner: str, tier: str) -> list[str]:
    """Gemini CLI names a project only by sha256(project root): match it against every project path known from the
    other platforms' conversations, and put the path in its place. Returns the conversations resolved."""
    with conn.transaction():
        rows = conn.execute(
            """
            UPDATE ghostmem.conversations g
            SET project = k.project, meta = g.meta || jsonb_build_object('project_hash', g.project)
            FROM (SELECT DISTINCT project FROM ghostmem.conversations
                  WHERE owner = %s AND platform <> 'gemini' AND project IS NOT NULL) k
            WHERE g.owner = %s AND g.tier = %s AND g.platform = 'gemini'
              AND g.project = encode(sha256(convert_to(k.project, 'UTF8')), 'hex')
            RETURNING g.conv_id, g.project
            """,
            (owner, owner, tier),
        ).fetchall()
        for conv_id, project in rows:
            conn.execute(
                "UPDATE ghostmem.messages SET project = %s WHERE owner = %s AND tier = %s AND conv_id = %s",
                (project, owner, tier, conv_id),
            )
    return [r[0] for r in rows]


def _import_source(
    conn: Connection[Any],
    owner: str,
    tier: str,
    source: Source,
    report: ImportReport,
    tick: Callable[[int], None] | None = None,
) -> None:
    key = state_key(source.key)
    lock = "\x1f".join(("file", owner, tier, key))
    conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (lock,))
    try:
        try:
            size, mtime_ns = stat_of(source)
        except OSError as exc:
            report.files_skipped += 1
            report.problems.append(Problem(source.label, 0, f"cannot read: {exc}"))
            return
        row = conn.execute(
            'SELECT size, mtime_ns, "offset", hash, state FROM ghostmem.import_state'
            " WHERE owner = %s AND tier = %s AND path = %s",
            (owner, tier, key),
        ).fetchone()
        if row is not None and (row[0], row[1]) == (size, mtime_ns):
            report.files_unchanged += 1  # another import did it while we waited for the lock
            return
        state: dict[str, Any] = {}
        digest: str | None = None
        if source.kind == "append":
            if row is not None and size >= row[2] and row[3] == _head_hash(source, min(row[2], _HEAD_BYTES)):
                state = dict(row[4])  # the file grew: read on from the last complete line
        else:
            digest = _full_hash(source)
            if row is not None and row[3] == digest:
                _save_state(conn, owner, tier, key, size, mtime_ns, size, digest, dict(row[4]))
                report.files_unchanged += 1
                return
        done = 0
        try:
            for item in PARSERS[source.platform](source, state):
                _handle(conn, owner, tier, source.label, item, report)
                if tick is not None and isinstance(item, Parsed):
                    done += 1
                    if done % 50 == 0:
                        tick(done)
        except (
            OSError,
            ValueError,
            KeyError,
            TypeError,
            AttributeError,
            RecursionError,
            zipfile.BadZipFile,
        ) as exc:
            # input no parser foresaw: what was committed stays, the file is reported and read again next time
            logger.exception("cannot import %s", source.label)
            report.files_skipped += 1
            report.problems.append(Problem(source.label, 0, f"cannot import: {type(exc).__name__}: {exc}"))
            return
        if source.kind == "append":
            digest = _head_hash(source, min(int(state.get("offset", 0)), _HEAD_BYTES))
        _save_state(conn, owner, tier, key, size, mtime_ns, int(state.get("offset", size)), digest, state)
        report.files_read += 1
    finally:
        conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (lock,))


def _handle(
    conn: Connection[Any], owner: str, tier: str, label: str, item: Item, report: ImportReport
) -> None:
    if isinstance(item, Problem):
        report.problems.append(item)
    elif isinstance(item, TitleHint):
        try:
            with conn.transaction():
                report.conv_ids.update(_title_hint(conn, owner, tier, item))
        except _REFUSED as exc:
            report.problems.append(Problem(label, 0, f"summary of {item.leaf_id[:80]}: {_first_line(exc)}"))
    elif isinstance(item, Parsed):
        record = item.record
        try:
            # pipeline mode: statements whose results are not read yet travel together (~half the round trips)
            with conn.pipeline() if _PIPELINE else nullcontext(), conn.transaction():
                if item.line_ids and _ignored_by_summary(conn, owner, tier, item.line_ids):
                    ignore(conn, owner, record.conv_id, record.platform)
                    result = SaveResult(skipped="ignored")
                else:
                    if item.line_ids:
                        _drop_replayed(conn, owner, tier, record)
                    result = save_conversation(conn, owner, tier, record, embedder=None, append=item.append)
                if result.skipped is None and item.line_ids:
                    _apply_hints(conn, owner, tier, record.conv_id, item.line_ids)
        except _REFUSED as exc:
            report.problems.append(
                Problem(label, 0, f"conversation {record.conv_id[:80]}: {_first_line(exc)}")
            )
            return
        _count(report, record, result)


def _count(report: ImportReport, record: ConversationRecord, result: SaveResult) -> None:
    counts = report.counts(record.platform)
    if result.skipped == "ignored":
        counts.ignored += 1
    elif result.skipped == "forgotten":
        counts.forgotten += 1
    elif result.created:
        counts.conversations_new += 1
    elif result.updated:
        counts.conversations_updated += 1
    else:
        counts.conversations_unchanged += 1
    counts.messages_new += result.messages_new
    if result.created or result.updated:
        report.conv_ids.add(record.conv_id)


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _drop_replayed(conn: Connection[Any], owner: str, tier: str, record: ConversationRecord) -> None:
    """Drop the messages an older Claude Code version replayed from an earlier session into a resumed one.

    Those lines keep their uuid under the new session id; the conversation imported first keeps them (files are
    read oldest first, so that is the original session).
    """
    stored = {
        r[0]
        for r in conn.execute(
            """
            SELECT native_id FROM ghostmem.messages
            WHERE owner = %s AND tier = %s AND native_id = ANY(%s) AND conv_id <> %s AND platform = %s
            """,
            (owner, tier, [m.native_id for m in record.messages], record.conv_id, record.platform),
        )
    }
    if stored:
        record.messages = [m for m in record.messages if m.native_id not in stored]


def _title_hint(conn: Connection[Any], owner: str, tier: str, hint: TitleHint) -> list[str]:
    """Remember a summary title for a leaf and give it to the stored conversation that holds the leaf, if any.

    A summary that carries ``ghostmem:ignore`` ignores that conversation (now, or when it is read later).
    """
    marked = has_marker(hint.title)
    title = IGNORE_MARKER if marked else scrub(clip(hint.title, STORED_TITLE_CHARS))
    conn.execute(
        """
        INSERT INTO ghostmem.title_hints (owner, tier, leaf_id, title) VALUES (%s, %s, %s, %s)
        ON CONFLICT (owner, tier, leaf_id) DO UPDATE SET title = EXCLUDED.title
        """,
        (owner, tier, hint.leaf_id, title),
    )
    if marked:
        holders = conn.execute(
            "SELECT DISTINCT conv_id, platform FROM ghostmem.messages WHERE owner = %s AND tier = %s AND native_id = %s",
            (owner, tier, hint.leaf_id),
        ).fetchall()
        for conv_id, platform in holders:
            ignore(conn, owner, conv_id, platform)
        return []
    rows = conn.execute(
        """
        UPDATE ghostmem.conversations c
        SET title = %s, meta = c.meta || jsonb_build_object('title_rank', %s::int), updated_at = now()
        FROM ghostmem.messages m
        WHERE m.owner = %s AND m.tier = %s AND m.native_id = %s
          AND c.owner = m.owner AND c.tier = m.tier AND c.conv_id = m.conv_id
          AND COALESCE((c.meta ->> 'title_rank')::int, 0) <= %s AND c.title IS DISTINCT FROM %s
        RETURNING c.conv_id
        """,
        (title, TITLE_FROM_SUMMARY, owner, tier, hint.leaf_id, TITLE_FROM_SUMMARY, title),
    ).fetchall()
    return [r[0] for r in rows]


def _ignored_by_summary(conn: Connection[Any], owner: str, tier: str, line_ids: list[str]) -> bool:
    """Whether a summary read earlier (maybe from another file) put the marker on one of these lines."""
    row = conn.execute(
        "SELECT 1 FROM ghostmem.title_hints WHERE owner = %s AND tier = %s AND leaf_id = ANY(%s) AND title = %s",
        (owner, tier, line_ids, IGNORE_MARKER),
    ).fetchone()
    return row is not None


def _apply_hints(conn: Connection[Any], owner: str, tier: str, conv_id: str, line_ids: list[str]) -> None:
    conn.execute(
        """
        UPDATE ghostmem.conversations c
        SET title = h.title, meta = c.meta || jsonb_build_object('title_rank', %s::int)
        FROM (SELECT title FROM ghostmem.title_hints
              WHERE owner = %s AND tier = %s AND leaf_id = ANY(%s) LIMIT 1) h
        WHERE c.owner = %s AND c.tier = %s AND c.conv_id = %s
          AND COALESCE((c.meta ->> 'title_rank')::int, 0) <= %s AND c.title IS DISTINCT FROM h.title
        """,
        (TITLE_FROM_SUMMARY, owner, tier, line_ids, owner, tier, conv_id, TITLE_FROM_SUMMARY),
    )


def state_key(key: str) -> str:
    """What ``ghostmem.import_state`` keeps of a source's key: scrubbed (a secret in a path, a token as a folder
    name, is not stored either) and shortened beyond :data:`~ghostmem.limits.STORED_PATH_BYTES` (a deep folder's
    path would not fit the table's key; the shortened one stays the file's own)."""
    return shortened(scrub(key), STORED_PATH_BYTES)


def _save_state(
    conn: Connection[Any],
    owner: str,
    tier: str,
    key: str,
    size: int,
    mtime_ns: int,
    offset: int,
    digest: str | None,
    state: dict[str, Any],
) -> None:
    conn.execute(
        """
        INSERT INTO ghostmem.import_state (owner, tier, path, size, mtime_ns, "offset", hash, state)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (owner, tier, path) DO UPDATE SET size = EXCLUDED.size, mtime_ns = EXCLUDED.mtime_ns,
            "offset" = EXCLUDED."offset", hash = EXCLUDED.hash, state = EXCLUDED.state, updated_at = now()
        """,
        (owner, tier, key, size, mtime_ns, offset, digest, Jsonb(scrub_json(state))),
    )


def _head_hash(source: Source, length: int) -> str:
    with source.open() as fh:
        return hashlib.sha256(fh.read(length)).hexdigest()


def _full_hash(source: Source) -> str:
    digest = hashlib.sha256()
    with source.open() as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
