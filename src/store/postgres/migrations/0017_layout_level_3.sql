-- Storage layout level 3 (store::layout): a ledger entry's direction, status and effective
-- time are read from its `ledger_postings` row (which every entry has always had, kept in step
-- with the entry by the same commit), and a transaction's status and effective time from its
-- entries' rows, no longer from search terms: a posting writes eight rows fewer. Older releases
-- filter entries and transactions by those terms and would miss what this release writes, so
-- the level is raised and they stop.
-- The terms of rows written before stay, unread, so that older instances still serving until
-- they see the new level answer right; a later release may drop them.
-- When the database already held data, an older instance may be serving: the raise's time
-- holds this release's instances off until every older one has stopped (store::layout::hold_off).
INSERT INTO settings (name, value)
SELECT 'layout_raised_at',
       convert_to(CASE WHEN EXISTS (SELECT 1 FROM objects)
                       THEN ((extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT)::TEXT
                       ELSE '0' END, 'UTF8')
ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value;
UPDATE settings SET value = convert_to('3', 'UTF8') WHERE name = 'layout_level';
