-- Key-value items of a LangGraph store (langchain_ghostmem.GhostMemStore, written through ghostmem.items).
-- An item is a JSON value under a namespace path and a key, owned like every other row: the owner leads the
-- primary key and every statement of ghostmem.items names it, so one owner's reads never return another's rows.
-- `text` is what the item is found by (the indexed fields of its value, NULL when it is not indexed); `tsv` holds
-- its lexemes (the same ghostmem.lexemes as messages) and `embedding` its vector. TTL: `ttl_minutes` is what the
-- writer asked for, `expires_at` when the item stops being returned (reads may push it forward).

CREATE TABLE ghostmem.store_items (
    owner       text        NOT NULL,
    namespace   text[]      NOT NULL CHECK (cardinality(namespace) > 0),
    key         text        NOT NULL,
    value       jsonb       NOT NULL,
    text        text,
    tsv         tsvector,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    ttl_minutes double precision CHECK (ttl_minutes > 0),
    expires_at  timestamptz,
    PRIMARY KEY (owner, namespace, key)
);
CALL ghostmem.add_vector_column('ghostmem.store_items', 'embedding');

CREATE INDEX store_items_updated ON ghostmem.store_items (owner, updated_at DESC);
CREATE INDEX store_items_tsv ON ghostmem.store_items USING gin (tsv);
CREATE INDEX store_items_embedding_hnsw ON ghostmem.store_items USING hnsw (embedding vector_cosine_ops);
CREATE INDEX store_items_expiring ON ghostmem.store_items (expires_at) WHERE expires_at IS NOT NULL;
