-- Japanese words for the lexical index (ghostmem/japanese.py). A dictionary tokenizer runs in Python, not in the
-- database, so the write path passes each message's words in `morphemes` (prefixed normalised forms, NULL for
-- text without Japanese or without the [ja] extra), and the tsv trigger adds them to the message's lexemes next to
-- the character grams, which keep working alone where no words were given.
ALTER TABLE ghostmem.messages ADD COLUMN morphemes text[];

CREATE OR REPLACE FUNCTION ghostmem.messages_fill_tsv() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    NEW.tsv := CASE WHEN NEW.role IN ('user', 'assistant')
                    THEN ghostmem.lexemes(NEW.text) || array_to_tsvector(coalesce(NEW.morphemes, '{}'))
               END;
    RETURN NEW;
END
$$;

DROP TRIGGER messages_fill_tsv ON ghostmem.messages;
CREATE TRIGGER messages_fill_tsv
    BEFORE INSERT OR UPDATE OF text, role, morphemes ON ghostmem.messages
    FOR EACH ROW EXECUTE FUNCTION ghostmem.messages_fill_tsv();
