"""``ghostmem doctor``: is everything ghostmem needs there, and if not, what to do."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import Connection

from ghostmem import db
from ghostmem.config import Settings
from ghostmem.db import migrate as migrations
from ghostmem.embed import Announce, OnnxEmbedder, make_embedder
from ghostmem.errors import GhostMemError


def diagnose(
    settings: Settings, check_model: bool = True, announce: Announce | None = None
) -> dict[str, Any]:
    """Every check with its result; ``ok`` is true when all passed (``announce`` is told when the model check
    starts preparing the model)."""
    report: dict[str, Any] = {"ok": True, "embedded": settings.dsn is None, "checks": {}}
    checks: dict[str, Any] = report["checks"]

    def fail(name: str, message: str) -> None:
        checks[name] = {"ok": False, "error": message}
        report["ok"] = False

    embedder = make_embedder(settings.embed_model, settings.home, announce=announce)
    try:
        dsn = db.resolve_dsn(settings)
        with db.connect(dsn, autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()
            buffers = conn.execute("SHOW shared_buffers").fetchone()
            checks["server"] = {
                "ok": True,
                "dsn": db.redact_dsn(dsn),
                "version": version[0] if version else None,
                "shared_buffers": buffers[0] if buffers else None,
            }
            installed = dict(
                conn.execute(
                    "SELECT name, installed_version FROM pg_available_extensions WHERE name = ANY(%s)",
                    (list(migrations.REQUIRED_EXTENSIONS),),
                ).fetchall()
            )
            for ext in migrations.REQUIRED_EXTENSIONS:
                if ext not in installed:
                    fail(ext, f"{ext} is not available on this server")
                else:
                    checks[ext] = {"ok": True, "available": True, "installed_version": installed[ext]}
            done = migrations.applied(conn)
            shipped = [m.version for m in migrations.available()]
            pending = [v for v in shipped if v not in done]
            # A store nothing has used yet is not migrated: that is news, not a problem (the first command
            # migrates it). A store migrated before and behind this ghostmem is a problem until migrated.
            fresh = not done
            checks["migrations"] = {"ok": fresh or not pending, "applied": done, "pending": pending}
            if fresh:
                checks["migrations"]["note"] = (
                    "not migrated yet: `ghostmem migrate` creates the schema (any other command does it on first use)"
                )
            elif pending:
                checks["migrations"]["hint"] = (
                    "run `ghostmem migrate` (or any command: it migrates on first use)"
                )
                report["ok"] = False
            stored = migrations.stored_dims(conn)
            checks["schema_dims"] = {
                "ok": stored in (None, embedder.dim),
                "stored": stored,
                "model": embedder.dim,
            }
            if stored not in (None, embedder.dim):
                report["ok"] = False
            checks["runtime_role"] = _runtime_role(conn, settings.runtime_role)
            if not checks["runtime_role"]["ok"]:
                report["ok"] = False
            if settings.read_dsn is not None:
                checks["read_standby"] = _read_standby(settings.read_dsn, conn)
    except GhostMemError as exc:
        fail("server", str(exc))
    if settings.read_dsn is not None and "read_standby" not in checks:
        checks["read_standby"] = _read_standby(settings.read_dsn, None)
    if "read_standby" in checks and not checks["read_standby"]["ok"]:
        report["ok"] = False
    if check_model:
        try:
            vec = embedder.embed_query("ghostmem doctor")
            checks["model"] = {"ok": len(vec) == embedder.dim, "name": embedder.name, "dim": len(vec)}
            if isinstance(embedder, OnnxEmbedder):
                checks["model"]["engine"] = embedder.engine
        except GhostMemError as exc:
            fail("model", str(exc))
    else:
        checks["model"] = {"ok": True, "name": embedder.name, "dim": embedder.dim, "loaded": False}
    return report


# What a standby says of itself: in recovery, replay paused, how far it replayed (as text, for the primary to
# compare), how long ago the last replayed transaction committed on the primary unless everything received is
# replayed, and which cluster it copies (its primary's system identifier).
_STANDBY_STATE = """
SELECT pg_is_in_recovery(),
       pg_is_in_recovery() AND pg_is_wal_replay_paused(),
       pg_last_wal_replay_lsn()::text,
       CASE WHEN pg_last_wal_receive_lsn() IS DISTINCT FROM pg_last_wal_replay_lsn()
            THEN extract(epoch FROM now() - pg_last_xact_replay_timestamp()) ELSE 0 END,
       (SELECT system_identifier FROM pg_control_system())
"""
_SYSTEM = "SELECT system_identifier FROM pg_control_system()"
_BEHIND = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::bigint"


def _read_standby(read_dsn: str, primary: Connection[Any] | None) -> dict[str, Any]:
    """The standby reads go to (``GHOSTMEM_READ_DSN``): reachable, a standby of this primary, replaying, and how far
    behind (bytes of WAL the primary wrote that it has not replayed; seconds since the last transaction it replayed
    committed, 0 when it replayed all it received). Its password is never shown. ``primary``: None when the
    primary cannot be reached (then only the standby's own state is reported)."""
    where = db.redact_dsn(read_dsn)
    fix = "start the standby or fix GHOSTMEM_READ_DSN (reads go to the primary meanwhile)"
    try:
        with db.connect(read_dsn, fix=fix, autocommit=True) as conn:
            row = conn.execute(_STANDBY_STATE).fetchone()
        assert row is not None
        in_recovery, paused, replayed, behind_s, system = row
        ours = None if primary is None else primary.execute(_SYSTEM).fetchone()
        lag = (
            primary.execute(_BEHIND, (replayed,)).fetchone()
            if primary is not None and replayed is not None
            else None
        )
    except GhostMemError as exc:
        return {"ok": False, "error": str(exc)}
    except psycopg.Error as exc:  # a server that does not let this login read its state
        return {"ok": False, "error": f"cannot read the state of the standby {where}: {exc}"}
    if ours is not None and ours[0] != system:
        error = f"{where} is not a standby of this primary (it copies another cluster): fix GHOSTMEM_READ_DSN"
        return {"ok": False, "error": error}
    if not in_recovery:
        error = f"{where} is not a standby (not in recovery): point GHOSTMEM_READ_DSN at a streaming standby"
        return {"ok": False, "error": error}
    check: dict[str, Any] = {
        "ok": True,
        "dsn": where,
        "in_recovery": True,
        "replay_paused": paused,
        "lag_bytes": max(0, int(lag[0])) if lag else None,
        "lag_seconds": round(float(behind_s), 3) if behind_s is not None else None,
    }
    if paused:
        check["hint"] = (
            "replay is paused (on the standby, SELECT pg_wal_replay_resume()): reads wait, then use the primary"
        )
    return check


def _runtime_role(conn: Connection[Any], role: str) -> dict[str, Any]:
    """What the runtime role may do beyond the API (docs/ghosts.md, "Names inside the functions"): CREATE in any
    schema breaks the trust the definer functions' search_path rests on (a failure); TEMP is safe for them, but
    least privilege says revoke it where nothing needs it (a hint)."""
    row = conn.execute(
        "SELECT has_database_privilege(r.rolname, current_database(), 'TEMP'),"
        " ARRAY(SELECT n.nspname::text FROM pg_namespace n WHERE n.nspname NOT LIKE 'pg\\_%%'"
        "       AND has_schema_privilege(r.rolname, n.oid, 'CREATE') ORDER BY 1),"
        " current_database()"
        " FROM pg_roles r WHERE r.rolname = %s",
        (role,),
    ).fetchone()
    if row is None:
        return {"ok": True, "name": role, "exists": False}
    temp, creatable, database = row
    check: dict[str, Any] = {"ok": not creatable, "name": role, "temp": temp, "create_in": list(creatable)}
    if creatable:
        check["hint"] = (
            f"{role} (or PUBLIC) may create objects in {', '.join(creatable)}, which the ghost-memory functions "
            f"trust: REVOKE CREATE ON SCHEMA {', '.join(creatable)} FROM PUBLIC, {role}"
        )
    elif temp:
        check["hint"] = (
            f"{role} may create temporary objects (safe for ghostmem's functions); if nothing in this database "
            f"needs them: REVOKE TEMPORARY ON DATABASE {database} FROM PUBLIC"
        )
    return check


def render_report(report: dict[str, Any]) -> str:
    lines = []
    for name, check in report["checks"].items():
        mark = "FAIL" if not check.get("ok") else "info" if "note" in check else "ok  "
        detail = (
            check.get("error")
            or check.get("note")
            or ", ".join(f"{k}={v}" for k, v in check.items() if k != "ok")
        )
        lines.append(f"[{mark}] {name}: {detail}")
    lines.append("all good" if report["ok"] else "problems found (see above)")
    return "\n".join(lines)
