"""Numbered SQL migrations, applied in order, each in its own transaction, under an advisory lock.

Two processes migrating at once serialise on the lock: the second finds every migration recorded and applies
nothing. Landed migrations are never edited; a change is a new file.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from psycopg import Connection, errors, sql

from ghostmem.errors import DatabaseUnavailable, SchemaMismatch
from ghostmem.limits import STORED_ID_BYTES

logger = logging.getLogger(__name__)

# pg_advisory_lock key: "ghostmem" read as a number, shared by every ghostmem process on the server.
MIGRATION_LOCK = 0x67686F73746D656D & 0x7FFFFFFFFFFFFFFF
REQUIRED_EXTENSIONS = ("vector", "pg_trgm")
_NAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    text: str


def available() -> list[Migration]:
    """Every migration shipped with the package, in order."""
    found = []
    for entry in resources.files("ghostmem.db").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


def applied(conn: Connection[Any]) -> list[int]:
    """Versions recorded in the migrations table (empty on a new database)."""
    exists = conn.execute("SELECT to_regclass('ghostmem_migrations.applied') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return []
    return [r[0] for r in conn.execute("SELECT version FROM ghostmem_migrations.applied ORDER BY version")]


def pending(conn: Connection[Any]) -> list[Migration] | None:
    """The shipped migrations this database has not recorded; None when this role may not read the record (every
    role may once a migration run of this version granted it)."""
    try:
        done = set(applied(conn))
    except errors.InsufficientPrivilege:
        return None
    return [m for m in available() if m.version not in done]


def is_current(conn: Connection[Any]) -> bool:
    """Every shipped migration is recorded (read-only: needs no privilege beyond reading the record)."""
    return pending(conn) == []


def cannot_migrate(conn: Connection[Any], missing: list[Migration] | None) -> str:
    """The sentence for a role that found the schema behind (or could not tell) and may not migrate it."""
    row = conn.execute(
        "SELECT current_user, (SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'ghostmem')"
    ).fetchone()
    user, owner = row if row else (None, None)
    if missing is None:
        state = (
            "this role cannot read which ghostmem migrations this database has (ghostmem_migrations.applied)"
        )
    elif len(missing) == len(available()):
        state = "this database has no ghostmem schema yet"
    else:
        state = (
            "this database's ghostmem schema is behind this ghostmem (missing "
            + ", ".join(f"{m.version:03d}_{m.name}" for m in missing)
            + ")"
        )
    who = (
        f"as {owner}, the role that owns the ghostmem schema"
        if owner
        else "as a role that may create schemas"
    )
    return f"{state} and role {user} may not migrate it: an administrator runs `ghostmem migrate` {who}"


def migrate(
    conn: Connection[Any], dims: int, embed_model: str, runtime_role: str, upto: int | None = None
) -> list[str]:
    """Apply every pending migration (up to version ``upto``, to build an older store); returns the names
    applied. ``conn`` must be in autocommit mode.

    Migrations read ``ghostmem.dims``, ``ghostmem.embed_model`` and ``ghostmem.runtime_role`` with
    ``current_setting``: values are set per transaction, never formatted into the SQL text.
    """
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        if upto is None and is_current(conn):  # another process migrated while this one waited for the lock
            check_dims(conn, dims)
            return []
        _ensure_extensions(conn)
        conn.execute("CREATE SCHEMA IF NOT EXISTS ghostmem_migrations")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS ghostmem_migrations.applied ("
            " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        # Which migrations ran is no secret: any role (an application's login) may see that the schema is current.
        conn.execute("GRANT USAGE ON SCHEMA ghostmem_migrations TO PUBLIC")
        conn.execute("GRANT SELECT ON ghostmem_migrations.applied TO PUBLIC")
        done = set(applied(conn))
        names = []
        for migration in available():
            if migration.version in done or (upto is not None and migration.version > upto):
                continue
            try:
                with conn.transaction():
                    conn.execute("SELECT set_config('ghostmem.dims', %s, true)", (str(dims),))
                    conn.execute("SELECT set_config('ghostmem.embed_model', %s, true)", (embed_model,))
                    conn.execute("SELECT set_config('ghostmem.runtime_role', %s, true)", (runtime_role,))
                    conn.execute(migration.text.encode("utf-8"))  # a file shipped with the package
                    conn.execute(
                        "INSERT INTO ghostmem_migrations.applied (version, name) VALUES (%s, %s)",
                        (migration.version, migration.name),
                    )
            except errors.ConfigurationLimitExceeded as exc:  # a migration that checks the server first (163)
                raise SchemaMismatch(
                    f"migration {migration.version:03d}_{migration.name} cannot run on this server:"
                    f" {exc.diag.message_primary}"
                ) from exc
            except errors.ProgramLimitExceeded as exc:
                reason = _too_long_ids(conn, migration)
                if reason is None:
                    raise
                raise reason from exc
            logger.info("applied migration %03d_%s", migration.version, migration.name)
            names.append(f"{migration.version:03d}_{migration.name}")
        check_dims(conn, dims)
        return names
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


def _too_long_ids(conn: Connection[Any], migration: Migration) -> SchemaMismatch | None:
    """Why ``migration`` could not index the store, when it holds ids longer than ghostmem keeps (written before it
    refused them): an index entry holds at most 2,704 bytes. None when it holds none (the error is another one)."""
    found = []
    for table, column, what in (
        ("conversations", "conv_id", "conversation"),
        ("messages", "native_id", "message"),
    ):
        rows = conn.execute(
            sql.SQL(
                "SELECT owner, {c}, octet_length({c}), count(*) OVER () FROM ghostmem.{t}"
                " WHERE octet_length({c}) > %s ORDER BY octet_length({c}) DESC LIMIT 1"
            ).format(c=sql.Identifier(column), t=sql.Identifier(table)),
            (STORED_ID_BYTES,),
        ).fetchall()
        if rows:
            owner, value, size, count = rows[0]
            found.append(
                (
                    f"{count} {what} id(s) longer than {STORED_ID_BYTES:,} bytes (the longest: {value[:40]!r}…,"
                    f" {size:,} bytes, owner {owner!r})",
                    sql.SQL("DELETE FROM ghostmem.{t} WHERE octet_length({c}) > {n}")
                    .format(t=sql.SQL(table), c=sql.SQL(column), n=sql.Literal(STORED_ID_BYTES))
                    .as_string(conn),
                )
            )
    if not found:
        return None
    return SchemaMismatch(
        f"migration {migration.version:03d}_{migration.name} cannot index this store, which holds "
        + " and ".join(held for held, _ in found)
        + ": ghostmem keeps no longer ids (an import refuses them now) and applied nothing of the migration; remove "
        "them, with their messages, as the schema's owner ("
        + "; ".join(f"`{fix}`" for _, fix in found)
        + "), then run `ghostmem migrate` again"
    )


def stored_dims(conn: Connection[Any]) -> int | None:
    row = conn.execute(
        "SELECT value FROM ghostmem.settings WHERE key = 'dims'"
        if _has_settings(conn)
        else "SELECT NULL::text WHERE false"
    ).fetchone()
    return int(row[0]) if row else None


def check_dims(conn: Connection[Any], dims: int) -> None:
    stored = stored_dims(conn)
    if stored is not None and stored != dims:
        raise SchemaMismatch(
            f"this database stores {stored}-dimensional vectors but the configured model gives {dims}: "
            "use the model it was built with, or run `ghostmem reembed --model NAME` to switch"
        )


def _has_settings(conn: Connection[Any]) -> bool:
    row = conn.execute("SELECT to_regclass('ghostmem.settings') IS NOT NULL").fetchone()
    return bool(row and row[0])


def _ensure_extensions(conn: Connection[Any]) -> None:
    for ext in REQUIRED_EXTENSIONS:
        try:
            conn.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(ext)))
        except errors.FeatureNotSupported as exc:
            raise DatabaseUnavailable(_missing_extension(ext)) from exc
        except errors.UndefinedFile as exc:
            raise DatabaseUnavailable(_missing_extension(ext)) from exc
        except errors.InsufficientPrivilege as exc:
            raise DatabaseUnavailable(
                f"the extension {ext} is not installed in this database and this role may not create it: "
                f"ask an administrator to run CREATE EXTENSION {ext}"
            ) from exc


def _missing_extension(ext: str) -> str:
    if ext == "vector":
        return (
            "this Postgres server has no pgvector: install it (https://github.com/pgvector/pgvector) "
            "or unset GHOSTMEM_DSN to use the embedded server, which ships it"
        )
    return f"this Postgres server lacks the {ext} extension (contrib): install postgresql-contrib"
