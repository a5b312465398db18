-- A graph of each large project's own: a partial HNSW index of the compact vectors (migration 101) per (owner,
-- project) past a size, for the vector leg of a search filtered by project (search.py, docs/search.md "A graph of
-- each large project's own").
--
-- The vector leg of a project search read the project's rows whole (exact or quantized scan, migrations 101 and
-- 110): at a million messages a project of ~31,000 rows took 10-20 ms, where its own graph takes 3-4 ms and keeps
-- nearly all of the exact nearest rows. The shared graph of ghostmem.messages cannot serve: a project is 3% of it,
-- so a walk passes over thirty rows for each it keeps. Each graph is `... WHERE owner = '<owner>' AND project =
-- '<project>'`, and the search writes the owner and the project as literals, so that the planner proves the
-- predicate in the statement's generic plan.
--
-- A graph is an index of the table that holds the owner's rows: message_vectors, or the owner's partition of it
-- once it is partitioned (a partial index of the partitioned table would be made on every owner's partition).
-- An index is named by a digest of its owner and project (`message_vectors_graph_` and 40 hex digits of the
-- sha256 of the owner's length, the owner and the project), so no owner or project text reaches an identifier, and
-- whether a project has one is a catalog lookup (`to_regclass`) of that name: the catalog is the only record.
-- Built by `ghostmem.build_project_graphs(owner)`, SECURITY DEFINER (the index is DDL on a table the owner of the
-- schema owns) and executable by that owner alone (PUBLIC may not: a graph per project past a size is all it can
-- build, but each costs a build that blocks writes of the table); ghostmem calls it after embedding (import,
-- `ghostmem embed`, `reembed`). One CREATE INDEX per graph, inside the call's transaction: a killed build leaves
-- nothing (a plain, not concurrent, build, so it blocks writes of the table while it runs: 20-50 s per 31,000 rows).
-- The size past which a project gets its graph is the setting `project_graph_rows` (5,000: below it a walk of the
-- graph costs about what reading the project does, search.vector_scan). The graphs are denser than pgvector's
-- default (m = 32, ef_construction = 128: at a million messages the default's walks missed a few of the nearest
-- rows whatever their ef_search, and one of 480 conversations of the bench's project searches).

INSERT INTO ghostmem.settings (key, value) VALUES ('project_graph_rows', '5000');

CREATE FUNCTION ghostmem.project_graph_name(p_owner text, p_project text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT 'message_vectors_graph_' || pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
        pg_catalog.length(p_owner)::pg_catalog.text || ':' || p_owner || p_project, 'UTF8')), 'hex'), 40)
$$;

CREATE FUNCTION ghostmem.build_project_graphs(p_owner text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    vectors pg_catalog.text := (
        SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'vector');
    threshold pg_catalog.int8 := (
        SELECT s.value::pg_catalog.int8 FROM ghostmem.settings s WHERE s.key = 'project_graph_rows');
    -- the table that holds the owner's rows: message_vectors, or its partition of them if it is partitioned
    target pg_catalog.regclass := (
        SELECT v.tableoid::pg_catalog.regclass FROM ghostmem.message_vectors v WHERE v.owner = p_owner LIMIT 1);
    r record;
    built pg_catalog.int4 := 0;
BEGIN
    IF target IS NULL THEN
        RETURN 0;  -- no vector of the owner's yet
    END IF;
    -- one builder at a time (two would race to create the same name)
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('ghostmem.build_project_graphs'));
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

-- `ghostmem reembed` drops them with the old vectors and builds them again once the new ones are in.
CREATE FUNCTION ghostmem.drop_project_graphs() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    dropped pg_catalog.int4 := 0;
BEGIN
    FOR r IN
        SELECT c.relname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
        -- the table, or its partitions once it is partitioned (a plain table has no partition tree)
        WHERE (i.indrelid = 'ghostmem.message_vectors'::pg_catalog.regclass
               OR i.indrelid IN (SELECT t.relid FROM pg_catalog.pg_partition_tree('ghostmem.message_vectors') t))
          AND c.relname::pg_catalog.text LIKE 'message\_vectors\_graph\_%'
    LOOP
        EXECUTE pg_catalog.format('DROP INDEX ghostmem.%I', r.relname);
        dropped := dropped + 1;
    END LOOP;
    RETURN dropped;
END
$$;

REVOKE ALL ON FUNCTION ghostmem.build_project_graphs(text), ghostmem.drop_project_graphs() FROM PUBLIC;

SELECT ghostmem.build_project_graphs(o.owner) FROM (SELECT DISTINCT c.owner FROM ghostmem.message_counts c) o;
