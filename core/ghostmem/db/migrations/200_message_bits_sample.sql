-- A sample of the quantized bits, so that the quantized scan sorts only the rows near the query (search.py
-- `_SAMPLED_CUT`, docs/search.md "Scopes between: a quantized scan", *Session 28*).
--
-- The scan's Hamming stage reads every row of its scope from the index alone (migration 164) and kept its nearest
-- `candidates` with a top-N sort of all of them: at 100k messages, of the 30-day window's 15,000 rows, reading
-- them cost about 1.5 ms of backend CPU, their distances 0.5 and the sort 1.5. The sort now gets only the rows
-- whose distance is at most a cut taken from these two indexes: every sixteenth message (by a hash of its id, so
-- no pattern of ids written by several owners at once empties an owner's share), its bits in the leaf entries,
-- keyed as the two indexes a time window and a platform are read through. The cut is the distance below which
-- the sample holds twice the candidates' share; when fewer than `candidates` rows of the scope are that near,
-- the scan falls back to the full sort, so its rows are the same either way.
--
-- Cost: a sixteenth of each covering index (at 100k messages about 0.6 MB each), kept by every write.
CREATE INDEX message_bits_owner_ts_sample ON ghostmem.message_bits (owner, tier, ts) INCLUDE (bits)
    WHERE (hashint8(id) & 15) = 0;
CREATE INDEX message_bits_owner_platform_ts_sample ON ghostmem.message_bits (owner, tier, platform, ts)
    INCLUDE (bits) WHERE (hashint8(id) & 15) = 0;
