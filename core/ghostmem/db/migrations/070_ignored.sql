-- `ghostmem:ignore` is a property of the conversation, remembered like `ghostmem forget`: once a conversation carried
-- the marker, its id stays in ghostmem.forgotten (reason 'ignore'), so appended lines, subagent transcripts and later
-- re-reads are dropped too. Only the id is kept, never content.
ALTER TABLE ghostmem.forgotten
    ADD COLUMN reason text NOT NULL DEFAULT 'forget' CONSTRAINT forgotten_reason CHECK (reason IN ('forget', 'ignore'));
