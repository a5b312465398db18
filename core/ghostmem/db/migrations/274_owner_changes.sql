-- A token per owner that every write of what a search's plan statement reads replaces (search.py, "kept plans"):
-- the owner's messages (their counts per tier, platform, project and day, and the speakers people are), its
-- conversations (a project filter's titled conversations and their message counts), and its search indexes
-- (maintenance.py replaces it after each step that builds or drops them). A process keeps a plan statement's row
-- with the token it was read at, and a later search of the same owner and filters uses it when the token is still
-- the owner's: one primary-key read instead of the plan statement (2-11% of a search's backend CPU at 100k messages).
--
-- A random token, not a counter: two databases (a test's, a copy of a store) then never hold the same token for
-- different data, so a process that talks to both cannot take one's plan for the other's. An owner without a row
-- has no token and its plans are not kept.
CREATE TABLE ghostmem.owner_changes (
    owner text PRIMARY KEY,
    token uuid NOT NULL
);

INSERT INTO ghostmem.owner_changes (owner, token)
SELECT o.owner, gen_random_uuid()
FROM (SELECT owner FROM ghostmem.messages UNION SELECT owner FROM ghostmem.conversations) o;

-- New tokens for the owners (one upsert, owners in order, so two writers lock their rows in the same order). Not
-- SECURITY DEFINER: whoever may write messages may write this table (application roles get both from
-- `ghostmem.grant_app`, whose default privileges cover the tables migrations add).
CREATE FUNCTION ghostmem.owners_changed(owners text[]) RETURNS void
    LANGUAGE sql
    SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO ghostmem.owner_changes AS c (owner, token)
    SELECT o.owner, gen_random_uuid()
    FROM (SELECT DISTINCT u.owner FROM unnest(owners) AS u(owner) WHERE u.owner IS NOT NULL) o
    ORDER BY o.owner
    ON CONFLICT (owner) DO UPDATE SET token = EXCLUDED.token;
$$;

-- The statement's owners; a TRUNCATE changes every owner. An update changes only the owners of the rows whose
-- columns a plan reads changed (a message's tier, platform, project, time, speaker or role; a conversation's title
-- or message count), and of a row moved to another owner (its old row pairs with no new one, by key, and the other
-- way round): the embedding step, which sets vectors by the thousand, and enrichment's topics replace no token, so
-- neither waits for an import of the same owner to commit (a trigger with transition tables cannot name its columns).
CREATE FUNCTION ghostmem.owner_changes_track() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM ghostmem.owners_changed(ARRAY(SELECT DISTINCT r.owner FROM new_rows r));
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM ghostmem.owners_changed(ARRAY(SELECT DISTINCT r.owner FROM old_rows r));
    ELSIF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'messages' THEN
        PERFORM ghostmem.owners_changed(ARRAY(
            SELECT DISTINCT coalesce(o.owner, w.owner)
            FROM old_rows o FULL JOIN new_rows w ON w.id = o.id AND w.owner = o.owner
            WHERE o.id IS NULL OR w.id IS NULL
               OR (o.tier, o.platform, o.project, o.ts, o.speaker, o.role)
                  IS DISTINCT FROM (w.tier, w.platform, w.project, w.ts, w.speaker, w.role)));
    ELSIF TG_OP = 'UPDATE' THEN
        PERFORM ghostmem.owners_changed(ARRAY(
            SELECT DISTINCT coalesce(o.owner, w.owner)
            FROM old_rows o FULL JOIN new_rows w
              ON w.owner = o.owner AND w.tier = o.tier AND w.conv_id = o.conv_id
            WHERE o.owner IS NULL OR w.owner IS NULL
               OR (o.title, o.msg_count) IS DISTINCT FROM (w.title, w.msg_count)));
    ELSE
        UPDATE ghostmem.owner_changes SET token = gen_random_uuid();
    END IF;
    RETURN NULL;
END
$$;

-- Statement triggers fire in the order of their names: `message_altered_*` fire before the counters' (`message_bits`,
-- `message_counts`, ...), so a statement locks the owner's token before its counters, and the first write of an
-- owner's messages or conversations in a transaction takes that owner's token first.
CREATE TRIGGER message_altered_insert
    AFTER INSERT ON ghostmem.messages REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.owner_changes_track();
CREATE TRIGGER message_altered_update
    AFTER UPDATE ON ghostmem.messages
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.owner_changes_track();
CREATE TRIGGER message_altered_delete
    AFTER DELETE ON ghostmem.messages REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.owner_changes_track();
CREATE TRIGGER message_altered_truncate
    AFTER TRUNCATE ON ghostmem.messages
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.owner_changes_track();

CREATE TRIGGER conversation_altered_insert
    AFTER INSERT ON ghostmem.conversations REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.owner_changes_track();
CREATE TRIGGER conversation_altered_update
    AFTER UPDATE ON ghostmem.conversations
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.owner_changes_track();
CREATE TRIGGER conversation_altered_delete
    AFTER DELETE ON ghostmem.conversations REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.owner_changes_track();
CREATE TRIGGER conversation_altered_truncate
    AFTER TRUNCATE ON ghostmem.conversations
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.owner_changes_track();
