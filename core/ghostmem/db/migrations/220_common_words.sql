-- The words each large owner holds in many messages, so that a search need not fetch them to learn it (search.py's
-- lexical leg, docs/search.md "Known-common words not fetched").
--
-- When fewer than DF_CAP (100) messages hold all of a query's words, the lexical leg fetches each word's first
-- DF_CAP matches: their count is the word's document frequency, capped. A common word's fetch decodes its whole
-- posting list in the owner's words index (migration 102) and reads DF_CAP rows only to learn "df = DF_CAP". Here
-- ghostmem.common_words lists, per (owner, tier), every lexeme held by at least `floor` of that owner's messages of
-- that tier (the caller passes search.DF_CAP), with its count: the search looks each query lexeme up by primary key
-- and does not fetch one listed with df >= DF_CAP in a searched tier (a word common in one tier is common in the
-- union of the tiers searched). A word not listed is fetched as before, so a list that is short of words (made
-- before they became common, or for an owner below the size) only costs what the search cost without it.
--
-- The count is the fetch's own: the messages of the owner and tier whose keyed words (ghostmem.owner_words, the
-- indexed expression) hold the lexeme. ts_stat counts the plain words (tsv), which are the keyed ones less two
-- cases owner_words leaves out: a lexeme too long for its key (left out here too), and, past 1 MB of keyed
-- lexemes, a message's last lexemes; a message of at most 508 lexemes (each at most 2,046 bytes) can never pass
-- 1 MB with its keys, so only longer messages are counted from owner_words itself (its key taken off again).
--
-- Kept by ghostmem.refresh_common_words(owner, floor), SECURITY DEFINER and the schema owner's alone (EXECUTE
-- revoked from PUBLIC); ghostmem calls it after each import or embedding (and reembed), as it builds the project
-- graphs. It lists an owner's tier holding at least `common_words_rows` messages, and lists it again once the tier
-- has grown (or shrunk) by `common_words_growth` (a share) since. It takes a SHARE lock on
-- ghostmem.messages while it counts, so no write of messages is in flight, and none can start, between its count and
-- its commit (a removal committed later finds the list made and takes its words out).
--
-- A word must never stay listed once fewer messages hold it (a search would then skip the fetch of a rare word and
-- lose its matches): a statement trigger on ghostmem.messages (DELETE, UPDATE, TRUNCATE), SECURITY DEFINER, takes out
-- every listed lexeme of a removed or changed row (a row whose owner, tier or words changed: the words its old row
-- held and its new one does not). A word taken out that is still common is fetched, as without a list, until the
-- tier is listed again. The trigger only ever deletes entries, so whoever writes messages can make the list
-- shorter, never longer.
--
-- The application's roles (ghostmem.grant_app) may read both tables and never write them.

INSERT INTO ghostmem.settings (key, value) VALUES ('common_words_rows', '10000'), ('common_words_growth', '0.1');

CREATE TABLE ghostmem.common_words (
    owner  text NOT NULL,
    lexeme text NOT NULL,
    tier   text NOT NULL,
    df     bigint NOT NULL,
    PRIMARY KEY (owner, lexeme, tier)
);

-- When each (owner, tier) was last listed: its messages then, and the floor it was listed with.
CREATE TABLE ghostmem.common_words_counted (
    owner  text NOT NULL,
    tier   text NOT NULL,
    rows   bigint NOT NULL,
    floor  bigint NOT NULL,
    PRIMARY KEY (owner, tier)
);

-- The default privileges of ghostmem.grant_app gave its roles writes on these tables as they were created: only
-- SELECT is kept.
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT DISTINCT c.relname, a.grantee::regrole::text AS grantee
             FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
             WHERE c.oid IN ('ghostmem.common_words'::regclass, 'ghostmem.common_words_counted'::regclass)
               AND a.grantee NOT IN (0, c.relowner) LOOP
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON ghostmem.%I FROM %s',
                       g.relname, g.grantee);
    END LOOP;
END
$$;

-- ghostmem.grant_app (062) grants an application every table of the schema; it is kept as grant_app_tables, and
-- grant_app now calls it and takes the writes of the two tables away, as 062 does those of ghostmem.settings.
ALTER FUNCTION ghostmem.grant_app(text, text, boolean) RENAME TO grant_app_tables;

CREATE FUNCTION ghostmem.grant_app(p_role text, p_runtime_role text, read_only boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, ghostmem, pg_temp
AS $$
BEGIN
    PERFORM ghostmem.grant_app_tables(p_role, p_runtime_role, read_only);
    EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON ghostmem.common_words, ghostmem.common_words_counted FROM %I',
                   p_role);
END
$$;

REVOKE ALL ON FUNCTION ghostmem.grant_app(text, text, boolean) FROM PUBLIC;

-- Lists the owner's tiers that are due (above); returns how many were listed.
CREATE FUNCTION ghostmem.refresh_common_words(p_owner text, p_floor bigint) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    least_rows pg_catalog.int8 := (
        SELECT s.value::pg_catalog.int8 FROM ghostmem.settings s WHERE s.key = 'common_words_rows');
    growth pg_catalog.numeric := (
        SELECT s.value::pg_catalog.numeric FROM ghostmem.settings s WHERE s.key = 'common_words_growth');
    key_bytes pg_catalog.int4 := pg_catalog.octet_length(ghostmem.owner_key(p_owner));
    r record;
    listed pg_catalog.int4 := 0;
BEGIN
    IF p_owner IS NULL OR p_floor IS NULL OR p_floor < 1 THEN
        RETURN 0;
    END IF;
    -- no write of messages in flight or starting until this commits (a removal then finds the list and trims it)
    LOCK TABLE ghostmem.messages IN SHARE MODE;
    FOR r IN
        SELECT t.tier, t.n, k.rows, k.floor
        FROM (SELECT c.tier, pg_catalog.sum(c.n)::pg_catalog.int8 AS n FROM ghostmem.message_counts c
              WHERE c.owner = p_owner GROUP BY c.tier) t
        LEFT JOIN ghostmem.common_words_counted k ON k.owner = p_owner AND k.tier = t.tier
        UNION ALL  -- tiers listed once and emptied since
        SELECT k.tier, 0, k.rows, k.floor FROM ghostmem.common_words_counted k
        WHERE k.owner = p_owner AND NOT EXISTS (
            SELECT 1 FROM ghostmem.message_counts c WHERE c.owner = p_owner AND c.tier = k.tier AND c.n > 0)
        ORDER BY 1
    LOOP
        IF r.n < least_rows THEN
            DELETE FROM ghostmem.common_words w WHERE w.owner = p_owner AND w.tier = r.tier;
            DELETE FROM ghostmem.common_words_counted k WHERE k.owner = p_owner AND k.tier = r.tier;
            CONTINUE;
        END IF;
        IF r.rows IS NOT NULL AND r.floor = p_floor AND pg_catalog.abs(r.n - r.rows) < r.rows * growth THEN
            CONTINUE;  -- listed, and grown (or shrunk) by less than the share since
        END IF;
        DELETE FROM ghostmem.common_words w WHERE w.owner = p_owner AND w.tier = r.tier;
        INSERT INTO ghostmem.common_words (owner, lexeme, tier, df)
        SELECT p_owner, s.word, r.tier, s.ndoc
        FROM pg_catalog.ts_stat(pg_catalog.format(
            'SELECT m.tsv FROM ghostmem.messages m WHERE m.owner = %1$L AND m.tier = %2$L AND m.tsv IS NOT NULL'
            '   AND pg_catalog.length(m.tsv) <= 508'
            ' UNION ALL'
            ' SELECT pg_catalog.array_to_tsvector(ARRAY('
            '     SELECT pg_catalog.substr(w, %3$s) FROM pg_catalog.unnest(pg_catalog.tsvector_to_array('
            '         ghostmem.owner_words(m.owner, m.tsv))) AS w))'
            ' FROM ghostmem.messages m WHERE m.owner = %1$L AND m.tier = %2$L AND m.tsv IS NOT NULL'
            '   AND pg_catalog.length(m.tsv) > 508',
            p_owner, r.tier, key_bytes + 1)) s
        WHERE s.ndoc >= p_floor AND pg_catalog.octet_length(s.word) + key_bytes <= 2046;
        INSERT INTO ghostmem.common_words_counted (owner, tier, rows, floor) VALUES (p_owner, r.tier, r.n, p_floor)
        ON CONFLICT (owner, tier) DO UPDATE SET rows = EXCLUDED.rows, floor = EXCLUDED.floor;
        listed := listed + 1;
    END LOOP;
    RETURN listed;
END
$$;

REVOKE ALL ON FUNCTION ghostmem.refresh_common_words(text, bigint) FROM PUBLIC;

-- A removed or changed message takes its listed lexemes out of the list (its old row's, those its new row does not
-- hold in the same owner and tier).
CREATE FUNCTION ghostmem.common_words_trim() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM ghostmem.common_words;
        DELETE FROM ghostmem.common_words_counted;
        RETURN NULL;
    END IF;
    -- the usual case (an owner without a list, an update of vectors): one look at the key of each owner
    IF NOT EXISTS (SELECT 1 FROM ghostmem.common_words_counted k
                   WHERE k.owner IN (SELECT o.owner FROM old_rows o)) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        DELETE FROM ghostmem.common_words w
        USING (SELECT DISTINCT o.owner, o.tier, l.lexeme
               FROM old_rows o CROSS JOIN LATERAL pg_catalog.unnest(pg_catalog.tsvector_to_array(o.tsv)) AS l(lexeme)
               WHERE o.owner IN (SELECT k.owner FROM ghostmem.common_words_counted k)) g
        WHERE w.owner = g.owner AND w.lexeme = g.lexeme AND w.tier = g.tier;
    ELSE
        -- the rows whose owner, tier or words changed first (an update of vectors changes none: nothing is unnested)
        WITH changed AS MATERIALIZED (
            SELECT o.owner, o.tier, o.tsv AS old_tsv,
                   CASE WHEN n.id IS NOT NULL AND n.tier = o.tier THEN n.tsv END AS new_tsv
            FROM old_rows o LEFT JOIN new_rows n ON n.id = o.id AND n.owner = o.owner
            WHERE (n.id IS NULL OR n.tier IS DISTINCT FROM o.tier OR n.tsv IS DISTINCT FROM o.tsv)
              AND o.owner IN (SELECT k.owner FROM ghostmem.common_words_counted k)
        )
        DELETE FROM ghostmem.common_words w
        USING (SELECT DISTINCT c.owner, c.tier, l.lexeme
               FROM changed c
               CROSS JOIN LATERAL pg_catalog.unnest(pg_catalog.tsvector_to_array(c.old_tsv)) AS l(lexeme)
               WHERE c.new_tsv IS NULL OR NOT c.new_tsv @@ ghostmem.lexeme_query(l.lexeme)) g
        WHERE w.owner = g.owner AND w.lexeme = g.lexeme AND w.tier = g.tier;
    END IF;
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION ghostmem.common_words_trim() FROM PUBLIC;

CREATE TRIGGER common_words_delete
    AFTER DELETE ON ghostmem.messages REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.common_words_trim();
CREATE TRIGGER common_words_update
    AFTER UPDATE ON ghostmem.messages REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.common_words_trim();
CREATE TRIGGER common_words_truncate
    AFTER TRUNCATE ON ghostmem.messages
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.common_words_trim();
