-- Ledger account settlements (SPEC G1): the settlement that took a posted entry, if any. A
-- settlement marks the entries it settles in the commit that writes it, so no entry is ever
-- settled twice; archiving it gives them back. New entries are written unmarked (NULL), so the
-- index holds settled entries only and costs a posting nothing.
ALTER TABLE ledger_postings ADD COLUMN settlement_id TEXT;
CREATE INDEX ledger_postings_by_settlement ON ledger_postings (settlement_id) WHERE settlement_id IS NOT NULL;
