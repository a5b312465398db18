-- The lexical leg's index keyed by owner (search.py, docs/search.md "Several owners: words keyed by owner").
--
-- messages_tsv held one posting list per word for every owner together, so a word fetch for one owner read
-- through every other owner's matches of that word (heap pages and all) before it had found its LIMIT of its own:
-- a 10,000-message owner beside a 1,000,000-message one read 57,000 heap blocks for five words. Here each of a
-- message's lexemes is prefixed with a key of its owner (16 hex digits of md5(owner) and ':'), so every owner has
-- posting lists of its own in one GIN index: an owner's fetch reads only its own entries, whatever else the
-- table holds, and a database of one owner reads exactly what it read before. The search still checks the owner
-- on every fetched row (two owners whose keys collide would only share posting lists).
-- COST: computing it for a row (its lexemes unnested, prefixed and gathered again) is far dearer than reading the
-- index, and the planner must never prefer checking it row by row (e.g. along a btree of the owner's rows).
CREATE FUNCTION ghostmem.owner_words(owner text, tsv tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE COST 10000
AS $$
    SELECT array_to_tsvector(ARRAY(
        SELECT left(md5(owner), 16) || ':' || l FROM unnest(tsvector_to_array(tsv)) AS l
    ))
$$;

-- A query lexeme as the owner's key of it (matched against ghostmem.owner_words).
CREATE FUNCTION ghostmem.owner_word_query(owner text, lexeme text) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT ghostmem.lexeme_query(left(md5(owner), 16) || ':' || lexeme)
$$;

CREATE INDEX messages_owner_words ON ghostmem.messages USING gin (ghostmem.owner_words(owner, tsv));
DROP INDEX ghostmem.messages_tsv;
