-- The outbox read (SPEC E4, W2) walks one kind in commit order: events (store::OUTBOX_KIND).
-- Its index covered every object, so each ledger transaction, entry and version, each
-- counterparty and payment order paid for an entry nobody reads. The index now covers events
-- alone; the outbox statement names the kind as a literal, so its plan can use it.
-- Older instances of the previous release name the kind as a parameter: a custom plan (made
-- with the value) still uses the partial index, and a generic one may scan objects_newest
-- instead, which is slower but answers the same. Expand-only: no layout level raised.
CREATE INDEX objects_outbox_events ON objects (org_id, live_mode, xid, seq) WHERE kind = 'event';
DROP INDEX objects_outbox;

-- Room on each page of the ledger's running sums and time buckets for the next version of
-- their rows: a posting rewrites its accounts' sums and the buckets its entries fall in, and a
-- rewrite that finds no room on its page is not heap-only (it adds an index entry).
-- Applies to pages filled from now on; a storage parameter only.
ALTER TABLE ledger_account_sums SET (fillfactor = 50);
ALTER TABLE ledger_buckets SET (fillfactor = 70);
