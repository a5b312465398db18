-- Ghost memory lifecycle: a memory's wording can be corrected (update_memory) and a wrong or injected memory
-- retired (retire_memory), through the same SECURITY DEFINER boundary as remember and give_feedback: the runtime
-- role executes the two API functions and still reads no table.
--
-- Who may change a memory: a caller bound to a project (a claim) changes only that project's own memories (scope
-- project or shared-restricted with that project), never a global one nor another project's memory it was only
-- allowed to read; an unbound caller changes global memories only when its login role has no project map, and a
-- project's memories only when it may claim that project. Memories it may not change are "not there".
--
-- Nothing is lost: an update keeps the memory's id, signals and feedback, re-embeds it and records the old wording
-- in agent.ghost_revisions; a retired memory leaves agent.ghost_memories (so no search, overview or feedback sees
-- it) for agent.retired_ghosts, with its row, its feedback, who retired it, when and why, and only the operator
-- (the owner of the schema) may put it back with agent.restore_memory.

CREATE TABLE agent.ghost_revisions (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner        text        NOT NULL,
    memory_id    bigint      NOT NULL,
    action       text        NOT NULL CHECK (action IN ('update', 'retire', 'restore')),
    content      text        NOT NULL,  -- update: the wording it replaced; retire / restore: the memory's wording
    reason       text,
    claimed      text,
    session_role text        NOT NULL DEFAULT session_user,
    created_at   timestamptz NOT NULL
);
CREATE INDEX ghost_revisions_memory ON agent.ghost_revisions (owner, memory_id, id);

CREATE TABLE agent.retired_ghosts (
    owner      text        NOT NULL,
    memory_id  bigint      NOT NULL,
    memory     jsonb       NOT NULL,  -- the agent.ghost_memories row, without its vector and lexemes
    feedback   jsonb       NOT NULL,  -- its agent.ghost_feedback rows, oldest first
    reason     text        NOT NULL,
    retired_by text        NOT NULL,
    retired_at timestamptz NOT NULL,
    PRIMARY KEY (owner, memory_id)
);

CREATE FUNCTION agent.ghost_modifiable(m_scope text, m_project text, claimed text) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, agent, public, pg_temp
    RETURN CASE
        WHEN claimed IS NOT NULL THEN m_scope <> 'global' AND m_project = claimed
        WHEN m_scope = 'global' THEN NOT EXISTS (SELECT 1 FROM agent.role_projects r
                                                  WHERE r.role_name = session_user)
        ELSE m_project IS NOT NULL AND agent.may_claim(m_project)
    END;

CREATE FUNCTION agent.update_memory_at(at timestamptz, p_owner text, claimed text, p_memory_id bigint,
                                       p_content text, p_embedding public.vector, p_reason text)
    RETURNS SETOF agent.ghost_written
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
DECLARE
    m agent.ghost_memories;
BEGIN
    PERFORM agent.check_claim(claimed);
    IF p_content IS NULL OR pg_catalog.btrim(p_content) = '' THEN
        RAISE EXCEPTION 'the new wording of a memory must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT g.* INTO m FROM agent.ghost_memories g
     WHERE g.owner = p_owner AND g.memory_id = p_memory_id AND agent.ghost_modifiable(g.scope, g.project, claimed)
     FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF m.content IS DISTINCT FROM p_content THEN
        INSERT INTO agent.ghost_revisions (owner, memory_id, action, content, reason, claimed, created_at)
        VALUES (p_owner, m.memory_id, 'update', m.content, p_reason, claimed, at);
        UPDATE agent.ghost_memories g
           SET content = p_content, embedding = p_embedding, tsv = ghostmem.lexemes(p_content), updated_at = at
         WHERE g.memory_id = m.memory_id
        RETURNING g.* INTO m;
    END IF;
    RETURN NEXT agent.written(m, false, claimed, at);
END
$$;

CREATE FUNCTION agent.update_memory(p_owner text, claimed text, p_memory_id bigint, p_content text,
                                    p_embedding public.vector, p_reason text)
    RETURNS SETOF agent.ghost_written
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$ SELECT * FROM agent.update_memory_at(pg_catalog.now(), p_owner, claimed, p_memory_id, p_content, p_embedding,
                                           p_reason) $$;

CREATE FUNCTION agent.retire_memory_at(at timestamptz, p_owner text, claimed text, p_memory_id bigint,
                                       p_reason text)
    RETURNS SETOF agent.ghost_written
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
DECLARE
    m agent.ghost_memories;
    shown agent.ghost_written;
BEGIN
    PERFORM agent.check_claim(claimed);
    IF p_reason IS NULL OR pg_catalog.btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'say why the memory is retired' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT g.* INTO m FROM agent.ghost_memories g
     WHERE g.owner = p_owner AND g.memory_id = p_memory_id AND agent.ghost_modifiable(g.scope, g.project, claimed)
     FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    shown := agent.written(m, false, claimed, at);
    INSERT INTO agent.retired_ghosts (owner, memory_id, memory, feedback, reason, retired_by, retired_at)
    VALUES (p_owner, m.memory_id, pg_catalog.to_jsonb(m) - 'embedding' - 'tsv',
            coalesce((SELECT pg_catalog.jsonb_agg(pg_catalog.to_jsonb(f) ORDER BY f.id)
                        FROM agent.ghost_feedback f WHERE f.memory_id = m.memory_id), '[]'::jsonb),
            p_reason, session_user, at);
    INSERT INTO agent.ghost_revisions (owner, memory_id, action, content, reason, claimed, created_at)
    VALUES (p_owner, m.memory_id, 'retire', m.content, p_reason, claimed, at);
    DELETE FROM agent.ghost_memories g WHERE g.memory_id = m.memory_id;  -- its feedback goes with it (kept above)
    RETURN NEXT shown;
END
$$;

CREATE FUNCTION agent.retire_memory(p_owner text, claimed text, p_memory_id bigint, p_reason text)
    RETURNS SETOF agent.ghost_written
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$ SELECT * FROM agent.retire_memory_at(pg_catalog.now(), p_owner, claimed, p_memory_id, p_reason) $$;

-- Operator (never granted): put a retired memory back, with its id, signals and feedback; its vector is computed
-- again by the caller (the model may have changed since). Returns the memory's content.
CREATE FUNCTION agent.restore_memory(p_owner text, p_memory_id bigint, p_embedding public.vector) RETURNS text
    LANGUAGE plpgsql
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
DECLARE
    r agent.retired_ghosts;
BEGIN
    DELETE FROM agent.retired_ghosts g WHERE g.owner = p_owner AND g.memory_id = p_memory_id RETURNING g.* INTO r;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'there is no retired ghost memory % of owner %', p_memory_id, quote_literal(p_owner)
            USING ERRCODE = 'undefined_object';
    END IF;
    INSERT INTO agent.ghost_memories OVERRIDING SYSTEM VALUE
    SELECT (pg_catalog.jsonb_populate_record(NULL::agent.ghost_memories,
                r.memory || pg_catalog.jsonb_build_object('embedding', p_embedding::text,
                                                          'tsv', ghostmem.lexemes(r.memory ->> 'content')::text))).*;
    INSERT INTO agent.ghost_feedback OVERRIDING SYSTEM VALUE
    SELECT (pg_catalog.jsonb_populate_record(NULL::agent.ghost_feedback, f)).*
      FROM pg_catalog.jsonb_array_elements(r.feedback) AS f;
    INSERT INTO agent.ghost_revisions (owner, memory_id, action, content, reason, created_at)
    VALUES (p_owner, p_memory_id, 'restore', r.memory ->> 'content', 'restored by ' || session_user, pg_catalog.now());
    RETURN r.memory ->> 'content';
END
$$;

-- The runtime role gets the two API functions: the roles installed already here, later ones in
-- install_runtime_role (the same function as 040's, with the lifecycle functions in its grant).
CREATE OR REPLACE FUNCTION agent.install_runtime_role(p_role text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_role) THEN
        BEGIN
            EXECUTE format('CREATE ROLE %I NOLOGIN', p_role);
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;  -- another database of this cluster created it at the same moment
        END;
    END IF;
    IF NOT pg_has_role(current_user, p_role, 'MEMBER') THEN
        EXECUTE format('GRANT %I TO %I', p_role, current_user);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA agent TO %I', p_role);
    EXECUTE format('GRANT EXECUTE ON FUNCTION agent.search_ghost_ranked(text, text, text, vector, text, integer), '
                   'agent.remember(text, text, text, text, text, text[], vector, text), '
                   'agent.give_feedback(text, text, bigint, text, text), agent.claim_refusal(text), '
                   'agent.update_memory(text, text, bigint, text, vector, text), '
                   'agent.retire_memory(text, text, bigint, text) TO %I', p_role);
    INSERT INTO agent.runtime_roles (role_name) VALUES (p_role) ON CONFLICT DO NOTHING;
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA agent FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA agent FROM PUBLIC;

DO $$
DECLARE
    r text;
BEGIN
    FOR r IN SELECT role_name FROM agent.runtime_roles WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name)
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION agent.update_memory(text, text, bigint, text, vector, text), '
                       'agent.retire_memory(text, text, bigint, text) TO %I', r);
    END LOOP;
END
$$;
