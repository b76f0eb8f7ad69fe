-- SPEC I2 (amended): a key made by `keys roll` shares its predecessor's idempotency scope, so a
-- retry sent with the successor replays what the predecessor stored. Claims and stored replies
-- are keyed by the scope (their `api_key_id` column, and the reply slots derived from it, hold
-- it). A key made before this migration is its own scope, so its stored replies, slotted by its
-- id, are found where they are: unlike migration 2, no row moves, and plain SQL is enough.
-- Readers take COALESCE(idempotency_scope, id).
ALTER TABLE api_keys ADD COLUMN idempotency_scope TEXT;
UPDATE api_keys SET idempotency_scope = id;
