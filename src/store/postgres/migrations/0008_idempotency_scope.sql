-- SPEC I2 (amended): a key made by `keys roll` shares its predecessor's idempotency scope, so a
-- retry sent with the successor replays what the predecessor stored. Claims and stored replies
-- are keyed by the scope (their `api_key_id` column holds it). A key made before this migration
-- is its own scope: its stored replies, keyed by its id, are found as before. Nullable so that an
-- instance of the previous release, still running during a rolling upgrade, can insert keys;
-- readers take COALESCE(idempotency_scope, id).
ALTER TABLE api_keys ADD COLUMN idempotency_scope TEXT;
UPDATE api_keys SET idempotency_scope = id;
