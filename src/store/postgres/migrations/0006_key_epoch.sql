-- Cached API keys across instances (SPEC A5; see src/store/postgres/key_watch.rs). Every key
-- change bumps the epoch; every instance acknowledges the epoch it has adopted and holds a lease
-- on the database's clock. Instances of earlier releases do not cache, so they need neither.
CREATE TABLE keys_epoch (
    id    BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),
    epoch BIGINT NOT NULL
);
INSERT INTO keys_epoch (epoch) VALUES (1);
-- Liveness only: a crash empties it, and every instance's listening connection (hence its
-- trust in its cache) ended with that crash anyway.
CREATE UNLOGGED TABLE key_cache_instances (
    id          TEXT PRIMARY KEY,
    seen_epoch  BIGINT NOT NULL,
    alive_until BIGINT NOT NULL
);
