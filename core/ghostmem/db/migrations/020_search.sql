-- Search machinery: the lexical column filled by a trigger, its GIN index, the HNSW index, and the indexes of the
-- list operations and of the filters that run inside the scans.

-- CJK text has no spaces: index every character and every pair of neighbouring characters of each run of
-- Han / Kana / Hangul, so that "会話" is a lexeme of "会話をしました". A query asks for the pairs only (a run of
-- one character asks for that character), which keeps particles such as の or は from matching everything.
CREATE FUNCTION ghostmem.cjk_grams(body text, with_unigrams boolean) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT coalesce(array_agg(DISTINCT g), '{}')
    FROM regexp_matches(body, '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+', 'g') AS r(run),
         LATERAL (
             SELECT substr(r.run[1], i, 2) AS g
             FROM generate_series(1, greatest(char_length(r.run[1]) - 1, 1)) AS i
             UNION ALL
             SELECT substr(r.run[1], i, 1)
             FROM generate_series(1, char_length(r.run[1])) AS i
             WHERE with_unigrams
         ) grams
$$;

-- The lexemes of a text: English-stemmed words (so "running" finds "run") plus the CJK grams above. Stemming only
-- touches Latin words, so it cannot break the CJK leg. Very long texts are cut: a tsvector is limited to 1 MB.
CREATE FUNCTION ghostmem.lexemes(body text, for_query boolean DEFAULT false) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT to_tsvector('english'::regconfig, left(body, 200000))
        || array_to_tsvector(ghostmem.cjk_grams(left(body, 200000), NOT for_query))
$$;

-- A one-lexeme tsquery, quoted so that no character of the lexeme is read as tsquery syntax.
CREATE FUNCTION ghostmem.lexeme_query(lexeme text) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT ('''' || replace(replace(lexeme, '\', '\\'), '''', '\''') || '''')::tsquery
$$;

-- Only what a person said or was told is indexed for words, like embeddings: tool dumps would swamp the index.
CREATE FUNCTION ghostmem.messages_fill_tsv() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    NEW.tsv := CASE WHEN NEW.role IN ('user', 'assistant') THEN ghostmem.lexemes(NEW.text) END;
    RETURN NEW;
END
$$;

CREATE TRIGGER messages_fill_tsv
    BEFORE INSERT OR UPDATE OF text, role ON ghostmem.messages
    FOR EACH ROW EXECUTE FUNCTION ghostmem.messages_fill_tsv();

UPDATE ghostmem.messages SET tsv = ghostmem.lexemes(text) WHERE role IN ('user', 'assistant');

CREATE INDEX messages_tsv ON ghostmem.messages USING gin (tsv);
CREATE INDEX messages_embedding_hnsw ON ghostmem.messages USING hnsw (embedding vector_cosine_ops);
-- Owner-scoped filters of the lexical leg and the time window.
CREATE INDEX messages_owner_ts ON ghostmem.messages (owner, tier, ts);
-- Speaker names mentioned in a query are looked up here (they are metadata, never embedded).
CREATE INDEX messages_owner_speaker ON ghostmem.messages (owner, lower(speaker)) WHERE speaker IS NOT NULL;

-- List operations: newest activity first, and case-insensitive substrings of title or project.
CREATE INDEX conversations_owner_ended ON ghostmem.conversations (owner, tier, ended_at DESC NULLS LAST);
CREATE INDEX conversations_title_trgm ON ghostmem.conversations USING gin (title gin_trgm_ops);
CREATE INDEX conversations_project_trgm ON ghostmem.conversations USING gin (project gin_trgm_ops);
