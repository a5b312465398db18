-- The API a runtime role is granted, as rows: agent.runtime_api lists the functions, and install_runtime_role grants
-- what it lists. Until here the list was written in install_runtime_role's body, so every migration that added an
-- API function (081, 105, 127) re-created the whole function to add one signature to its GRANT. A migration that
-- adds one now inserts its row and calls agent.grant_runtime_api(), which grants the list to every runtime role
-- installed. Only the schema's owner may write the table (no grant): a role that could add a row would be granted
-- that function at the next install. A row whose function was dropped (a regprocedure holds no dependency) grants
-- nothing: the list is read through pg_proc.
CREATE TABLE agent.runtime_api (
    fn regprocedure PRIMARY KEY
);
REVOKE ALL ON agent.runtime_api FROM PUBLIC;

INSERT INTO agent.runtime_api (fn) VALUES
    ('agent.search_ghost_ranked(text, text, text, vector, text[], text, integer)'),
    ('agent.has_visible_ghosts(text, text)'),
    ('agent.remember(text, text, text, text, text, text[], vector, text[], text)'),
    ('agent.give_feedback(text, text, bigint, text, text)'),
    ('agent.claim_refusal(text)'),
    ('agent.update_memory(text, text, bigint, text, vector, text[], text)'),
    ('agent.retire_memory(text, text, bigint, text)');

-- 127's install_runtime_role, granting the functions agent.runtime_api lists (the last time it is re-created to
-- change what it grants).
CREATE OR REPLACE FUNCTION agent.install_runtime_role(p_role text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
DECLARE
    f record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = p_role) THEN
        BEGIN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', p_role);
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;  -- another database of this cluster created it at the same moment
        END;
    END IF;
    IF NOT pg_catalog.pg_has_role(current_user, p_role, 'MEMBER') THEN
        EXECUTE pg_catalog.format('GRANT %I TO %I', p_role, current_user);
    END IF;
    EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA agent TO %I', p_role);
    FOR f IN SELECT n.nspname, p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid) AS args
               FROM agent.runtime_api a
               JOIN pg_catalog.pg_proc p ON p.oid = a.fn::pg_catalog.oid
               JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
              ORDER BY 1, 2, 3
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %I.%I(%s) TO %I', f.nspname, f.proname, f.args, p_role);
    END LOOP;
    INSERT INTO agent.runtime_roles (role_name) VALUES (p_role) ON CONFLICT DO NOTHING;
END
$$;

-- Grant the listed API to every runtime role installed in this database (a migration that adds an API function
-- calls it after inserting the function's row).
CREATE FUNCTION agent.grant_runtime_api() RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
DECLARE
    r text;
BEGIN
    FOR r IN SELECT role_name FROM agent.runtime_roles
              WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = role_name)
              ORDER BY 1
    LOOP
        PERFORM agent.install_runtime_role(r);
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION agent.grant_runtime_api() FROM PUBLIC;

SELECT agent.grant_runtime_api();
