-- objects_page (org_id, live_mode, kind, seq) has served no query since 0003: newest-first pages
-- use objects_newest, the outbox objects_outbox, parents objects_parent. Every insert still paid
-- for it (the benchmark's group inserts spend most of their time in index maintenance). Older
-- instances do not need it either: their list queries are 0003's.
DROP INDEX IF EXISTS objects_page;
