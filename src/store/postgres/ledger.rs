//! Ledger writes and reads on PostgreSQL (see `store::ledger`). A posting locks its accounts'
//! rows in one statement, in account-id order (`ORDER BY ... FOR UPDATE` locks rows as the sort
//! returns them), so concurrent postings on any instance queue on the rows they share and can
//! never deadlock each other; the checks run on the locked values, and the new values and the
//! entries are written in two more statements before the batch's COMMIT (SPEC G4, G6).

use std::collections::BTreeMap;

use deadpool_postgres::Transaction;
use tokio_postgres::Row;

use super::db_err;
use crate::base::ledger::{Totals, Window};
use crate::error::{Error, Result};
use crate::store::ledger::{self, AccountGuard, AccountState, LedgerLine, STATUS_ARCHIVED, STATUS_PENDING, STATUS_POSTED};

const LOCK_ACCOUNTS: &str = "SELECT account_id, credit_normal, posted_debits, posted_credits, pending_debits, pending_credits, lock_version
     FROM ledger_account_sums WHERE account_id = ANY($1) ORDER BY account_id FOR UPDATE";
const STORE_ACCOUNTS: &str = "UPDATE ledger_account_sums AS s
     SET posted_debits = n.pd, posted_credits = n.pc, pending_debits = n.qd, pending_credits = n.qc, lock_version = n.v
     FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[]) AS n(id, pd, pc, qd, qc, v)
     WHERE s.account_id = n.id";
const INSERT_POSTINGS: &str = "INSERT INTO ledger_postings (entry_id, account_id, effective_at, version, status, debit, amount)
     SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::smallint[], $6::boolean[], $7::bigint[])";
const SETTLE_POSTINGS: &str = "UPDATE ledger_postings SET status = $2 WHERE entry_id = ANY($1) AND status = 0";
pub const ACCOUNTS: &str = "SELECT account_id, credit_normal, posted_debits, posted_credits, pending_debits, pending_credits, lock_version
     FROM ledger_account_sums WHERE account_id = ANY($1)";
pub const WINDOW: &str = "SELECT status, debit, sum(amount)::bigint FROM ledger_postings
     WHERE account_id = $1 AND status <> 2
       AND effective_at >= $2
       AND (effective_at < $3 OR ($4 AND effective_at = $3))
       AND version <= $5
       AND (effective_at < $6 OR (effective_at = $6 AND version <= $7))
     GROUP BY status, debit";
pub const ENTRY_VERSIONS: &str = "SELECT entry_id, version FROM ledger_postings WHERE entry_id = ANY($1)";

pub async fn open(tx: &Transaction<'_>, account_id: &str, credit_normal: bool) -> Result<()> {
    let sql = "INSERT INTO ledger_account_sums (account_id, credit_normal) VALUES ($1, $2)";
    tx.execute(sql, &[&account_id, &credit_normal]).await.map_err(db_err)?;
    Ok(())
}

pub async fn post(tx: &Transaction<'_>, lines: &[LedgerLine], guards: &[AccountGuard]) -> Result<()> {
    let mut accounts = lock(tx, &ledger::accounts_named(lines, guards)).await?;
    let versions = ledger::post(&mut accounts, lines, guards)?;
    store(tx, &accounts).await?;
    let ids: Vec<&str> = lines.iter().map(|l| l.entry_id.as_str()).collect();
    let account_ids: Vec<&str> = lines.iter().map(|l| l.account_id.as_str()).collect();
    let at: Vec<i64> = lines.iter().map(|l| l.effective_at.as_micros()).collect();
    let status: Vec<i16> = lines.iter().map(|l| if l.pending { STATUS_PENDING } else { STATUS_POSTED }).collect();
    let debit: Vec<bool> = lines.iter().map(|l| l.debit).collect();
    let amount: Vec<i64> = lines.iter().map(|l| l.amount).collect();
    let statement = tx.prepare_cached(INSERT_POSTINGS).await.map_err(db_err)?;
    tx.execute(&statement, &[&ids, &account_ids, &at, &versions, &status, &debit, &amount]).await.map_err(db_err)?;
    Ok(())
}

pub async fn settle(tx: &Transaction<'_>, lines: &[LedgerLine], post: bool) -> Result<()> {
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
    store(tx, &accounts).await
}

pub async fn unique(tx: &Transaction<'_>, key: &str, parameter: &str, message: &str) -> Result<()> {
    let sql = "INSERT INTO unique_keys (key) VALUES ($1) ON CONFLICT DO NOTHING";
    let taken = tx.execute(sql, &[&key]).await.map_err(db_err)?;
    if taken == 0 { Err(Error::invalid(parameter, message)) } else { Ok(()) }
}

pub async fn release_unique(tx: &Transaction<'_>, key: &str) -> Result<()> {
    tx.execute("DELETE FROM unique_keys WHERE key = $1", &[&key]).await.map_err(db_err)?;
    Ok(())
}

async fn lock(tx: &Transaction<'_>, ids: &[String]) -> Result<BTreeMap<String, AccountState>> {
    let statement = tx.prepare_cached(LOCK_ACCOUNTS).await.map_err(db_err)?;
    let rows = tx.query(&statement, &[&ids]).await.map_err(db_err)?;
    Ok(rows.iter().map(state_row).collect())
}

async fn store(tx: &Transaction<'_>, accounts: &BTreeMap<String, AccountState>) -> Result<()> {
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
    let totals = Totals { posted_debits: row.get(2), posted_credits: row.get(3), pending_debits: row.get(4), pending_credits: row.get(5) };
    (row.get(0), AccountState { credit_normal: row.get(1), totals, lock_version: row.get(6) })
}

/// The parameters of [`WINDOW`], in order.
pub fn window_params(window: &Window) -> (i64, i64, bool, i64, i64, i64) {
    let (through_at, through_version) = window.through_entry.unwrap_or((i64::MAX, i64::MAX));
    (
        window.from_micros.unwrap_or(i64::MIN),
        window.to_micros.unwrap_or(i64::MAX),
        window.through_inclusive || window.to_micros.is_none(),
        window.upto_version.unwrap_or(i64::MAX),
        through_at,
        through_version,
    )
}
