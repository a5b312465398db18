-- Where a conversation ends (its last message) and where its user first spoke before a position, read from the
-- conversation's own entries of messages_conv_seq (owner, tier, conv_id, seq) whatever the planner knows.
--
-- As plain statements (`... WHERE owner = $1 AND tier = $2 AND conv_id = $3 ORDER BY seq DESC LIMIT 1`) the planner
-- may answer them with another owner-leading index (messages_native_id) and a sort: an owner the statistics have not
-- seen (any owner in a never-analyzed table) is estimated at one row, a sort of one row costs next to nothing, and
-- the index that is one level lower wins. Live capture then read every message of the owner on every append (8,000
-- for a conversation of 2, twice per append, in a never-analyzed table whose conv_seq index was one level taller
-- than native_id's). With sorting disabled for these statements alone, the conversation's index is the only way to
-- get its messages in order: the other plans remain but are never chosen over it, whatever the estimates.
CREATE FUNCTION ghostmem.conversation_end(p_owner text, p_tier text, p_conv_id text, OUT seq integer,
                                          OUT native_id text)
LANGUAGE sql STABLE
SET enable_sort = off
BEGIN ATOMIC
    SELECT m.seq, m.native_id FROM ghostmem.messages m
    WHERE m.owner = p_owner AND m.tier = p_tier AND m.conv_id = p_conv_id
    ORDER BY m.seq DESC LIMIT 1;
END;

CREATE FUNCTION ghostmem.first_user_message(p_owner text, p_tier text, p_conv_id text, p_before integer)
RETURNS integer
LANGUAGE sql STABLE
SET enable_sort = off
BEGIN ATOMIC
    SELECT m.seq FROM ghostmem.messages m
    WHERE m.owner = p_owner AND m.tier = p_tier AND m.conv_id = p_conv_id AND m.seq < p_before AND m.role = 'user'
    ORDER BY m.seq LIMIT 1;
END;
