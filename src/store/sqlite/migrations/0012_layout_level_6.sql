-- Storage layout level 6 (store::layout): a webhook delivery no longer stores its body; it is
-- built from the delivery's event (immutable) each time it is sent, so an event delivered to
-- twenty endpoints is stored once, not twenty-one times. Older releases read the body from
-- the delivery, so the level is raised and they stop. Deliveries written before keep their
-- body, and this release sends it.
-- The raise's time is recorded as on PostgreSQL (0 on an empty database); on SQLite nobody
-- waits for it (see migration 0008).
INSERT OR REPLACE INTO settings (name, value)
VALUES ('layout_raised_at',
        CAST(CAST(CASE WHEN EXISTS (SELECT 1 FROM objects)
                       THEN CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
                       ELSE 0 END AS TEXT) AS BLOB));
UPDATE settings SET value = CAST('6' AS BLOB) WHERE name = 'layout_level';
