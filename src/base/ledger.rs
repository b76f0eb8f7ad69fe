//! The arithmetic of a ledger account's balances (SPEC G3, G4), below both the domain and the
//! store: the store keeps four running sums per account and checks an entry's balance
//! conditions against them inside the transaction that writes it; the domain renders the same
//! sums as Modern Treasury's pending, posted and available balances. One definition, so what
//! the store enforces is exactly what the API shows.

use crate::error::{Error, Result};

/// The running sums of an account's live entries, in minor units. `pending_*` count entries
/// still pending only (a posted entry moves from them to `posted_*`; an archived one leaves both).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub posted_debits: i64,
    pub posted_credits: i64,
    pub pending_debits: i64,
    pub pending_credits: i64,
}

/// Which of an account's three balances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BalanceKind {
    /// Posted and pending entries.
    Pending,
    /// Posted entries only.
    Posted,
    /// Posted entries less pending outflows (debits of a credit-normal account, credits of a
    /// debit-normal one).
    Available,
}

impl BalanceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BalanceKind::Pending => "pending_balance",
            BalanceKind::Posted => "posted_balance",
            BalanceKind::Available => "available_balance",
        }
    }
}

/// One balance: its credits, debits, and amount signed by the account's normal balance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Balance {
    pub credits: i64,
    pub debits: i64,
    pub amount: i64,
}

impl Totals {
    /// Adds an entry's effect (`pending`: it counts as pending, else posted); checked, since a
    /// sum past `i64` is refused rather than wrapped. The pending balance counts posted and
    /// pending entries together, so their sums must fit too: otherwise the write would succeed
    /// and every later read of the account (and of any list holding it) would fail.
    pub fn add(&mut self, debit: bool, amount: i64, pending: bool) -> Result<()> {
        let sum = match (debit, pending) {
            (true, true) => &mut self.pending_debits,
            (false, true) => &mut self.pending_credits,
            (true, false) => &mut self.posted_debits,
            (false, false) => &mut self.posted_credits,
        };
        *sum = sum.checked_add(amount).ok_or_else(overflow)?;
        self.posted_debits.checked_add(self.pending_debits).ok_or_else(overflow)?;
        self.posted_credits.checked_add(self.pending_credits).ok_or_else(overflow)?;
        Ok(())
    }

    /// Removes an entry's effect, as [`add`](Self::add) added it.
    pub fn remove(&mut self, debit: bool, amount: i64, pending: bool) -> Result<()> {
        self.add(debit, -amount, pending)
    }

    /// Sums two sets of totals (a category's accounts), checked.
    pub fn plus(self, other: Totals) -> Result<Totals> {
        let add = |a: i64, b: i64| a.checked_add(b).ok_or_else(overflow);
        Ok(Totals {
            posted_debits: add(self.posted_debits, other.posted_debits)?,
            posted_credits: add(self.posted_credits, other.posted_credits)?,
            pending_debits: add(self.pending_debits, other.pending_debits)?,
            pending_credits: add(self.pending_credits, other.pending_credits)?,
        })
    }

    /// `self` less `other` (the sums of a window: up to its end, less up to its start), checked.
    pub fn minus(self, other: Totals) -> Result<Totals> {
        let sub = |a: i64, b: i64| a.checked_sub(b).ok_or_else(overflow);
        Ok(Totals {
            posted_debits: sub(self.posted_debits, other.posted_debits)?,
            posted_credits: sub(self.posted_credits, other.posted_credits)?,
            pending_debits: sub(self.pending_debits, other.pending_debits)?,
            pending_credits: sub(self.pending_credits, other.pending_credits)?,
        })
    }

    /// One of the three balances, signed by the normal balance (`credit_normal`: credits minus
    /// debits; otherwise debits minus credits).
    pub fn balance(&self, kind: BalanceKind, credit_normal: bool) -> Result<Balance> {
        let add = |a: i64, b: i64| a.checked_add(b).ok_or_else(overflow);
        let (credits, debits) = match kind {
            BalanceKind::Posted => (self.posted_credits, self.posted_debits),
            BalanceKind::Pending => (add(self.posted_credits, self.pending_credits)?, add(self.posted_debits, self.pending_debits)?),
            BalanceKind::Available if credit_normal => (self.posted_credits, add(self.posted_debits, self.pending_debits)?),
            BalanceKind::Available => (add(self.posted_credits, self.pending_credits)?, self.posted_debits),
        };
        let amount = if credit_normal { credits.checked_sub(debits) } else { debits.checked_sub(credits) };
        Ok(Balance { credits, debits, amount: amount.ok_or_else(overflow)? })
    }
}

fn overflow() -> Error {
    Error::invalid("ledger_entries", "this transaction would take a balance past the largest amount Payrail keeps (2^63 - 1)")
}

/// How a condition compares the balance with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Gt,
    Gte,
    Lt,
    Lte,
    Eq,
}

impl Comparison {
    pub fn parse(text: &str) -> Option<Comparison> {
        Some(match text {
            "gt" => Comparison::Gt,
            "gte" => Comparison::Gte,
            "lt" => Comparison::Lt,
            "lte" => Comparison::Lte,
            "eq" => Comparison::Eq,
            _ => return None,
        })
    }

    pub fn holds(self, left: i64, right: i64) -> bool {
        match self {
            Comparison::Gt => left > right,
            Comparison::Gte => left >= right,
            Comparison::Lt => left < right,
            Comparison::Lte => left <= right,
            Comparison::Eq => left == right,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Comparison::Gt => "gt",
            Comparison::Gte => "gte",
            Comparison::Lt => "lt",
            Comparison::Lte => "lte",
            Comparison::Eq => "eq",
        }
    }
}

/// A balance condition an entry carries (SPEC G4): after the whole transaction, the account's
/// `kind` balance amount must compare to `value` as `comparison` says, or nothing is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalanceCondition {
    pub kind: BalanceKind,
    pub comparison: Comparison,
    pub value: i64,
    /// The request field it came from (`ledger_entries[1].available_balance_amount`).
    pub parameter: String,
}

impl BalanceCondition {
    /// Ok if the condition holds on `totals`; else the 422 that names it.
    pub fn check(&self, totals: &Totals, credit_normal: bool) -> Result<()> {
        let amount = totals.balance(self.kind, credit_normal)?.amount;
        if self.comparison.holds(amount, self.value) {
            return Ok(());
        }
        Err(Error::invalid(
            self.parameter.clone(),
            format!(
                "the account's {} would be {amount}, which is not {} {}; nothing was written",
                self.kind.as_str().replace('_', " "),
                self.comparison.as_str(),
                self.value
            ),
        ))
    }
}

/// Which of an account's entries a balance counts, by effective time (SPEC G5) or by the
/// account's version: lower bound inclusive, upper bound inclusive or exclusive as MT's
/// parameters say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// Entries effective at or after this instant (micros since the epoch).
    pub from_micros: Option<i64>,
    /// Entries effective before this instant, or at it when `through_inclusive`.
    pub to_micros: Option<i64>,
    pub through_inclusive: bool,
    /// Entries written at or before this account version (`as_of_lock_version`, or an entry's
    /// own version for the balance that resulted from it).
    pub upto_version: Option<i64>,
    /// Entries up to and including one entry in effective order (effective time, then account
    /// version): the balance that entry resulted in.
    pub through_entry: Option<(i64, i64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals() -> Totals {
        Totals { posted_debits: 30, posted_credits: 100, pending_debits: 20, pending_credits: 5 }
    }

    #[test]
    fn g3_balances_of_a_credit_normal_account() {
        let t = totals();
        assert_eq!(t.balance(BalanceKind::Posted, true).unwrap(), Balance { credits: 100, debits: 30, amount: 70 });
        assert_eq!(t.balance(BalanceKind::Pending, true).unwrap(), Balance { credits: 105, debits: 50, amount: 55 });
        // Available: posted less pending outflows (debits); a pending inflow does not count.
        assert_eq!(t.balance(BalanceKind::Available, true).unwrap(), Balance { credits: 100, debits: 50, amount: 50 });
    }

    #[test]
    fn g3_balances_of_a_debit_normal_account() {
        let t = totals();
        assert_eq!(t.balance(BalanceKind::Posted, false).unwrap().amount, -70);
        assert_eq!(t.balance(BalanceKind::Pending, false).unwrap().amount, -55);
        assert_eq!(t.balance(BalanceKind::Available, false).unwrap(), Balance { credits: 105, debits: 30, amount: -75 });
    }

    #[test]
    fn g4_conditions_compare_the_signed_amount() {
        let t = totals();
        let cond = |kind, comparison, value| BalanceCondition { kind, comparison, value, parameter: "p".into() };
        assert!(cond(BalanceKind::Available, Comparison::Gte, 50).check(&t, true).is_ok());
        assert!(cond(BalanceKind::Available, Comparison::Gt, 50).check(&t, true).is_err());
        assert!(cond(BalanceKind::Posted, Comparison::Eq, 70).check(&t, true).is_ok());
        assert!(cond(BalanceKind::Pending, Comparison::Lt, 0).check(&t, false).is_ok());
        let err = cond(BalanceKind::Pending, Comparison::Lte, 10).check(&t, true).unwrap_err();
        assert!(matches!(err, Error::Invalid { ref parameter, .. } if parameter == "p"));
    }

    #[test]
    fn sums_past_i64_are_refused_not_wrapped() {
        let mut t = Totals { posted_credits: i64::MAX, ..Totals::default() };
        assert!(t.add(false, 1, false).is_err());
        assert_eq!(t.posted_credits, i64::MAX);
    }
}
