"""Vectors reach the database through pgvector's adapters, on pooled connections and on any other."""

from __future__ import annotations

import numpy as np
import psycopg
from ghostmem import GhostMem, db
from ghostmem.db import prepare

# float64 values float32 cannot hold exactly, and one it can
VALUES = [0.1, 1 / 3, 2**-30, -0.98765432198, 0.5]


def test_a_vector_reads_back_as_the_float32_it_was_written_as(gm: GhostMem) -> None:
    with gm.connection() as conn:
        back = conn.execute("SELECT %s::vector", (db.vector(VALUES),)).fetchone()
    assert back is not None
    assert back[0].dtype == np.float32 and back[0].tolist() == np.asarray(VALUES, dtype=np.float32).tolist()


def test_a_connection_not_opened_by_ghostmem_is_given_the_types_once(pg_dsn: str) -> None:
    prepare(pg_dsn, 384, "hash")
    with psycopg.connect(pg_dsn) as conn:
        db.use_vectors(conn)
        oid = conn.adapters.get_dumper(np.ndarray, psycopg.adapt.PyFormat.BINARY).oid
        db.use_vectors(conn)  # nothing to do the second time
        assert conn.adapters.get_dumper(np.ndarray, psycopg.adapt.PyFormat.BINARY).oid == oid
        row = conn.execute(
            "SELECT %s::vector <=> %s::vector", (db.vector(VALUES), db.vector(np.asarray(VALUES) * 2))
        ).fetchone()
    assert row is not None and abs(row[0]) < 1e-6  # same direction
