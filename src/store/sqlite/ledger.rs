//! Ledger writes and reads on SQLite (see `store::ledger`). The writer thread is the only
//! writer, so a posting reads its accounts, checks and writes them with nothing in between.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::row_err;
use crate::base::ledger::{Totals, Window};
use crate::error::{Error, Result};
use crate::store::ledger::{
    self, AccountGuard, AccountState, Change, Claim, Claimed, LedgerLine, Piece, STATUS_ARCHIVED, STATUS_PENDING, STATUS_POSTED,
};

pub fn open(tx: &Transaction<'_>, account_id: &str, credit_normal: bool) -> Result<()> {
    tx.prepare_cached("INSERT INTO ledger_account_sums (account_id, credit_normal) VALUES (?1, ?2)")
        .and_then(|mut st| st.execute(params![account_id, credit_normal]))
        .map_err(row_err)?;
    Ok(())
}

pub fn post(tx: &Transaction<'_>, lines: &[LedgerLine], guards: &[AccountGuard]) -> Result<()> {
    let mut accounts = load(tx, &ledger::accounts_named(lines, guards))?;
    let versions = ledger::post(&mut accounts, lines, guards)?;
    store(tx, &accounts)?;
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO ledger_postings (entry_id, account_id, effective_at, version, status, debit, amount)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .map_err(row_err)?;
    for (line, version) in lines.iter().zip(&versions) {
        let status = if line.pending { STATUS_PENDING } else { STATUS_POSTED };
        insert
            .execute(params![line.entry_id, line.account_id, line.effective_at.as_micros(), version, status, line.debit, line.amount])
            .map_err(row_err)?;
    }
    let work = ledger::bucket_work(lines.iter(), &versions);
    let mut rebuilt = Vec::new();
    for account_id in &work.rebuild {
        rebuilt.extend(rebuilt_lines(tx, account_id)?);
    }
    add_to_buckets(tx, &ledger::bucket_deltas(rebuilt.iter().chain(work.lines), Change::Write)?)
}

/// The entries of an account reaching [`ledger::BUCKETS_FROM`], up to it, as the lines that
/// build its buckets afresh (the bucket rows an older release wrote for it deleted first).
fn rebuilt_lines(tx: &Transaction<'_>, account_id: &str) -> Result<Vec<LedgerLine>> {
    tx.prepare_cached("DELETE FROM ledger_buckets WHERE account_id = ?1").and_then(|mut st| st.execute([account_id])).map_err(row_err)?;
    let mut select = tx
        .prepare_cached("SELECT effective_at, status, debit, amount FROM ledger_postings WHERE account_id = ?1 AND version <= ?2")
        .map_err(row_err)?;
    let rows = select
        .query_map(params![account_id, ledger::BUCKETS_FROM], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)))
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(row_err)?;
    Ok(rows.into_iter().filter_map(|row| ledger::rebuilt_line(account_id, row)).collect())
}

fn add_to_buckets(tx: &Transaction<'_>, deltas: &BTreeMap<ledger::BucketKey, Totals>) -> Result<()> {
    let mut upsert = tx
        .prepare_cached(
            "INSERT INTO ledger_buckets (account_id, level, bucket, posted_debits, posted_credits, pending_debits, pending_credits)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (account_id, level, bucket) DO UPDATE SET
               posted_debits = posted_debits + excluded.posted_debits, posted_credits = posted_credits + excluded.posted_credits,
               pending_debits = pending_debits + excluded.pending_debits, pending_credits = pending_credits + excluded.pending_credits",
        )
        .map_err(row_err)?;
    for ((account, level, bucket), t) in deltas {
        upsert
            .execute(params![account, level, bucket, t.posted_debits, t.posted_credits, t.pending_debits, t.pending_credits])
            .map_err(row_err)?;
    }
    Ok(())
}

pub fn settle(tx: &Transaction<'_>, lines: &[LedgerLine], post: bool) -> Result<()> {
    let mut accounts = load(tx, &ledger::accounts_named(lines, &[]))?;
    ledger::settle(&mut accounts, lines, post)?;
    let status = if post { STATUS_POSTED } else { STATUS_ARCHIVED };
    let mut update = tx.prepare_cached("UPDATE ledger_postings SET status = ?2 WHERE entry_id = ?1 AND status = ?3").map_err(row_err)?;
    for line in lines {
        if update.execute(params![line.entry_id, status, STATUS_PENDING]).map_err(row_err)? == 0 {
            return Err(not_pending());
        }
    }
    store(tx, &accounts)?;
    let moved = ledger::settled_bucket_lines(lines, &accounts);
    add_to_buckets(tx, &ledger::bucket_deltas(moved.into_iter(), if post { Change::Post } else { Change::Archive })?)
}

/// The posted, unsettled entries a claim over (`account_id`, `before`, `upto_version`) takes.
const UNSETTLED: &str = "account_id = ?1 AND effective_at < ?2 AND version <= ?3 AND status = 1 AND settlement_id IS NULL";

pub fn unsettled(conn: &Connection, account_id: &str, before: i64, upto_version: i64) -> rusqlite::Result<Claimed> {
    let sql = format!(
        "SELECT count(*), coalesce(sum(CASE WHEN debit THEN amount ELSE 0 END), 0), coalesce(sum(CASE WHEN debit THEN 0 ELSE amount END), 0)
         FROM ledger_postings WHERE {UNSETTLED}"
    );
    conn.prepare_cached(&sql)?.query_row(params![account_id, before, upto_version], |row| {
        Ok(Claimed { count: row.get(0)?, debits: row.get(1)?, credits: row.get(2)? })
    })
}

/// Takes a settlement's entries (see [`Claim`]): the one writer makes the sum and the marking
/// one step, so the set taken is exactly the set summed.
pub fn claim(tx: &Transaction<'_>, claim: &Claim) -> Result<()> {
    let found = unsettled(tx, &claim.account_id, claim.before_micros, claim.upto_version).map_err(row_err)?;
    if found != claim.expected {
        return Err(ledger::claim_changed());
    }
    let sql = format!("UPDATE ledger_postings SET settlement_id = ?4 WHERE {UNSETTLED}");
    tx.prepare_cached(&sql)
        .and_then(|mut st| st.execute(params![claim.account_id, claim.before_micros, claim.upto_version, claim.settlement_id]))
        .map_err(row_err)?;
    let mut own = tx
        .prepare_cached("UPDATE ledger_postings SET settlement_id = ?1 WHERE entry_id = ?2 AND account_id = ?3 AND settlement_id IS NULL")
        .map_err(row_err)?;
    for entry_id in &claim.own_entry_ids {
        if own.execute(params![claim.settlement_id, entry_id, claim.account_id]).map_err(row_err)? != 1 {
            return Err(Error::internal("a settlement's own ledger entry was not written with it"));
        }
    }
    Ok(())
}

/// Gives back what a settlement took.
pub fn unclaim(tx: &Transaction<'_>, settlement_id: &str) -> Result<()> {
    tx.prepare_cached("UPDATE ledger_postings SET settlement_id = NULL WHERE settlement_id = ?1")
        .and_then(|mut st| st.execute([settlement_id]))
        .map_err(row_err)?;
    Ok(())
}

pub fn unique(tx: &Transaction<'_>, key: &str, parameter: &str, message: &str) -> Result<()> {
    let taken =
        tx.prepare_cached("INSERT OR IGNORE INTO unique_keys (key) VALUES (?1)").and_then(|mut st| st.execute([key])).map_err(row_err)?;
    if taken == 0 { Err(Error::invalid(parameter, message)) } else { Ok(()) }
}

pub fn release_unique(tx: &Transaction<'_>, key: &str) -> Result<()> {
    tx.prepare_cached("DELETE FROM unique_keys WHERE key = ?1").and_then(|mut st| st.execute([key])).map_err(row_err)?;
    Ok(())
}

fn not_pending() -> Error {
    Error::Conflict { message: "the ledger transaction is no longer pending; read it again".into(), parameter: None, retry_after_s: None }
}

fn load(conn: &Connection, ids: &[String]) -> Result<BTreeMap<String, AccountState>> {
    load_rows(conn, ids).map_err(row_err)
}

fn load_rows(conn: &Connection, ids: &[String]) -> rusqlite::Result<BTreeMap<String, AccountState>> {
    let mut out = BTreeMap::new();
    let mut st = conn.prepare_cached(
        "SELECT credit_normal, posted_debits, posted_credits, pending_debits, pending_credits, lock_version
         FROM ledger_account_sums WHERE account_id = ?1",
    )?;
    for id in ids {
        if let Some(state) = st.query_row([id], state_row).optional()? {
            out.insert(id.clone(), state);
        }
    }
    Ok(out)
}

fn state_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<AccountState> {
    Ok(AccountState {
        credit_normal: row.get(0)?,
        totals: Totals {
            posted_debits: row.get(1)?,
            posted_credits: row.get(2)?,
            pending_debits: row.get(3)?,
            pending_credits: row.get(4)?,
        },
        lock_version: row.get(5)?,
    })
}

fn store(tx: &Transaction<'_>, accounts: &BTreeMap<String, AccountState>) -> Result<()> {
    let mut st = tx
        .prepare_cached(
            "UPDATE ledger_account_sums SET posted_debits = ?2, posted_credits = ?3, pending_debits = ?4, pending_credits = ?5,
               lock_version = ?6 WHERE account_id = ?1",
        )
        .map_err(row_err)?;
    for (id, s) in accounts {
        let t = &s.totals;
        st.execute(params![id, t.posted_debits, t.posted_credits, t.pending_debits, t.pending_credits, s.lock_version]).map_err(row_err)?;
    }
    Ok(())
}

pub fn accounts(conn: &Connection, ids: &[String]) -> rusqlite::Result<Vec<(String, AccountState)>> {
    Ok(load_rows(conn, ids)?.into_iter().collect())
}

/// Sums the account's entries inside `window`: from its time buckets and the few entries of
/// the finest buckets at the window's ends if it keeps buckets, else from its entries
/// (`store::ledger::window_pieces`). One read transaction, so whether the account keeps buckets
/// and what they hold are read from the same snapshot.
pub fn window(conn: &Connection, account_id: &str, window: &Window) -> Result<Totals> {
    let read = conn.unchecked_transaction().map_err(row_err)?;
    let version: i64 = read
        .prepare_cached("SELECT lock_version FROM ledger_account_sums WHERE account_id = ?1")
        .and_then(|mut st| st.query_row([account_id], |row| row.get(0)).optional())
        .map_err(row_err)?
        .unwrap_or(0);
    let (add, subtract) = ledger::window_pieces(window, ledger::bucketed(version));
    let totals = sum_pieces(&read, account_id, &add)?.minus(sum_pieces(&read, account_id, &subtract)?)?;
    read.finish().map_err(row_err)?;
    Ok(totals)
}

fn sum_pieces(conn: &Connection, account_id: &str, pieces: &[Piece]) -> Result<Totals> {
    let mut totals = Totals::default();
    let mut buckets = conn
        .prepare_cached(
            "SELECT coalesce(sum(posted_debits), 0), coalesce(sum(posted_credits), 0), coalesce(sum(pending_debits), 0),
           coalesce(sum(pending_credits), 0)
         FROM ledger_buckets WHERE account_id = ?1 AND level = ?2 AND bucket >= ?3 AND bucket < ?4",
        )
        .map_err(row_err)?;
    let mut entries = conn
        .prepare_cached(
            "SELECT status, debit, sum(amount) FROM ledger_postings
         WHERE account_id = ?1 AND status <> 2 AND effective_at >= ?2 AND effective_at <= ?3 AND version <= ?4
         GROUP BY status, debit",
        )
        .map_err(row_err)?;
    for piece in pieces {
        match *piece {
            Piece::Buckets { level, from, to } => {
                let part = buckets
                    .query_row(params![account_id, level, from, to], |row| {
                        Ok(Totals {
                            posted_debits: row.get(0)?,
                            posted_credits: row.get(1)?,
                            pending_debits: row.get(2)?,
                            pending_credits: row.get(3)?,
                        })
                    })
                    .map_err(row_err)?;
                totals = totals.plus(part)?;
            }
            Piece::Entries { from, to, upto_version } => {
                let rows = entries
                    .query_map(params![account_id, from, to, upto_version.unwrap_or(i64::MAX)], |row| {
                        Ok((row.get::<_, i16>(0)?, row.get::<_, bool>(1)?, row.get::<_, i64>(2)?))
                    })
                    .map_err(row_err)?;
                for row in rows {
                    let (status, debit, amount) = row.map_err(row_err)?;
                    ledger::add_row(&mut totals, status, debit, amount)?;
                }
            }
        }
    }
    Ok(totals)
}

pub fn entry_versions(conn: &Connection, entry_ids: &[String]) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut st = conn.prepare_cached("SELECT version FROM ledger_postings WHERE entry_id = ?1")?;
    let mut out = Vec::with_capacity(entry_ids.len());
    for id in entry_ids {
        if let Some(version) = st.query_row([id], |row| row.get(0)).optional()? {
            out.push((id.clone(), version));
        }
    }
    Ok(out)
}
