-- Statistics of the namespace prefixes a LangGraph store search filters by (ghostmem.items: `namespace[1:n] =
-- prefix`, n written into the statement), so that the planner knows how many items a prefix holds.
--
-- Without them it guessed 0.5% of the owner's items for any prefix: a namespace of 20,000 items was planned as 100,
-- and its search read all 20,000 rows and sorted them by distance (about 200 ms on a busy machine) instead of
-- walking the HNSW index (about 10 ms); the idf's sample read them all too. Prefixes of one to four labels are
-- counted (LangGraph namespaces are short: ("memories", user) and the like); a longer prefix keeps the guess.
CREATE STATISTICS ghostmem.store_items_prefix_1 ON (namespace[1:1]) FROM ghostmem.store_items;
CREATE STATISTICS ghostmem.store_items_prefix_2 ON (namespace[1:2]) FROM ghostmem.store_items;
CREATE STATISTICS ghostmem.store_items_prefix_3 ON (namespace[1:3]) FROM ghostmem.store_items;
CREATE STATISTICS ghostmem.store_items_prefix_4 ON (namespace[1:4]) FROM ghostmem.store_items;
ANALYZE ghostmem.store_items;
