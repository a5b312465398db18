-- Each indexed message's word count with its place in the thread and what the filters read, for the lexical leg's
-- window ranking (search.py, docs/search.md "The window ranking from compact rows").
--
-- The lexical leg scores a message as the document of its window (itself and its neighbours in the thread), whose
-- length is the sum of its messages' word counts. It read them from ghostmem.messages: for each of up to 300
-- windows a range of messages_conv_seq, a row of the wide messages table per message (1.4 kB on average at the
-- bench's 100k messages) and `length(tsv)` of each. Here one narrow row per message with words (tsv not NULL, as
-- the leg counts them), and an index on (owner, tier, conv_id, seq) that holds every column the leg reads but the
-- project, so a window is one short range of a small index (index-only once the table is vacuumed, unless the
-- search is filtered by project).
--
-- Kept by statement triggers on ghostmem.messages with transition tables (as message_vectors, migration 101): a
-- message with words has its row; an update that changes its words, place, time, platform or project replaces it; a
-- delete or TRUNCATE removes it. `lexemes` is length(tsv), the count BM25 reads. Not SECURITY DEFINER: whoever may
-- write messages may write this table (application roles get both from `ghostmem.grant_app`).
CREATE TABLE ghostmem.message_lengths (
    owner    text        NOT NULL,
    id       bigint      NOT NULL,  -- ghostmem.messages.id
    tier     text        NOT NULL,
    conv_id  text        NOT NULL,
    seq      integer     NOT NULL,
    lexemes  integer     NOT NULL,  -- length(tsv)
    ts       timestamptz,
    platform text        NOT NULL,
    project  text,
    -- as messages' own key: led by owner, the planner could take it for the window reads (checking tier, conv_id and
    -- seq on every row of the owner)
    PRIMARY KEY (id, owner)
);

CREATE FUNCTION ghostmem.message_lengths_track() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ghostmem.message_lengths (owner, id, tier, conv_id, seq, lexemes, ts, platform, project)
        SELECT n.owner, n.id, n.tier, n.conv_id, n.seq, length(n.tsv), n.ts, n.platform, n.project
        FROM new_rows n WHERE n.tsv IS NOT NULL
        ORDER BY n.owner, n.id;
    ELSIF TG_OP = 'DELETE' THEN
        DELETE FROM ghostmem.message_lengths l USING old_rows o WHERE l.owner = o.owner AND l.id = o.id;
    ELSE
        -- Only rows whose words, place or what the filters read changed (a new vector changes none).
        DELETE FROM ghostmem.message_lengths l USING old_rows o JOIN new_rows n ON n.id = o.id
        WHERE l.owner = o.owner AND l.id = o.id AND o.tsv IS NOT NULL
          AND (n.tsv IS NULL OR n.owner IS DISTINCT FROM o.owner);
        INSERT INTO ghostmem.message_lengths (owner, id, tier, conv_id, seq, lexemes, ts, platform, project)
        SELECT n.owner, n.id, n.tier, n.conv_id, n.seq, length(n.tsv), n.ts, n.platform, n.project
        FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE n.tsv IS NOT NULL
          AND ((o.owner, o.tier, o.conv_id, o.seq, o.ts, o.platform, o.project)
                   IS DISTINCT FROM (n.owner, n.tier, n.conv_id, n.seq, n.ts, n.platform, n.project)
               OR o.tsv IS NULL OR length(o.tsv) <> length(n.tsv))
        ORDER BY n.owner, n.id
        ON CONFLICT (id, owner) DO UPDATE
            SET tier = EXCLUDED.tier, conv_id = EXCLUDED.conv_id, seq = EXCLUDED.seq, lexemes = EXCLUDED.lexemes,
                ts = EXCLUDED.ts, platform = EXCLUDED.platform, project = EXCLUDED.project;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION ghostmem.message_lengths_clear() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    TRUNCATE ghostmem.message_lengths;
    RETURN NULL;
END
$$;

CREATE TRIGGER message_lengths_insert
    AFTER INSERT ON ghostmem.messages REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_lengths_track();
CREATE TRIGGER message_lengths_update
    AFTER UPDATE ON ghostmem.messages REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_lengths_track();
CREATE TRIGGER message_lengths_delete
    AFTER DELETE ON ghostmem.messages REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_lengths_track();
CREATE TRIGGER message_lengths_truncate
    AFTER TRUNCATE ON ghostmem.messages
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_lengths_clear();

-- An existing store's rows, in thread order (the order the window reads take).
INSERT INTO ghostmem.message_lengths (owner, id, tier, conv_id, seq, lexemes, ts, platform, project)
SELECT owner, id, tier, conv_id, seq, length(tsv), ts, platform, project
FROM ghostmem.messages WHERE tsv IS NOT NULL
ORDER BY owner, tier, conv_id, seq;

-- Not the project: with the conversation id in the key, a long id and a long project (each fits the indexes of
-- messages) would not fit one btree entry together (at most 2,704 bytes), and no message of such a conversation
-- could be stored (nor this migration applied to a store holding one). A search filtered by project reads it from
-- the narrow rows of its windows; every other search reads the index alone.
CREATE INDEX message_lengths_place ON ghostmem.message_lengths (owner, tier, conv_id, seq)
    INCLUDE (id, lexemes, ts, platform);
ANALYZE ghostmem.message_lengths;
