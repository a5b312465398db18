-- The update triggers of the tables kept from ghostmem.messages (092's counts, 101's compact vectors, 107's word
-- counts) pair each old row with its new row by id and owner, the messages' key, instead of by id alone.
--
-- Since migration 100 the key of ghostmem.messages is (id, owner): the identity column hands out unique ids, but
-- nothing requires two owners' ids to differ (rows written with explicit ids, as a restore or a merge of two stores
-- does; a sharded server's identity ranges). Paired by id alone, one UPDATE touching two owners' messages of the
-- same id matched each old row with both new rows: 107's and 101's upserts then proposed the same row twice and the
-- statement failed ("ON CONFLICT DO UPDATE command cannot affect row a second time": a `ghostmem reembed`, a
-- migration's backfill or any update of those rows could not run), and 092's counts moved by the cross pairs. A
-- message moved to another owner (same id, new owner) pairs with nothing now: its old row counts as deleted and
-- its new row as inserted, as before.
CREATE OR REPLACE FUNCTION ghostmem.message_counts_track() RETURNS trigger
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
                    FROM old_rows o LEFT JOIN new_rows w ON w.id = o.id AND w.owner = o.owner
                    WHERE w.id IS NULL
                       OR (o.tier, o.platform, o.project, (o.ts AT TIME ZONE 'UTC')::date)
                          IS DISTINCT FROM (w.tier, w.platform, w.project, (w.ts AT TIME ZONE 'UTC')::date)
                    UNION ALL
                    SELECT w.owner, w.tier, w.platform, w.project, w.ts, 1
                    FROM new_rows w LEFT JOIN old_rows o ON o.id = w.id AND o.owner = w.owner
                    WHERE o.id IS NULL
                       OR (o.tier, o.platform, o.project, (o.ts AT TIME ZONE 'UTC')::date)
                          IS DISTINCT FROM (w.tier, w.platform, w.project, (w.ts AT TIME ZONE 'UTC')::date)
                   ) r
              GROUP BY 1, 2, 3, 4, 5) g;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION ghostmem.message_vectors_track() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ghostmem.message_vectors (owner, id, tier, conv_id, ts, platform, project, embedding)
        SELECT n.owner, n.id, n.tier, n.conv_id, n.ts, n.platform, n.project, n.embedding::halfvec
        FROM new_rows n WHERE n.embedding IS NOT NULL
        ORDER BY n.owner, n.id;
    ELSIF TG_OP = 'DELETE' THEN
        DELETE FROM ghostmem.message_vectors v USING old_rows o WHERE v.owner = o.owner AND v.id = o.id;
    ELSE
        -- Only rows whose vector or what the filters read changed (tsv refills and the like change none); a row
        -- without its new row (moved to another owner) or whose vector is gone leaves.
        DELETE FROM ghostmem.message_vectors v
        USING old_rows o LEFT JOIN new_rows n ON n.id = o.id AND n.owner = o.owner
        WHERE v.owner = o.owner AND v.id = o.id AND o.embedding IS NOT NULL AND n.embedding IS NULL;
        INSERT INTO ghostmem.message_vectors (owner, id, tier, conv_id, ts, platform, project, embedding)
        SELECT n.owner, n.id, n.tier, n.conv_id, n.ts, n.platform, n.project, n.embedding::halfvec
        FROM new_rows n LEFT JOIN old_rows o ON o.id = n.id AND o.owner = n.owner
        WHERE n.embedding IS NOT NULL
          AND (o.id IS NULL
               OR (o.tier, o.conv_id, o.ts, o.platform, o.project)
                   IS DISTINCT FROM (n.tier, n.conv_id, n.ts, n.platform, n.project)
               OR o.embedding IS DISTINCT FROM n.embedding)
        ORDER BY n.owner, n.id
        ON CONFLICT (owner, id) DO UPDATE
            SET tier = EXCLUDED.tier, conv_id = EXCLUDED.conv_id, ts = EXCLUDED.ts, platform = EXCLUDED.platform,
                project = EXCLUDED.project, embedding = EXCLUDED.embedding;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION ghostmem.message_lengths_track() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ghostmem.message_lengths (owner, id, tier, conv_id, seq, lexemes, ts, platform, project)
        SELECT n.owner, n.id, n.tier, n.conv_id, n.seq, length(n.tsv), n.ts, n.platform, n.project
        FROM new_rows n WHERE n.tsv IS NOT NULL
        ORDER BY n.owner, n.id;
    ELSIF TG_OP = 'DELETE' THEN
        DELETE FROM ghostmem.message_lengths l USING old_rows o WHERE l.owner = o.owner AND l.id = o.id;
    ELSE
        -- Only rows whose words, place or what the filters read changed (a new vector changes none); a row without
        -- its new row (moved to another owner) or whose words are gone leaves.
        DELETE FROM ghostmem.message_lengths l
        USING old_rows o LEFT JOIN new_rows n ON n.id = o.id AND n.owner = o.owner
        WHERE l.owner = o.owner AND l.id = o.id AND o.tsv IS NOT NULL AND n.tsv IS NULL;
        INSERT INTO ghostmem.message_lengths (owner, id, tier, conv_id, seq, lexemes, ts, platform, project)
        SELECT n.owner, n.id, n.tier, n.conv_id, n.seq, length(n.tsv), n.ts, n.platform, n.project
        FROM new_rows n LEFT JOIN old_rows o ON o.id = n.id AND o.owner = n.owner
        WHERE n.tsv IS NOT NULL
          AND (o.id IS NULL
               OR (o.tier, o.conv_id, o.seq, o.ts, o.platform, o.project)
                   IS DISTINCT FROM (n.tier, n.conv_id, n.seq, n.ts, n.platform, n.project)
               OR o.tsv IS NULL OR length(o.tsv) <> length(n.tsv))
        ORDER BY n.owner, n.id
        ON CONFLICT (id, owner) DO UPDATE
            SET tier = EXCLUDED.tier, conv_id = EXCLUDED.conv_id, seq = EXCLUDED.seq, lexemes = EXCLUDED.lexemes,
                ts = EXCLUDED.ts, platform = EXCLUDED.platform, project = EXCLUDED.project;
    END IF;
    RETURN NULL;
END
$$;
