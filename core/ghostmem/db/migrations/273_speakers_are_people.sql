-- The speaker names a query mentions are looked up among the messages people wrote (the conversational roles,
-- `user` and `assistant`), no longer among tool calls and tool results, whose `speaker` is the tool's name (Claude
-- Code's `Read`, `Edit`, `Bash`; ChatGPT's `python`, `browser`; a Codex or Gemini function's name). In a store
-- holding such calls, a query with the word "read" or "python" named a speaker: the word was removed from the text
-- the vector leg embeds, and every call of that tool got the speaker bonus in the fusion. Migration 020's index of
-- every message's speaker is replaced by one of people's: the lookup (search._people) and the bonus test the
-- same roles, and the index's predicate is theirs, so the lookup reads only people's names (a name a tool shares
-- no longer reads that tool's calls to find none written by a person).

CREATE INDEX messages_owner_person ON ghostmem.messages (owner, lower(speaker))
    WHERE speaker IS NOT NULL AND role IN ('assistant', 'user');
DROP INDEX ghostmem.messages_owner_speaker;
