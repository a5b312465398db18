-- The graphs of large projects (migration 155) follow their projects' size: ghostmem.build_project_graphs(owner)
-- also drops the graph of each of the owner's projects that holds fewer than `project_graph_rows` messages now
-- (conversations forgotten, deleted or replaced by live capture; a project emptied; the setting raised), so a
-- project keeps a graph exactly while it is large enough to have one built (docs/search.md "A graph of each large
-- project's own"). Until 176 such a graph stayed until `ghostmem reembed`: every write of the owner's vectors
-- checked its predicate, and a search of the project walked it wherever its cost said so.
--
-- Only the indexes of the owner's own partition (migration 163) are looked at, so no other owner's graph can be
-- dropped whatever the owner or its projects are called; a graph is kept when its name is that of one of the
-- owner's large projects (ghostmem.project_graph_name, a digest: no owner or project text reaches an identifier).
-- Drops and builds are in the call's transaction, under the same advisory lock as before: a killed call leaves the
-- graphs as they were.

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
    -- the owner's partition of the compact vectors (migration 163)
    target pg_catalog.regclass := (
        SELECT v.tableoid::pg_catalog.regclass FROM ghostmem.message_vectors v WHERE v.owner = p_owner LIMIT 1);
    large pg_catalog.text[];
    r record;
    built pg_catalog.int4 := 0;
BEGIN
    IF target IS NULL THEN
        RETURN 0;  -- no vector of the owner's (its graphs, if any, index nothing)
    END IF;
    -- one builder at a time (two would race to create the same name)
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('ghostmem.build_project_graphs'));
    large := ARRAY(
        SELECT ghostmem.project_graph_name(p_owner, c.project)
        FROM ghostmem.message_counts c
        WHERE c.owner = p_owner AND c.project <> ''
        GROUP BY c.project HAVING pg_catalog.sum(c.n) >= threshold);
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
    RETURN built;
END
$$;
