-- Storage layout level 4 (store::layout): a ledger entry moves its account's time buckets of
-- levels 1 to 5 only (2^20 us, about a second, to 2^44 us, about 203 days), no longer those of
-- level 0 (2^14 us) and level 6 (2^50 us): a posting writes four rows fewer. A balance as of an
-- instant sums the entries of its second from their own rows, and every level-5 bucket before
-- it (store::ledger::BUCKET_LEVELS). Older releases read levels 0 and 6, which this release no
-- longer keeps up to date, so the level is raised and they stop.
-- The rows of levels 0 and 6 written before stay, unread (deleting them here would hold the
-- rows older instances are still writing for as long as it takes); a later release may drop
-- them.
-- When the database already held data, an older instance may be serving: the raise's time
-- holds this release's instances off until every older one has stopped (store::layout::hold_off).
INSERT INTO settings (name, value)
SELECT 'layout_raised_at',
       convert_to(CASE WHEN EXISTS (SELECT 1 FROM objects)
                       THEN ((extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT)::TEXT
                       ELSE '0' END, 'UTF8')
ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value;
UPDATE settings SET value = convert_to('4', 'UTF8') WHERE name = 'layout_level';
