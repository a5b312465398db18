"""``ghostmem doctor``: is everything ghostmem needs there, and if not, what to do."""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from ghostmem import db
from ghostmem.config import Settings
from ghostmem.db import migrate as migrations
from ghostmem.embed import OnnxEmbedder, make_embedder
from ghostmem.errors import GhostMemError


def diagnose(settings: Settings, check_model: bool = True) -> dict[str, Any]:
    """Every check with its result; ``ok`` is true when all passed."""
    report: dict[str, Any] = {"ok": True, "embedded": settings.dsn is None, "checks": {}}
    checks: dict[str, Any] = report["checks"]

    def fail(name: str, message: str) -> None:
        checks[name] = {"ok": False, "error": message}
        report["ok"] = False

    embedder = make_embedder(settings.embed_model, settings.home)
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
    except GhostMemError as exc:
        fail("server", str(exc))
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
