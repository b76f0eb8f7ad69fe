-- Claims only mark requests in flight (SPEC I6, I9); they need no durability, and writing them
-- to the WAL cost every idempotent write two extra flushes (claim and release). An unlogged
-- table is emptied by crash recovery, which only frees keys early: a commit still has to
-- delete its own claim, by nonce, in the same transaction as its effects, so an owner whose
-- claim vanished (crash, failover, expired lease) can never commit (see PostgresStore::commit).
-- Same table, same columns: instances of the previous release keep working against it.
ALTER TABLE idempotency_claims SET UNLOGGED;
