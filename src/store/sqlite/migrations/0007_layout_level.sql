-- The storage layout's level (store::layout): a release that changes what older releases read
-- raises it, and older instances stop serving instead of answering from a layout they do not know.
INSERT OR IGNORE INTO settings (name, value) VALUES ('layout_level', CAST('1' AS BLOB));
