-- Every key holds the owner, so that the schema can be distributed by owner (docs/scaling.md, "Distributing by
-- owner"): a sharded PostgreSQL such as Citus enforces a primary key, a unique constraint or a foreign key only
-- when it includes the distribution column, since each owner's rows then live, and are checked, on one node.
-- Keys that lacked it: the generated ids of ghostmem.messages, agent.ghost_memories, agent.ghost_feedback and
-- agent.ghost_revisions, and the feedback's reference to its memory (agent.ghost_feedback had no owner: it gets
-- its memory's). The ids stay unique on their own (identity columns) and stay the leading column, so every lookup
-- and join by id (the search's joins back to messages, a memory by id) keeps using the same index.
--
-- Tables without an owner are global by nature and stay so: ghostmem.settings (the schema's own facts),
-- ghostmem.embedding_cache (a model's vector of a text, shared by every owner who wrote that text),
-- agent.role_projects and agent.runtime_roles (operator maps of database roles); on Citus they are reference
-- tables. tests/integration/test_owner_keys.py holds that list and fails on any key of another table without the
-- owner, so later migrations keep the property.
--
-- Every statement of the ghost functions below names the owner of the rows it reads or writes (it did for most),
-- so that each one is routed to the owner's node; the functions are otherwise unchanged.

ALTER TABLE ghostmem.messages
    DROP CONSTRAINT messages_pkey,
    ADD CONSTRAINT messages_pkey PRIMARY KEY (id, owner);

ALTER TABLE agent.ghost_revisions
    DROP CONSTRAINT ghost_revisions_pkey,
    ADD CONSTRAINT ghost_revisions_pkey PRIMARY KEY (id, owner);

ALTER TABLE agent.ghost_feedback ADD COLUMN owner text;
UPDATE agent.ghost_feedback f SET owner = m.owner FROM agent.ghost_memories m WHERE m.memory_id = f.memory_id;
ALTER TABLE agent.ghost_feedback
    ALTER COLUMN owner SET NOT NULL,
    DROP CONSTRAINT ghost_feedback_memory_id_fkey,
    DROP CONSTRAINT ghost_feedback_pkey,
    ADD CONSTRAINT ghost_feedback_pkey PRIMARY KEY (id, owner);

ALTER TABLE agent.ghost_memories
    DROP CONSTRAINT ghost_memories_pkey,
    ADD CONSTRAINT ghost_memories_pkey PRIMARY KEY (memory_id, owner);

ALTER TABLE agent.ghost_feedback
    ADD CONSTRAINT ghost_feedback_memory_fkey FOREIGN KEY (memory_id, owner)
        REFERENCES agent.ghost_memories (memory_id, owner) ON DELETE CASCADE;

-- ---------------------------------------------------------------------------------------------------------------
-- The functions that write feedback (it needs its owner now) or address a memory by id alone.

-- 061's ranking, the join back to the memories routed to the owner.
CREATE OR REPLACE FUNCTION agent.rank_ghosts_explained(at timestamptz, p_owner text, claimed text, query text,
                                                       query_vec public.vector, formula text, lim integer)
    RETURNS TABLE (hit agent.ghost_hit, explained boolean)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
DECLARE
    overview boolean := coalesce(btrim(query), '') = '';
BEGIN
    IF formula IS NULL OR formula NOT IN ('default', 'literal') THEN
        RAISE EXCEPTION 'unknown ranking formula %: use default or literal', formula
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF lim IS NULL OR lim < 1 OR lim > 1000 THEN
        RAISE EXCEPTION 'limit must be between 1 and 1000 (got %)', lim USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT overview AND query_vec IS NULL THEN
        RAISE EXCEPTION 'a search with a query needs the query''s embedding' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH candidate AS (
        SELECT m.memory_id, false AS by_query FROM agent.ghost_memories m
         WHERE overview AND m.owner = p_owner AND agent.ghost_visible(m.scope, m.project, m.allowlist, claimed)
        UNION ALL
        SELECT q.id, least(q.vector_rank, q.lexical_rank) <= lim
          FROM agent.query_legs(p_owner, claimed, query, query_vec, greatest(lim * 10, 100)) q
         WHERE NOT overview
    )
    SELECT ROW(m.memory_id, m.content, m.kind, m.scope, m.project, m.allowlist, s.score, s.breakdown,
               m.created_at, m.last_activated_at, m.last_used_at)::agent.ghost_hit,
           c.by_query
      FROM agent.ghost_memories m
      JOIN candidate c ON c.memory_id = m.memory_id AND m.owner = p_owner
     CROSS JOIN LATERAL agent.ghost_terms(
           m.activation_count, m.overview_count, m.endorsements, m.corrections, m.incidents_prevented,
           m.prediction_errors, m.last_activated_at, m.last_used_at, m.project, claimed,
           CASE WHEN overview THEN 0 ELSE 1 - (m.embedding <=> query_vec) END, formula, at) s
     ORDER BY s.score DESC, m.memory_id
     LIMIT lim;
END
$$;

-- 040's remember: the strengthening update addressed by owner and id, the feedback row with its owner.
CREATE OR REPLACE FUNCTION agent.remember_at(at timestamptz, p_owner text, p_content text, p_kind text,
                                             p_scope text, p_project text, p_allowlist text[],
                                             p_embedding public.vector, p_source text)
    RETURNS agent.ghost_written
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
DECLARE
    allow text[] := ARRAY(SELECT DISTINCT btrim(a) FROM unnest(coalesce(p_allowlist, '{}')) a
                           WHERE btrim(a) <> '' ORDER BY 1);
    m agent.ghost_memories;
BEGIN
    PERFORM agent.check_claim(p_project);
    IF p_scope = 'project' AND p_project IS NULL THEN
        RAISE EXCEPTION 'a project-scoped memory needs a project' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (p_scope = 'shared-restricted') <> (cardinality(allow) > 0) THEN
        RAISE EXCEPTION 'an allowlist goes with scope shared-restricted, and only with it'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- one writer per owner at a time, so two identical concurrent remembers cannot both insert
    PERFORM pg_advisory_xact_lock(hashtextextended('ghostmem.remember:' || p_owner, 0));
    SELECT g.* INTO m FROM agent.ghost_memories g
     WHERE g.owner = p_owner AND g.scope = p_scope
       AND (p_scope = 'global' OR (p_scope = 'project' AND g.project = p_project)
            OR (p_scope = 'shared-restricted' AND g.allowlist = allow))
       AND ((g.embedding <=> p_embedding) <= 0.05 OR similarity(lower(g.content), lower(p_content)) >= 0.9)
     ORDER BY least(g.embedding <=> p_embedding, 1 - similarity(lower(g.content), lower(p_content))), g.memory_id
     LIMIT 1
     FOR UPDATE;
    IF FOUND THEN
        UPDATE agent.ghost_memories g
           SET endorsements = g.endorsements + 1, last_used_at = greatest(g.last_used_at, at),
               updated_at = at
         WHERE g.owner = p_owner AND g.memory_id = m.memory_id
        RETURNING g.* INTO m;
        INSERT INTO agent.ghost_feedback (owner, memory_id, signal, note, created_at)
        VALUES (p_owner, m.memory_id, 'remembered_again', p_content, at);
        RETURN agent.written(m, false, p_project, at);
    END IF;
    INSERT INTO agent.ghost_memories (owner, content, kind, scope, project, allowlist, embedding, source_conv_id,
                                      created_at, last_activated_at, last_used_at, updated_at, tsv)
    VALUES (p_owner, p_content, p_kind, p_scope, p_project, allow, p_embedding, p_source, at, at, at, at,
            ghostmem.lexemes(p_content))
    RETURNING * INTO m;
    RETURN agent.written(m, true, p_project, at);
END
$$;

-- 040's feedback: the feedback row with its owner.
CREATE OR REPLACE FUNCTION agent.give_feedback_at(at timestamptz, p_owner text, claimed text, p_memory_id bigint,
                                                  p_signal text, p_note text) RETURNS SETOF agent.ghost_written
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
DECLARE
    m agent.ghost_memories;
BEGIN
    PERFORM agent.check_claim(claimed);
    IF p_signal IS NULL OR p_signal NOT IN ('endorse', 'correct', 'incident_prevented', 'prediction_error') THEN
        RAISE EXCEPTION 'unknown feedback signal %: use endorse, correct, incident_prevented or prediction_error',
            p_signal USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE agent.ghost_memories g
       SET endorsements = g.endorsements + (p_signal = 'endorse')::integer,
           corrections = g.corrections + (p_signal = 'correct')::integer,
           incidents_prevented = g.incidents_prevented + (p_signal = 'incident_prevented')::integer,
           prediction_errors = g.prediction_errors + (p_signal = 'prediction_error')::integer,
           last_used_at = CASE WHEN p_signal IN ('endorse', 'incident_prevented')
                               THEN greatest(g.last_used_at, at) ELSE g.last_used_at END,
           updated_at = at
     WHERE g.owner = p_owner AND g.memory_id = p_memory_id
       AND agent.ghost_addressable(g.scope, g.project, g.allowlist, claimed)
    RETURNING g.* INTO m;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO agent.ghost_feedback (owner, memory_id, signal, note, created_at)
    VALUES (p_owner, m.memory_id, p_signal, p_note, at);
    RETURN NEXT agent.written(m, false, claimed, at);
END
$$;

-- 081's update: the rewrite addressed by owner and id.
CREATE OR REPLACE FUNCTION agent.update_memory_at(at timestamptz, p_owner text, claimed text, p_memory_id bigint,
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
         WHERE g.owner = p_owner AND g.memory_id = m.memory_id
        RETURNING g.* INTO m;
    END IF;
    RETURN NEXT agent.written(m, false, claimed, at);
END
$$;

-- 081's retirement: the feedback read and the delete addressed by owner and id (the retired feedback rows, kept as
-- JSON, now carry their owner).
CREATE OR REPLACE FUNCTION agent.retire_memory_at(at timestamptz, p_owner text, claimed text, p_memory_id bigint,
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
                        FROM agent.ghost_feedback f WHERE f.owner = p_owner AND f.memory_id = m.memory_id),
                     '[]'::jsonb),
            p_reason, session_user, at);
    INSERT INTO agent.ghost_revisions (owner, memory_id, action, content, reason, claimed, created_at)
    VALUES (p_owner, m.memory_id, 'retire', m.content, p_reason, claimed, at);
    -- its feedback goes with it (kept above)
    DELETE FROM agent.ghost_memories g WHERE g.owner = p_owner AND g.memory_id = m.memory_id;
    RETURN NEXT shown;
END
$$;

-- 081's restore (operator, never granted): feedback retired before this migration was kept without its owner,
-- which is the memory's.
CREATE OR REPLACE FUNCTION agent.restore_memory(p_owner text, p_memory_id bigint, p_embedding public.vector)
    RETURNS text
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
    SELECT (pg_catalog.jsonb_populate_record(NULL::agent.ghost_feedback,
                f || pg_catalog.jsonb_build_object('owner', p_owner))).*
      FROM pg_catalog.jsonb_array_elements(r.feedback) AS f;
    INSERT INTO agent.ghost_revisions (owner, memory_id, action, content, reason, created_at)
    VALUES (p_owner, p_memory_id, 'restore', r.memory ->> 'content', 'restored by ' || session_user, pg_catalog.now());
    RETURN r.memory ->> 'content';
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA agent FROM PUBLIC;
