"""``ghostmem reembed --model NAME``: switch the embedding model, and with it the vector dimension.

The dimension is part of the schema (``vector(N)`` columns), so switching is a schema change: under the migration
lock, every vector column of ghostmem's schemas (``vector``, and ``halfvec`` for the compact copies of the message
vectors, which are deleted) is emptied and retyped and its vector indexes are dropped (the projects' own graphs of
migration 155 too); then ghost memories, messages, conversation vectors, clusters and store items are embedded again
with the new model; then the indexes are rebuilt and NOT NULL constraints restored. The embedding cache and the
clusters (derived from the old vectors) are discarded. Other processes still configured for the old model are
refused by the dimension check.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from psycopg import Connection, sql

from ghostmem import db, maintenance
from ghostmem.config import DEFAULT_RUNTIME_ROLE, checked_embedder_name
from ghostmem.db import migrate as migrations
from ghostmem.embed import Embedder
from ghostmem.errors import GhostMemError, translated
from ghostmem.items import embed_pending_items
from ghostmem.store import embed_pending

logger = logging.getLogger(__name__)

SCHEMAS = ("ghostmem", "agent")


@dataclass(frozen=True, slots=True)
class VectorColumn:
    schema: str
    table: str
    column: str
    not_null: bool
    type: str  # vector, or halfvec (the compact copies of migration 101)


def vector_columns(conn: Connection[Any]) -> list[VectorColumn]:
    """The vector columns of ghostmem's tables; of a partitioned table (the compact copies, partitioned by owner since
    migration 163) its own column, which its partitions follow."""
    rows = conn.execute(
        """
        SELECT n.nspname, c.relname, a.attname, a.attnotnull, a.atttypid::regtype::text
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE a.atttypid IN ('vector'::regtype, 'halfvec'::regtype) AND c.relkind IN ('r', 'p')
          AND NOT c.relispartition AND NOT a.attisdropped
          AND n.nspname = ANY(%s)
        ORDER BY 1, 2, 3
        """,
        (list(SCHEMAS),),
    ).fetchall()
    return [VectorColumn(*row) for row in rows]


def _vector_indexes(conn: Connection[Any]) -> list[tuple[str, str, str]]:
    """(schema, index name, CREATE INDEX statement) of every index on a ``vector`` column. The HNSW graphs of the
    compact copies' partitions (``halfvec``) are rebuilt by their column's retyping, on the copies emptied first,
    and grow as the messages get their new vectors, as they do on every write."""
    rows = conn.execute(
        """
        SELECT DISTINCT n.nspname, ic.relname, pg_get_indexdef(i.indexrelid)
        FROM pg_index i
        JOIN pg_class ic ON ic.oid = i.indexrelid
        JOIN pg_namespace n ON n.oid = ic.relnamespace
        JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
        WHERE a.atttypid = 'vector'::regtype AND n.nspname = ANY(%s)
        ORDER BY 1, 2
        """,
        (list(SCHEMAS),),
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def reembed(dsn: str, embedder: Embedder, runtime_role: str = DEFAULT_RUNTIME_ROLE) -> dict[str, Any]:
    """Switch the database at ``dsn`` to ``embedder`` and embed everything again; returns what was done.

    ``GhostMem.reembed`` and ``ghostmem reembed --model`` call this. An embedder whose name the embedding cache
    cannot key is refused before anything changes (it would fail after every vector was dropped).
    """
    checked_embedder_name(embedder.name)
    db.prepare(dsn, _stored_dims(dsn), embedder.name, runtime_role)  # current schema, old dimension
    with translated(), db.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (migrations.MIGRATION_LOCK,))
        try:
            columns = vector_columns(conn)
            indexes = _vector_indexes(conn)
            with conn.transaction():
                _retype(conn, columns, indexes, embedder)
            ghosts = _embed_ghosts(conn, embedder)
            owners = [
                r[0] for r in conn.execute("SELECT DISTINCT owner FROM ghostmem.conversations ORDER BY 1")
            ]
            messages = sum(embed_pending(conn, owner, embedder) for owner in owners)
            conversations = sum(maintenance.enrich(conn, owner) for owner in owners)
            items = embed_pending_items(conn, embedder)
            for owner in owners:
                maintenance.build_project_graphs(conn, owner)
            with conn.transaction():
                for _, _, statement in indexes:
                    logger.info("rebuilding %s", statement)
                    conn.execute(statement.encode("utf-8"))  # statement produced by pg_get_indexdef
                for col in columns:
                    if col.not_null:
                        conn.execute(
                            sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET NOT NULL").format(
                                sql.Identifier(col.schema, col.table), sql.Identifier(col.column)
                            )
                        )
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (migrations.MIGRATION_LOCK,))
    return {
        "model": embedder.name,
        "dims": embedder.dim,
        "ghost_memories": ghosts,
        "messages": messages,
        "conversations": conversations,
        "store_items": items,
        "indexes_rebuilt": [name for _, name, _ in indexes],
    }


def _stored_dims(dsn: str) -> int:
    with db.connect(dsn) as conn:
        dims = migrations.stored_dims(conn)
    if dims is None:
        raise GhostMemError("this database has no ghostmem schema yet: nothing to re-embed")
    return dims


def _retype(
    conn: Connection[Any],
    columns: list[VectorColumn],
    indexes: list[tuple[str, str, str]],
    embedder: Embedder,
) -> None:
    for schema, name, _ in indexes:
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(schema, name)))
    # The projects' own graphs (migration 155), built again once the new vectors are in (rather than filled row by
    # row as they come, ten times slower than a build).
    conn.execute("SELECT ghostmem.drop_project_graphs()")
    # Derived from the old vectors: rebuilt from scratch with the new model.
    conn.execute("DELETE FROM ghostmem.embedding_cache")
    conn.execute("DELETE FROM ghostmem.message_vectors")  # filled again as messages get their new vectors
    conn.execute("DELETE FROM ghostmem.clusters")
    conn.execute("DELETE FROM ghostmem.cluster_runs")
    conn.execute("UPDATE ghostmem.conversations SET cluster = NULL, topic = NULL")
    for col in columns:
        table, column = sql.Identifier(col.schema, col.table), sql.Identifier(col.column)
        if col.not_null:
            conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN {} DROP NOT NULL").format(table, column))
        conn.execute(
            sql.SQL("ALTER TABLE {} ALTER COLUMN {} TYPE {} USING NULL").format(
                table, column, sql.SQL("{}({})").format(sql.SQL(col.type), sql.Literal(embedder.dim))
            )
        )
    conn.execute("UPDATE ghostmem.settings SET value = %s WHERE key = 'dims'", (str(embedder.dim),))
    conn.execute("UPDATE ghostmem.settings SET value = %s WHERE key = 'embed_model'", (embedder.name,))


def _embed_ghosts(conn: Connection[Any], embedder: Embedder, batch: int = 256) -> int:
    done = 0
    while True:
        with conn.transaction():
            rows = conn.execute(
                "SELECT memory_id, owner, content FROM agent.ghost_memories WHERE embedding IS NULL"
                " ORDER BY memory_id LIMIT %s",
                (batch,),
            ).fetchall()
            if not rows:
                return done
            db.use_vectors(conn)
            vectors = embedder.embed_documents([content for _, _, content in rows])
            with conn.cursor() as cur:
                cur.executemany(
                    "UPDATE agent.ghost_memories SET embedding = %s::vector WHERE memory_id = %s AND owner = %s",
                    [
                        (db.vector(vec), memory_id, owner)
                        for (memory_id, owner, _), vec in zip(rows, vectors, strict=True)
                    ],
                )
            done += len(rows)
