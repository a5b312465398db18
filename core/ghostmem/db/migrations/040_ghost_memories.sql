-- Ghost memories: the agent's own rules and lessons, ranked inside the database and guarded by it.
--
-- The tables belong to the migrating role and are granted to nobody. A runtime role (NOLOGIN, default
-- ghostmem_runtime; another name through the ghostmem.runtime_role setting) may only EXECUTE the API functions
-- below, which are SECURITY DEFINER with a pinned search_path and decide scope visibility themselves.
-- Functions named *_at take the clock as their first argument so that a simulation can replay a year in
-- minutes; they are internal (never granted) and the API functions call them with now().
-- The per-row scoring is one SQL function the planner inlines into the ranking query (no PL/pgSQL call per
-- memory), and the lexical column is filled once on insert, so an activation bump recomputes nothing.

CREATE TABLE agent.ghost_memories (
    memory_id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner               text        NOT NULL,
    content             text        NOT NULL CHECK (content <> ''),
    kind                text        NOT NULL CHECK (kind IN ('rule', 'feedback', 'preference', 'fact', 'warning')),
    scope               text        NOT NULL CHECK (scope IN ('global', 'project', 'shared-restricted')),
    project             text,
    allowlist           text[]      NOT NULL DEFAULT '{}',
    -- raw signals: counts of events; each formula maps them to its own scale (docs/ghosts.md)
    activation_count    integer     NOT NULL DEFAULT 0,  -- returned by a search with a query
    overview_count      integer     NOT NULL DEFAULT 0,  -- returned by an empty-query overview
    endorsements        integer     NOT NULL DEFAULT 0,  -- includes being remembered again
    corrections         integer     NOT NULL DEFAULT 0,
    incidents_prevented integer     NOT NULL DEFAULT 0,
    prediction_errors   integer     NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL,
    last_activated_at   timestamptz NOT NULL,  -- any return, overviews included (the literal formula's clock)
    last_used_at        timestamptz NOT NULL,  -- real use: a query hit or positive feedback (the default's)
    updated_at          timestamptz NOT NULL,
    source_conv_id      text,
    -- the lexemes of conversation search (020): English stems plus CJK grams. remember_at fills it from content
    -- (which never changes after the insert); not a generated column, which every activation bump would recompute.
    tsv                 tsvector,
    CHECK (scope <> 'project' OR project IS NOT NULL),
    CHECK ((scope = 'shared-restricted') = (cardinality(allowlist) > 0))
);
CREATE INDEX ghost_memories_owner ON agent.ghost_memories (owner, scope);
CREATE INDEX ghost_memories_tsv ON agent.ghost_memories USING gin (tsv);

CALL ghostmem.add_vector_column('agent.ghost_memories', 'embedding', not_null => true);

-- Every feedback event, with its note: the history behind the counters.
CREATE TABLE agent.ghost_feedback (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    memory_id  bigint      NOT NULL REFERENCES agent.ghost_memories (memory_id) ON DELETE CASCADE,
    signal     text        NOT NULL CHECK (signal IN ('endorse', 'correct', 'incident_prevented',
                                                      'prediction_error', 'remembered_again')),
    note       text,
    session_role text      NOT NULL DEFAULT session_user,
    created_at timestamptz NOT NULL
);
CREATE INDEX ghost_feedback_memory ON agent.ghost_feedback (memory_id);

-- Operator map: a login role with rows here may claim only these projects (`ghostmem grant-project`).
CREATE TABLE agent.role_projects (
    role_name  text        NOT NULL,
    project    text        NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (role_name, project)
);

-- Runtime roles installed in this database (later migrations grant new API functions to each).
CREATE TABLE agent.runtime_roles (
    role_name text PRIMARY KEY
);

-- ---------------------------------------------------------------------------------------------------------------
-- Pure helpers

CREATE FUNCTION agent.ghost_visible(m_scope text, m_project text, m_allowlist text[], claimed text)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog
    RETURN m_scope = 'global'
        OR (m_scope = 'project' AND claimed IS NOT NULL AND m_project = claimed)
        OR (m_scope = 'shared-restricted' AND claimed IS NOT NULL AND claimed = ANY (m_allowlist));

CREATE TYPE agent.ghost_score AS (score double precision, breakdown jsonb);

-- The ranking, as plain arithmetic on a memory's signals (docs/ghosts.md). 'literal' is DESIGN.md's formula
-- exactly; 'default' keeps its terms and weights with every signal saturated into [0, 1) (a count n becomes
-- n / (n + k), k = the count at which the signal is half-way), decay applied to the positive part only, and
-- overviews not counted as use. breakdown: each term's contribution (they sum to the score) and the recency
-- factor applied. Not SECURITY DEFINER and without SET so that the planner can inline it into the ranking query
-- (rank_ghosts_at) instead of calling a function per memory; it reads no table, only pg_catalog functions. Any
-- formula name but 'literal' reads as 'default' here: rank_ghosts_at refuses unknown names first.
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

-- One memory's score and breakdown (written() reports it).
CREATE FUNCTION agent.score_ghost(m agent.ghost_memories, claimed text, sim double precision, formula text,
                                  at timestamptz) RETURNS agent.ghost_score
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, agent, public
    RETURN (SELECT ROW(t.score, t.breakdown)::agent.ghost_score
              FROM agent.ghost_terms(m.activation_count, m.overview_count, m.endorsements, m.corrections,
                                     m.incidents_prevented, m.prediction_errors, m.last_activated_at,
                                     m.last_used_at, m.project, claimed, sim, formula, at) t);

-- ---------------------------------------------------------------------------------------------------------------
-- Claims: which projects the login role (session_user, unchanged by SET ROLE) may act for.

CREATE FUNCTION agent.may_claim(claimed text) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, agent, public
    RETURN claimed IS NULL
        OR NOT EXISTS (SELECT 1 FROM agent.role_projects r WHERE r.role_name = session_user)
        OR EXISTS (SELECT 1 FROM agent.role_projects r WHERE r.role_name = session_user AND r.project = claimed);

-- NULL when the claim is allowed, else the sentence that explains the refusal (API: the client asks first so
-- that it can raise a clear error; the functions below refuse on their own anyway).
CREATE FUNCTION agent.claim_refusal(claimed text) RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, agent, public
    RETURN CASE WHEN agent.may_claim(claimed) THEN NULL ELSE format(
        'database role %s may not act for project %s (an operator allowed only: %s); '
        'use one of those projects or ask for `ghostmem grant-project %s %s`',
        session_user, quote_literal(claimed),
        (SELECT string_agg(r.project, ', ' ORDER BY r.project) FROM agent.role_projects r
          WHERE r.role_name = session_user),
        session_user, claimed) END;

CREATE FUNCTION agent.check_claim(claimed text) RETURNS void
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, agent, public
AS $$
DECLARE
    refusal text := agent.claim_refusal(claimed);
BEGIN
    IF refusal IS NOT NULL THEN
        RAISE EXCEPTION '%', refusal USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$;

-- A memory may be addressed by id (feedback) when it is visible under the claim; with no claim, when it is
-- visible under some project the login role may claim (any project, for a role without a map).
CREATE FUNCTION agent.ghost_addressable(m_scope text, m_project text, m_allowlist text[], claimed text)
    RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, agent, public
    RETURN CASE
        WHEN claimed IS NOT NULL THEN agent.ghost_visible(m_scope, m_project, m_allowlist, claimed)
        WHEN m_scope = 'global' THEN true
        WHEN m_scope = 'project' THEN agent.may_claim(m_project)
        ELSE EXISTS (SELECT 1 FROM unnest(m_allowlist) a WHERE agent.may_claim(a))
    END;

-- ---------------------------------------------------------------------------------------------------------------
-- Activation

CREATE FUNCTION agent.bump_activation(p_owner text, ids bigint[], overview boolean, at timestamptz)
    RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public
BEGIN ATOMIC
    UPDATE agent.ghost_memories
       SET activation_count = activation_count + CASE WHEN overview THEN 0 ELSE 1 END,
           overview_count = overview_count + CASE WHEN overview THEN 1 ELSE 0 END,
           last_activated_at = greatest(last_activated_at, at),
           last_used_at = CASE WHEN overview THEN last_used_at ELSE greatest(last_used_at, at) END
     WHERE owner = p_owner AND memory_id = ANY (ids);
END;

-- ---------------------------------------------------------------------------------------------------------------
-- Search

CREATE TYPE agent.ghost_hit AS (
    memory_id         bigint,
    content           text,
    kind              text,
    scope             text,
    project           text,
    allowlist         text[],
    score             double precision,
    breakdown         jsonb,
    created_at        timestamptz,
    last_activated_at timestamptz
);

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

-- Scores without bumping: the ranking itself (internal; the bench measures ranks with it). Candidates: every
-- visible memory for an empty query (the overview), else the query's two legs, ten times the limit deep.
CREATE FUNCTION agent.rank_ghosts_at(at timestamptz, p_owner text, claimed text, query text, query_vec vector,
                                     formula text, lim integer)
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

-- Rank, then bump. A return counts as *use* (activation_count, last_used_at: what the default formula reads) only
-- when the query explains it: the memory is among the `lim` nearest embeddings or the `lim` best full-text
-- matches of the query. A memory returned only because its evidence already ranks it high is recorded as shown
-- (overview_count, last_activated_at: what the literal formula reads), exactly like an empty-query overview.
-- Otherwise strong rules returned for unrelated queries would keep their clock fresh and stay on top all year
-- (bench/ghost_sim.py). Both legs break distance/rank ties by memory_id, so rankings are reproducible.
CREATE FUNCTION agent.search_ghost_ranked_at(at timestamptz, p_owner text, claimed text, query text,
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

-- API: the ranked ghost memories of p_owner visible under `claimed`; every returned row is bumped, as use when
-- the query explains it, else as shown (an empty query shows them all).
CREATE FUNCTION agent.search_ghost_ranked(p_owner text, claimed text, query text, query_vec vector,
                                          formula text DEFAULT 'default', lim integer DEFAULT 10)
    RETURNS SETOF agent.ghost_hit
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public
AS $$ SELECT * FROM agent.search_ghost_ranked_at(now(), p_owner, claimed, query, query_vec, formula, lim) $$;

-- ---------------------------------------------------------------------------------------------------------------
-- Writes

CREATE TYPE agent.ghost_written AS (
    memory_id         bigint,
    content           text,
    kind              text,
    scope             text,
    project           text,
    allowlist         text[],
    score             double precision,
    breakdown         jsonb,
    created_at        timestamptz,
    last_activated_at timestamptz,
    created           boolean
);

CREATE FUNCTION agent.written(m agent.ghost_memories, created boolean, claimed text, at timestamptz)
    RETURNS agent.ghost_written
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, agent, public
    RETURN (SELECT ROW(m.memory_id, m.content, m.kind, m.scope, m.project, m.allowlist, s.score, s.breakdown,
                       m.created_at, m.last_used_at, created)::agent.ghost_written
              FROM agent.score_ghost(m, claimed, 0, 'default', at) s);

-- Store a memory, or strengthen (one more endorsement) a near-duplicate of the same owner and scope: the same
-- project for a project memory, the same allowlist for a restricted one; near = cosine distance <= 0.05 or
-- trigram similarity >= 0.9 of the lower-cased text. A new memory gets its lexical column here (content never
-- changes after the insert).
CREATE FUNCTION agent.remember_at(at timestamptz, p_owner text, p_content text, p_kind text, p_scope text,
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

-- API
CREATE FUNCTION agent.remember(p_owner text, p_content text, p_kind text, p_scope text, p_project text,
                               p_allowlist text[], p_embedding vector, p_source text DEFAULT NULL)
    RETURNS agent.ghost_written
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public
AS $$ SELECT agent.remember_at(now(), p_owner, p_content, p_kind, p_scope, p_project, p_allowlist, p_embedding,
                               p_source) $$;

-- Record feedback on a memory the caller may address; no row when it is unknown (or another owner's, or out of
-- the claim's sight). Endorsements and prevented incidents count as use (they refresh the default's clock).
CREATE FUNCTION agent.give_feedback_at(at timestamptz, p_owner text, claimed text, p_memory_id bigint,
                                       p_signal text, p_note text) RETURNS SETOF agent.ghost_written
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public
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
    INSERT INTO agent.ghost_feedback (memory_id, signal, note, created_at) VALUES (m.memory_id, p_signal, p_note, at);
    RETURN NEXT agent.written(m, false, claimed, at);
END
$$;

-- API
CREATE FUNCTION agent.give_feedback(p_owner text, claimed text, p_memory_id bigint, p_signal text, p_note text)
    RETURNS SETOF agent.ghost_written
    LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, agent, public
AS $$ SELECT * FROM agent.give_feedback_at(now(), p_owner, claimed, p_memory_id, p_signal, p_note) $$;

-- ---------------------------------------------------------------------------------------------------------------
-- Operator functions (never granted): the role → project map and the runtime role.

CREATE FUNCTION agent.grant_project(p_role text, p_project text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, agent, public
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_role) THEN
        RAISE EXCEPTION 'there is no database role %', quote_ident(p_role) USING ERRCODE = 'undefined_object';
    END IF;
    IF coalesce(btrim(p_project), '') = '' THEN
        RAISE EXCEPTION 'the project name is empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO agent.role_projects (role_name, project) VALUES (p_role, btrim(p_project))
        ON CONFLICT DO NOTHING;
END
$$;

-- Removes one project (or, with NULL, the whole map: the role may then claim any project again).
CREATE FUNCTION agent.revoke_project(p_role text, p_project text) RETURNS integer
    LANGUAGE sql
    SET search_path = pg_catalog, agent, public
BEGIN ATOMIC
    WITH gone AS (DELETE FROM agent.role_projects
                   WHERE role_name = p_role AND (p_project IS NULL OR project = btrim(p_project)) RETURNING 1)
    SELECT count(*)::integer FROM gone;
END;

-- Create the runtime role if missing, make the current role a member (so it may SET ROLE to it, as on a managed
-- server where the connecting role is no superuser), and grant it the API and nothing else.
CREATE FUNCTION agent.install_runtime_role(p_role text) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, agent, public
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
                   'agent.give_feedback(text, text, bigint, text, text), agent.claim_refusal(text) TO %I', p_role);
    INSERT INTO agent.runtime_roles (role_name) VALUES (p_role) ON CONFLICT DO NOTHING;
END
$$;

-- Functions are executable by PUBLIC unless revoked: revoke everything (the internal ghost_terms and query_matches
-- included), then grant the API to the runtime role.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA agent FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA agent FROM PUBLIC;

DO $$
DECLARE
    r text := coalesce(nullif(current_setting('ghostmem.runtime_role', true), ''), 'ghostmem_runtime');
BEGIN
    PERFORM agent.install_runtime_role(r);
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'ghostmem: cannot create or join the runtime role % (%): ghost memories stay unavailable until '
                  'an administrator runs SELECT agent.install_runtime_role(%)', r, SQLERRM, quote_literal(r);
END
$$;
