-- ghostmem.lexemes asks for identifier parts and CJK grams only of a text that can have them (docs/search.md, the
-- schema's `ghostmem.lexemes`; "The window ranking from narrow rows", *Session 27*).
--
-- identifier_parts (090) and cjk_grams (106) are SQL functions that read a FROM (regexp_matches), so PostgreSQL runs
-- each through its SQL-function executor on every call, whatever the text: for a search's query about 0.1 ms of
-- the statement (pgbench, a query of ten English words: 0.17 against 0.05 ms for its to_tsvector alone). A text
-- without a character of an identifier's pattern (090's `[A-Za-z0-9][._/\\:-]+[A-Za-z0-9]|[a-z][A-Z]|
-- [A-Z][A-Z][a-z]`, which every token identifier_parts keeps must match) has no identifier parts, and one without a
-- Han, Kana or Hangul character (cjk_grams' class) has no grams: for them the function now adds an empty tsvector,
-- which changes nothing of the result, instead of calling the two. The result is the same for every text.
--
-- The function is no longer STRICT: PostgreSQL inlines a strict SQL function only if its body is strict, and a CASE
-- is not; a NULL text or a NULL for_query still gives NULL, as the strict function did.
CREATE OR REPLACE FUNCTION ghostmem.lexemes(body text, for_query boolean DEFAULT false) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN body IS NOT NULL AND for_query IS NOT NULL THEN
        to_tsvector('english'::regconfig, left(body, 200000))
        || CASE WHEN left(body, 200000) ~ '[A-Za-z0-9][._/\\:-]+[A-Za-z0-9]|[a-z][A-Z]|[A-Z][A-Z][a-z]'
                THEN ghostmem.identifier_parts(left(body, 200000)) ELSE ''::tsvector END
        || CASE WHEN left(body, 200000) ~ '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]'
                THEN array_to_tsvector(ghostmem.cjk_grams(left(body, 200000), NOT for_query)) ELSE ''::tsvector END
    END
$$;
