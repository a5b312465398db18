-- Identifiers and file names are also indexed by their parts. The English parser keeps `fibonacci.py`,
-- `src/parseConfig.ts` or `home_budget_calculator.py` as one host/file token and `parseConfig` as one word, so a
-- search for `fibonacci` or `parse config` missed them. Every ASCII run that joins letters or digits with . / \ : -
-- or _, or that changes case inside (camelCase, HTTPServer), now adds its parts, stemmed like any word:
-- `fibonacci.py` -> fibonacci, py; `parseConfig` -> pars, config; `HTTPServer` -> http, server. The whole token
-- stays a lexeme too, so an exact search for it still matches.
CREATE FUNCTION ghostmem.identifier_parts(body text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT to_tsvector('english'::regconfig, coalesce(string_agg(
        regexp_replace(
            regexp_replace(regexp_replace(t.tok[1], '([a-z0-9])([A-Z])', '\1 \2', 'g'),
                           '([A-Z])([A-Z][a-z])', '\1 \2', 'g'),
            '[^A-Za-z0-9]+', ' ', 'g'),
        ' '), ''))
    FROM regexp_matches(body, '[A-Za-z0-9._/\\:-]+', 'g') AS t(tok)
    WHERE t.tok[1] ~ '[A-Za-z0-9][._/\\:-]+[A-Za-z0-9]|[a-z][A-Z]|[A-Z][A-Z][a-z]'
$$;

CREATE OR REPLACE FUNCTION ghostmem.lexemes(body text, for_query boolean DEFAULT false) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT to_tsvector('english'::regconfig, left(body, 200000))
        || ghostmem.identifier_parts(left(body, 200000))
        || array_to_tsvector(ghostmem.cjk_grams(left(body, 200000), NOT for_query))
$$;

-- Only the rows that hold such a token change.
UPDATE ghostmem.messages SET tsv = ghostmem.lexemes(text)
WHERE role IN ('user', 'assistant') AND text ~ '[A-Za-z0-9][._/\\:-]+[A-Za-z0-9]|[a-z][A-Z]|[A-Z][A-Z][a-z]';
UPDATE agent.ghost_memories SET tsv = ghostmem.lexemes(content)
WHERE content ~ '[A-Za-z0-9][._/\\:-]+[A-Za-z0-9]|[a-z][A-Z]|[A-Z][A-Z][a-z]';
