-- Compact copies of the message embeddings, for an exact scan of a small candidate set (search.py, docs/search.md
-- "Small candidate sets: an exact scan of compact vectors").
--
-- When an owner's messages in a search's scope are few (a small owner beside large ones, a short time window), the
-- nearest ones are found exactly, by reading them all, instead of walking the HNSW graph shared by every owner
-- until enough of them pass the filters. `messages.embedding` is stored out of line (TOAST, about two extra buffer
-- reads per row), so such a scan of `messages` paid only below ~3,000 rows. Here each row holds its vector inline
-- as `halfvec` (2 bytes a dimension: 776 bytes for 384, about nine rows a page) with what the filters read, in
-- (owner, tier, ts) order, so a scope's rows are a range of a small index over few pages.
--
-- Kept by statement triggers on ghostmem.messages with transition tables (as message_counts, migration 092): a
-- message with an embedding has its row; an update that changes its embedding, time, platform, project or place
-- replaces it; a delete or TRUNCATE removes it. Not SECURITY DEFINER: whoever may write messages may write this
-- table (application roles get both from `ghostmem.grant_app`).
CREATE TABLE ghostmem.message_vectors (
    owner    text        NOT NULL,
    id       bigint      NOT NULL,  -- ghostmem.messages.id
    tier     text        NOT NULL,
    conv_id  text        NOT NULL,
    ts       timestamptz,
    platform text        NOT NULL,
    project  text,
    PRIMARY KEY (owner, id)
);

-- The dimension is the configured model's: the column is made as every vector column is (which checks it), then
-- retyped. STORAGE MAIN: inline (compressed if it must be; out of line only when a row could not fit a page
-- otherwise).
CALL ghostmem.add_vector_column('ghostmem.message_vectors', 'embedding', not_null => true);
DO $$
BEGIN
    EXECUTE format('ALTER TABLE ghostmem.message_vectors ALTER COLUMN embedding TYPE halfvec(%s),'
                   ' ALTER COLUMN embedding SET STORAGE MAIN', current_setting('ghostmem.dims')::integer);
END
$$;

CREATE FUNCTION ghostmem.message_vectors_track() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ghostmem.message_vectors (owner, id, tier, conv_id, ts, platform, project, embedding)
        SELECT n.owner, n.id, n.tier, n.conv_id, n.ts, n.platform, n.project, n.embedding::halfvec
        FROM new_rows n WHERE n.embedding IS NOT NULL
        ORDER BY n.owner, n.id;
    ELSIF TG_OP = 'DELETE' THEN
        DELETE FROM ghostmem.message_vectors v USING old_rows o WHERE v.owner = o.owner AND v.id = o.id;
    ELSE
        -- Only rows whose vector or what the filters read changed (tsv refills and the like change none).
        DELETE FROM ghostmem.message_vectors v USING old_rows o JOIN new_rows n ON n.id = o.id
        WHERE v.owner = o.owner AND v.id = o.id AND o.embedding IS NOT NULL
          AND (n.embedding IS NULL OR n.owner IS DISTINCT FROM o.owner);
        INSERT INTO ghostmem.message_vectors (owner, id, tier, conv_id, ts, platform, project, embedding)
        SELECT n.owner, n.id, n.tier, n.conv_id, n.ts, n.platform, n.project, n.embedding::halfvec
        FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE n.embedding IS NOT NULL
          AND ((o.owner, o.tier, o.conv_id, o.ts, o.platform, o.project)
                   IS DISTINCT FROM (n.owner, n.tier, n.conv_id, n.ts, n.platform, n.project)
               OR o.embedding IS DISTINCT FROM n.embedding)
        ORDER BY n.owner, n.id
        ON CONFLICT (owner, id) DO UPDATE
            SET tier = EXCLUDED.tier, conv_id = EXCLUDED.conv_id, ts = EXCLUDED.ts, platform = EXCLUDED.platform,
                project = EXCLUDED.project, embedding = EXCLUDED.embedding;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION ghostmem.message_vectors_clear() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    TRUNCATE ghostmem.message_vectors;
    RETURN NULL;
END
$$;

CREATE TRIGGER message_vectors_insert
    AFTER INSERT ON ghostmem.messages REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_vectors_track();
CREATE TRIGGER message_vectors_update
    AFTER UPDATE ON ghostmem.messages REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_vectors_track();
CREATE TRIGGER message_vectors_delete
    AFTER DELETE ON ghostmem.messages REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_vectors_track();
CREATE TRIGGER message_vectors_truncate
    AFTER TRUNCATE ON ghostmem.messages
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_vectors_clear();

INSERT INTO ghostmem.message_vectors (owner, id, tier, conv_id, ts, platform, project, embedding)
SELECT owner, id, tier, conv_id, ts, platform, project, embedding::halfvec
FROM ghostmem.messages WHERE embedding IS NOT NULL
ORDER BY owner, tier, ts;

-- A scope's rows: the owner's within a time window or all of them; a project's; a (titled) conversation's.
CREATE INDEX message_vectors_owner_ts ON ghostmem.message_vectors (owner, tier, ts);
CREATE INDEX message_vectors_owner_project ON ghostmem.message_vectors (owner, tier, project);
CREATE INDEX message_vectors_owner_conv ON ghostmem.message_vectors (owner, tier, conv_id);
