-- Storage layout level 6 (store::layout): a webhook delivery no longer stores its body; it is
-- built from the delivery's event (immutable) each time it is sent, so an event delivered to
-- twenty endpoints is stored once, not twenty-one times. Older releases read the body from
-- the delivery, so the level is raised and they stop. Deliveries written before keep their
-- body, and this release sends it.
-- When the database already held data, an older instance may be serving: the raise's time
-- holds this release's instances off until every older one has stopped (store::layout::hold_off).
INSERT INTO settings (name, value)
SELECT 'layout_raised_at',
       convert_to(CASE WHEN EXISTS (SELECT 1 FROM objects)
                       THEN ((extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT)::TEXT
                       ELSE '0' END, 'UTF8')
ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value;
UPDATE settings SET value = convert_to('6', 'UTF8') WHERE name = 'layout_level';
