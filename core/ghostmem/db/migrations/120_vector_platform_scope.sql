-- A platform's rows of the compact vectors (101) and of their bits (110) read through an index of their own, so that
-- the vector leg's exact and quantized scans of a search filtered by platform read that platform's rows only
-- (search.py `_scope_rows`, docs/search.md "A platform's rows").
--
-- Until now those scans read the owner's rows (or a time window's) through (owner, tier, ts) and dropped the other
-- platforms' rows one by one: a platform holding 4% of 100,000 messages cost an exact scan of all of them (53 ms),
-- more than the HNSW walk (40 ms, which passes over 25 rows for each one it keeps), where reading its 4,000 rows
-- takes 6 ms. The time stays the column after the platform, so a platform within a time window is one range too.
-- Plain indexes: kept by every write of the tables as their other indexes are. The migration runs in one
-- transaction, so an upgrade killed while it builds them leaves neither.
CREATE INDEX message_vectors_owner_platform_ts ON ghostmem.message_vectors (owner, tier, platform, ts);
CREATE INDEX message_bits_owner_platform_ts ON ghostmem.message_bits (owner, tier, platform, ts);
