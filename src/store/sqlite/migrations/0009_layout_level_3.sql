-- Storage layout level 3 (store::layout): a ledger entry's direction, status and effective
-- time are read from its `ledger_postings` row (which every entry has always had, kept in step
-- with the entry by the same commit), and a transaction's status and effective time from its
-- entries' rows, no longer from search terms: a posting writes eight rows fewer. Older releases
-- filter entries and transactions by those terms and would miss what this release writes, so
-- the level is raised and they stop.
-- The terms of rows written before stay, unread, so that an older release still serving until
-- it sees the new level answers right; a later release may drop them.
-- The raise's time is recorded as on PostgreSQL (0 on an empty database); on SQLite nobody
-- waits for it (see migration 0008).
INSERT OR REPLACE INTO settings (name, value)
VALUES ('layout_raised_at',
        CAST(CAST(CASE WHEN EXISTS (SELECT 1 FROM objects)
                       THEN CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
                       ELSE 0 END AS TEXT) AS BLOB));
UPDATE settings SET value = CAST('3' AS BLOB) WHERE name = 'layout_level';
