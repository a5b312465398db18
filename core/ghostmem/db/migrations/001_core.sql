-- Personal memory: conversations, their messages, and what the importers already read.
-- The vector dimension comes from the configured embedding model: see ghostmem.add_vector_column below.

CREATE SCHEMA IF NOT EXISTS ghostmem;
CREATE SCHEMA IF NOT EXISTS agent;

CREATE TABLE ghostmem.settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO ghostmem.settings (key, value) VALUES ('dims', current_setting('ghostmem.dims'));
INSERT INTO ghostmem.settings (key, value) VALUES ('embed_model', current_setting('ghostmem.embed_model'));

CREATE TABLE ghostmem.conversations (
    owner          text        NOT NULL,
    tier           text        NOT NULL CHECK (tier IN ('personal', 'library')),
    conv_id        text        NOT NULL,
    platform       text        NOT NULL,
    parent_conv_id text,
    title          text,
    project        text,
    started_at     timestamptz,
    ended_at       timestamptz,
    msg_count      integer     NOT NULL DEFAULT 0,
    topic          text,
    cluster        integer,
    intensity      real,
    first_snippet  text,
    source         text,
    meta           jsonb       NOT NULL DEFAULT '{}'::jsonb,
    imported_at    timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, tier, conv_id)
);

CREATE TABLE ghostmem.messages (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner        text        NOT NULL,
    tier         text        NOT NULL,
    conv_id      text        NOT NULL,
    seq          integer     NOT NULL,
    native_id    text        NOT NULL,
    role         text        NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool', 'tool_call',
                                                      'thinking', 'meta')),
    raw_role     text,
    speaker      text,
    text         text        NOT NULL,
    ts           timestamptz,
    -- denormalised from the conversation so that filters run inside the index scans
    platform     text        NOT NULL,
    project      text,
    content_hash bytea       NOT NULL,
    tsv          tsvector,
    meta         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    UNIQUE (owner, tier, conv_id, native_id),
    FOREIGN KEY (owner, tier, conv_id) REFERENCES ghostmem.conversations (owner, tier, conv_id)
        ON DELETE CASCADE
);
CREATE INDEX messages_conv_seq ON ghostmem.messages (owner, tier, conv_id, seq);

-- The one place a vector column is created: later migrations call it too. The dimension is the configured
-- model's (ghostmem.dims, set by the runner for the migration's transaction), checked before it is formatted in.
CREATE PROCEDURE ghostmem.add_vector_column(tbl regclass, col text, not_null boolean DEFAULT false)
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    d integer := current_setting('ghostmem.dims')::integer;
BEGIN
    IF d < 1 OR d > 16000 THEN
        RAISE EXCEPTION 'ghostmem.dims out of range: %', d;
    END IF;
    EXECUTE format('ALTER TABLE %s ADD COLUMN %I vector(%s)%s', tbl, col, d,
                   CASE WHEN not_null THEN ' NOT NULL' ELSE '' END);
END
$$;
REVOKE ALL ON PROCEDURE ghostmem.add_vector_column(regclass, text, boolean) FROM PUBLIC;

CALL ghostmem.add_vector_column('ghostmem.messages', 'embedding');
CALL ghostmem.add_vector_column('ghostmem.conversations', 'embedding');

-- Per source file: what an importer has already read, so the next run reads only what is new.
CREATE TABLE ghostmem.import_state (
    owner      text        NOT NULL,
    tier       text        NOT NULL,
    path       text        NOT NULL,
    size       bigint      NOT NULL,
    mtime_ns   bigint      NOT NULL,
    "offset"   bigint      NOT NULL DEFAULT 0,
    hash       text,
    state      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, tier, path)
);

-- Conversations removed by `ghostmem forget`: never imported again.
CREATE TABLE ghostmem.forgotten (
    owner        text        NOT NULL,
    conv_id      text        NOT NULL,
    platform     text,
    forgotten_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, conv_id)
);
