-- One bit a dimension of every compact vector (migration 101), in a narrow table of its own, for the vector leg's
-- quantized scan of a scope too large to read whole at half precision (search.py, docs/search.md "Scopes between:
-- a quantized scan").
--
-- An exact scan of `message_vectors` computes a 384-dimension distance for each of its rows (about 0.5 µs) and
-- reads about nine rows a page. Here each row holds `binary_quantize(embedding)` (the sign of each dimension: 48
-- bytes for 384) with what the filters read, about forty rows a page, and the Hamming distance (`<~>`) costs a
-- tenth of a cosine. The search ranks its scope by it, keeps the nearest few hundred and ranks those again by the
-- halfvec distance of their compact vectors, so what it returns is ordered by the vector distance as before.
--
-- Kept from `message_vectors` by statement triggers with transition tables (as that table is kept from messages):
-- every row there has its row here, with the same owner, id and filtered columns; a copy updated there is replaced
-- here, a deleted or truncated one removed. `ghostmem reembed` empties `message_vectors` and so this table; the
-- column is `bit varying`, so a model of another dimension needs no retyping. Not SECURITY DEFINER: whoever may
-- write messages may write this table (application roles get it from `ghostmem.grant_app`).
CREATE TABLE ghostmem.message_bits (
    owner    text        NOT NULL,
    id       bigint      NOT NULL,  -- ghostmem.messages.id
    tier     text        NOT NULL,
    conv_id  text        NOT NULL,
    ts       timestamptz,
    platform text        NOT NULL,
    project  text,
    bits     bit varying NOT NULL,
    PRIMARY KEY (owner, id)
);

CREATE FUNCTION ghostmem.message_bits_track() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM ghostmem.message_bits b USING old_rows o WHERE b.owner = o.owner AND b.id = o.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO ghostmem.message_bits (owner, id, tier, conv_id, ts, platform, project, bits)
        SELECT n.owner, n.id, n.tier, n.conv_id, n.ts, n.platform, n.project, binary_quantize(n.embedding)
        FROM new_rows n
        ORDER BY n.owner, n.tier, n.project, n.ts;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION ghostmem.message_bits_clear() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    TRUNCATE ghostmem.message_bits;
    RETURN NULL;
END
$$;

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

-- The store's vectors so far, in the order of migration 103 (a project's rows are a run of pages, a time window a
-- short run per project). The migration runs in one transaction: an upgrade killed here leaves nothing of it.
INSERT INTO ghostmem.message_bits (owner, id, tier, conv_id, ts, platform, project, bits)
SELECT owner, id, tier, conv_id, ts, platform, project, binary_quantize(embedding)
FROM ghostmem.message_vectors
ORDER BY owner, tier, project, ts;

-- A scope's rows, as for the compact vectors: the owner's within a time window or all of them; a project's; a
-- (titled) conversation's.
CREATE INDEX message_bits_owner_ts ON ghostmem.message_bits (owner, tier, ts);
CREATE INDEX message_bits_owner_project_ts ON ghostmem.message_bits (owner, tier, project, ts);
CREATE INDEX message_bits_owner_conv ON ghostmem.message_bits (owner, tier, conv_id);
