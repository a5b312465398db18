-- The CJK grams of 020 in linear time. 020 cut each run with substr(run, i, 2) for every position i; substr on a
-- multibyte text walks from the start, so a run of n characters cost n² steps: 20,000 characters without
-- punctuation took 5.6 s, and the 200,000 a message may hold would take minutes inside one import. Here the run is
-- split into its characters once and each is paired with the next. The grams are the same set (a test compares
-- them with an independent cut), so every stored tsv stays valid and nothing is re-indexed.
CREATE OR REPLACE FUNCTION ghostmem.cjk_grams(body text, with_unigrams boolean) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT coalesce(array_agg(DISTINCT g), '{}')
    FROM regexp_matches(body, '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+', 'g') AS r(run),
         LATERAL (
             SELECT c.ch, lead(c.ch) OVER (ORDER BY c.i) AS nx, count(*) OVER () AS n
             FROM unnest(string_to_array(r.run[1], NULL)) WITH ORDINALITY AS c(ch, i)
         ) chars,
         LATERAL (
             SELECT chars.ch || chars.nx AS g WHERE chars.nx IS NOT NULL
             UNION ALL
             SELECT chars.ch WHERE chars.n = 1 OR with_unigrams
         ) grams
$$;
