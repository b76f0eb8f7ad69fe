-- Stored replies move from a WITHOUT ROWID table keyed by (api_key_id, key) to a rowid table
-- whose rowid comes from the key (src/store/sqlite/reply_slots.rs). In a WITHOUT ROWID table the
-- interior pages hold whole rows, bodies included: at a million replies the tree was eight
-- levels deep with 136 MB of interior pages, and a lookup read several pages from the OS.
-- Between this file and 0002_replies_in_slots_end.sql the rows are moved by code, since their
-- rowids are SHA-256 digests that SQL cannot compute.
DROP INDEX idempotency_replies_expiry;
ALTER TABLE idempotency_replies RENAME TO idempotency_replies_v1;
CREATE TABLE idempotency_replies (
    id           INTEGER PRIMARY KEY,
    api_key_id   TEXT NOT NULL,
    key          TEXT NOT NULL,
    status       INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    body         BLOB NOT NULL,
    fingerprint  BLOB NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
);
