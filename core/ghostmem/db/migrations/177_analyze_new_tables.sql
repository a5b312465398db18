-- A first import is planned on statistics (docs/formats.md "Statistics after a first import"): until autovacuum's
-- first visit (a minute or more after the writes, and never in a server that lives less than that) the tables a
-- first import filled have none, and PostgreSQL plans them from their size alone. bench.fairness measured it: a
-- 10,000-message owner in a database of its own searched unfiltered in 16-21 ms p50 before its vector partition,
-- message_bits, message_lengths, message_counts and message_days were analyzed, 8.6-9.7 ms after.
--
-- ghostmem.analyze_new_tables() analyzes each table of the schema (an owner's partition of message_vectors among
-- them, migration 163) that holds at least `analyze_new_pages` pages now and was never analyzed (reltuples < 0) or
-- was last counted (relpages, by ANALYZE, VACUUM or an index build: the migrations leave some tables counted empty)
-- at a tenth of its size or less. Small tables are left to autovacuum (their plans barely depend on statistics), so
-- an import into a small store changes nothing. The schema owner's alone (SECURITY DEFINER; EXECUTE revoked from PUBLIC), as
-- build_project_graphs (migration 155): an application's login skips it and autovacuum analyzes its tables later.
-- Only relations of the schema ghostmem are named, as regclass, so a caller's temporary tables are never touched.

INSERT INTO ghostmem.settings (key, value) VALUES ('analyze_new_pages', '128');

CREATE FUNCTION ghostmem.analyze_new_tables() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    pages pg_catalog.int8 := (
        SELECT s.value::pg_catalog.int8 FROM ghostmem.settings s WHERE s.key = 'analyze_new_pages');
    r record;
    analyzed pg_catalog.int4 := 0;
BEGIN
    FOR r IN
        SELECT c.oid::pg_catalog.regclass AS rel FROM pg_catalog.pg_class c
        WHERE c.relnamespace = 'ghostmem'::pg_catalog.regnamespace AND c.relkind = 'r'
          AND pg_catalog.pg_relation_size(c.oid) >= pages * pg_catalog.current_setting('block_size')::pg_catalog.int8
          AND (c.reltuples < 0 OR pg_catalog.pg_relation_size(c.oid)
               >= 10 * c.relpages::pg_catalog.int8 * pg_catalog.current_setting('block_size')::pg_catalog.int8)
        ORDER BY c.relname
    LOOP
        EXECUTE pg_catalog.format('ANALYZE %s', r.rel);
        analyzed := analyzed + 1;
    END LOOP;
    RETURN analyzed;
END
$$;

REVOKE ALL ON FUNCTION ghostmem.analyze_new_tables() FROM PUBLIC;
