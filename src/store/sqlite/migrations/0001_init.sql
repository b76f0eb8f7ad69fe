-- Payrail's first schema. Times are microseconds since the Unix epoch (UTC).
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
);

CREATE TABLE api_keys (
    id                TEXT PRIMARY KEY,
    key_hash          BLOB NOT NULL UNIQUE,
    name              TEXT NOT NULL,
    organization_id   TEXT NOT NULL,
    live_mode         INTEGER NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    expires_at        INTEGER,
    decommissioned_at INTEGER
);

-- Every resource: its document as the API returns it, and its position for newest-first pages.
CREATE TABLE objects (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    kind       TEXT NOT NULL,
    org_id     TEXT NOT NULL,
    live_mode  INTEGER NOT NULL,
    parent_id  TEXT,
    created_at INTEGER NOT NULL,
    version    INTEGER NOT NULL,
    doc        TEXT NOT NULL
);
CREATE INDEX objects_page ON objects (org_id, live_mode, kind, seq);
CREATE INDEX objects_parent ON objects (parent_id) WHERE parent_id IS NOT NULL;

-- What list filters search: (name, value) pairs chosen by the domain.
CREATE TABLE object_terms (
    object_seq INTEGER NOT NULL,
    name       TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (object_seq, name, value)
) WITHOUT ROWID;
CREATE INDEX object_terms_lookup ON object_terms (name, value, object_seq);

-- Successful replies kept for replay (SPEC I3). Only successes are ever written here.
CREATE TABLE idempotency_replies (
    api_key_id   TEXT NOT NULL,
    key          TEXT NOT NULL,
    status       INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    body         BLOB NOT NULL,
    fingerprint  BLOB NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    PRIMARY KEY (api_key_id, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_replies_expiry ON idempotency_replies (expires_at);
