-- Storage layout level 2 (store::layout): a ledger entry's transaction and a transaction
-- version's transaction are found through `parent_id` (which every such row has always had),
-- no longer through search terms, and an entry's ledger is no longer a term (nothing asked for
-- it): a posting writes five rows fewer. Older releases list entries and versions by those
-- terms and would miss what this release writes, so the level is raised and they stop.
-- The terms of rows written before stay, unread, so that an older release still serving until
-- it sees the new level answers right; a later release may drop them.
-- The raise's time is recorded as on PostgreSQL (0 on an empty database), but a SQLite file has
-- one server at a time, whose lock an older one lets go only once drained: nobody waits for it.
INSERT OR REPLACE INTO settings (name, value)
VALUES ('layout_raised_at',
        CAST(CAST(CASE WHEN EXISTS (SELECT 1 FROM objects)
                       THEN CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
                       ELSE 0 END AS TEXT) AS BLOB));
UPDATE settings SET value = CAST('2' AS BLOB) WHERE name = 'layout_level';
