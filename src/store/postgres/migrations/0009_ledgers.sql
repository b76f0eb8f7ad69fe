-- Ledgers (SPEC G): the documents live in `objects`; these tables hold the numbers that must
-- change atomically with them. Amounts are minor units; times microseconds since the epoch.

-- Each ledger account's running sums (pending = entries still pending only) and its version:
-- how many entries were ever written to it (the API's `lock_version`). Writers lock the rows
-- of a posting's accounts in account-id order (FOR UPDATE), so they queue, never deadlock.
CREATE TABLE ledger_account_sums (
    account_id      TEXT PRIMARY KEY,
    credit_normal   BOOLEAN NOT NULL,
    posted_debits   BIGINT NOT NULL DEFAULT 0,
    posted_credits  BIGINT NOT NULL DEFAULT 0,
    pending_debits  BIGINT NOT NULL DEFAULT 0,
    pending_credits BIGINT NOT NULL DEFAULT 0,
    lock_version    BIGINT NOT NULL DEFAULT 0
);

-- One row per entry: what balances as of an instant or a version are summed from.
-- status: 0 pending, 1 posted, 2 archived.
CREATE TABLE ledger_postings (
    entry_id     TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL,
    effective_at BIGINT NOT NULL,
    version      BIGINT NOT NULL,
    status       SMALLINT NOT NULL,
    debit        BOOLEAN NOT NULL,
    amount       BIGINT NOT NULL
);
CREATE INDEX ledger_postings_by_time ON ledger_postings (account_id, effective_at, version) INCLUDE (status, debit, amount);
CREATE UNIQUE INDEX ledger_postings_by_version ON ledger_postings (account_id, version);

-- Values that must be unique within a namespace the domain names (an external_id in a ledger).
CREATE TABLE unique_keys (
    key TEXT PRIMARY KEY
);

-- Each account's sums per time bucket, at seven widths (2^14 us up to 2^50 us, each 64 times
-- the one below): a balance as of any instant adds fewer than 64 buckets per width and the
-- entries of one finest bucket, however many entries the account has (store::ledger::prefix_pieces).
CREATE TABLE ledger_buckets (
    account_id      TEXT NOT NULL,
    level           SMALLINT NOT NULL,
    bucket          BIGINT NOT NULL,
    posted_debits   BIGINT NOT NULL,
    posted_credits  BIGINT NOT NULL,
    pending_debits  BIGINT NOT NULL,
    pending_credits BIGINT NOT NULL,
    PRIMARY KEY (account_id, level, bucket)
);
