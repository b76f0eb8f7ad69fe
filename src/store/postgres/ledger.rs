//! Ledger writes and reads on PostgreSQL (see `store::ledger`). A posting locks its accounts'
//! rows in one statement, in account-id order (`ORDER BY ... FOR UPDATE` locks rows as the sort
//! returns them), so concurrent postings on any instance queue on the rows they share and can
//! never deadlock each other; the checks run on the locked values, and the new values and the
//! entries are written in two more statements before the batch's COMMIT (SPEC G4, G6).

use std::collections::BTreeMap;

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::db_err;
use crate::base::ledger::Totals;
use crate::error::{Error, Result};
use crate::store::ledger::{
    self, AccountGuard, AccountState, Change, Claim, Claimed, LedgerLine, STATUS_ARCHIVED, STATUS_PENDING, STATUS_POSTED,
};

const LOCK_ACCOUNTS: &str = "SELECT account_id, credit_normal, posted_debits, posted_credits, pending_debits, pending_credits, lock_version
     FROM ledger_account_sums WHERE account_id = ANY($1) ORDER BY account_id FOR UPDATE";
const STORE_ACCOUNTS: &str = "UPDATE ledger_account_sums AS s
     SET posted_debits = n.pd, posted_credits = n.pc, pending_debits = n.qd, pending_credits = n.qc, lock_version = n.v
     FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[]) AS n(id, pd, pc, qd, qc, v)
     WHERE s.account_id = n.id";
const INSERT_POSTINGS: &str = "INSERT INTO ledger_postings (entry_id, account_id, effective_at, version, status, debit, amount)
     SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::smallint[], $6::boolean[], $7::bigint[])";
const SETTLE_POSTINGS: &str = "UPDATE ledger_postings SET status = $2 WHERE entry_id = ANY($1) AND status = 0";
/// The ids are read through a sub-select so that the plan is made once (the store's note on plans).
pub const ACCOUNTS: &str = "SELECT account_id, credit_normal, posted_debits, posted_credits, pending_debits, pending_credits, lock_version
     FROM ledger_account_sums WHERE account_id = ANY((SELECT $1::text[])::text[])";
const ADD_TO_BUCKETS: &str =
    "INSERT INTO ledger_buckets (account_id, level, bucket, posted_debits, posted_credits, pending_debits, pending_credits)
     SELECT * FROM unnest($1::text[], $2::smallint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[])
     ON CONFLICT (account_id, level, bucket) DO UPDATE SET
       posted_debits = ledger_buckets.posted_debits + EXCLUDED.posted_debits,
       posted_credits = ledger_buckets.posted_credits + EXCLUDED.posted_credits,
       pending_debits = ledger_buckets.pending_debits + EXCLUDED.pending_debits,
       pending_credits = ledger_buckets.pending_credits + EXCLUDED.pending_credits";
const DELETE_BUCKETS: &str = "DELETE FROM ledger_buckets WHERE account_id = ANY($1)";
/// An account's entries up to the version it starts keeping buckets at (`store::ledger::BUCKETS_FROM`).
const BUCKETED_ENTRIES: &str = "SELECT account_id, effective_at, status, debit, amount FROM ledger_postings
     WHERE account_id = ANY($1) AND version <= $2";
pub const ENTRY_VERSIONS: &str = "SELECT entry_id, version FROM ledger_postings WHERE entry_id = ANY($1)";
/// The posted entries of an account no settlement took, effective before a bound, written at or
/// before a version: how many and their sums (a settlement's amount, SPEC G1).
pub const UNSETTLED: &str = "SELECT count(*), coalesce(sum(amount) FILTER (WHERE debit), 0)::bigint,
       coalesce(sum(amount) FILTER (WHERE NOT debit), 0)::bigint
     FROM ledger_postings
     WHERE account_id = $1 AND effective_at < $2 AND version <= $3 AND status = 1 AND settlement_id IS NULL";
/// Marks what [`UNSETTLED`] sums as taken by settlement `$4`, returning the same sums.
const CLAIM: &str = "WITH taken AS (
       UPDATE ledger_postings SET settlement_id = $4
       WHERE account_id = $1 AND effective_at < $2 AND version <= $3 AND status = 1 AND settlement_id IS NULL
       RETURNING debit, amount)
     SELECT count(*), coalesce(sum(amount) FILTER (WHERE debit), 0)::bigint, coalesce(sum(amount) FILTER (WHERE NOT debit), 0)::bigint
     FROM taken";
const CLAIM_OWN: &str =
    "UPDATE ledger_postings SET settlement_id = $1 WHERE entry_id = ANY($2) AND account_id = $3 AND settlement_id IS NULL";
const UNCLAIM: &str = "UPDATE ledger_postings SET settlement_id = NULL WHERE settlement_id = $1";

pub async fn open(tx: &impl GenericClient, account_id: &str, credit_normal: bool) -> Result<()> {
    let sql = "INSERT INTO ledger_account_sums (account_id, credit_normal) VALUES ($1, $2)";
    tx.execute(sql, &[&account_id, &credit_normal]).await.map_err(db_err)?;
    Ok(())
}

pub async fn post(tx: &impl GenericClient, lines: &[LedgerLine], guards: &[AccountGuard]) -> Result<()> {
    let mut accounts = lock(tx, &ledger::accounts_named(lines, guards)).await?;
    let versions = ledger::post(&mut accounts, lines, guards)?;
    store(tx, &accounts).await?;
    let lines: Vec<&LedgerLine> = lines.iter().collect();
    insert_postings(tx, &lines, &versions).await
}

/// Writes entries' rows, each with the account version its write made.
pub async fn insert_postings(tx: &impl GenericClient, lines: &[&LedgerLine], versions: &[i64]) -> Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = lines.iter().map(|l| l.entry_id.as_str()).collect();
    let account_ids: Vec<&str> = lines.iter().map(|l| l.account_id.as_str()).collect();
    let at: Vec<i64> = lines.iter().map(|l| l.effective_at.as_micros()).collect();
    let status: Vec<i16> = lines.iter().map(|l| if l.pending { STATUS_PENDING } else { STATUS_POSTED }).collect();
    let debit: Vec<bool> = lines.iter().map(|l| l.debit).collect();
    let amount: Vec<i64> = lines.iter().map(|l| l.amount).collect();
    let statement = tx.prepare_cached(INSERT_POSTINGS).await.map_err(db_err)?;
    tx.execute(&statement, &[&ids, &account_ids, &at, &versions, &status, &debit, &amount]).await.map_err(db_err)?;
    let work = ledger::bucket_work(lines.iter().copied(), versions);
    let rebuilt = if work.rebuild.is_empty() { Vec::new() } else { rebuilt_lines(tx, &work.rebuild).await? };
    add_to_buckets(tx, &ledger::bucket_deltas(rebuilt.iter().chain(work.lines), Change::Write)?).await
}

/// The entries of accounts reaching [`ledger::BUCKETS_FROM`], up to it, as the lines that build
/// their buckets afresh (the bucket rows an older release wrote for them deleted first).
async fn rebuilt_lines(tx: &impl GenericClient, account_ids: &[String]) -> Result<Vec<LedgerLine>> {
    let statement = tx.prepare_cached(DELETE_BUCKETS).await.map_err(db_err)?;
    tx.execute(&statement, &[&account_ids]).await.map_err(db_err)?;
    let statement = tx.prepare_cached(BUCKETED_ENTRIES).await.map_err(db_err)?;
    let rows = tx.query(&statement, &[&account_ids, &ledger::BUCKETS_FROM]).await.map_err(db_err)?;
    Ok(rows.iter().filter_map(|row| ledger::rebuilt_line(row.get(0), (row.get(1), row.get(2), row.get(3), row.get(4)))).collect())
}

/// Adds per-bucket changes to the accounts' time buckets (callers hold the accounts' row locks,
/// so bucket rows are only ever written in the accounts' lock order).
pub async fn add_to_buckets(tx: &impl GenericClient, deltas: &BTreeMap<ledger::BucketKey, Totals>) -> Result<()> {
    if deltas.is_empty() {
        return Ok(());
    }
    let accounts: Vec<&str> = deltas.keys().map(|k| k.0.as_str()).collect();
    let levels: Vec<i16> = deltas.keys().map(|k| k.1).collect();
    let buckets: Vec<i64> = deltas.keys().map(|k| k.2).collect();
    let column = |f: fn(&Totals) -> i64| deltas.values().map(f).collect::<Vec<i64>>();
    let (pd, pc, qd, qc) =
        (column(|t| t.posted_debits), column(|t| t.posted_credits), column(|t| t.pending_debits), column(|t| t.pending_credits));
    let statement = tx.prepare_cached(ADD_TO_BUCKETS).await.map_err(db_err)?;
    tx.execute(&statement, &[&accounts, &levels, &buckets, &pd, &pc, &qd, &qc]).await.map_err(db_err)?;
    Ok(())
}

/// Starts the sums of several new accounts at zero.
pub async fn open_all(tx: &impl GenericClient, accounts: &[(&str, bool)]) -> Result<()> {
    if accounts.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = accounts.iter().map(|a| a.0).collect();
    let normals: Vec<bool> = accounts.iter().map(|a| a.1).collect();
    let sql = "INSERT INTO ledger_account_sums (account_id, credit_normal) SELECT * FROM unnest($1::text[], $2::bool[])";
    tx.execute(sql, &[&ids, &normals]).await.map_err(db_err)?;
    Ok(())
}

/// Which of `keys` are already taken.
pub async fn taken_keys(tx: &impl GenericClient, keys: &[&str]) -> Result<Vec<String>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let rows = tx.query("SELECT key FROM unique_keys WHERE key = ANY($1)", &[&keys]).await.map_err(db_err)?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Takes every one of `keys` (checked free by the caller; a racing taker makes this fail).
pub async fn take_keys(tx: &impl GenericClient, keys: &[&str]) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    tx.execute("INSERT INTO unique_keys (key) SELECT * FROM unnest($1::text[])", &[&keys]).await.map_err(db_err)?;
    Ok(())
}

pub async fn settle(tx: &impl GenericClient, lines: &[LedgerLine], post: bool) -> Result<()> {
    let mut accounts = lock(tx, &ledger::accounts_named(lines, &[])).await?;
    ledger::settle(&mut accounts, lines, post)?;
    let ids: Vec<&str> = lines.iter().map(|l| l.entry_id.as_str()).collect();
    let status = if post { STATUS_POSTED } else { STATUS_ARCHIVED };
    let statement = tx.prepare_cached(SETTLE_POSTINGS).await.map_err(db_err)?;
    let moved = tx.execute(&statement, &[&ids, &status]).await.map_err(db_err)?;
    if moved != lines.len() as u64 {
        return Err(Error::Conflict {
            message: "the ledger transaction is no longer pending; read it again".into(),
            parameter: None,
            retry_after_s: None,
        });
    }
    store(tx, &accounts).await?;
    let moved = ledger::settled_bucket_lines(lines, &accounts);
    add_to_buckets(tx, &ledger::bucket_deltas(moved.into_iter(), if post { Change::Post } else { Change::Archive })?).await
}

pub fn claimed(row: &Row) -> Claimed {
    Claimed { count: row.get(0), debits: row.get(1), credits: row.get(2) }
}

/// Takes a settlement's entries (see [`Claim`]). The account's row is locked first, as every
/// posting and settling of its entries locks it, so racing settlements of one account queue
/// and their row updates never cross; the entries taken are summed as they are marked.
pub async fn claim(tx: &impl GenericClient, claim: &Claim) -> Result<()> {
    lock(tx, std::slice::from_ref(&claim.account_id)).await?;
    let statement = tx.prepare_cached(CLAIM).await.map_err(db_err)?;
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
        [&claim.account_id, &claim.before_micros, &claim.upto_version, &claim.settlement_id];
    let row = tx.query_one(&statement, &params).await.map_err(db_err)?;
    if claimed(&row) != claim.expected {
        return Err(ledger::claim_changed());
    }
    let statement = tx.prepare_cached(CLAIM_OWN).await.map_err(db_err)?;
    let marked = tx.execute(&statement, &[&claim.settlement_id, &claim.own_entry_ids, &claim.account_id]).await.map_err(db_err)?;
    if marked != claim.own_entry_ids.len() as u64 {
        return Err(Error::internal("a settlement's own ledger entry was not written with it"));
    }
    Ok(())
}

/// Gives back what a settlement took (its account's row locked first, as in [`claim`]).
pub async fn unclaim(tx: &impl GenericClient, account_id: &str, settlement_id: &str) -> Result<()> {
    lock(tx, &[account_id.to_owned()]).await?;
    let statement = tx.prepare_cached(UNCLAIM).await.map_err(db_err)?;
    tx.execute(&statement, &[&settlement_id]).await.map_err(db_err)?;
    Ok(())
}

pub async fn unique(tx: &impl GenericClient, key: &str, parameter: &str, message: &str) -> Result<()> {
    let sql = "INSERT INTO unique_keys (key) VALUES ($1) ON CONFLICT DO NOTHING";
    let taken = tx.execute(sql, &[&key]).await.map_err(db_err)?;
    if taken == 0 { Err(Error::invalid(parameter, message)) } else { Ok(()) }
}

pub async fn release_unique(tx: &impl GenericClient, key: &str) -> Result<()> {
    tx.execute("DELETE FROM unique_keys WHERE key = $1", &[&key]).await.map_err(db_err)?;
    Ok(())
}

pub async fn lock(tx: &impl GenericClient, ids: &[String]) -> Result<BTreeMap<String, AccountState>> {
    let statement = tx.prepare_cached(LOCK_ACCOUNTS).await.map_err(db_err)?;
    let rows = tx.query(&statement, &[&ids]).await.map_err(db_err)?;
    Ok(rows.iter().map(state_row).collect())
}

pub async fn store(tx: &impl GenericClient, accounts: &BTreeMap<String, AccountState>) -> Result<()> {
    let ids: Vec<&str> = accounts.keys().map(String::as_str).collect();
    let column = |f: fn(&AccountState) -> i64| accounts.values().map(f).collect::<Vec<i64>>();
    let pd = column(|s| s.totals.posted_debits);
    let pc = column(|s| s.totals.posted_credits);
    let qd = column(|s| s.totals.pending_debits);
    let qc = column(|s| s.totals.pending_credits);
    let v = column(|s| s.lock_version);
    let statement = tx.prepare_cached(STORE_ACCOUNTS).await.map_err(db_err)?;
    tx.execute(&statement, &[&ids, &pd, &pc, &qd, &qc, &v]).await.map_err(db_err)?;
    Ok(())
}

pub fn state_row(row: &Row) -> (String, AccountState) {
    (row.get(0), AccountState { credit_normal: row.get(1), totals: totals_at(row, 2), lock_version: row.get(6) })
}

/// The four sums in columns `first..first + 4`: posted debits, posted credits, pending debits,
/// pending credits (the order every statement here selects them in).
pub(super) fn totals_at(row: &Row, first: usize) -> Totals {
    Totals {
        posted_debits: row.get(first),
        posted_credits: row.get(first + 1),
        pending_debits: row.get(first + 2),
        pending_credits: row.get(first + 3),
    }
}
