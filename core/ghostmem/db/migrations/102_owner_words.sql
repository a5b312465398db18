-- The lexical leg's index keyed by owner (search.py, docs/search.md "Several owners: words keyed by owner").
--
-- messages_tsv held one posting list per word for every owner together, so a word fetch for one owner read
-- through every other owner's matches of that word (heap pages and all) before it had found its LIMIT of its own:
-- a 10,000-message owner beside a 1,000,000-message one read 57,000 heap blocks for five words. Here each of a
-- message's lexemes is prefixed with a key of its owner (16 hex digits of md5(owner) and ':'), so every owner has
-- posting lists of its own in one GIN index: an owner's fetch reads only its own entries, whatever else the
-- table holds, and a database of one owner reads exactly what it read before. The search still checks the owner
-- on every fetched row (two owners whose keys collide would only share posting lists).
--
-- PostgreSQL refuses a lexeme over 2,046 bytes and a tsvector whose lexemes pass 1 MB, and the key makes every
-- lexeme 17 bytes longer: a word too long for its key (2,030 bytes or more: a long signed URL, a hex dump) is left
-- out of the owner's words (the vector leg still finds its message), and a message's keyed lexemes (some 50,000
-- distinct CJK pairs) are kept in the tsvector's bytewise order up to 1 MB, words in Latin letters first; without
-- that, such a message made the index expression fail and its whole conversation was refused (and this migration
-- failed on a store holding one). A message that fits (all but a few) takes one pass.
--
CREATE FUNCTION ghostmem.owner_key(owner text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT left(md5(owner), 16) || ':'
$$;

-- COST: computing it for a row (its lexemes unnested, prefixed and gathered again) is far dearer than reading the
-- index, and the planner must never prefer checking it row by row (e.g. along a btree of the owner's rows).
CREATE FUNCTION ghostmem.owner_words(owner text, tsv tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE COST 10000
AS $$
    SELECT array_to_tsvector(
        CASE WHEN coalesce(f.longest, 0) + octet_length(f.key) <= 2046
                  AND coalesce(f.total, 0) + f.n * octet_length(f.key) <= 1048575
             THEN coalesce(f.words, '{}')
             ELSE ARRAY(
                 SELECT w.word FROM (
                     SELECT f.key || l AS word,
                            sum(octet_length(f.key) + octet_length(l)) OVER (ORDER BY n) AS bytes
                       FROM unnest(tsvector_to_array(tsv)) WITH ORDINALITY AS u (l, n)
                      WHERE octet_length(f.key) + octet_length(l) <= 2046
                 ) w
                 WHERE w.bytes <= 1048575)
        END)
    FROM (SELECT max(k.key) AS key, array_agg(k.key || l) FILTER (WHERE l IS NOT NULL) AS words,
                 max(octet_length(l)) AS longest, sum(octet_length(l)) AS total, count(l) AS n
            FROM (SELECT ghostmem.owner_key(owner) AS key) k
            LEFT JOIN unnest(tsvector_to_array(tsv)) AS l ON true) f
$$;

-- A query lexeme as the owner's key of it (matched against ghostmem.owner_words); NULL (matches nothing) for one
-- too long to be among the owner's words.
CREATE FUNCTION ghostmem.owner_word_query(owner text, lexeme text) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT CASE WHEN octet_length(ghostmem.owner_key(owner)) + octet_length(lexeme) <= 2046
                THEN ghostmem.lexeme_query(ghostmem.owner_key(owner) || lexeme) END
$$;

CREATE INDEX messages_owner_words ON ghostmem.messages USING gin (ghostmem.owner_words(owner, tsv));
DROP INDEX ghostmem.messages_tsv;
