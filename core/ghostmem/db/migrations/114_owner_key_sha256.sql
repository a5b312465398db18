-- The owner's key in its words (migration 102) without md5: a server in FIPS mode refuses md5() ("could not compute
-- MD5 hash: unsupported"), so on such a server every message with words failed to be stored (the index expression
-- calls ghostmem.owner_key) and a store holding messages could not build the index at all. The key is now the first
-- 16 hex digits of sha256 (built in since PostgreSQL 11, allowed under FIPS) of the owner's bytes, and ':'.
--
-- The bytes are the text's own, in the database's encoding, taken with immutable functions only: decode(..,
-- 'escape') copies every byte but a backslash, and every backslash is doubled first, so it gives the text's bytes
-- exactly (convert_to would do the same but is only stable: a conversion is looked up along the search path).
-- In a UTF-8 database that is sha256 of the owner's UTF-8 bytes.
--
-- owner_words and owner_word_query call owner_key, so writes and queries change key together; the index keyed
-- by the old key is rebuilt here, once (every message's words read again: the cost of creating it in 102).
CREATE OR REPLACE FUNCTION ghostmem.owner_key(owner text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT left(encode(sha256(decode(replace(owner, E'\\', E'\\\\'), 'escape')), 'hex'), 16) || ':'
$$;

REINDEX INDEX ghostmem.messages_owner_words;
