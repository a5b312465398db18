-- Japanese words for ghost memories, as 091 gave them to messages: a memory's content words (SudachiPy, computed in
-- Python by ghostmem/japanese.py, NULL without Japanese or without the [ja] extra) are stored in `morphemes`, and
-- the query's words join the query's character pairs in the full-text leg of a ghost search, so a rule written
-- `毎朝本を読みます` is found by `本を読んだ` (the pairs share nothing; the normalised word 読む joins them).
--
-- The API functions take the words next to the vector they already take: remember and update_memory the
-- content's, search_ghost_ranked the query's, restore_memory (operator) the restored content's. The old signatures
-- are dropped, so nothing can write a memory without its words by mistake. `tsv` is now filled by a trigger from
-- content and morphemes (one rule, as for messages), so a backfill of the words (`ghostmem enrich`) is one UPDATE of
-- morphemes. Existing memories keep their tsv (their lexemes are unchanged until they get words), so every
-- ranking is the same across this upgrade (tests/integration/test_migrate.py).

ALTER TABLE agent.ghost_memories ADD COLUMN morphemes text[];

-- Not SECURITY DEFINER: it runs as whoever writes the row (the API functions' owner, or the operator's backfill).
CREATE FUNCTION agent.ghost_memories_fill_tsv() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.tsv := ghostmem.lexemes(NEW.content)
               || pg_catalog.array_to_tsvector(coalesce(NEW.morphemes, '{}'::pg_catalog.text[]));
    RETURN NEW;
END
$$;

CREATE TRIGGER ghost_memories_fill_tsv
    BEFORE INSERT OR UPDATE OF content, morphemes ON agent.ghost_memories
    FOR EACH ROW EXECUTE FUNCTION agent.ghost_memories_fill_tsv();

DROP FUNCTION agent.search_ghost_ranked(text, text, text, public.vector, text, integer);
DROP FUNCTION agent.search_ghost_ranked_at(timestamptz, text, text, text, public.vector, text, integer);
DROP FUNCTION agent.rank_ghosts_at(timestamptz, text, text, text, public.vector, text, integer);
DROP FUNCTION agent.rank_ghosts_explained(timestamptz, text, text, text, public.vector, text, integer);
DROP FUNCTION agent.query_legs(text, text, text, public.vector, integer);
DROP FUNCTION agent.remember(text, text, text, text, text, text[], public.vector, text);
DROP FUNCTION agent.remember_at(timestamptz, text, text, text, text, text, text[], public.vector, text);
DROP FUNCTION agent.update_memory(text, text, bigint, text, public.vector, text);
DROP FUNCTION agent.update_memory_at(timestamptz, text, text, bigint, text, public.vector, text);
DROP FUNCTION agent.restore_memory(text, bigint, public.vector);

-- 061's legs; the full-text leg asks for the query's character grams or any of its words.
CREATE FUNCTION agent.query_legs(p_owner text, claimed text, query text, query_vec public.vector,
                                 query_words text[], k integer)
    RETURNS TABLE (id bigint, vector_rank bigint, lexical_rank bigint)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
DECLARE
    words pg_catalog.tsquery;
BEGIN
    -- each lexeme quoted, so no character of the query is read as tsquery syntax
    SELECT pg_catalog.string_agg(ghostmem.lexeme_query(l)::pg_catalog.text, ' | ')::pg_catalog.tsquery INTO words
      FROM (SELECT pg_catalog.unnest(pg_catalog.tsvector_to_array(
                       ghostmem.lexemes(coalesce(pg_catalog.btrim(query), ''), true)))
            UNION
            SELECT pg_catalog.unnest(coalesce(query_words, '{}'::pg_catalog.text[]))) AS q (l);
    RETURN QUERY
    WITH visible AS (
        SELECT m.memory_id, m.embedding, m.tsv FROM agent.ghost_memories m
         WHERE m.owner = p_owner AND agent.ghost_visible(m.scope, m.project, m.allowlist, claimed)
    ), nearest AS (
        SELECT n.memory_id, pg_catalog.row_number() OVER (ORDER BY n.distance, n.memory_id) AS rank
          FROM (SELECT v.memory_id, v.embedding OPERATOR(public.<=>) query_vec AS distance FROM visible v
                 ORDER BY 2, 1 LIMIT k) n
    ), lexical AS (
        SELECT x.memory_id, pg_catalog.row_number() OVER (ORDER BY x.relevance DESC, x.memory_id) AS rank
          FROM (SELECT v.memory_id, pg_catalog.ts_rank(v.tsv, words) AS relevance FROM visible v
                 WHERE v.tsv @@ words
                 ORDER BY 2 DESC, 1 LIMIT k) x
    )
    SELECT coalesce(n.memory_id, x.memory_id), n.rank, x.rank
      FROM nearest n FULL JOIN lexical x ON x.memory_id = n.memory_id;
END
$$;

-- 100's ranking, the query's words passed to its legs.
CREATE FUNCTION agent.rank_ghosts_explained(at timestamptz, p_owner text, claimed text, query text,
                                            query_vec public.vector, query_words text[], formula text,
                                            lim integer)
    RETURNS TABLE (hit agent.ghost_hit, explained boolean)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
DECLARE
    overview boolean := coalesce(pg_catalog.btrim(query), '') = '';
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
          FROM agent.query_legs(p_owner, claimed, query, query_vec, query_words, greatest(lim * 10, 100)) q
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
           CASE WHEN overview THEN 0 ELSE 1 - (m.embedding OPERATOR(public.<=>) query_vec) END, formula, at) s
     ORDER BY s.score DESC, m.memory_id
     LIMIT lim;
END
$$;

-- 061's scores without bumping (internal; the bench reads ranks with it).
CREATE FUNCTION agent.rank_ghosts_at(at timestamptz, p_owner text, claimed text, query text,
                                     query_vec public.vector, query_words text[], formula text, lim integer)
    RETURNS SETOF agent.ghost_hit
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
    SELECT (r.hit).*
      FROM agent.rank_ghosts_explained(at, p_owner, claimed, query, query_vec, query_words, formula, lim) r
     ORDER BY (r.hit).score DESC, (r.hit).memory_id
$$;

-- 061's rank once, then bump.
CREATE FUNCTION agent.search_ghost_ranked_at(at timestamptz, p_owner text, claimed text, query text,
                                             query_vec public.vector, query_words text[], formula text,
                                             lim integer)
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
    SELECT coalesce(pg_catalog.array_agg(r.hit ORDER BY (r.hit).score DESC, (r.hit).memory_id), '{}'),
           coalesce(pg_catalog.array_agg((r.hit).memory_id) FILTER (WHERE r.explained), '{}'),
           coalesce(pg_catalog.array_agg((r.hit).memory_id) FILTER (WHERE NOT r.explained), '{}')
      INTO hits, used, shown
      FROM agent.rank_ghosts_explained(at, p_owner, claimed, query, query_vec, query_words, formula, lim) r;
    PERFORM agent.bump_activation(p_owner, used, false, at);
    PERFORM agent.bump_activation(p_owner, shown, true, at);
    RETURN QUERY SELECT h.memory_id, h.content, h.kind, h.scope, h.project, h.allowlist, h.score, h.breakdown,
                        h.created_at, h.last_activated_at, h.last_used_at
                   FROM pg_catalog.unnest(hits) WITH ORDINALITY AS h ORDER BY h.ordinality;
END
$$;

-- API: the ranked ghost memories of p_owner visible under `claimed` (040), the query's words with its vector.
CREATE FUNCTION agent.search_ghost_ranked(p_owner text, claimed text, query text, query_vec public.vector,
                                          query_words text[], formula text DEFAULT 'default',
                                          lim integer DEFAULT 10)
    RETURNS SETOF agent.ghost_hit
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$ SELECT * FROM agent.search_ghost_ranked_at(pg_catalog.now(), p_owner, claimed, query, query_vec, query_words,
                                                 formula, lim) $$;

-- 100's remember; the new memory stores its words (the trigger builds its lexemes).
CREATE FUNCTION agent.remember_at(at timestamptz, p_owner text, p_content text, p_kind text,
                                  p_scope text, p_project text, p_allowlist text[],
                                  p_embedding public.vector, p_words text[], p_source text)
    RETURNS agent.ghost_written
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
DECLARE
    allow text[] := ARRAY(SELECT DISTINCT pg_catalog.btrim(a) FROM pg_catalog.unnest(coalesce(p_allowlist, '{}')) a
                           WHERE pg_catalog.btrim(a) <> '' ORDER BY 1);
    m agent.ghost_memories;
BEGIN
    PERFORM agent.check_claim(p_project);
    IF p_scope = 'project' AND p_project IS NULL THEN
        RAISE EXCEPTION 'a project-scoped memory needs a project' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (p_scope = 'shared-restricted') <> (pg_catalog.cardinality(allow) > 0) THEN
        RAISE EXCEPTION 'an allowlist goes with scope shared-restricted, and only with it'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- one writer per owner at a time, so two identical concurrent remembers cannot both insert
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('ghostmem.remember:' || p_owner, 0));
    SELECT g.* INTO m FROM agent.ghost_memories g
     WHERE g.owner = p_owner AND g.scope = p_scope
       AND (p_scope = 'global' OR (p_scope = 'project' AND g.project = p_project)
            OR (p_scope = 'shared-restricted' AND g.allowlist = allow))
       AND ((g.embedding OPERATOR(public.<=>) p_embedding) <= 0.05
            OR public.similarity(pg_catalog.lower(g.content), pg_catalog.lower(p_content)) >= 0.9)
     ORDER BY least(g.embedding OPERATOR(public.<=>) p_embedding,
                    1 - public.similarity(pg_catalog.lower(g.content), pg_catalog.lower(p_content))), g.memory_id
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
    INSERT INTO agent.ghost_memories (owner, content, kind, scope, project, allowlist, embedding, morphemes,
                                      source_conv_id, created_at, last_activated_at, last_used_at, updated_at)
    VALUES (p_owner, p_content, p_kind, p_scope, p_project, allow, p_embedding, p_words, p_source, at, at, at, at)
    RETURNING * INTO m;
    RETURN agent.written(m, true, p_project, at);
END
$$;

-- API (040), the content's words with its vector.
CREATE FUNCTION agent.remember(p_owner text, p_content text, p_kind text, p_scope text, p_project text,
                               p_allowlist text[], p_embedding public.vector, p_words text[],
                               p_source text DEFAULT NULL)
    RETURNS agent.ghost_written
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$ SELECT agent.remember_at(pg_catalog.now(), p_owner, p_content, p_kind, p_scope, p_project, p_allowlist,
                               p_embedding, p_words, p_source) $$;

-- 100's update; the new wording comes with its words.
CREATE FUNCTION agent.update_memory_at(at timestamptz, p_owner text, claimed text, p_memory_id bigint,
                                       p_content text, p_embedding public.vector, p_words text[], p_reason text)
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
           SET content = p_content, embedding = p_embedding, morphemes = p_words, updated_at = at
         WHERE g.owner = p_owner AND g.memory_id = m.memory_id
        RETURNING g.* INTO m;
    END IF;
    RETURN NEXT agent.written(m, false, claimed, at);
END
$$;

CREATE FUNCTION agent.update_memory(p_owner text, claimed text, p_memory_id bigint, p_content text,
                                    p_embedding public.vector, p_words text[], p_reason text)
    RETURNS SETOF agent.ghost_written
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$ SELECT * FROM agent.update_memory_at(pg_catalog.now(), p_owner, claimed, p_memory_id, p_content, p_embedding,
                                           p_words, p_reason) $$;

-- 100's restore (operator, never granted): the caller computes the vector and the words again (the model or the
-- dictionary may have changed since); the trigger builds the lexemes.
CREATE FUNCTION agent.restore_memory(p_owner text, p_memory_id bigint, p_embedding public.vector,
                                     p_words text[])
    RETURNS text
    LANGUAGE plpgsql
    SET search_path = pg_catalog, agent, public, pg_temp
AS $$
DECLARE
    r agent.retired_ghosts;
BEGIN
    DELETE FROM agent.retired_ghosts g WHERE g.owner = p_owner AND g.memory_id = p_memory_id RETURNING g.* INTO r;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'there is no retired ghost memory % of owner %', p_memory_id, pg_catalog.quote_literal(p_owner)
            USING ERRCODE = 'undefined_object';
    END IF;
    INSERT INTO agent.ghost_memories OVERRIDING SYSTEM VALUE
    SELECT (pg_catalog.jsonb_populate_record(NULL::agent.ghost_memories,
                r.memory || pg_catalog.jsonb_build_object('embedding', p_embedding::pg_catalog.text,
                                                          'morphemes', p_words))).*;
    INSERT INTO agent.ghost_feedback OVERRIDING SYSTEM VALUE
    SELECT (pg_catalog.jsonb_populate_record(NULL::agent.ghost_feedback,
                f || pg_catalog.jsonb_build_object('owner', p_owner))).*
      FROM pg_catalog.jsonb_array_elements(r.feedback) AS f;
    INSERT INTO agent.ghost_revisions (owner, memory_id, action, content, reason, created_at)
    VALUES (p_owner, p_memory_id, 'restore', r.memory ->> 'content', 'restored by ' || session_user, pg_catalog.now());
    RETURN r.memory ->> 'content';
END
$$;

-- The runtime role gets the API functions under their new signatures: the roles installed already here, later
-- ones in install_runtime_role (081's, with the new signatures in its grant).
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
        'agent.remember(text, text, text, text, text, text[], vector, text[], text), '
        'agent.give_feedback(text, text, bigint, text, text), agent.claim_refusal(text), '
        'agent.update_memory(text, text, bigint, text, vector, text[], text), '
        'agent.retire_memory(text, text, bigint, text) TO %I', p_role);
    INSERT INTO agent.runtime_roles (role_name) VALUES (p_role) ON CONFLICT DO NOTHING;
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA agent FROM PUBLIC;

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
