-- The LangGraph store's word index keeps a short pending list too: 256 kB (32 pages) instead of PostgreSQL's 4 MB,
-- as 116 gave the indexes a message search reads. Every store search with a query scans store_items_tsv for the
-- query's words (ghostmem.items, the lexical leg), and a GIN scan reads the index's whole pending list, whatever it
-- asks for, until the list passes gin_pending_list_limit or vacuum or autoanalyze merges it; a store that wrote a
-- few thousand items since then made every search read them all. With 256 kB a scan reads at most 32 pending
-- pages, and writes are still queued and merged together (docs/search.md, "A short pending list"). What is queued
-- now is merged here.
ALTER INDEX ghostmem.store_items_tsv SET (gin_pending_list_limit = 256);

SELECT pg_catalog.gin_clean_pending_list('ghostmem.store_items_tsv'::pg_catalog.regclass);
