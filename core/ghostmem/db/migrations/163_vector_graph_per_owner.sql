-- A vector graph per owner: the compact vectors of migration 101 partitioned by owner (LIST, one partition each),
-- each partition with an HNSW index of its own, which the vector leg walks instead of the one graph every owner's
-- messages shared (search.py, docs/search.md "A graph per owner").
--
-- In a shared graph a small owner beside a large one is a few nodes among many: an HNSW walk for its nearest
-- messages passes over the others' (about vec_depth × all / its own rows), so search.vector_scan read its whole
-- scope quantized instead (a 10,000-message owner beside a million: ~5 ms, against ~1.5 ms for the walk of a graph of
-- its own in a database of its own). Here every owner's graph holds only its own vectors, so its walk costs what it
-- would cost alone, whoever else the database holds. The search names the owner as a constant, so the planner keeps
-- only that owner's partition in the plan (a parameter would keep them all in a generic plan, which then sorts the
-- owner's rows rather than merge a walk of every partition). The graphs are over the halfvec copies (as fast to
-- walk as the vector-typed index of messages, half the size); the shared index of messages is dropped.
--
-- A partition is named by a digest of its owner (message_vectors_ and 40 hex digits of sha256 of the owner's UTF-8
-- bytes), never by the owner itself, and is created by ghostmem.message_vectors_partition (SECURITY DEFINER: whoever
-- writes messages may not run DDL) from a trigger on messages that fires, as PostgreSQL fires triggers of one event
-- in the order of their names, before the ones of 101 that copy the vectors (message_vectors_attach_* sorts before
-- message_vectors_insert and _update). A partition is created as a table and then attached, which takes SHARE
-- UPDATE EXCLUSIVE on message_vectors (searches and writes of other owners go on; two creators take turns). An
-- owner whose messages are all deleted keeps its empty partition.
--
-- The vectors are copied into the new table in the order they were written (by id), not in migration 103's
-- (owner, tier, project, ts) order, and each graph is built by one process: an HNSW graph is built in the order of
-- its table's rows, and at a million messages a graph built from rows grouped by project (or by time) found fewer
-- of the nearest rows (0.85 and 0.89 of the exact 100, against 0.94 for the graph of messages, built in the order
-- of writing; a build by two processes 0.85 where one made 0.89). Rows written later are appended in the order they
-- come, as before. The indexes are built after the copy, and 110's triggers set on the new table again. The
-- migration runs in one transaction: an upgrade killed here leaves nothing of it.
--
-- Every owner's partition is made in this one transaction, and each holds about 15 locks (its table, TOAST table
-- and indexes) until it commits: a store of more owners than the server's lock table holds would fail part way
-- ("out of shared memory", after minutes, rolled back), so it is refused first, in one sentence.
DO $$
DECLARE
    owners bigint := (SELECT count(DISTINCT v.owner) FROM ghostmem.message_vectors v);
    backends bigint := pg_catalog.current_setting('max_connections')::bigint
        + pg_catalog.current_setting('max_prepared_transactions')::bigint;
BEGIN
    IF owners * 15 > pg_catalog.current_setting('max_locks_per_transaction')::bigint * backends THEN
        RAISE EXCEPTION 'the vector graph of each of this store''s % owners is made in one transaction, which needs '
            'max_locks_per_transaction of at least % on this server (it is %): raise it, restart the server and '
            'upgrade again', owners, pg_catalog.ceil(owners * 15.0 / backends),
            pg_catalog.current_setting('max_locks_per_transaction')
            USING ERRCODE = 'configuration_limit_exceeded';
    END IF;
END
$$;

ALTER TABLE ghostmem.message_vectors RENAME TO message_vectors_shared;

CREATE TABLE ghostmem.message_vectors (
    LIKE ghostmem.message_vectors_shared INCLUDING DEFAULTS INCLUDING STORAGE
) PARTITION BY LIST (owner);

-- The application roles granted the table (ghostmem.grant_app) are granted the new one.
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT a.grantee::regrole::text AS grantee, a.privilege_type
             FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
             WHERE c.oid = 'ghostmem.message_vectors_shared'::regclass AND a.grantee NOT IN (0, c.relowner) LOOP
        EXECUTE format('GRANT %s ON ghostmem.message_vectors TO %s', g.privilege_type, g.grantee);
    END LOOP;
END
$$;

-- The owner's partition, created and attached if it does not exist yet; returns it.
CREATE FUNCTION ghostmem.message_vectors_partition(p_owner text) RETURNS regclass
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    part text := 'message_vectors_'
        || pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(p_owner, 'UTF8')), 'hex'), 40);
    found regclass;
BEGIN
    found := pg_catalog.to_regclass(pg_catalog.format('ghostmem.%I', part));
    IF found IS NULL THEN
        -- Creators take turns: the lock makes this session read the catalog again, so a second creator of the same
        -- owner finds the first's partition once that commits.
        LOCK TABLE ghostmem.message_vectors IN SHARE UPDATE EXCLUSIVE MODE;
        found := pg_catalog.to_regclass(pg_catalog.format('ghostmem.%I', part));
    END IF;
    IF found IS NULL THEN
        EXECUTE pg_catalog.format(
            'CREATE TABLE ghostmem.%I (LIKE ghostmem.message_vectors INCLUDING DEFAULTS INCLUDING STORAGE)', part);
        EXECUTE pg_catalog.format(
            'ALTER TABLE ghostmem.message_vectors ATTACH PARTITION ghostmem.%I FOR VALUES IN (%L)', part, p_owner);
        found := pg_catalog.to_regclass(pg_catalog.format('ghostmem.%I', part));
    ELSIF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i
                      WHERE i.inhrelid = found AND i.inhparent = 'ghostmem.message_vectors'::pg_catalog.regclass) THEN
        RAISE EXCEPTION 'the vector partition % of owner % is not a partition of ghostmem.message_vectors',
            found, pg_catalog.quote_literal(p_owner) USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN found;
END
$$;
REVOKE ALL ON FUNCTION ghostmem.message_vectors_partition(text) FROM PUBLIC;

-- The partitions of the owners a write to messages gives vectors (a trigger: no role is granted EXECUTE).
CREATE FUNCTION ghostmem.message_vectors_attach() RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM ghostmem.message_vectors_partition(n.owner)
    FROM (SELECT DISTINCT r.owner FROM new_rows r WHERE r.embedding IS NOT NULL) n;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION ghostmem.message_vectors_attach() FROM PUBLIC;

CREATE TRIGGER message_vectors_attach_insert
    AFTER INSERT ON ghostmem.messages REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_vectors_attach();
CREATE TRIGGER message_vectors_attach_update
    AFTER UPDATE ON ghostmem.messages REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_vectors_attach();

-- 128's copy of the vectors, its deletes made one owner at a time: `v.owner = who` plans and locks that owner's
-- partition alone (a join on the owner would plan and lock every owner's partition on every write).
CREATE OR REPLACE FUNCTION ghostmem.message_vectors_track() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    who text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ghostmem.message_vectors (owner, id, tier, conv_id, ts, platform, project, embedding)
        SELECT n.owner, n.id, n.tier, n.conv_id, n.ts, n.platform, n.project, n.embedding::halfvec
        FROM new_rows n WHERE n.embedding IS NOT NULL
        ORDER BY n.owner, n.id;
    ELSIF TG_OP = 'DELETE' THEN
        FOR who IN SELECT DISTINCT o.owner FROM old_rows o WHERE o.embedding IS NOT NULL LOOP
            DELETE FROM ghostmem.message_vectors v
            WHERE v.owner = who AND v.id IN (SELECT o.id FROM old_rows o WHERE o.owner = who);
        END LOOP;
    ELSE
        -- Only rows whose vector or what the filters read changed (tsv refills and the like change none); a row
        -- without its new row (moved to another owner) or whose vector is gone leaves.
        FOR who IN SELECT DISTINCT o.owner FROM old_rows o LEFT JOIN new_rows n ON n.id = o.id AND n.owner = o.owner
                   WHERE o.embedding IS NOT NULL AND n.embedding IS NULL LOOP
            DELETE FROM ghostmem.message_vectors v
            WHERE v.owner = who AND v.id IN (
                SELECT o.id FROM old_rows o LEFT JOIN new_rows n ON n.id = o.id AND n.owner = o.owner
                WHERE o.owner = who AND o.embedding IS NOT NULL AND n.embedding IS NULL);
        END LOOP;
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

SELECT ghostmem.message_vectors_partition(o.owner)
FROM (SELECT DISTINCT owner FROM ghostmem.message_vectors_shared) o;

INSERT INTO ghostmem.message_vectors (owner, id, tier, conv_id, ts, platform, project, embedding)
SELECT owner, id, tier, conv_id, ts, platform, project, embedding
FROM ghostmem.message_vectors_shared
ORDER BY owner, id;

DROP TABLE ghostmem.message_vectors_shared;  -- and 110's triggers on it

ALTER TABLE ghostmem.message_vectors ADD PRIMARY KEY (owner, id);
CREATE INDEX message_vectors_owner_ts ON ghostmem.message_vectors (owner, tier, ts);
CREATE INDEX message_vectors_owner_project_ts ON ghostmem.message_vectors (owner, tier, project, ts);
CREATE INDEX message_vectors_owner_conv ON ghostmem.message_vectors (owner, tier, conv_id);
CREATE INDEX message_vectors_owner_platform_ts ON ghostmem.message_vectors (owner, tier, platform, ts);
SET LOCAL max_parallel_maintenance_workers = 0;  -- each graph built by one process (see above)
CREATE INDEX message_vectors_embedding_hnsw ON ghostmem.message_vectors USING hnsw (embedding halfvec_cosine_ops);

CREATE TRIGGER message_bits_insert
    AFTER INSERT ON ghostmem.message_vectors REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_bits_track();
CREATE TRIGGER message_bits_update
    AFTER UPDATE ON ghostmem.message_vectors REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_bits_track();
CREATE TRIGGER message_bits_delete
    AFTER DELETE ON ghostmem.message_vectors REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_bits_track();
CREATE TRIGGER message_bits_truncate
    AFTER TRUNCATE ON ghostmem.message_vectors
    FOR EACH STATEMENT EXECUTE FUNCTION ghostmem.message_bits_clear();

DROP INDEX ghostmem.messages_embedding_hnsw;

-- The graphs of the large projects (migration 155) went with the old table: each is built again, on the owner's
-- partition (ghostmem.build_project_graphs makes it on the table that holds the owner's rows).
-- (The owners are read from the counts: a statement still reading a partition may not index it.)
SELECT ghostmem.build_project_graphs(o.owner) FROM (SELECT DISTINCT c.owner FROM ghostmem.message_counts c) o;

-- The partitions' statistics, so that the first searches are planned from them.
ANALYZE ghostmem.message_vectors;
