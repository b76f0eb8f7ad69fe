//! Ledger postings as the store applies them (SPEC G2 to G6): each account's running sums and
//! version, checked and moved inside the transaction that writes the entries.
//!
//! Both stores load the accounts a batch touches (PostgreSQL locks their rows in one global
//! order, so racing writers queue instead of deadlocking; SQLite has one writer), run the same
//! pure steps here, and write back what changed. A refused posting changes nothing: its batch
//! rolls back whole.

use std::collections::BTreeMap;

use crate::base::ledger::{BalanceCondition, Totals};
use crate::base::time::Timestamp;
use crate::error::{Error, Result};

/// One entry's effect on its account.
#[derive(Debug, Clone)]
pub struct LedgerLine {
    pub entry_id: String,
    pub account_id: String,
    pub effective_at: Timestamp,
    pub debit: bool,
    pub amount: i64,
    /// Whether the entry is written pending (else posted).
    pub pending: bool,
}

/// What must hold of an account for a posting to commit (SPEC G4).
#[derive(Debug, Clone)]
pub struct AccountGuard {
    pub account_id: String,
    /// The version the request expects the account to be at before the posting, and the
    /// request field that gave it.
    pub lock_version: Option<(i64, String)>,
    /// Conditions on the account's balances after the whole posting.
    pub conditions: Vec<BalanceCondition>,
}

/// An account's state as the store keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccountState {
    pub credit_normal: bool,
    pub totals: Totals,
    /// How many entries were ever written to the account (SPEC G4's `lock_version`).
    pub lock_version: i64,
}

/// Where a posting's entries are kept: status codes of the `ledger_postings` table.
pub const STATUS_PENDING: i16 = 0;
pub const STATUS_POSTED: i16 = 1;
pub const STATUS_ARCHIVED: i16 = 2;

/// Applies `lines` to `accounts` (loaded by the store: every account the lines or guards name)
/// and checks `guards`; returns each line's account version (the version its write made).
/// On error `accounts` is left half-changed: the caller rolls back.
pub fn post(accounts: &mut BTreeMap<String, AccountState>, lines: &[LedgerLine], guards: &[AccountGuard]) -> Result<Vec<i64>> {
    for guard in guards {
        let Some((expected, parameter)) = &guard.lock_version else { continue };
        let state = state_of(accounts, &guard.account_id)?;
        if state.lock_version != *expected {
            return Err(stale_lock_version(parameter, *expected, state.lock_version));
        }
    }
    let mut versions = Vec::with_capacity(lines.len());
    for line in lines {
        let state = accounts.get_mut(&line.account_id).ok_or_else(|| gone(&line.account_id))?;
        state.totals.add(line.debit, line.amount, line.pending)?;
        state.lock_version += 1;
        versions.push(state.lock_version);
    }
    for guard in guards {
        let state = state_of(accounts, &guard.account_id)?;
        for condition in &guard.conditions {
            condition.check(&state.totals, state.credit_normal)?;
        }
    }
    Ok(versions)
}

/// Moves pending `lines` to posted (`post`) or out of every sum (archived).
pub fn settle(accounts: &mut BTreeMap<String, AccountState>, lines: &[LedgerLine], post: bool) -> Result<()> {
    for line in lines {
        let state = accounts.get_mut(&line.account_id).ok_or_else(|| gone(&line.account_id))?;
        state.totals.remove(line.debit, line.amount, true)?;
        if post {
            state.totals.add(line.debit, line.amount, false)?;
        }
    }
    Ok(())
}

/// The accounts `lines` and `guards` name, sorted and distinct: the order rows are locked in.
pub fn accounts_named(lines: &[LedgerLine], guards: &[AccountGuard]) -> Vec<String> {
    let mut ids: Vec<String> = lines.iter().map(|l| l.account_id.clone()).chain(guards.iter().map(|g| g.account_id.clone())).collect();
    ids.sort();
    ids.dedup();
    ids
}

fn state_of<'a>(accounts: &'a BTreeMap<String, AccountState>, id: &str) -> Result<&'a AccountState> {
    accounts.get(id).ok_or_else(|| gone(id))
}

fn gone(account_id: &str) -> Error {
    Error::invalid("ledger_entries", format!("ledger account {account_id} no longer exists"))
}

/// SPEC G4: 409, and retrying the same request cannot fix it (the caller must read the
/// account again), so no `Retry-After`.
fn stale_lock_version(parameter: &str, expected: i64, current: i64) -> Error {
    Error::Conflict {
        message: format!(
            "{parameter} is {expected} but the ledger account is at lock_version {current}: it changed since it was read; nothing was written"
        ),
        parameter: Some(parameter.to_owned()),
        retry_after_s: None,
    }
}

/// Adds a posting table row's amount into `totals` (reading balances back from entries).
pub fn add_row(totals: &mut Totals, status: i16, debit: bool, amount: i64) -> Result<()> {
    match status {
        STATUS_PENDING => totals.add(debit, amount, true),
        STATUS_POSTED => totals.add(debit, amount, false),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ledger::{BalanceKind, Comparison};

    fn line(account: &str, debit: bool, amount: i64) -> LedgerLine {
        LedgerLine {
            entry_id: format!("e-{account}-{amount}"),
            account_id: account.into(),
            effective_at: Timestamp::from_micros(0),
            debit,
            amount,
            pending: false,
        }
    }

    fn accounts() -> BTreeMap<String, AccountState> {
        let state = AccountState { credit_normal: true, totals: Totals::default(), lock_version: 0 };
        [("a".to_string(), state), ("b".to_string(), state)].into_iter().collect()
    }

    #[test]
    fn g4_versions_count_entries_and_a_stale_one_is_a_409() {
        let mut state = accounts();
        let versions = post(&mut state, &[line("a", true, 5), line("b", false, 5)], &[]).unwrap();
        assert_eq!(versions, [1, 1]);
        let guard =
            AccountGuard { account_id: "a".into(), lock_version: Some((0, "ledger_entries[0].lock_version".into())), conditions: vec![] };
        let err = post(&mut state, &[line("a", true, 5), line("b", false, 5)], &[guard]).unwrap_err();
        assert!(
            matches!(err, Error::Conflict { parameter: Some(ref p), retry_after_s: None, .. } if p == "ledger_entries[0].lock_version")
        );
    }

    #[test]
    fn g4_conditions_are_checked_after_the_whole_posting() {
        let mut state = accounts();
        let condition = BalanceCondition {
            kind: BalanceKind::Available,
            comparison: Comparison::Gte,
            value: 0,
            parameter: "ledger_entries[0].available_balance_amount".into(),
        };
        let guard = AccountGuard { account_id: "a".into(), lock_version: None, conditions: vec![condition] };
        // Debiting a credit-normal account with nothing in it takes it below zero.
        assert!(post(&mut state.clone(), &[line("a", true, 5), line("b", false, 5)], std::slice::from_ref(&guard)).is_err());
        // The same debit with a credit to the same account first in the transaction nets out.
        assert!(post(&mut state, &[line("a", true, 5), line("a", false, 5)], &[guard]).is_ok());
    }

    #[test]
    fn g2_settling_moves_pending_to_posted_or_out() {
        let mut state = accounts();
        let mut pending = line("a", true, 7);
        pending.pending = true;
        post(&mut state, std::slice::from_ref(&pending), &[]).unwrap();
        assert_eq!(state["a"].totals.pending_debits, 7);
        let mut archived = state.clone();
        settle(&mut archived, std::slice::from_ref(&pending), false).unwrap();
        assert_eq!(archived["a"].totals, Totals::default());
        settle(&mut state, &[pending], true).unwrap();
        assert_eq!(state["a"].totals, Totals { posted_debits: 7, ..Totals::default() });
    }
}
