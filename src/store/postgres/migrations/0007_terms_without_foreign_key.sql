-- Terms are deleted with their object by the statement that deletes the object (see
-- src/store/postgres/writes.rs), and are distinct per object before they are written, so
-- neither the foreign key nor ON CONFLICT is needed any more: the key's check ran once per
-- inserted term, ~15 % of a create's grouped insert. Instances of the previous release still
-- delete objects without their terms during a rolling upgrade; the rows they leave behind
-- name a seq that is never reused and that no list or scan can reach (both go through
-- objects), so they are dead weight, not wrong answers.
ALTER TABLE object_terms DROP CONSTRAINT IF EXISTS object_terms_object_seq_fkey;
