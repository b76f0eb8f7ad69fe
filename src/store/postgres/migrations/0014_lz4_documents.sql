-- Documents and stored replies compressed with lz4 instead of pglz. A row over about 2 kB is
-- compressed before it is stored; an event (which embeds its object's document) and a stored
-- reply usually are, and pglz_compress alone was 6 % of the machine's CPU in a PostgreSQL
-- cut-off, which writes an event per order twice (BENCHMARKS.md, thirteenth round). lz4 takes a
-- fraction of that time for a ratio a little lower. Applies to values written from now on;
-- values already stored stay readable as they are, so older instances read and write alike
-- (a brief lock, no rewrite). A server built without lz4 (optional at build time; Debian's
-- and the official images have it) keeps pglz, as does a server older than 14 (which has no
-- choice of method): the setting is then skipped, not an error.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'ALTER TABLE objects ALTER COLUMN doc SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE idempotency_replies ALTER COLUMN body SET COMPRESSION lz4';
    END IF;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available on this server; documents stay compressed with pglz';
END
$$;
