-- Ghost memories: a return counts as *use* (activation_count, last_used_at: what the default formula reads) only
-- when the query explains it — the memory is among the `lim` nearest embeddings or the `lim` best full-text
-- matches of the query. A memory returned only because its evidence already ranks it high is recorded as shown
-- (overview_count, last_activated_at: what the literal formula reads), exactly like an empty-query overview.
-- Without this, strong rules returned for unrelated queries kept their clock fresh and stayed on top all year
-- (bench/ghost_sim.py). Both legs also break distance/rank ties by memory_id, so rankings are reproducible.

-- The query's two legs among the memories visible under the claim: the k nearest embeddings and the k best
-- full-text matches of any of the query's lexemes.
CREATE FUNCTION agent.query_matches(p_owner text, claimed text, query text, query_vec vector, k integer)
    RETURNS SETOF bigint
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, agent, public
AS $$
DECLARE
    words tsquery;
BEGIN
    -- each lexeme quoted, so no character of the query is read as tsquery syntax
    SELECT string_agg(ghostmem.lexeme_query(l)::text, ' | ')::tsquery INTO words
      FROM unnest(tsvector_to_array(ghostmem.lexemes(coalesce(btrim(query), ''), true))) AS l;
    RETURN QUERY
    WITH visible AS (
        SELECT m.memory_id, m.embedding, m.tsv FROM agent.ghost_memories m
         WHERE m.owner = p_owner AND agent.ghost_visible(m.scope, m.project, m.allowlist, claimed)
    )
    (SELECT v.memory_id FROM visible v ORDER BY v.embedding <=> query_vec, v.memory_id LIMIT k)
    UNION
    (SELECT v.memory_id FROM visible v WHERE v.tsv @@ words
      ORDER BY ts_rank(v.tsv, words) DESC, v.memory_id LIMIT k);
END
$$;

CREATE OR REPLACE FUNCTION agent.rank_ghosts_at(at timestamptz, p_owner text, claimed text, query text,
                                                query_vec vector, formula text, lim integer)
    RETURNS SETOF agent.ghost_hit
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, agent, public
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
        SELECT m.memory_id FROM agent.ghost_memories m
         WHERE overview AND m.owner = p_owner AND agent.ghost_visible(m.scope, m.project, m.allowlist, claimed)
        UNION
        SELECT q.id FROM agent.query_matches(p_owner, claimed, query, query_vec, greatest(lim * 10, 100)) AS q(id)
         WHERE NOT overview
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

CREATE OR REPLACE FUNCTION agent.search_ghost_ranked_at(at timestamptz, p_owner text, claimed text, query text,
                                                        query_vec vector, formula text, lim integer)
    RETURNS SETOF agent.ghost_hit
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public
AS $$
DECLARE
    hits     agent.ghost_hit[];
    returned bigint[];
    used     bigint[] := '{}';
BEGIN
    PERFORM agent.check_claim(claimed);
    SELECT coalesce(array_agg(h ORDER BY h.score DESC, h.memory_id), '{}') INTO hits
      FROM agent.rank_ghosts_at(at, p_owner, claimed, query, query_vec, formula, lim) h;
    returned := ARRAY(SELECT (h).memory_id FROM unnest(hits) h);
    IF coalesce(btrim(query), '') <> '' THEN
        used := ARRAY(SELECT id FROM agent.query_matches(p_owner, claimed, query, query_vec, lim) AS q(id)
                       WHERE id = ANY (returned));
    END IF;
    PERFORM agent.bump_activation(p_owner, used, false, at);
    PERFORM agent.bump_activation(p_owner, ARRAY(SELECT r FROM unnest(returned) r WHERE r <> ALL (used)), true, at);
    RETURN QUERY SELECT h.memory_id, h.content, h.kind, h.scope, h.project, h.allowlist, h.score, h.breakdown,
                        h.created_at, h.last_activated_at
                   FROM unnest(hits) WITH ORDINALITY AS h ORDER BY h.ordinality;
END
$$;

REVOKE ALL ON FUNCTION agent.query_matches(text, text, text, vector, integer) FROM PUBLIC;
