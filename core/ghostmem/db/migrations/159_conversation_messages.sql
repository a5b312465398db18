-- A conversation's messages in order, read from its own entries of messages_conv_seq (owner, tier, conv_id, seq)
-- whatever the planner knows: what migration 147 did for where a conversation ends, for the statements that read a
-- whole conversation (live capture replacing one, a thread's recount after an import saved it whole, reading a
-- captured conversation back).
--
-- As plain statements (`... WHERE owner = $1 AND tier = $2 AND conv_id = $3`) they were answered through
-- messages_native_id (owner, tier, native_id) whenever the planner estimated one row for the owner (any owner in a
-- never-analyzed table, an owner the statistics have not seen), its filter on conv_id applied to every message of
-- the owner: capture_replace of a 4-message conversation read 40,000 rows beside 20,000 other messages of the owner
-- (its DELETE of the dropped messages and its recount, each all of them), with 36-character conversation ids. With
-- sorting disabled for this statement alone and the rows asked in seq order, the conversation's index is the only way
-- to them that needs no sort: the other plans remain but are never chosen over it.
CREATE FUNCTION ghostmem.conversation_messages(p_owner text, p_tier text, p_conv_id text)
RETURNS TABLE (id bigint, seq integer, native_id text, role text, raw_role text, speaker text, text text,
               ts timestamptz, meta jsonb)
LANGUAGE sql STABLE
SET enable_sort = off
BEGIN ATOMIC
    SELECT m.id, m.seq, m.native_id, m.role, m.raw_role, m.speaker, m.text, m.ts, m.meta
    FROM ghostmem.messages m
    WHERE m.owner = p_owner AND m.tier = p_tier AND m.conv_id = p_conv_id
    ORDER BY m.seq;
END;
