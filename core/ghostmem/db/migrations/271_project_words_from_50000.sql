-- An index of a project's words (migration 250) for an owner of at least `project_words_rows` (50,000) messages
-- instead of `recent_words_rows` (500,000, which still decides a platform's and, migration 240, the recent
-- messages'): docs/search.md "Session 31, project".
--
-- At 100,000 messages a hybrid search filtered by a project (3-5% of the owner's messages, each with a graph of its
-- own, migration 231) spent about half of its lexical leg in the conjunction fetch through the owner's whole index:
-- the bitmap of all the owner's matches, then up to a hundred of them read from the table, of which the project kept
-- a few (6 and 14 of 100 in two bench queries). Through the project's index the fetch reads the project's matches
-- alone, its share of the hundred less one (search._scope_conjunction). On a copy of the 100k bench store with the
-- indexes, paired A/B of the search with and without them: project hybrid 1.16x less backend CPU, conversation
-- recall the same (0.850). A platform keeps the larger size: a platform's share is larger, and 250 measured it at a
-- million only. 50,000 is half the smallest owner measured; below it the owner's own lists are short anyway.
--
-- As for 250, the indexes are built by ghostmem.build_scope_words(owner) at the owner's next import, embedding or
-- `ghostmem maintain`, not here; a store whose size of `recent_words_rows` was changed keeps it for platforms.
INSERT INTO ghostmem.settings (key, value) VALUES ('project_words_rows', '50000');

CREATE OR REPLACE FUNCTION ghostmem.build_scope_words(p_owner text) RETURNS integer
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp LANGUAGE plpgsql
AS $$
DECLARE
    owner_rows pg_catalog.int8 := (
        SELECT COALESCE(pg_catalog.sum(c.n), 0) FROM ghostmem.message_counts c WHERE c.owner = p_owner);
    platform_owner_rows pg_catalog.int8 := (
        SELECT s.value::pg_catalog.int8 FROM ghostmem.settings s WHERE s.key = 'recent_words_rows');
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
