-- The index of an owner's recent messages' words (migration 240) from 100,000 messages instead of 500,000; a
-- platform's words (migration 250), which shared that size, keep it under a setting of their own,
-- `platform_words_rows`, as a project's have had `project_words_rows` (50,000) since migration 271. One setting a
-- size: `recent_words_rows` the recent messages', `project_words_rows` a project's, `platform_words_rows` a platform's.
--
-- At 100,000 messages migration 240's measurement (searches of the last 7 or 30 days 6% and 1% dearer through the
-- index) was of session 29's search; since then a known-common word is not fetched (migration 220) and an
-- unfiltered hybrid search's conjunction reads the index too (session 30). On a copy of the bench's 100k store
-- (paired A/B of the search with and without reading the index) backend CPU per hybrid search fell for the last 7
-- and 30 days and without a filter (docs/search.md "An index of the recent messages' words", *From 100,000
-- messages*). Below 100,000 it was not measured: the recent graph (migration 210) starts at 50,000, and an owner
-- between keeps reading its whole index, as before. A platform's index was measured at a million only.
--
-- A store whose `recent_words_rows` was changed from 240's 500,000 keeps its size for the recent messages, and each
-- store's platforms keep the size they had. An owner past the size that has a graph of its recent messages gets the
-- index here (a few seconds at 100,000: it holds the recent share, 15% of the bench's), as migration 240 built it at
-- open; a larger owner's is kept.

INSERT INTO ghostmem.settings (key, value)
SELECT 'platform_words_rows', s.value FROM ghostmem.settings s WHERE s.key = 'recent_words_rows';
UPDATE ghostmem.settings SET value = '100000' WHERE key = 'recent_words_rows' AND value = '500000';

-- The owner's scopes' indexes built and dropped as the sizes say; returns how many it built. Migration 271's body
-- with a platform's size read from `platform_words_rows`.
CREATE OR REPLACE FUNCTION ghostmem.build_scope_words(p_owner text) RETURNS integer
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp LANGUAGE plpgsql
AS $$
DECLARE
    owner_rows pg_catalog.int8 := (
        SELECT COALESCE(pg_catalog.sum(c.n), 0) FROM ghostmem.message_counts c WHERE c.owner = p_owner);
    platform_owner_rows pg_catalog.int8 := (
        SELECT s.value::pg_catalog.int8 FROM ghostmem.settings s WHERE s.key = 'platform_words_rows');
    project_owner_rows pg_catalog.int8 := (
        SELECT s.value::pg_catalog.int8 FROM ghostmem.settings s WHERE s.key = 'project_words_rows');
    project_rows pg_catalog.int8 := (
        SELECT s.value::pg_catalog.int8 FROM ghostmem.settings s WHERE s.key = 'project_graph_rows');
    platform_rows pg_catalog.int8 := (
        SELECT s.value::pg_catalog.int8 FROM ghostmem.settings s WHERE s.key = 'platform_graph_rows');
    wanted pg_catalog.text[] := ARRAY[]::pg_catalog.text[];
    r record;
    built pg_catalog.int4 := 0;
BEGIN
    -- one builder at a time (two would race to create the same name)
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('ghostmem.build_scope_words'));
    FOR r IN
        SELECT 'project' AS kind, c.project AS scope, ghostmem.project_words_name(p_owner, c.project) AS name
        FROM ghostmem.message_counts c
        WHERE c.owner = p_owner AND c.project <> '' AND owner_rows >= project_owner_rows
        GROUP BY c.project HAVING pg_catalog.sum(c.n) >= project_rows
        UNION ALL
        SELECT 'platform', c.platform, ghostmem.platform_words_name(p_owner, c.platform)
        FROM ghostmem.message_counts c
        WHERE c.owner = p_owner AND owner_rows >= platform_owner_rows
        GROUP BY c.platform HAVING pg_catalog.sum(c.n) >= platform_rows AND 2 * pg_catalog.sum(c.n) <= owner_rows
        ORDER BY 1, 2
    LOOP
        wanted := wanted || r.name;
        IF pg_catalog.to_regclass(pg_catalog.quote_ident('ghostmem') || '.' || pg_catalog.quote_ident(r.name)) IS NULL
        THEN
            EXECUTE pg_catalog.format(
                'CREATE INDEX %I ON ghostmem.messages USING gin (ghostmem.owner_words(owner, tsv))'
                ' WITH (gin_pending_list_limit = 256) WHERE (owner || '''') = %L AND %I = %L',
                r.name, p_owner, r.kind, r.scope);
            EXECUTE pg_catalog.format('COMMENT ON INDEX ghostmem.%I IS %L', r.name, p_owner);
            built := built + 1;
        END IF;
    END LOOP;
    FOR r IN
        SELECT c.relname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'ghostmem.messages'::pg_catalog.regclass
          AND c.relname::pg_catalog.text LIKE 'messages\_words\_%'
          AND pg_catalog.obj_description(c.oid, 'pg_class') = p_owner
          AND c.relname::pg_catalog.text <> ALL (wanted)
    LOOP
        EXECUTE pg_catalog.format('DROP INDEX ghostmem.%I', r.relname);
    END LOOP;
    RETURN built;
END
$$;

REVOKE ALL ON FUNCTION ghostmem.build_scope_words(text) FROM PUBLIC;

SELECT ghostmem.build_recent_words(o.owner) FROM (SELECT DISTINCT c.owner FROM ghostmem.message_counts c) o;
