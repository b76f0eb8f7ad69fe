-- Newest-first pages by an index no other plan can mimic (SPEC L1). With `ORDER BY seq DESC`
-- the planner may walk the primary key backwards and filter, assuming matching rows are spread
-- evenly: when the newest rows are of other kinds it reads the whole table. Ordering by `-seq`
-- can only be served by this index, so every list is an index range scan.
CREATE INDEX objects_newest ON objects (org_id, live_mode, kind, (-seq));
