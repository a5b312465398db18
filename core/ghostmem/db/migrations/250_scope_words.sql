-- An index of the words of each large project and each large platform of a large owner: a partial GIN index of
-- ghostmem.owner_words(owner, tsv) (migration 102) holding the owner's messages of one project,
-- `... WHERE (owner || '') = '<owner>' AND project = '<project>'`, or of one platform, `... AND platform =
-- '<platform>'`, for the lexical leg's conjunction fetch of a search filtered by that project or platform (search.py,
-- docs/search.md "An index of a project's or a platform's words"), as migration 240's index of the recent messages'
-- words serves a time window.
--
-- The conjunction fetch reads the messages holding every query word, at most a hundred, and checks the filters on
-- the rows it fetched: at a million messages the bitmap of all the owner's matches is built whole (2.7-4.6 ms a
-- query, half of a filtered search) for a hundred rows of which a project (3.5% of the messages) kept 0-3 and
-- codex (14%) 4-21. Through the scope's index the bitmap holds the scope's matches alone, and the search fetches
-- a little less than the scope's share of the hundred (search._scope_conjunction, SCOPE_FETCH_BELOW): the fetch
-- alone 2.8 -> 0.33 ms for a project, 3.7 -> 0.65 ms for codex.
--
-- The scopes are those that get a graph of their own (migrations 155, 230, 231: a project of at least
-- `project_graph_rows` messages, a platform of at least `platform_graph_rows` and at most half of the owner's) of an
-- owner of at least `recent_words_rows` (500,000, migration 240's size) messages. Kept by
-- ghostmem.build_scope_words(owner), which ghostmem calls after ghostmem.build_project_graphs (each import,
-- embedding and reembed, and bench.scale's load and reuse), not here: at a million messages the 18 + 3 projects
-- and 7 platforms take about 80 s (1.3 s a project, 7.5 s for codex's 141,000 messages), a wait the first command
-- after an upgrade should not hold. A scope that falls outside the bounds, or an owner below the size, loses its
-- indexes at the next build. Each index's comment is its owner (the name, a digest, does not say whose it is).
-- New messages go into it as they come (gin_pending_list_limit 256 kB, as migration 116 asks of a GIN index a search
-- reads).

-- The names: a digest as the scope's graph's (migrations 155, 230), whose texts differ between a project and a
-- platform by their separator.
CREATE FUNCTION ghostmem.project_words_name(p_owner text, p_project text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT 'messages_words_' || pg_catalog.substr(ghostmem.project_graph_name(p_owner, p_project), 23)
$$;

CREATE FUNCTION ghostmem.platform_words_name(p_owner text, p_platform text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT 'messages_words_' || pg_catalog.substr(ghostmem.platform_graph_name(p_owner, p_platform), 23)
$$;

-- The owner's scopes' indexes built and dropped as the bounds say; returns how many it built.
CREATE FUNCTION ghostmem.build_scope_words(p_owner text) RETURNS integer
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp LANGUAGE plpgsql
AS $$
DECLARE
    owner_rows pg_catalog.int8 := (
        SELECT COALESCE(pg_catalog.sum(c.n), 0) FROM ghostmem.message_counts c WHERE c.owner = p_owner);
    threshold pg_catalog.int8 := (
        SELECT s.value::pg_catalog.int8 FROM ghostmem.settings s WHERE s.key = 'recent_words_rows');
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
        WHERE c.owner = p_owner AND c.project <> '' AND owner_rows >= threshold
        GROUP BY c.project HAVING pg_catalog.sum(c.n) >= project_rows
        UNION ALL
        SELECT 'platform', c.platform, ghostmem.platform_words_name(p_owner, c.platform)
        FROM ghostmem.message_counts c
        WHERE c.owner = p_owner AND owner_rows >= threshold
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
