-- The window index of migration 107 without the project, on a store that applied 107 before it was amended (the
-- development stores of the session that wrote it): there it held the conversation id and the project in one
-- btree entry, so a conversation whose id and project are long (each fits the indexes of messages, together over
-- the 2,704 bytes of an entry) could not be stored. 107 now creates the index as below; on a store where it did,
-- this does nothing.
DO $$
BEGIN
    IF (SELECT i.indnatts FROM pg_catalog.pg_index i
        WHERE i.indexrelid = 'ghostmem.message_lengths_place'::pg_catalog.regclass) <> 8 THEN
        DROP INDEX ghostmem.message_lengths_place;
        CREATE INDEX message_lengths_place ON ghostmem.message_lengths (owner, tier, conv_id, seq)
            INCLUDE (id, lexemes, ts, platform);
    END IF;
END
$$;
