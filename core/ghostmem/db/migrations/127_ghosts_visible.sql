-- Whether an owner has any ghost memory visible under a claim, asked before a ghost search embeds its query: with
-- none, the search has nothing to rank and the client embeds nothing (on a new home the first embedding prepares
-- the model, about 20 s, which an agent's first `search_ghost_memories` call or `ghostmem ghosts QUERY` on a store
-- without ghosts would wait for, for an empty answer). The runtime role may not read the tables (migration 040),
-- so this is an API function: it tells no more than the overview search (an empty query) already lists.
CREATE FUNCTION agent.has_visible_ghosts(p_owner text, claimed text) RETURNS boolean
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
BEGIN
    PERFORM agent.check_claim(claimed);
    RETURN EXISTS (SELECT 1 FROM agent.ghost_memories m
                    WHERE m.owner = p_owner AND agent.ghost_visible(m.scope, m.project, m.allowlist, claimed));
END
$$;

-- 105's install_runtime_role, granting the new function too (to the roles installed already here, below).
CREATE OR REPLACE FUNCTION agent.install_runtime_role(p_role text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
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
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION agent.search_ghost_ranked(text, text, text, vector, text[], text, integer), '
        'agent.has_visible_ghosts(text, text), '
        'agent.remember(text, text, text, text, text, text[], vector, text[], text), '
        'agent.give_feedback(text, text, bigint, text, text), agent.claim_refusal(text), '
        'agent.update_memory(text, text, bigint, text, vector, text[], text), '
        'agent.retire_memory(text, text, bigint, text) TO %I', p_role);
    INSERT INTO agent.runtime_roles (role_name) VALUES (p_role) ON CONFLICT DO NOTHING;
END
$$;

REVOKE ALL ON FUNCTION agent.has_visible_ghosts(text, text) FROM PUBLIC;

DO $$
DECLARE
    r text;
BEGIN
    FOR r IN SELECT role_name FROM agent.runtime_roles WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name)
    LOOP
        PERFORM agent.install_runtime_role(r);
    END LOOP;
END
$$;
