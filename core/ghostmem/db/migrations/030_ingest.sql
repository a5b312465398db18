-- Ingest support: the embedding cache (never embed the same text twice), title hints from Claude Code
-- `summary` lines (which often point at a leaf in another file), and indexes the importers look things up by.

CREATE TABLE ghostmem.embedding_cache (
    model        text  NOT NULL,
    content_hash bytea NOT NULL,
    PRIMARY KEY (model, content_hash)
);

CALL ghostmem.add_vector_column('ghostmem.embedding_cache', 'embedding', not_null => true);

-- A `summary` line names a leaf message (by its native uuid) and a title for the conversation holding it.
CREATE TABLE ghostmem.title_hints (
    owner    text NOT NULL,
    tier     text NOT NULL,
    leaf_id  text NOT NULL,
    title    text NOT NULL,
    PRIMARY KEY (owner, tier, leaf_id)
);

-- Find the conversation holding a native message id without knowing the conversation.
CREATE INDEX messages_native_id ON ghostmem.messages (owner, tier, native_id);

-- What `ghostmem embed` still has to do: conversational messages without a vector.
CREATE INDEX messages_unembedded ON ghostmem.messages (owner, tier, id)
    WHERE embedding IS NULL AND role IN ('user', 'assistant');
