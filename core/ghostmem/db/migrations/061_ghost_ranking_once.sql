-- The ghost ranking of 040, each fact once, with the same results (tests/integration/test_ghosts.py checks the
-- scores against the formulas written out in Python; test_migrate.py checks a store's rankings across this
-- upgrade):
-- - ghost_terms: the weights written once (the terms are weighted once and the score is their sum, which the
--   breakdown always claimed), and the formulas' difference (their signals, their clock, whether penalties decay)
--   stated in one place instead of ten CASEs;
-- - a search runs the query's two legs once: each candidate carries its rank in each leg, and whether the query
--   explains it (among the `lim` first of a leg) is read from those ranks instead of running the legs again;
-- - results hold last_activated_at as stored (it held last_used_at, or either, depending on the formula), and
--   last_used_at under its own name.
-- Every routine here pins a path ending in pg_temp (060); the internal ones are not SECURITY DEFINER (the API
-- functions that call them already run as the owner) and, like everything in agent, are not granted to PUBLIC.

ALTER TYPE agent.ghost_hit ADD ATTRIBUTE last_used_at timestamptz;
ALTER TYPE agent.ghost_written ADD ATTRIBUTE last_used_at timestamptz;

-- Not SECURITY DEFINER and without SET, so that the planner inlines it into the ranking query (no function call
-- per memory); inside the API it runs under the API's pinned path. Any formula name but 'literal' reads as
-- 'default' here: rank_ghosts_explained refuses unknown names first.
CREATE OR REPLACE FUNCTION agent.ghost_terms(
    activation_count integer, overview_count integer, endorsements integer, corrections integer,
    incidents_prevented integer, prediction_errors integer, last_activated_at timestamptz,
    last_used_at timestamptz, m_project text, claimed text, sim double precision, formula text, at timestamptz)
    RETURNS TABLE (score double precision, breakdown jsonb)
    LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT t.activation + t.incident_prevention + t.endorsement + t.correction + t.pred_error + t.scope_bonus
               + t.semantic,
           pg_catalog.jsonb_build_object(
               'activation', t.activation, 'incident_prevention', t.incident_prevention,
               'endorsement', t.endorsement, 'correction', t.correction, 'pred_error', t.pred_error,
               'scope_bonus', t.scope_bonus, 'semantic', t.semantic, 'recency_factor', r.recency)
      FROM (
            -- where the formulas differ: each one's signals, its clock, and whether its penalties decay
            SELECT (activation_count + overview_count)::double precision, incidents_prevented::double precision,
                   endorsements::double precision, corrections::double precision,
                   prediction_errors::double precision, last_activated_at, true
             WHERE formula = 'literal'
            UNION ALL
            -- saturated counts n / (n + k), k = the count at which a signal is half-way
            SELECT activation_count / (activation_count + 10.0)::double precision,
                   incidents_prevented / (incidents_prevented + 2.0)::double precision,
                   endorsements / (endorsements + 3.0)::double precision,
                   corrections / (corrections + 2.0)::double precision,
                   prediction_errors / (prediction_errors + 3.0)::double precision, last_used_at, false
             WHERE formula IS DISTINCT FROM 'literal'
           ) s (activation, incident, endorse, correction, pred_error, clock, penalties_decay)
     CROSS JOIN LATERAL (
            SELECT r.recency, CASE WHEN s.penalties_decay THEN r.recency ELSE 1 END AS penalty_factor
              FROM (SELECT exp(-(greatest(extract(epoch FROM at - s.clock), 0)::double precision / 86400.0)
                               / 30.0) AS recency) r
           ) r
     CROSS JOIN LATERAL (
            -- the weights
            SELECT 0.2 * s.activation * r.recency AS activation,
                   0.5 * s.incident * r.recency AS incident_prevention,
                   0.3 * s.endorse * r.recency AS endorsement,
                   -0.4 * s.correction * r.penalty_factor AS correction,
                   -0.2 * s.pred_error * r.penalty_factor AS pred_error,
                   0.1 * CASE WHEN claimed IS NOT NULL AND m_project = claimed THEN 1.0 ELSE 0.0 END::double precision
                       * r.recency AS scope_bonus,
                   0.5 * coalesce(sim, 0)::double precision AS semantic
           ) t
$$;

-- The query's two legs among the memories visible under the claim, each k deep: the nearest embeddings and the
-- best full-text matches of any of the query's lexemes, with each memory's rank in each leg (NULL: not found by
-- it). Both legs break ties by memory_id, so the first n of a leg are the same at any depth >= n.
DROP FUNCTION agent.query_matches(text, text, text, vector, integer);
CREATE FUNCTION agent.query_legs(p_owner text, claimed text, query text, query_vec public.vector, k integer)
    RETURNS TABLE (id bigint, vector_rank bigint, lexical_rank bigint)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
DECLARE
    words pg_catalog.tsquery;
BEGIN
    -- each lexeme quoted, so no character of the query is read as tsquery syntax
    SELECT string_agg(ghostmem.lexeme_query(l)::pg_catalog.text, ' | ')::pg_catalog.tsquery INTO words
      FROM unnest(tsvector_to_array(ghostmem.lexemes(coalesce(btrim(query), ''), true))) AS l;
    RETURN QUERY
    WITH visible AS (
        SELECT m.memory_id, m.embedding, m.tsv FROM agent.ghost_memories m
         WHERE m.owner = p_owner AND agent.ghost_visible(m.scope, m.project, m.allowlist, claimed)
    ), nearest AS (
        SELECT n.memory_id, row_number() OVER (ORDER BY n.distance, n.memory_id) AS rank
          FROM (SELECT v.memory_id, v.embedding <=> query_vec AS distance FROM visible v
                 ORDER BY 2, 1 LIMIT k) n
    ), lexical AS (
        SELECT x.memory_id, row_number() OVER (ORDER BY x.relevance DESC, x.memory_id) AS rank
          FROM (SELECT v.memory_id, ts_rank(v.tsv, words) AS relevance FROM visible v WHERE v.tsv @@ words
                 ORDER BY 2 DESC, 1 LIMIT k) x
    )
    SELECT coalesce(n.memory_id, x.memory_id), n.rank, x.rank
      FROM nearest n FULL JOIN lexical x ON x.memory_id = n.memory_id;
END
$$;

-- The ranking (internal): candidates are every visible memory for an empty query (the overview), else the query's
-- two legs, ten times the limit deep. `explained`: the query explains the memory (it is among the `lim` nearest
-- embeddings or the `lim` best full-text matches), which makes its return *use* (search_ghost_ranked_at).
CREATE FUNCTION agent.rank_ghosts_explained(at timestamptz, p_owner text, claimed text, query text,
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
      JOIN candidate c ON c.memory_id = m.memory_id
     CROSS JOIN LATERAL agent.ghost_terms(
           m.activation_count, m.overview_count, m.endorsements, m.corrections, m.incidents_prevented,
           m.prediction_errors, m.last_activated_at, m.last_used_at, m.project, claimed,
           CASE WHEN overview THEN 0 ELSE 1 - (m.embedding <=> query_vec) END, formula, at) s
     ORDER BY s.score DESC, m.memory_id
     LIMIT lim;
END
$$;

-- Scores without bumping (internal; the bench reads ranks with it).
CREATE OR REPLACE FUNCTION agent.rank_ghosts_at(at timestamptz, p_owner text, claimed text, query text,
                                                query_vec public.vector, formula text, lim integer)
    RETURNS SETOF agent.ghost_hit
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
    SELECT (r.hit).* FROM agent.rank_ghosts_explained(at, p_owner, claimed, query, query_vec, formula, lim) r
     ORDER BY (r.hit).score DESC, (r.hit).memory_id
$$;

-- Rank once, then bump: a return the query explains is use (activation_count, last_used_at), any other return is
-- shown (overview_count); every return resets last_activated_at. The rows come back as they were ranked (scores
-- and times before the bump).
CREATE OR REPLACE FUNCTION agent.search_ghost_ranked_at(at timestamptz, p_owner text, claimed text, query text,
                                                        query_vec public.vector, formula text, lim integer)
    RETURNS SETOF agent.ghost_hit
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
DECLARE
    hits  agent.ghost_hit[];
    used  bigint[];
    shown bigint[];
BEGIN
    PERFORM agent.check_claim(claimed);
    SELECT coalesce(array_agg(r.hit ORDER BY (r.hit).score DESC, (r.hit).memory_id), '{}'),
           coalesce(array_agg((r.hit).memory_id) FILTER (WHERE r.explained), '{}'),
           coalesce(array_agg((r.hit).memory_id) FILTER (WHERE NOT r.explained), '{}')
      INTO hits, used, shown
      FROM agent.rank_ghosts_explained(at, p_owner, claimed, query, query_vec, formula, lim) r;
    PERFORM agent.bump_activation(p_owner, used, false, at);
    PERFORM agent.bump_activation(p_owner, shown, true, at);
    RETURN QUERY SELECT h.memory_id, h.content, h.kind, h.scope, h.project, h.allowlist, h.score, h.breakdown,
                        h.created_at, h.last_activated_at, h.last_used_at
                   FROM unnest(hits) WITH ORDINALITY AS h ORDER BY h.ordinality;
END
$$;

CREATE OR REPLACE FUNCTION agent.written(m agent.ghost_memories, created boolean, claimed text, at timestamptz)
    RETURNS agent.ghost_written
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, agent, public, pg_temp
    RETURN (SELECT ROW(m.memory_id, m.content, m.kind, m.scope, m.project, m.allowlist, s.score, s.breakdown,
                       m.created_at, m.last_activated_at, created, m.last_used_at)::agent.ghost_written
              FROM agent.score_ghost(m, claimed, 0, 'default', at) s);

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA agent FROM PUBLIC;
