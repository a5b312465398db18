-- A graph of a large owner's recent messages: a partial HNSW index of the owner's partition of the compact vectors
-- (migrations 101, 163) holding its rows since a day, `... WHERE ts >= '<since>'`, for the vector leg of a search
-- filtered by a time window that starts after that day (search.py, docs/search.md "A graph of the recent
-- messages").
--
-- A time window keeps a few percent of a large owner's messages (the last 7 days: 8% of the bench's million), so the
-- walk of the owner's whole graph passes over about twelve rows for each it keeps, in a graph whose size asks for a
-- long candidate list (search.message_ef_search: 200 at a million). The recent graph holds the last
-- `recent_graph_days` (31) days when it is built, so a window of 7 or 30 days is most or all of it.
--
-- Built by ghostmem.build_project_graphs(owner), which ghostmem already calls after each import or embedding (and
-- `reembed`, whose ghostmem.drop_project_graphs drops it with the projects' graphs: its name has their prefix), for
-- an owner of at least `recent_graph_rows` (50,000) messages. The graph's name is ghostmem.project_graph_name(owner,
-- ''), a name no project's graph gets (a project '' has none), and its day is the index's comment (the catalog is the
-- only record, as for the projects' graphs), written in UTC. New messages go into it as they come (they are after its
-- day), so it always holds every message since its day; once that day is more than `recent_graph_days` older than
-- the one a build would give it now (the graph holds twice the span), a build replaces it; a store only captured
-- into keeps its graph until its next import or embedding, and the search's cost model sees its rows grow
-- (search.vector_scan). An owner that falls below the size loses it.

INSERT INTO ghostmem.settings (key, value) VALUES ('recent_graph_rows', '50000'), ('recent_graph_days', '31');

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
    -- the owner's partition of the compact vectors (migration 163)
    target pg_catalog.regclass := (
        SELECT v.tableoid::pg_catalog.regclass FROM ghostmem.message_vectors v WHERE v.owner = p_owner LIMIT 1);
    recent pg_catalog.text := ghostmem.project_graph_name(p_owner, '');
    recent_index pg_catalog.regclass;
    -- the day a graph of the recent messages built now starts at (midnight UTC)
    since pg_catalog.timestamptz := pg_catalog.date_trunc('day', pg_catalog.now(), 'UTC')
        - pg_catalog.make_interval(days => recent_days);
    wanted pg_catalog.bool;
    large pg_catalog.text[];
    r record;
    built pg_catalog.int4 := 0;
BEGIN
    IF target IS NULL THEN
        RETURN 0;  -- no vector of the owner's (its graphs, if any, index nothing)
    END IF;
    -- one builder at a time (two would race to create the same name)
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('ghostmem.build_project_graphs'));
    wanted := (SELECT COALESCE(pg_catalog.sum(c.n), 0) FROM ghostmem.message_counts c
               WHERE c.owner = p_owner) >= recent_rows;
    recent_index := pg_catalog.to_regclass(pg_catalog.quote_ident('ghostmem') || '.' || pg_catalog.quote_ident(recent));
    large := ARRAY(
        SELECT ghostmem.project_graph_name(p_owner, c.project)
        FROM ghostmem.message_counts c
        WHERE c.owner = p_owner AND c.project <> ''
        GROUP BY c.project HAVING pg_catalog.sum(c.n) >= threshold);
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

-- CREATE OR REPLACE keeps the function's privileges (155: the schema owner's alone).
SELECT ghostmem.build_project_graphs(o.owner) FROM (SELECT DISTINCT c.owner FROM ghostmem.message_counts c) o;
