-- Storage layout level 5 (store::layout): a ledger account keeps time buckets only from its
-- 64th entry on (store::ledger::BUCKETS_FROM). Below that, a balance as of an instant sums the
-- account's own entries, and its entries move no bucket rows: five rows fewer an entry for most
-- accounts. The entry that takes an account to version 64 builds its buckets afresh from its
-- entries. Older releases read the buckets of every account, which this release no longer
-- writes below version 64, so the level is raised and they stop.
-- The bucket rows an older release wrote for accounts still below version 64 stay, unread, until
-- the account reaches it and its buckets are built again.
-- The raise's time is recorded as on PostgreSQL (0 on an empty database); on SQLite nobody
-- waits for it (see migration 0008).
INSERT OR REPLACE INTO settings (name, value)
VALUES ('layout_raised_at',
        CAST(CAST(CASE WHEN EXISTS (SELECT 1 FROM objects)
                       THEN CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
                       ELSE 0 END AS TEXT) AS BLOB));
UPDATE settings SET value = CAST('5' AS BLOB) WHERE name = 'layout_level';
