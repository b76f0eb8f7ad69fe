-- Room on each page of objects for the next version of its rows, so that rewriting a document
-- (a payment order moving through its states, a PATCH) is a heap-only update: the new version
-- goes on the same page and none of the table's four indexes takes an entry for it. With full
-- pages every rewrite added an entry to each index, and index inserts were a third of
-- PostgreSQL's CPU in a cut-off, which rewrites each order twice (BENCHMARKS.md, twelfth round).
-- A document is 1 to 2 kB, so 60 % leaves room for one or two; the table takes about 1.6
-- times the pages. Applies to pages filled from now on; a storage parameter only (a brief
-- lock, no rewrite), so older instances write alike.
ALTER TABLE objects SET (fillfactor = 60);
