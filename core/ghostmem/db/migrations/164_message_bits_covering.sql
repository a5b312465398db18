-- The quantized scan's bits read from the index alone (search.py `_QUANTIZED_SCAN`, docs/search.md "Scopes between:
-- a quantized scan", *Session 26*).
--
-- The scan's Hamming stage reads every row of its scope (a time window, a platform) for two columns, the id and the
-- bits. Through (owner, tier, ts) and (owner, tier, platform, ts) it read them from the table (a bitmap heap scan:
-- a visibility check and the row formed, about 0.2 µs a row); with the two columns in the index's leaf entries an
-- index-only scan reads them there (at 100k messages, the 7-day window of 7,800 rows: the vector leg's backend CPU
-- 0.69-0.79 of before, the same rows). The other indexes stay as they were: a project's scope is an OR of two
-- indexes (its projects, its titled conversations), read as a bitmap either way.
--
-- An index-only scan reads the table for an entry whose page is not all-visible (written since the table was last
-- vacuumed), so the table is vacuumed after every thousand rows written (autovacuum_vacuum_insert_threshold's
-- default) instead of after a fifth of its size as well: the new rows are the ones a short time window reads.
-- The migration runs in one transaction: an upgrade killed while it builds leaves the indexes as they were.
CREATE INDEX message_bits_owner_ts_bits ON ghostmem.message_bits (owner, tier, ts) INCLUDE (id, bits);
CREATE INDEX message_bits_owner_platform_ts_bits ON ghostmem.message_bits (owner, tier, platform, ts)
    INCLUDE (id, bits);
DROP INDEX ghostmem.message_bits_owner_ts;
DROP INDEX ghostmem.message_bits_owner_platform_ts;
ALTER INDEX ghostmem.message_bits_owner_ts_bits RENAME TO message_bits_owner_ts;
ALTER INDEX ghostmem.message_bits_owner_platform_ts_bits RENAME TO message_bits_owner_platform_ts;
ALTER TABLE ghostmem.message_bits SET (autovacuum_vacuum_insert_scale_factor = 0);
