-- Ghost-memory ranking, faster: the per-row scoring becomes one SQL function the planner inlines into the ranking
-- query (instead of a PL/pgSQL call per memory), and the lexical column is filled once on insert instead of being
-- a generated column recomputed on every activation bump. Behaviour and scores are unchanged.

ALTER TABLE agent.ghost_memories ALTER COLUMN tsv DROP EXPRESSION;

-- The two formulas as plain arithmetic on a memory's signals (see score_ghost in 040 and docs/ghosts.md).
-- Not SECURITY DEFINER and without SET so that it can be inlined; it reads no table, only pg_catalog functions.
CREATE FUNCTION agent.ghost_terms(
    activation_count integer, overview_count integer, endorsements integer, corrections integer,
    incidents_prevented integer, prediction_errors integer, last_activated_at timestamptz,
    last_used_at timestamptz, m_project text, claimed text, sim double precision, formula text, at timestamptz)
    RETURNS TABLE (score double precision, breakdown jsonb)
    LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN t.literal THEN t.base * t.recency + t.sim * 0.5
                ELSE t.positive * t.recency - t.negative + t.sim * 0.5 END,
           jsonb_build_object(
               'activation', 0.2 * t.activation * t.recency,
               'incident_prevention', 0.5 * t.incident * t.recency,
               'endorsement', 0.3 * t.endorse * t.recency,
               'correction', -0.4 * t.correction * CASE WHEN t.literal THEN t.recency ELSE 1 END,
               'pred_error', -0.2 * t.pred_error * CASE WHEN t.literal THEN t.recency ELSE 1 END,
               'scope_bonus', 0.1 * t.bonus * t.recency,
               'semantic', t.sim * 0.5,
               'recency_factor', t.recency)
      FROM (SELECT s.*,
                   0.2 * s.activation + 0.5 * s.incident + 0.3 * s.endorse - 0.4 * s.correction
                       - 0.2 * s.pred_error + 0.1 * s.bonus AS base,
                   0.2 * s.activation + 0.5 * s.incident + 0.3 * s.endorse + 0.1 * s.bonus AS positive,
                   0.4 * s.correction + 0.2 * s.pred_error AS negative
              FROM (SELECT formula = 'literal' AS literal,
                           coalesce(sim, 0)::double precision AS sim,
                           CASE WHEN claimed IS NOT NULL AND m_project = claimed THEN 1.0 ELSE 0.0 END::double precision AS bonus,
                           CASE WHEN formula = 'literal' THEN (activation_count + overview_count)::double precision
                                ELSE activation_count / (activation_count + 10.0)::double precision END AS activation,
                           CASE WHEN formula = 'literal' THEN incidents_prevented::double precision
                                ELSE incidents_prevented / (incidents_prevented + 2.0)::double precision END AS incident,
                           CASE WHEN formula = 'literal' THEN endorsements::double precision
                                ELSE endorsements / (endorsements + 3.0)::double precision END AS endorse,
                           CASE WHEN formula = 'literal' THEN corrections::double precision
                                ELSE corrections / (corrections + 2.0)::double precision END AS correction,
                           CASE WHEN formula = 'literal' THEN prediction_errors::double precision
                                ELSE prediction_errors / (prediction_errors + 3.0)::double precision END AS pred_error,
                           exp(-(greatest(extract(epoch FROM at - CASE WHEN formula = 'literal' THEN last_activated_at
                                                                   ELSE last_used_at END), 0)::double precision
                                 / 86400.0) / 30.0) AS recency) s) t
$$;

CREATE OR REPLACE FUNCTION agent.score_ghost(m agent.ghost_memories, claimed text, sim double precision,
                                             formula text, at timestamptz) RETURNS agent.ghost_score
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, agent, public
    RETURN (SELECT ROW(t.score, t.breakdown)::agent.ghost_score
              FROM agent.ghost_terms(m.activation_count, m.overview_count, m.endorsements, m.corrections,
                                     m.incidents_prevented, m.prediction_errors, m.last_activated_at,
                                     m.last_used_at, m.project, claimed, sim, formula, at) t);

CREATE OR REPLACE FUNCTION agent.rank_ghosts_at(at timestamptz, p_owner text, claimed text, query text,
                                                query_vec vector, formula text, lim integer)
    RETURNS SETOF agent.ghost_hit
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, agent, public
AS $$
DECLARE
    q          text := coalesce(btrim(query), '');
    overview   boolean := q = '';
    words      tsquery;
    candidates integer := greatest(lim * 10, 100);
BEGIN
    IF formula IS NULL OR formula NOT IN ('default', 'literal') THEN
        RAISE EXCEPTION 'unknown ranking formula %: use default or literal', formula
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF lim IS NULL OR lim < 1 OR lim > 1000 THEN
        RAISE EXCEPTION 'limit must be between 1 and 1000 (got %)', lim USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT overview THEN
        IF query_vec IS NULL THEN
            RAISE EXCEPTION 'a search with a query needs the query''s embedding'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- any of the query's lexemes; each quoted, so no character of the query is read as tsquery syntax
        SELECT string_agg(ghostmem.lexeme_query(l)::text, ' | ')::tsquery INTO words
          FROM unnest(tsvector_to_array(ghostmem.lexemes(q, true))) AS l;
    END IF;
    RETURN QUERY
    WITH visible AS (
        SELECT m.memory_id, m.embedding, m.tsv FROM agent.ghost_memories m
         WHERE m.owner = p_owner AND agent.ghost_visible(m.scope, m.project, m.allowlist, claimed)
    ), candidate AS (
        SELECT v.memory_id FROM visible v WHERE overview
        UNION
        (SELECT v.memory_id FROM visible v WHERE NOT overview
          ORDER BY v.embedding <=> query_vec LIMIT candidates)
        UNION
        (SELECT v.memory_id FROM visible v WHERE NOT overview AND v.tsv @@ words
          ORDER BY ts_rank(v.tsv, words) DESC LIMIT candidates)
    )
    SELECT m.memory_id, m.content, m.kind, m.scope, m.project, m.allowlist, s.score, s.breakdown,
           m.created_at, CASE WHEN formula = 'literal' THEN m.last_activated_at ELSE m.last_used_at END
      FROM agent.ghost_memories m
      JOIN candidate c ON c.memory_id = m.memory_id
     CROSS JOIN LATERAL agent.ghost_terms(
           m.activation_count, m.overview_count, m.endorsements, m.corrections, m.incidents_prevented,
           m.prediction_errors, m.last_activated_at, m.last_used_at, m.project, claimed,
           CASE WHEN overview THEN 0 ELSE 1 - (m.embedding <=> query_vec) END, formula, at) s
     ORDER BY s.score DESC, m.memory_id
     LIMIT lim;
END
$$;

-- as in 040, with the lexical column filled here (content never changes after the insert)
CREATE OR REPLACE FUNCTION agent.remember_at(at timestamptz, p_owner text, p_content text, p_kind text, p_scope text,
                                  p_project text, p_allowlist text[], p_embedding vector, p_source text)
    RETURNS agent.ghost_written
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public
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
         WHERE g.memory_id = m.memory_id
        RETURNING g.* INTO m;
        INSERT INTO agent.ghost_feedback (memory_id, signal, note, created_at)
        VALUES (m.memory_id, 'remembered_again', p_content, at);
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

REVOKE ALL ON FUNCTION agent.ghost_terms(integer, integer, integer, integer, integer, integer, timestamptz,
    timestamptz, text, text, double precision, text, timestamptz) FROM PUBLIC;
