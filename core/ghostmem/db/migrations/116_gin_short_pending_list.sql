-- The GIN indexes a search reads keep a short pending list: 256 kB (32 pages) instead of PostgreSQL's 4 MB. A GIN
-- index queues what is written in its pending list and merges the list into its entries when it passes
-- gin_pending_list_limit, or when vacuum or autoanalyze runs (after 10-20% of the table has changed: at a million
-- messages, some 100,000 writes); until then every scan of the index reads the whole list, whatever it asks for.
-- The lexical leg runs one scan of the words' index for the query and one per word (up to 64): with 4,000 messages
-- written since the last merge (226 pending pages) each scan read 245 pages instead of 21 and took 1.4 ms instead of
-- 0.23, and a 4 MB list holds the words of about 9,000 messages. With 256 kB a scan reads at most 32 pending pages,
-- and a write still goes to the list and is merged with others (without a list, fastupdate off, inserting messages
-- without vectors took 1.6 times as long; 64 kB 1.2 times): docs/search.md, "A short pending list". The trigram
-- indexes of titles and projects are read by every search filtered by project and by the project lists. What is
-- queued now is merged here.
ALTER INDEX ghostmem.messages_owner_words SET (gin_pending_list_limit = 256);
ALTER INDEX ghostmem.conversations_title_trgm SET (gin_pending_list_limit = 256);
ALTER INDEX ghostmem.conversations_project_trgm SET (gin_pending_list_limit = 256);

SELECT pg_catalog.gin_clean_pending_list(i)
FROM unnest(ARRAY[
    'ghostmem.messages_owner_words', 'ghostmem.conversations_title_trgm', 'ghostmem.conversations_project_trgm'
]::pg_catalog.regclass[]) AS i;
