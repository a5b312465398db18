-- SECURITY DEFINER functions run with their owner's rights, so every name in their bodies must resolve to an
-- object the owner trusts. Unless search_path names pg_temp, PostgreSQL searches the caller's temporary schema
-- *first* for relation and type names: a caller's temp table called `text` shadowed pg_catalog.text inside the
-- functions of 040, and a cast into it, backed by the caller's own function, ran with the owner's rights. Following
-- PostgreSQL's "Writing SECURITY DEFINER Functions Safely": trusted schemas only (pg_catalog, ghostmem's own, the
-- extensions' public, none of which the runtime role may create in) and pg_temp last, where it is searched for
-- relations and types only after every trusted schema (and never for functions or operators).
--
-- Every routine of ghostmem's schemas that is SECURITY DEFINER or pins a search_path gets pg_temp appended to the
-- path it pinned (each one's path is kept; a definer without one gets pg_catalog, its schema, public). The value
-- comes from the catalog, where the SET clauses of 001-050 stored it, so it is already valid SET syntax.
DO $$
DECLARE
    f record;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure AS routine,
               coalesce((SELECT substr(c, length('search_path=') + 1) FROM unnest(p.proconfig) c
                          WHERE c LIKE 'search_path=%'),
                        'pg_catalog, ' || quote_ident(n.nspname) || ', public') AS path
          FROM pg_catalog.pg_proc p
          JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname IN ('ghostmem', 'agent')
           AND (p.prosecdef OR EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%'))
    LOOP
        IF f.path !~ '(^|,\s*)pg_temp$' THEN
            EXECUTE format('ALTER ROUTINE %s SET search_path = %s, pg_temp', f.routine, f.path);
        END IF;
    END LOOP;
END
$$;

-- Functions are executable by PUBLIC unless revoked (per-schema default privileges cannot take that away): revoke
-- again whatever agent holds now; every later migration revokes its own (tests/integration/test_db_security.py
-- fails on a function of agent that PUBLIC may execute).
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA agent FROM PUBLIC;
