"""`ghostmem reembed`: a new model with another dimension; everything is embedded again and still found."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from ghostmem import GhostMem, HashEmbedder, SchemaMismatch
from ghostmem.items import ItemWrite, search_items, write_items
from ghostmem.reembed import vector_columns
from psycopg import sql
from support.conversations import conversation, import_generic
from support.copies import owner_index, vector_bits, word_counts


@pytest.fixture
def own_dsn(server_dsn: str) -> Iterator[str]:
    """A database of its own: re-embedding retypes the columns of the whole database."""
    name = f"ghostmem_reembed_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield psycopg.conninfo.make_conninfo(server_dsn, dbname=name)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_reembed_switches_dimension_and_keeps_everything_findable(
    own_dsn: str, owner: str, tmp_path: Path
) -> None:
    with GhostMem(dsn=own_dsn, owner=owner, embedder=HashEmbedder(384)) as gm:
        with gm.connection() as conn:  # each project gets its own graph (migration 155) from 2 messages
            conn.execute("UPDATE ghostmem.settings SET value = '2' WHERE key = 'project_graph_rows'")
        import_generic(
            gm,
            tmp_path / "c.jsonl",
            [
                conversation(
                    "pg",
                    "Postgres vacuum",
                    1,
                    ["autovacuum keeps running on the orders table", "tune it"],
                    "db",
                ),
                conversation("cats", "Cat food", 2, ["which food do cats like", "cats love fish"], "home"),
            ],
        )
        gm.remember("Run the migrations before the tests")
        with gm.connection() as conn:
            write_items(
                conn, owner, [ItemWrite(("n",), "k", {"c": "harbour lights"}, "harbour lights")], gm.embedder
            )

    with GhostMem(dsn=own_dsn, owner=owner, embedder=HashEmbedder(384)) as gm:
        done = gm.reembed(HashEmbedder(64))
        # the client switched with the database: its next search embeds the query with the new model
        assert gm.search_personal_memory("cats fish", mode="vector").data.rows[0].conv_id == "cats"
    assert done["dims"] == 64 and done["ghost_memories"] == 1 and done["conversations"] == 2
    assert done["messages"] == 4
    assert done["store_items"] == 1 and "store_items_embedding_hnsw" in done["indexes_rebuilt"]

    with psycopg.connect(own_dsn) as conn:
        for col in vector_columns(conn):
            typmod = conn.execute(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = %s::regclass AND attname = %s",
                (f"{col.schema}.{col.table}", col.column),
            ).fetchone()
            assert typmod == (64,), col
        ghost_col = next(c for c in vector_columns(conn) if c.table == "ghost_memories")
        assert ghost_col.not_null
        assert conn.execute(
            "SELECT count(*) FROM ghostmem.messages WHERE embedding IS NOT NULL"
        ).fetchone() == (4,)
        # the compact copies of the exact scan hold the new vectors (and only them)
        assert "message_vectors" in {c.table for c in vector_columns(conn)}
        assert conn.execute(
            "SELECT count(*) FROM ghostmem.messages m JOIN ghostmem.message_vectors v ON v.owner = m.owner"
            " AND v.id = m.id AND v.embedding = m.embedding::halfvec"
        ).fetchone() == (4,)
        assert conn.execute("SELECT count(*) FROM ghostmem.message_vectors").fetchone() == (4,)
        kept, actual = word_counts(conn)  # the word counts (107) are untouched by new vectors
        assert len(actual) == 4 and kept == actual
        kept, actual = vector_bits(conn)  # and their bits (110), one a dimension of the new model's
        assert len(actual) == 4 and kept == actual and {len(row[-1]) for row in kept} == {64}
        # the owner's partition of the copies (163) follows its table's column and has its graph again, valid
        graph = owner_index(conn, "message_vectors_embedding_hnsw", owner)
        assert conn.execute(
            "SELECT i.indisvalid, a.atttypmod FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
            " AND a.attname = 'embedding' WHERE i.indexrelid = format('ghostmem.%%I', %s::text)::regclass",
            (graph,),
        ).fetchone() == (True, 64)
        graphs = conn.execute(  # the projects' graphs, dropped with the old vectors, are built again (on the partition)
            "SELECT count(*) FILTER (WHERE i.indisvalid), count(*) FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indrelid IN (SELECT t.relid FROM pg_partition_tree('ghostmem.message_vectors') t)"
            " AND c.relname IN (ghostmem.project_graph_name(%s, 'db'), ghostmem.project_graph_name(%s, 'home'))",
            (owner, owner),
        ).fetchone()
        assert graphs == (2, 2)

    with GhostMem(dsn=own_dsn, owner=owner, embedder=HashEmbedder(64)) as gm:
        assert gm.search_personal_memory("cats fish", mode="vector").data.rows[0].conv_id == "cats"
        assert (
            gm.search_ghost_memories("migrations tests").data.rows[0].content.startswith("Run the migrations")
        )
        with gm.connection() as conn:
            conn.execute("UPDATE ghostmem.store_items SET tsv = NULL")  # only the new vector can find it now
            assert [
                i.key for i in search_items(conn, owner, ("n",), embedder=gm.embedder, query="harbour")
            ] == ["k"]
    with pytest.raises(SchemaMismatch, match="stores 64-dimensional vectors"):
        GhostMem(dsn=own_dsn, owner=owner, embedder=HashEmbedder(384)).connect()
