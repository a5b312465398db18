-- What the GIN indexes a search reads have queued is merged at the end of each import, embedding and reembed
-- (maintenance.build_project_graphs), not only by vacuum or autoanalyze: ghostmem.merge_pending_lists() merges the
-- pending list of every GIN index of ghostmem.messages and ghostmem.conversations (the words' index of migration 102
-- and the recent messages' of 240, the trigram indexes of titles and projects), so a store searched after an import
-- scans no queued entries. Migration 116 bounds each list to 256 kB (32 pages) and every scan of the index reads the
-- whole list: at a million messages the bench's store held 27 pages in the words' index, 19 and 6 in the trigram
-- indexes (a merge of 102's list took the conjunction fetch of a project search 0.15-0.35 ms less, and the title
-- search 0.07: docs/search.md, "A short pending list"). Writes between imports (live captures) queue as before.
--
-- The schema owner's function (a merge needs the index's owner): an application's login skips it, as it skips the
-- graphs' builds. What is queued now is merged here (a few milliseconds: at most 32 pages an index).
CREATE FUNCTION ghostmem.merge_pending_lists() RETURNS bigint
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp LANGUAGE sql
AS $$
    -- the pages merged, over every GIN index of the two tables
    SELECT COALESCE(pg_catalog.sum(pg_catalog.gin_clean_pending_list(i.indexrelid::pg_catalog.regclass)), 0)::pg_catalog.int8
    FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
    JOIN pg_catalog.pg_am a ON a.oid = c.relam
    WHERE a.amname = 'gin' AND i.indisvalid
      AND i.indrelid IN ('ghostmem.messages'::pg_catalog.regclass, 'ghostmem.conversations'::pg_catalog.regclass)
$$;

REVOKE ALL ON FUNCTION ghostmem.merge_pending_lists() FROM PUBLIC;

SELECT ghostmem.merge_pending_lists();
