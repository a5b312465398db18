-- An application's login role, set up by an operator (`ghostmem grant-app ROLE`, or these functions in psql): an
-- administrator migrates as the role that owns the schemas; the application connects as its own login and gets
-- exactly what the personal-memory statements need, plus membership in the runtime role for ghost memories (whose
-- tables it never reads: it calls the API functions of agent as the runtime role). Nothing else: no CREATE, no
-- TRUNCATE / REFERENCES / TRIGGER, no write to ghostmem.settings (the schema's own facts, which only `ghostmem
-- reembed`, run by the owner, changes). A read-only application (e.g. `ghostmem mcp --read-only`) gets SELECT only.
-- Tables a later migration adds to ghostmem are covered too: the grant sets the migrating role's default
-- privileges in the schema. Not SECURITY DEFINER: an operator runs them with the rights they have (only the
-- owner of the tables may grant on them), and PUBLIC may not execute them.

CREATE FUNCTION ghostmem.grant_app(p_role text, p_runtime_role text, read_only boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, ghostmem, pg_temp
AS $$
DECLARE
    privileges text := CASE WHEN read_only THEN 'SELECT' ELSE 'SELECT, INSERT, UPDATE, DELETE' END;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = p_role) THEN
        RAISE EXCEPTION 'there is no database role %', quote_ident(p_role) USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM agent.runtime_roles WHERE role_name = p_runtime_role) THEN
        RAISE EXCEPTION 'the runtime role % is not installed in this database: run SELECT agent.install_runtime_role(%)',
            quote_ident(p_runtime_role), quote_literal(p_runtime_role) USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM ghostmem.revoke_app(p_role, p_runtime_role);  -- so that granting read-only takes writes away
    EXECUTE format('GRANT USAGE ON SCHEMA ghostmem TO %I', p_role);
    EXECUTE format('GRANT %s ON ALL TABLES IN SCHEMA ghostmem TO %I', privileges, p_role);
    EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON ghostmem.settings FROM %I', p_role);
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA ghostmem GRANT %s ON TABLES TO %I', privileges, p_role);
    EXECUTE format('GRANT %I TO %I', p_runtime_role, p_role);
END
$$;

CREATE FUNCTION ghostmem.revoke_app(p_role text, p_runtime_role text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, ghostmem, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = p_role) THEN
        RAISE EXCEPTION 'there is no database role %', quote_ident(p_role) USING ERRCODE = 'undefined_object';
    END IF;
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA ghostmem FROM %I', p_role);
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA ghostmem REVOKE ALL ON TABLES FROM %I', p_role);
    EXECUTE format('REVOKE USAGE ON SCHEMA ghostmem FROM %I', p_role);
    IF pg_has_role(p_role, p_runtime_role, 'MEMBER') THEN
        EXECUTE format('REVOKE %I FROM %I', p_runtime_role, p_role);
    END IF;
END
$$;

REVOKE ALL ON FUNCTION ghostmem.grant_app(text, text, boolean), ghostmem.revoke_app(text, text) FROM PUBLIC;
