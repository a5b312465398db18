-- An index of a large owner's recent messages' words: a partial GIN index of ghostmem.owner_words(owner, tsv)
-- (migration 102) holding the owner's messages since the day of its graph of recent messages (migration 210),
-- `... WHERE (owner || '') = '<owner>' AND ts >= '<day>'` (the owner as the search compares it, search._OWNER_CHECK:
-- no btree index matches it, so the generic plan does not read the owner's btree range instead), for the lexical leg's conjunction fetch of a search filtered by a
-- time window that starts on or after that day (search.py, docs/search.md "An index of the recent messages' words").
--
-- The conjunction fetch reads the messages holding every query word, at most a hundred, and checks the filters on
-- the rows it fetched: at a million messages the bitmap of all the owner's matches is built whole (1,913 for one
-- query) for a hundred rows of which a 7-day window kept about 8; through this index the bitmap holds the recent
-- matches only and the window keeps about half of what is read.
--
-- Only for an owner of at least `recent_words_rows` (500,000) messages: at 100,000 the owner's conjunction fetch
-- costs little, and the fetch through this index made searches of the last 7 or 30 days 6% and 1% dearer (paired
-- A/B: its recent matches often fall short of the fetch's share, and the search then fetches word by word), against
-- 1.46 and 1.41 times cheaper at a million (docs/search.md).
--
-- Kept by ghostmem.build_recent_words(owner), which ghostmem calls after ghostmem.build_project_graphs (each import,
-- embedding and reembed, and bench.scale's load and reuse): the index exists while the owner's graph of recent
-- messages does, with the same day (its comment, the day as written in the graph's); a new day replaces it, no graph
-- drops it. New messages go into it as they come (gin_pending_list_limit 256 kB, as migration 116 asks of a GIN
-- index a search reads). Its name is ghostmem.recent_words_name(owner), a digest as the graphs' names are.

INSERT INTO ghostmem.settings (key, value) VALUES ('recent_words_rows', '500000');

CREATE FUNCTION ghostmem.recent_words_name(p_owner text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    -- the digest of the owner's recent graph's name (migration 155's of a project '')
    SELECT 'messages_recent_words_' || pg_catalog.substr(ghostmem.project_graph_name(p_owner, ''), 23)
$$;

-- The owner's index kept with its graph's day; returns 1 when it built one.
CREATE FUNCTION ghostmem.build_recent_words(p_owner text) RETURNS integer
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp LANGUAGE plpgsql
AS $$
DECLARE
    -- the owner's graph of its recent messages (migration 210) and its index of their words
    graph pg_catalog.regclass := pg_catalog.to_regclass(
        pg_catalog.quote_ident('ghostmem') || '.' || pg_catalog.quote_ident(ghostmem.project_graph_name(p_owner, '')));
    name pg_catalog.text := ghostmem.recent_words_name(p_owner);
    words pg_catalog.regclass;
    since pg_catalog.text;
    threshold pg_catalog.int8 := (
        SELECT s.value::pg_catalog.int8 FROM ghostmem.settings s WHERE s.key = 'recent_words_rows');
BEGIN
    -- one builder at a time (two would race to create the same name)
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('ghostmem.build_recent_words'));
    words := pg_catalog.to_regclass(pg_catalog.quote_ident('ghostmem') || '.' || pg_catalog.quote_ident(name));
    IF graph IS NOT NULL AND (SELECT COALESCE(pg_catalog.sum(c.n), 0) FROM ghostmem.message_counts c
                              WHERE c.owner = p_owner) >= threshold THEN
        since := pg_catalog.obj_description(graph, 'pg_class');
    END IF;
    IF words IS NOT NULL THEN
        IF since IS NOT NULL AND pg_catalog.obj_description(words, 'pg_class') IS NOT DISTINCT FROM since THEN
            RETURN 0;  -- kept: the graph's day
        END IF;
        EXECUTE pg_catalog.format('DROP INDEX ghostmem.%I', name);
    END IF;
    IF since IS NULL THEN
        RETURN 0;
    END IF;
    EXECUTE pg_catalog.format(
        'CREATE INDEX %I ON ghostmem.messages USING gin (ghostmem.owner_words(owner, tsv))'
        ' WITH (gin_pending_list_limit = 256) WHERE (owner || '''') = %L AND ts >= %L::pg_catalog.timestamptz',
        name, p_owner, since);
    EXECUTE pg_catalog.format('COMMENT ON INDEX ghostmem.%I IS %L', name, since);
    RETURN 1;
END
$$;

REVOKE ALL ON FUNCTION ghostmem.build_recent_words(text) FROM PUBLIC;

SELECT ghostmem.build_recent_words(o.owner) FROM (SELECT DISTINCT c.owner FROM ghostmem.message_counts c) o;
