-- Storage layout level 4 (store::layout): a ledger entry moves its account's time buckets of
-- levels 1 to 5 only (2^20 us, about a second, to 2^44 us, about 203 days), no longer those of
-- level 0 (2^14 us) and level 6 (2^50 us): a posting writes four rows fewer. A balance as of an
-- instant sums the entries of its second from their own rows, and every level-5 bucket before
-- it (store::ledger::BUCKET_LEVELS). Older releases read levels 0 and 6, which this release no
-- longer keeps up to date, so the level is raised and they stop.
-- The rows of levels 0 and 6 written before stay, unread; a later release may drop them.
-- The raise's time is recorded as on PostgreSQL (0 on an empty database); on SQLite nobody
-- waits for it (see migration 0008).
INSERT OR REPLACE INTO settings (name, value)
VALUES ('layout_raised_at',
        CAST(CAST(CASE WHEN EXISTS (SELECT 1 FROM objects)
                       THEN CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
                       ELSE 0 END AS TEXT) AS BLOB));
UPDATE settings SET value = CAST('4' AS BLOB) WHERE name = 'layout_level';
