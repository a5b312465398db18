"""Items: JSON values under a namespace path and a key, per owner, found by filters, words and meaning.

This is the storage of a key-value memory store (LangGraph's ``BaseStore``, see
``langchain_ghostmem.GhostMemStore``), kept in ``ghostmem.store_items`` (migration 080) next to personal memory and
under the same boundary: every statement here names one owner, so a caller can only reach the items of the owner
it passes. An item is found the way messages are (see :mod:`ghostmem.search`): a lexical leg over the same
``ghostmem.lexemes`` and a vector leg over the same embedder, fused by reciprocal rank with the same constant and
the same per-query vector weight. A found item's score says, like a search hit's, how much of the query it
holds (:func:`ghostmem.search.relevance`), never above the item ranked before it. Nothing here calls an LLM.

An item's ``text`` (what it is found by) is chosen by the caller (the adapter reads it from the value's indexed
fields); ``None`` stores the item unindexed. Its vector is computed only when its text changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import accumulate
from typing import Any

from psycopg import Connection, sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ghostmem.db import vector
from ghostmem.embed import Embedder
from ghostmem.errors import InvalidArgument
from ghostmem.limits import STORED_ITEM_KEY_BYTES, STORED_NAMESPACE_BYTES, STORED_NAMESPACE_LABELS, utf8_bytes
from ghostmem.search import HNSW_EF_SEARCH, MAX_QUERY_TERMS, NO_JIT, RRF_K, relevance, vector_weight
from ghostmem.store import embeddable

RANK_DEPTH = (
    50  # items each leg contributes to the fusion at least (more when offset + limit asks for more) ...
)
MAX_RANK_DEPTH = (
    1000  # ... and at most (pgvector's largest hnsw.ef_search): a deeper page of a query is empty
)
# The idf of a query's words is counted on at most this many items of the scope (all of a smaller scope): a word's
# share of them estimates its share of the scope, at a bounded cost (docs/store.md).
IDF_SAMPLE = 2000
COMPARISONS = {"$eq": "=", "$ne": "<>", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_LIVE = sql.SQL("(i.expires_at IS NULL OR i.expires_at > now())")


@dataclass(frozen=True, slots=True)
class Item:
    """A stored item; ``score`` is set only by a search with a query: from 0 to 1, how much of the query the
    item holds (its share of the query's words, weighted by idf, and its closeness in meaning), as a search hit's."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    score: float | None = None


@dataclass(frozen=True, slots=True)
class ItemWrite:
    """Put ``value`` at (namespace, key), or delete it when ``value`` is None.

    ``text`` is what the item is found by (None: not indexed); ``ttl_minutes`` makes it expire that long after
    its last write (or read, when reads refresh).
    """

    namespace: tuple[str, ...]
    key: str
    value: Mapping[str, Any] | None
    text: str | None = None
    ttl_minutes: float | None = None


def checked_namespace(namespace: Sequence[str]) -> None:
    """Refuse a namespace ghostmem cannot keep in an item's key: more than
    :data:`~ghostmem.limits.STORED_NAMESPACE_LABELS` labels, or more than
    :data:`~ghostmem.limits.STORED_NAMESPACE_BYTES` bytes written as LangGraph writes it (labels joined by '.')."""
    if not namespace:
        raise InvalidArgument("An item's namespace must have at least one label.")
    if len(namespace) > STORED_NAMESPACE_LABELS:
        raise InvalidArgument(
            f"The namespace has {len(namespace):,} labels, more than the {STORED_NAMESPACE_LABELS} ghostmem keeps"
            " (it is the item's key): use fewer labels."
        )
    size = utf8_bytes(".".join(namespace))
    if size > STORED_NAMESPACE_BYTES:
        raise InvalidArgument(
            f"The namespace {'.'.join(namespace)[:40]!r}… is {size:,} bytes, longer than the"
            f" {STORED_NAMESPACE_BYTES:,} bytes ghostmem keeps of a namespace (it is the item's key): use shorter"
            " labels, such as ids or hashes."
        )


def checked_key(key: str) -> None:
    """Refuse an item key longer than :data:`~ghostmem.limits.STORED_ITEM_KEY_BYTES` bytes (it is never cut: a cut
    key would merge distinct items)."""
    size = utf8_bytes(key)
    if size > STORED_ITEM_KEY_BYTES:
        raise InvalidArgument(
            f"The item key {key[:40]!r}… is {size:,} bytes, longer than the {STORED_ITEM_KEY_BYTES:,} bytes"
            " ghostmem keeps of a key: use a shorter key, such as an id or a hash of the text."
        )


def _keys_json(keys: Sequence[tuple[tuple[str, ...], str]]) -> Jsonb:
    return Jsonb([{"namespace": list(ns), "key": key, "n": n} for n, (ns, key) in enumerate(keys)])


def write_items(conn: Connection[Any], owner: str, writes: Sequence[ItemWrite], embedder: Embedder) -> None:
    """Apply ``writes`` in order (a later write of the same item wins) in the caller's transaction."""
    last: dict[tuple[tuple[str, ...], str], ItemWrite] = {}
    for w in writes:
        checked_namespace(w.namespace)
        checked_key(w.key)
        if w.ttl_minutes is not None and not w.ttl_minutes > 0:
            raise InvalidArgument(f"ttl must be a positive number of minutes, not {w.ttl_minutes!r}.")
        last.pop((w.namespace, w.key), None)  # re-inserted: the dict keeps the order of last writes
        last[(w.namespace, w.key)] = w
    deletes = [k for k, w in last.items() if w.value is None]
    puts = [w for w in last.values() if w.value is not None]
    if deletes:
        conn.execute(
            """
            DELETE FROM ghostmem.store_items i
            USING jsonb_to_recordset(%s) AS d(namespace text[], key text)
            WHERE i.owner = %s AND i.namespace = d.namespace AND i.key = d.key
            """,
            (_keys_json(deletes), owner),
        )
    if not puts:
        return
    stored = {
        (tuple(r[0]), r[1]): r[2]
        for r in conn.execute(
            """
            SELECT i.namespace, i.key, i.text FROM ghostmem.store_items i
            JOIN jsonb_to_recordset(%s) AS d(namespace text[], key text)
                ON i.owner = %s AND i.namespace = d.namespace AND i.key = d.key
            """,
            (_keys_json([(w.namespace, w.key) for w in puts]), owner),
        )
    }
    # Only a changed text is embedded; an unchanged one keeps its vector (NULL below means "keep").
    to_embed = {
        n: cut
        for n, w in enumerate(puts)
        if (cut := embeddable(w.text or "")) is not None and stored.get((w.namespace, w.key), "\0") != w.text
    }
    vectors = (
        dict(zip(to_embed, embedder.embed_documents(list(to_embed.values())), strict=True))
        if to_embed
        else {}
    )
    with conn.cursor() as cur:
        cur.executemany(
            """
            INSERT INTO ghostmem.store_items AS i
                (owner, namespace, key, value, text, tsv, embedding, ttl_minutes, expires_at)
            VALUES (%(owner)s, %(namespace)s, %(key)s, %(value)s, %(text)s, ghostmem.lexemes(%(text)s),
                    %(embedding)s, %(ttl)s, now() + %(ttl)s * interval '1 minute')
            ON CONFLICT (owner, namespace, key) DO UPDATE SET
                value = EXCLUDED.value, text = EXCLUDED.text, tsv = EXCLUDED.tsv,
                embedding = CASE WHEN EXCLUDED.text IS NOT DISTINCT FROM i.text AND EXCLUDED.embedding IS NULL
                                 THEN i.embedding ELSE EXCLUDED.embedding END,
                ttl_minutes = EXCLUDED.ttl_minutes, expires_at = EXCLUDED.expires_at, updated_at = now()
            """,
            [
                {
                    "owner": owner,
                    "namespace": list(w.namespace),
                    "key": w.key,
                    "value": Jsonb(dict(w.value or {})),
                    "text": w.text.replace("\x00", "") if w.text is not None else None,
                    "embedding": vectors.get(n),
                    "ttl": w.ttl_minutes,
                }
                for n, w in enumerate(puts)
            ],
        )


def _item(row: Mapping[str, Any], score: float | None = None) -> Item:
    return Item(
        namespace=tuple(row["namespace"]),
        key=row["key"],
        value=row["value"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        score=score,
    )


def _refresh(conn: Connection[Any], owner: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """Push the expiry of items with a TTL forward by their TTL (a read counts as use)."""
    expiring = [(tuple(r["namespace"]), r["key"]) for r in rows if r["ttl_minutes"] is not None]
    if expiring:
        conn.execute(
            """
            UPDATE ghostmem.store_items i SET expires_at = now() + i.ttl_minutes * interval '1 minute'
            FROM jsonb_to_recordset(%s) AS d(namespace text[], key text)
            WHERE i.owner = %s AND i.namespace = d.namespace AND i.key = d.key
            """,
            (_keys_json(expiring), owner),
        )


def get_items(
    conn: Connection[Any], owner: str, keys: Sequence[tuple[tuple[str, ...], str]], *, refresh_ttl: bool
) -> list[Item | None]:
    """The items at ``keys`` (None where there is none, or it expired), in the order asked."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            sql.SQL(
                """
                SELECT d.n, i.namespace, i.key, i.value, i.created_at, i.updated_at, i.ttl_minutes
                FROM jsonb_to_recordset(%s) AS d(namespace text[], key text, n int)
                JOIN ghostmem.store_items i ON i.owner = %s AND i.namespace = d.namespace AND i.key = d.key
                WHERE {live}
                """
            ).format(live=_LIVE),
            (_keys_json(keys), owner),
        ).fetchall()
    if refresh_ttl:
        _refresh(conn, owner, rows)
    found = {r["n"]: _item(r) for r in rows}
    return [found.get(n) for n in range(len(keys))]


class _Params:
    """Named bound parameters of one statement being composed."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def __call__(self, value: Any) -> sql.Placeholder:
        name = f"p{len(self.values)}"
        self.values[name] = value
        return sql.Placeholder(name)


def _filter_conditions(
    filter: Mapping[str, Any], params: _Params, path: tuple[str, ...] = ()
) -> list[sql.Composable]:
    """``filter`` as conditions on ``i.value``, with LangGraph's meaning.

    ``{"k": v}`` is equality (a nested object compares field by field, a list as a whole); ``{"k": {"$op": v}}``
    compares with one of :data:`COMPARISONS`. Ordering comparisons hold only between values of one JSON type
    (numbers as numbers, strings as strings); ``$ne`` is true where the field is missing.
    """
    conditions: list[sql.Composable] = []
    for key, wanted in filter.items():
        field = sql.SQL("(i.value #> {})").format(params([*path, str(key)]))
        if isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted):
            for op, operand in wanted.items():
                if op not in COMPARISONS:
                    raise InvalidArgument(
                        f"Filter operator {op!r} on {key!r} is not supported: use one of {', '.join(COMPARISONS)}."
                    )
                value = params(Jsonb(operand))
                if op == "$ne":
                    conditions.append(sql.SQL("{} IS DISTINCT FROM {}").format(field, value))
                elif op == "$eq":
                    conditions.append(sql.SQL("{} = {}").format(field, value))
                else:
                    conditions.append(
                        sql.SQL("({f} {cmp} {v} AND jsonb_typeof({f}) = jsonb_typeof({v}))").format(
                            f=field, cmp=sql.SQL(COMPARISONS[op]), v=value
                        )
                    )
        elif isinstance(wanted, Mapping):
            conditions.append(sql.SQL("jsonb_typeof({}) = 'object'").format(field))
            conditions.extend(_filter_conditions(wanted, params, (*path, str(key))))
        else:
            conditions.append(sql.SQL("{} = {}").format(field, params(Jsonb(wanted))))
    return conditions


def _scope(
    owner: str, prefix: Sequence[str], filter: Mapping[str, Any] | None, params: _Params
) -> sql.Composed:
    parts: list[sql.Composable] = [sql.SQL("i.owner = {}").format(params(owner)), _LIVE]
    if prefix:
        parts.append(
            sql.SQL("i.namespace[1:{}] = {}::text[]").format(sql.Literal(len(prefix)), params(list(prefix)))
        )
    parts.extend(_filter_conditions(filter or {}, params))
    return sql.SQL(" AND ").join(parts)


def search_items(
    conn: Connection[Any],
    owner: str,
    prefix: Sequence[str],
    *,
    embedder: Embedder,
    query: str | None = None,
    filter: Mapping[str, Any] | None = None,
    limit: int = 10,
    offset: int = 0,
    refresh_ttl: bool = True,
) -> list[Item]:
    """Items under ``prefix`` that pass ``filter``: best first for a ``query``, else most recently updated first."""
    if limit < 0 or offset < 0:
        raise InvalidArgument("limit and offset must not be negative.")
    params = _Params()
    scope = _scope(owner, prefix, filter, params)
    searching = bool(query and query.strip())
    if query and searching:
        depth = min(max(RANK_DEPTH, offset + limit), MAX_RANK_DEPTH)
        weight = vector_weight(query)
        # no JIT: with a filter on the values the statement reads the table twice (the idf's sample, the vector
        # leg), estimated 9,300 at 40,000 items and growing with the table, every owner's items: 100,000 at
        # some 450,000 (docs/store.md)
        conn.execute(
            sql.SQL(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                " set_config('hnsw.ef_search', %s, true), {}"
            ).format(NO_JIT),
            (str(max(depth, HNSW_EF_SEARCH)),),
        )
        statement = sql.SQL(
            """
            WITH terms AS MATERIALIZED (
                -- at most MAX_QUERY_TERMS words, the longest, as search_personal_memory takes them: every word
                -- is matched and ranked against each item in scope (a query of 1,000 words took 160 s at 5,000)
                SELECT l AS lexeme, ghostmem.lexeme_query(l) AS tq
                FROM unnest(tsvector_to_array(ghostmem.lexemes({query}, true))) AS l
                ORDER BY length(l) DESC, l
                LIMIT {max_terms}
            ), q AS (
                SELECT string_agg(t.tq::text, ' | ')::tsquery AS tq FROM terms t
            ), sample AS MATERIALIZED (
                -- the items in scope the idf is counted on: all of them up to IDF_SAMPLE, else the first
                -- IDF_SAMPLE in key order, the same on every search (counting all the items of a namespace of
                -- 100,000, and each word's, on every search cost more than the rest of the search)
                SELECT i.tsv FROM ghostmem.store_items i WHERE {scope} AND i.tsv IS NOT NULL
                ORDER BY i.namespace, i.key LIMIT {sample}
            ), idf AS MATERIALIZED (
                -- each query word's idf among them, as search_personal_memory weighs a hit's words (an item
                -- holds a word when its lexemes do: their lexemes are read once for every word)
                SELECT t.tq, ln(1 + (n.n - coalesce(d.df, 0) + 0.5) / (coalesce(d.df, 0) + 0.5))::float8 AS idf
                FROM terms t
                CROSS JOIN (SELECT count(*) AS n FROM sample) n
                LEFT JOIN (
                    SELECT l.lexeme, count(*) AS df
                    FROM sample s CROSS JOIN LATERAL unnest(tsvector_to_array(s.tsv)) AS l(lexeme)
                    WHERE l.lexeme IN (SELECT lexeme FROM terms)
                    GROUP BY l.lexeme
                ) d ON d.lexeme = t.lexeme
            ), lex AS (
                SELECT i.namespace, i.key,
                       row_number() OVER (ORDER BY ts_rank_cd(i.tsv, q.tq) DESC, i.updated_at DESC) AS rank
                FROM ghostmem.store_items i, q
                WHERE {scope} AND i.tsv @@ q.tq
                ORDER BY rank LIMIT {depth}
            ), vec AS (
                SELECT namespace, key, row_number() OVER (ORDER BY distance) AS rank
                FROM (SELECT i.namespace, i.key, i.embedding <=> {vector} AS distance
                      FROM ghostmem.store_items i
                      WHERE {scope} AND i.embedding IS NOT NULL
                      ORDER BY i.embedding <=> {vector} LIMIT {depth}) nearest
            ), fused AS (
                SELECT namespace, key,
                       coalesce(1.0 / ({k} + l.rank), 0) + coalesce({weight} / ({k} + v.rank), 0) AS fused
                FROM lex l FULL JOIN vec v USING (namespace, key)
            )
            SELECT i.namespace, i.key, i.value, i.created_at, i.updated_at, i.ttl_minutes,
                   (SELECT sum(x.idf) FILTER (WHERE i.tsv @@ x.tq) / nullif(sum(x.idf), 0) FROM idf x) AS cover,
                   CASE WHEN {weight} > 0 THEN 1 - (i.embedding <=> {vector}) END AS similarity
            FROM fused f
            JOIN ghostmem.store_items i ON i.owner = {owner} AND i.namespace = f.namespace AND i.key = f.key
            ORDER BY f.fused DESC, i.updated_at DESC, i.key
            LIMIT {ranked}
            """
        ).format(
            query=params(query),
            scope=scope,
            depth=params(depth),
            vector=params(vector(embedder.embed_query(query))),
            k=sql.Literal(RRF_K),
            max_terms=sql.Literal(MAX_QUERY_TERMS),
            sample=sql.Literal(IDF_SAMPLE),
            weight=params(weight),
            owner=params(owner),
            ranked=params(offset + limit),
        )
    else:
        statement = sql.SQL(
            """
            SELECT i.namespace, i.key, i.value, i.created_at, i.updated_at, i.ttl_minutes
            FROM ghostmem.store_items i WHERE {scope}
            ORDER BY i.updated_at DESC, i.namespace, i.key LIMIT {limit} OFFSET {offset}
            """
        ).format(scope=scope, limit=params(limit), offset=params(offset))
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(statement, params.values).fetchall()
    if not searching:
        if refresh_ttl:
            _refresh(conn, owner, rows)
        return [_item(r) for r in rows]
    # the fusion orders the items; each shows its relevance, never above the one ranked before it (so the page
    # after `offset` is scored with the items before it)
    scores = list(accumulate((relevance(r["cover"], r["similarity"]) for r in rows), min))
    if refresh_ttl:
        _refresh(conn, owner, rows[offset:])
    return [_item(r, score) for r, score in zip(rows[offset:], scores[offset:], strict=True)]


def list_namespaces(
    conn: Connection[Any],
    owner: str,
    *,
    prefix: Sequence[str] = (),
    suffix: Sequence[str] = (),
    max_depth: int | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[tuple[str, ...]]:
    """The owner's distinct namespaces (cut to ``max_depth`` labels) matching ``prefix`` and ``suffix``, sorted.

    A ``"*"`` label in ``prefix`` or ``suffix`` matches any label.
    """
    if limit < 0 or offset < 0:
        raise InvalidArgument("limit and offset must not be negative.")
    if max_depth is not None and max_depth < 1:
        raise InvalidArgument("max_depth must be at least 1.")
    params = _Params()
    parts: list[sql.Composable] = [sql.SQL("i.owner = {}").format(params(owner)), _LIVE]
    for labels, at_end in ((prefix, False), (suffix, True)):
        if labels:
            parts.append(sql.SQL("cardinality(i.namespace) >= {}").format(params(len(labels))))
        for n, label in enumerate(labels):
            if label == "*":
                continue
            index = (
                sql.SQL("cardinality(i.namespace) - {}").format(params(len(labels) - 1 - n))
                if at_end
                else params(n + 1)
            )
            parts.append(sql.SQL("i.namespace[{}] = {}").format(index, params(label)))
    statement = sql.SQL(
        """
        SELECT DISTINCT CASE WHEN {depth}::int IS NULL THEN i.namespace ELSE i.namespace[1:{depth}::int] END AS ns
        FROM ghostmem.store_items i WHERE {where}
        ORDER BY ns LIMIT {limit} OFFSET {offset}
        """
    ).format(
        depth=params(max_depth),
        where=sql.SQL(" AND ").join(parts),
        limit=params(limit),
        offset=params(offset),
    )
    return [tuple(r[0]) for r in conn.execute(statement, params.values)]


def sweep_expired(conn: Connection[Any]) -> int:
    """Delete every expired item (of every owner); returns how many."""
    cur = conn.execute("DELETE FROM ghostmem.store_items WHERE expires_at <= now()")
    return cur.rowcount


def embed_pending_items(conn: Connection[Any], embedder: Embedder, batch_size: int = 256) -> int:
    """Give indexed items without a vector (after ``ghostmem reembed``) their vector; returns how many."""
    done = 0
    after: tuple[str, list[str], str] = ("", [], "")
    while True:
        rows = conn.execute(
            """
            SELECT owner, namespace, key, text FROM ghostmem.store_items
            WHERE embedding IS NULL AND text IS NOT NULL AND (owner, namespace, key) > (%s, %s::text[], %s)
            ORDER BY owner, namespace, key LIMIT %s
            """,
            (*after, batch_size),
        ).fetchall()
        if not rows:
            return done
        after = (rows[-1][0], rows[-1][1], rows[-1][2])
        cuts = [(r, cut) for r in rows if (cut := embeddable(r[3])) is not None]
        vectors = embedder.embed_documents([cut for _, cut in cuts]) if cuts else []
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE ghostmem.store_items SET embedding = %s WHERE owner = %s AND namespace = %s AND key = %s",
                [(vector(v), r[0], r[1], r[2]) for (r, _), v in zip(cuts, vectors, strict=True)],
            )
        done += len(cuts)
