-- The storage layout's level (store::layout): a release that changes what older releases read
-- raises it, and older instances stop serving instead of answering from a layout they do not know.
INSERT INTO settings (name, value) VALUES ('layout_level', convert_to('1', 'UTF8')) ON CONFLICT (name) DO NOTHING;
