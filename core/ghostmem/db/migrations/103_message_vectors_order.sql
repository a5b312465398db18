-- The compact vectors of migration 101 stored in (owner, tier, project, ts) order, so that a project's rows are a
-- few runs of pages rather than one page each (docs/search.md, "Small scopes: an exact scan").
--
-- Migration 101 copied the vectors in (owner, tier, ts) order: a time window's rows were contiguous, but a project's
-- (a few percent of an owner's messages, spread over years) sat one to a page, and an exact scan of 3,400 of them
-- read about as many pages. In this order a project is one run of pages, and a time window one short run per
-- project. Rows written later are appended in the order they come (an import writes a conversation, one project,
-- at a time); CLUSTER on this index orders them again. The (owner, tier, project, ts) index replaces the
-- (owner, tier, project) one: the same lookups, and the order CLUSTER keeps.
CREATE INDEX message_vectors_owner_project_ts ON ghostmem.message_vectors (owner, tier, project, ts);
DROP INDEX ghostmem.message_vectors_owner_project;
CLUSTER ghostmem.message_vectors USING message_vectors_owner_project_ts;
