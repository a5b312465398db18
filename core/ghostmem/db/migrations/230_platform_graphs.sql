-- A graph of each of a large owner's large platforms: a partial HNSW index of the owner's partition of the compact
-- vectors (migrations 101, 163) holding its rows of one platform, `... WHERE platform = '<platform>'`, for the
-- vector leg of a search filtered by that platform (search.py, docs/search.md "A graph of each large platform").
--
-- A platform keeps a part of its owner's messages (in the bench's stores codex holds 14%), so the walk of the owner's
-- whole graph passes over about seven rows for each it keeps, and a search by meaning alone read the platform's rows
-- quantized instead (at 100k messages 14,440 rows, about 4.6 ms of a 5.1 ms statement). The platform's own graph is
-- walked like the recent messages' graph of migration 210: the search writes the platform as a literal into the
-- walk's filter, so that the generic plan proves the index's predicate.
--
-- Built by ghostmem.build_project_graphs(owner) with the projects' and the recent messages' graphs (after each import
-- or embedding, and by `reembed`, whose ghostmem.drop_project_graphs drops it: its name has their prefix), for each
-- platform of the owner's that holds at least `platform_graph_rows` (5,000) of its messages (every tier) and at most
-- half of them: a platform holding more is walked in the owner's graph passing over at most twice the rows it keeps,
-- and its graph would be most of the owner's, each message written twice into the same walk. The graph's name is
-- ghostmem.platform_graph_name(owner, platform): a digest as a project's (migration 155), whose text differs from any
-- project's by its separator. A platform that falls outside those bounds loses its graph at the next build. New
-- messages of the platform go into it as they come (one more HNSW insert for each, about 1 ms).

INSERT INTO ghostmem.settings (key, value) VALUES ('platform_graph_rows', '5000');

CREATE FUNCTION ghostmem.platform_graph_name(p_owner text, p_platform text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT 'message_vectors_graph_' || pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
        pg_catalog.length(p_owner)::pg_catalog.text || ';' || p_owner || p_platform, 'UTF8')), 'hex'), 40)
$$;

CREATE OR REPLACE FUNCTION ghostmem.build_project_graphs(p_owner text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    vectors pg_catalog.text := (
        SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'vector');
    threshold pg_catalog.int8 := (
        SELECT s.value::pg_catalog.int8 FROM ghostmem.settings s WHERE s.key = 'project_graph_rows');
    recent_rows pg_catalog.int8 := (
        SELECT s.value::pg_catalog.int8 FROM ghostmem.settings s WHERE s.key = 'recent_graph_rows');
    recent_days pg_catalog.int4 := (
        SELECT s.value::pg_catalog.int4 FROM ghostmem.settings s WHERE s.key = 'recent_graph_days');
    platform_rows pg_catalog.int8 := (
        SELECT s.value::pg_catalog.int8 FROM ghostmem.settings s WHERE s.key = 'platform_graph_rows');
    -- the owner's partition of the compact vectors (migration 163)
    target pg_catalog.regclass := (
        SELECT v.tableoid::pg_catalog.regclass FROM ghostmem.message_vectors v WHERE v.owner = p_owner LIMIT 1);
    owner_rows pg_catalog.int8 := (
        SELECT COALESCE(pg_catalog.sum(c.n), 0) FROM ghostmem.message_counts c WHERE c.owner = p_owner);
    recent pg_catalog.text := ghostmem.project_graph_name(p_owner, '');
    recent_index pg_catalog.regclass;
    -- the day a graph of the recent messages built now starts at (midnight UTC)
    since pg_catalog.timestamptz := pg_catalog.date_trunc('day', pg_catalog.now(), 'UTC')
        - pg_catalog.make_interval(days => recent_days);
    wanted pg_catalog.bool;
    large pg_catalog.text[];
    platforms pg_catalog.text[];
    r record;
    built pg_catalog.int4 := 0;
BEGIN
    IF target IS NULL THEN
        RETURN 0;  -- no vector of the owner's (its graphs, if any, index nothing)
    END IF;
    -- one builder at a time (two would race to create the same name)
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('ghostmem.build_project_graphs'));
    wanted := owner_rows >= recent_rows;
    recent_index := pg_catalog.to_regclass(pg_catalog.quote_ident('ghostmem') || '.' || pg_catalog.quote_ident(recent));
    large := ARRAY(
        SELECT ghostmem.project_graph_name(p_owner, c.project)
        FROM ghostmem.message_counts c
        WHERE c.owner = p_owner AND c.project <> ''
        GROUP BY c.project HAVING pg_catalog.sum(c.n) >= threshold);
    -- the platforms that get a graph: at least platform_graph_rows of the owner's messages, at most half of them
    platforms := ARRAY(
        SELECT c.platform
        FROM ghostmem.message_counts c
        WHERE c.owner = p_owner
        GROUP BY c.platform
        HAVING pg_catalog.sum(c.n) >= platform_rows AND 2 * pg_catalog.sum(c.n) <= owner_rows
        ORDER BY c.platform);
    large := large || ARRAY(SELECT ghostmem.platform_graph_name(p_owner, p) FROM pg_catalog.unnest(platforms) p);
    IF wanted AND recent_index IS NOT NULL
       AND pg_catalog.obj_description(recent_index, 'pg_class')::pg_catalog.timestamptz
           >= since - pg_catalog.make_interval(days => recent_days) THEN
        large := large || recent;  -- kept: it holds at most twice the span
    END IF;
    FOR r IN
        SELECT c.relname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = target AND c.relname::pg_catalog.text LIKE 'message\_vectors\_graph\_%'
          AND c.relname::pg_catalog.text <> ALL (large)
    LOOP
        EXECUTE pg_catalog.format('DROP INDEX ghostmem.%I', r.relname);
    END LOOP;
    FOR r IN
        SELECT c.project, ghostmem.project_graph_name(p_owner, c.project) AS name
        FROM ghostmem.message_counts c
        WHERE c.owner = p_owner AND c.project <> ''
        GROUP BY c.project HAVING pg_catalog.sum(c.n) >= threshold
        ORDER BY c.project
    LOOP
        IF pg_catalog.to_regclass(pg_catalog.quote_ident('ghostmem') || '.' || pg_catalog.quote_ident(r.name)) IS NULL
        THEN
            EXECUTE pg_catalog.format(
                'CREATE INDEX %I ON %s USING hnsw (embedding %I.halfvec_cosine_ops) WITH (m = 32, ef_construction = 128)'
                ' WHERE owner = %L AND project = %L',
                r.name, target, vectors, p_owner, r.project);
            built := built + 1;
        END IF;
    END LOOP;
    FOR r IN
        SELECT p AS platform, ghostmem.platform_graph_name(p_owner, p) AS name FROM pg_catalog.unnest(platforms) p
    LOOP
        IF pg_catalog.to_regclass(pg_catalog.quote_ident('ghostmem') || '.' || pg_catalog.quote_ident(r.name)) IS NULL
        THEN
            EXECUTE pg_catalog.format(
                'CREATE INDEX %I ON %s USING hnsw (embedding %I.halfvec_cosine_ops) WHERE platform = %L',
                r.name, target, vectors, r.platform);
            built := built + 1;
        END IF;
    END LOOP;
    IF wanted
       AND pg_catalog.to_regclass(pg_catalog.quote_ident('ghostmem') || '.' || pg_catalog.quote_ident(recent)) IS NULL
    THEN
        -- the day as UTC text, the index's comment: what a search writes into its statement (search._plan)
        EXECUTE pg_catalog.format(
            'CREATE INDEX %I ON %s USING hnsw (embedding %I.halfvec_cosine_ops) WHERE ts >= %L::pg_catalog.timestamptz',
            recent, target, vectors, pg_catalog.to_char(since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00"'));
        EXECUTE pg_catalog.format(
            'COMMENT ON INDEX ghostmem.%I IS %L',
            recent, pg_catalog.to_char(since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00"'));
        built := built + 1;
    END IF;
    RETURN built;
END
$$;

-- CREATE OR REPLACE keeps the function's privileges (155: the schema owner's alone). The graphs are not built here
-- but at the owner's next import or embedding (or `reembed`), which calls the function: on a copy of the 1M bench
-- store the build of its seven platforms' graphs (about a million rows) took 538 s, a wait a first command after
-- an upgrade should not hold (26 s at 100k). Until then a platform search reads as before.
