-- The outbox position of an object (SPEC E4, W2): the id of the transaction that wrote it.
-- Sequence values are taken before commit, so they are not commit order; transaction ids below
-- the oldest running transaction are settled for good, which makes (xid, seq) a gap-free order
-- for readers that stop at that horizon. Expand-only: older instances ignore the column.
ALTER TABLE objects ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX objects_outbox ON objects (org_id, live_mode, kind, xid, seq);
