-- The lexical leg's window reads led by an integer (search.py `_LEXICAL_LEG`, lex_doc; docs/search.md "The window
-- ranking from narrow rows", *Session 27*).
--
-- A search reads the length of each of its windows (up to 300: a message and its neighbours) as one short range of
-- ghostmem.message_lengths. Through 107's (owner, tier, conv_id, seq) each read descended the btree comparing three
-- texts a level, the conversation id with the collation's comparison (at 100k messages about 4 µs a read, 1.2 ms of
-- an unfiltered search). The index below is keyed by a 64-bit hash of the conversation id and the message's place in
-- it, so a descent compares two integers; the owner, tier and conversation id are in its entries and checked on the
-- few rows of the range (two conversations whose ids share a hash, of one owner or of two, are told apart there).
-- It holds every column the window read takes but the project (as 107's did, and for the same reason: an entry
-- holding a long id and a long project would not fit a btree entry), so a read stays index-only. It replaces 107's
-- index, which nothing else read. The migration runs in one transaction: an upgrade killed while it builds leaves
-- the index as it was.
CREATE INDEX message_lengths_window ON ghostmem.message_lengths (hashtextextended(conv_id, 0), seq)
    INCLUDE (owner, tier, conv_id, id, lexemes, ts, platform);
DROP INDEX ghostmem.message_lengths_place;
ANALYZE ghostmem.message_lengths;
