-- Payrail's first PostgreSQL schema. Times are microseconds since the Unix epoch (UTC).
-- Migrations are expand-then-contract: a release only adds what the previous one can ignore,
-- so a rolling upgrade never breaks an older instance still running.
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);

CREATE TABLE api_keys (
    id                TEXT PRIMARY KEY,
    key_hash          BYTEA NOT NULL UNIQUE,
    name              TEXT NOT NULL,
    organization_id   TEXT NOT NULL,
    live_mode         BOOLEAN NOT NULL,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    expires_at        BIGINT,
    decommissioned_at BIGINT
);

CREATE TABLE objects (
    seq        BIGSERIAL PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    kind       TEXT NOT NULL,
    org_id     TEXT NOT NULL,
    live_mode  BOOLEAN NOT NULL,
    parent_id  TEXT,
    created_at BIGINT NOT NULL,
    version    BIGINT NOT NULL,
    doc        TEXT NOT NULL
);
CREATE INDEX objects_page ON objects (org_id, live_mode, kind, seq);
CREATE INDEX objects_parent ON objects (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE object_terms (
    object_seq BIGINT NOT NULL REFERENCES objects (seq) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (object_seq, name, value)
);
CREATE INDEX object_terms_lookup ON object_terms (name, value, object_seq);

-- Successful replies kept for replay (SPEC I3).
CREATE TABLE idempotency_replies (
    api_key_id   TEXT NOT NULL,
    key          TEXT NOT NULL,
    status       INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    body         BYTEA NOT NULL,
    fingerprint  BYTEA NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    PRIMARY KEY (api_key_id, key)
);
CREATE INDEX idempotency_replies_expiry ON idempotency_replies (expires_at);

-- Requests in flight, shared by every instance (SPEC I6, I9). A row whose lease has passed
-- belongs to a vanished owner and may be taken over (I8).
CREATE TABLE idempotency_claims (
    api_key_id  TEXT NOT NULL,
    key         TEXT NOT NULL,
    nonce       BIGINT NOT NULL,
    lease_until BIGINT NOT NULL,
    PRIMARY KEY (api_key_id, key)
);
