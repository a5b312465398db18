-- How many messages each owner keeps, kept up to date by statement triggers on ghostmem.messages, so that a search
-- learns its store's size and how narrow its filters are from a few small rows (search.py):
--   message_counts: per owner, tier, platform and project (a few dozen rows per owner): the store size of the
--     lexical leg's idf (counted before on every search that fetched word by word: up to 20,000 index rows, 0.5-1 ms
--     at a million messages), and the share of an owner's messages a platform or project filter keeps;
--   message_days: per owner, tier and day (UTC; messages without a time are not counted): the share a time window
--     keeps.
CREATE TABLE ghostmem.message_counts (
    owner text NOT NULL,
    tier text NOT NULL,
    platform text NOT NULL,
    project text NOT NULL,  -- '' for none
    n bigint NOT NULL,
    PRIMARY KEY (owner, tier, platform, project)
);

CREATE TABLE ghostmem.message_days (
    owner text NOT NULL,
    tier text NOT NULL,
    day date NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (owner, tier, day)
);

-- Adds counts (negative to remove): one upsert per table, groups in key order, so two writers lock the counters in
-- the same order (no deadlock); groups that add up to nothing write nothing. Not SECURITY DEFINER: whoever may
-- write messages may write these counters (application roles get both from `ghostmem.grant_app`).
CREATE FUNCTION ghostmem.message_counts_add(
    owners text[], tiers text[], platforms text[], projects text[], days date[], ns bigint[]
) RETURNS void
LANGUAGE sql
AS $$
    INSERT INTO ghostmem.message_counts AS c (owner, tier, platform, project, n)
    SELECT d.owner, d.tier, d.platform, d.project, sum(d.n)
    FROM unnest(owners, tiers, platforms, projects, ns) AS d(owner, tier, platform, project, n)
    GROUP BY d.owner, d.tier, d.platform, d.project HAVING sum(d.n) <> 0
    ORDER BY d.owner, d.tier, d.platform, d.project
    ON CONFLICT (owner, tier, platform, project) DO UPDATE SET n = c.n + EXCLUDED.n;

    INSERT INTO ghostmem.message_days AS c (owner, tier, day, n)
    SELECT d.owner, d.tier, d.day, sum(d.n)
    FROM unnest(owners, tiers, days, ns) AS d(owner, tier, day, n)
    WHERE d.day IS NOT NULL
    GROUP BY d.owner, d.tier, d.day HAVING sum(d.n) <> 0
    ORDER BY d.owner, d.tier, d.day
    ON CONFLICT (owner, tier, day) DO UPDATE SET n = c.n + EXCLUDED.n;
$$;

-- The statement's rows, grouped: +1 for an inserted row, -1 for a deleted one; an update counts -1 and +1 only for
-- the rows whose platform, project or day changed (the embedding step updates messages by the thousand and
-- changes none of them).
CREATE FUNCTION ghostmem.message_counts_track() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM ghostmem.message_counts_add(
            array_agg(g.owner), array_agg(g.tier), array_agg(g.platform), array_agg(g.project), array_agg(g.day),
            array_agg(g.n))
        FROM (SELECT r.owner, r.tier, r.platform, coalesce(r.project, '') AS project,
                     (r.ts AT TIME ZONE 'UTC')::date AS day, count(*) AS n
              FROM new_rows r GROUP BY 1, 2, 3, 4, 5) g;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM ghostmem.message_counts_add(
            array_agg(g.owner), array_agg(g.tier), array_agg(g.platform), array_agg(g.project), array_agg(g.day),
            array_agg(g.n))
        FROM (SELECT r.owner, r.tier, r.platform, coalesce(r.project, '') AS project,
                     (r.ts AT TIME ZONE 'UTC')::date AS day, -count(*) AS n
              FROM old_rows r GROUP BY 1, 2, 3, 4, 5) g;
    ELSE
        PERFORM ghostmem.message_counts_add(
            array_agg(g.owner), array_agg(g.tier), array_agg(g.platform), array_agg(g.project), array_agg(g.day),
            array_agg(g.n))
        FROM (SELECT r.owner, r.tier, r.platform, coalesce(r.project, '') AS project,
                     (r.ts AT TIME ZONE 'UTC')::date AS day, sum(r.n) AS n
              FROM (SELECT o.owner, o.tier, o.platform, o.project, o.ts, -1 AS n
                    FROM old_rows o JOIN new_rows w ON w.id = o.id
                    WHERE (o.owner, o.tier, o.platform, o.project, (o.ts AT TIME ZONE 'UTC')::date)
                          IS DISTINCT FROM (w.owner, w.tier, w.platform, w.project, (w.ts AT TIME ZONE 'UTC')::date)
                    UNION ALL
                    SELECT w.owner, w.tier, w.platform, w.project, w.ts, 1
                    FROM old_rows o JOIN new_rows w ON w.id = o.id
                    WHERE (o.owner, o.tier, o.platform, o.project, (o.ts AT TIME ZONE 'UTC')::date)
                          IS DISTINCT FROM (w.owner, w.tier, w.platform, w.project, (w.ts AT TIME ZONE 'UTC')::date)
                   ) r
              GROUP BY 1, 2, 3, 4, 5) g;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION ghostmem.message_counts_clear() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    DELETE FROM ghostmem.message_counts;
    DELETE FROM ghostmem.message_days;
    RETURN NULL;
END
$$;

CREATE TRIGGER message_counts_insert
    AFTER INSERT ON ghostmem.messages REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_counts_track();
CREATE TRIGGER message_counts_update
    AFTER UPDATE ON ghostmem.messages REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_counts_track();
CREATE TRIGGER message_counts_delete
    AFTER DELETE ON ghostmem.messages REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_counts_track();
CREATE TRIGGER message_counts_truncate
    AFTER TRUNCATE ON ghostmem.messages
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_counts_clear();

INSERT INTO ghostmem.message_counts (owner, tier, platform, project, n)
SELECT owner, tier, platform, coalesce(project, ''), count(*) FROM ghostmem.messages GROUP BY 1, 2, 3, 4;
INSERT INTO ghostmem.message_days (owner, tier, day, n)
SELECT owner, tier, (ts AT TIME ZONE 'UTC')::date, count(*) FROM ghostmem.messages WHERE ts IS NOT NULL
GROUP BY 1, 2, 3;
