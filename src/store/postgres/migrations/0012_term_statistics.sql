-- The planner's view of object_terms: without it, PostgreSQL takes `name` and `value` for
-- independent, so `status = approved` among five term names looks five times rarer than it is.
-- A cut-off's page of approved orders (most of the kind) was then planned as a join over every
-- match and a sort, 400 ms a page at 100,000 orders, instead of a walk down the newest-first
-- index that stops at the page's end (5 ms). The pairs' own statistics (most common values and
-- dependencies) give the right estimate. Takes effect at the next ANALYZE (autovacuum's).
-- Expand-only: older instances plan with it too.
CREATE STATISTICS IF NOT EXISTS object_terms_name_value (mcv, dependencies) ON name, value FROM object_terms;
