-- Storage layout level 5 (store::layout): a ledger account keeps time buckets only from its
-- 64th entry on (store::ledger::BUCKETS_FROM). Below that, a balance as of an instant sums the
-- account's own entries, and its entries move no bucket rows: five rows fewer an entry for most
-- accounts. The entry that takes an account to version 64 builds its buckets afresh from its
-- entries. Older releases read the buckets of every account, which this release no longer
-- writes below version 64, so the level is raised and they stop.
-- The bucket rows an older release wrote for accounts still below version 64 stay, unread, until
-- the account reaches it and its buckets are built again.
-- When the database already held data, an older instance may be serving: the raise's time
-- holds this release's instances off until every older one has stopped (store::layout::hold_off).
INSERT INTO settings (name, value)
SELECT 'layout_raised_at',
       convert_to(CASE WHEN EXISTS (SELECT 1 FROM objects)
                       THEN ((extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT)::TEXT
                       ELSE '0' END, 'UTF8')
ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value;
UPDATE settings SET value = convert_to('5', 'UTF8') WHERE name = 'layout_level';
