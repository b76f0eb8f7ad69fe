//! What a bank's answer file does, staged into one batch (SPEC B4, B5): returns return their
//! orders, `pain.002` rejections fail them, notifications of change correct the receiving
//! account, booked statement entries become transactions that complete the orders they settle
//! (matched by end-to-end id, or by ACH trace number from `Refs/ClrSysRef`, or, for an entry
//! that names none, by account, direction, currency, amount and a window around the order's
//! effective date: the oldest such order awaiting settlement) or reconcile an
//! expected payment, and `camt.053` balances become balance reports of the internal account they
//! are about. Answers that match nothing change nothing and are noted on the file's record.
//!
//! A statement line names its account as the bank knows it (`Acct/Id`: an IBAN or an account
//! number); it is found among the internal accounts of the file's connection, or, for a line
//! that settles an order, is the order's originating account.

use std::collections::{BTreeMap, HashMap};

use crate::domain::Ctx;
use crate::domain::balance_report::{self, NewBalance, NewBalanceReport};
use crate::domain::bank_answer::{
    AccountRef, AchCorrection, AchReturn, Answer, AnswerFile, AnswerFormat, EntryDirection, PaymentStatus, StatementBalance,
    StatementEntry, StatusOutcome,
};
use crate::domain::common::new_id;
use crate::domain::correction::{self, Corrections};
use crate::domain::enums::Direction;
use crate::domain::expected_payment::Reconciler;
use crate::domain::payment_order;
use crate::domain::payment_order::answers::{self, Applied, Booking, Orders, Outcome};
use crate::domain::transaction::{self, NewTransaction, Settles};
use crate::domain::{internal_account, returns};
use crate::error::Result;
use crate::store::WriteBatch;

use super::record::Effects;

/// Stages every effect of `file` (of the connection `connection_id`) into `batch`; what it did,
/// counted.
pub async fn stage(ctx: &Ctx<'_>, batch: &mut WriteBatch, connection_id: &str, file: &AnswerFile) -> Result<Effects> {
    let mut s = Staging {
        ctx,
        batch,
        format: file.format,
        effects: Effects { answers: file.answers.len() as u64, ..Effects::default() },
        orders: Orders::of_connection(connection_id),
        fixes: Corrections::default(),
        reconciler: Reconciler::new(),
        accounts: accounts_of(ctx, connection_id).await?,
        balances: BTreeMap::new(),
        booked: HashMap::new(),
    };
    let traces: Vec<&str> = file
        .answers
        .iter()
        .filter_map(|a| match a {
            Answer::Return(r) => Some(r.original_trace_number.as_str()),
            Answer::Correction(c) => Some(c.original_trace_number.as_str()),
            Answer::Entry(e) if e.end_to_end_id.is_none() => e.ach_trace_number.as_deref(),
            _ => None,
        })
        .collect();
    s.orders.preload_traces(ctx, &traces).await?;
    let keys: Vec<String> = file
        .answers
        .iter()
        .filter_map(|a| match a {
            Answer::Entry(e) if e.end_to_end_id.is_none() && e.ach_trace_number.is_none() => s.settlement_key(e),
            _ => None,
        })
        .collect();
    s.orders.preload_settlements(ctx, &keys.iter().map(String::as_str).collect::<Vec<_>>()).await?;
    s.preload_bookings(&file.answers).await?;
    // What names its order goes first: an entry that names none settles an order by its amount
    // only among those the rest of the file leaves (the file is one commit, so the order of its
    // effects is free).
    let (guesses, named): (Vec<&Answer>, Vec<&Answer>) = file.answers.iter().partition(|a| names_no_order(a));
    for answer in named.into_iter().chain(guesses) {
        match answer {
            Answer::Return(ret) => s.returned(ret).await?,
            Answer::Status(status) => s.status_report(status).await?,
            Answer::Correction(correction) => s.corrected(correction).await?,
            Answer::Entry(entry) => s.booked(entry).await?,
            Answer::Balance(balance) => s.balance(balance),
        }
    }
    s.finish()
}

/// The connection's internal accounts by the numbers (and IBANs) a bank names them with,
/// however it writes them: without spaces, in any case, and zero-padded or not.
#[derive(Default)]
struct AccountNumbers {
    /// Written as the account has it (spaces removed, capitals) -> internal account id.
    exact: HashMap<String, String>,
    /// All-digit numbers without their leading zeros -> the one account so numbered, or none
    /// when two are (`0077700` and `77700`): then only an exact match names either.
    unpadded: HashMap<String, Option<String>>,
}

impl AccountNumbers {
    fn insert(&mut self, number: &str, account_id: &str) {
        let compact = compact(number);
        if let Some(unpadded) = unpadded(&compact) {
            let slot = self.unpadded.entry(unpadded).or_insert_with(|| Some(account_id.to_owned()));
            if slot.as_deref() != Some(account_id) {
                *slot = None;
            }
        }
        self.exact.insert(compact, account_id.to_owned());
    }

    fn find(&self, number: &str) -> Option<String> {
        let compact = compact(number);
        self.exact.get(&compact).cloned().or_else(|| self.unpadded.get(&unpadded(&compact)?).cloned().flatten())
    }
}

fn compact(number: &str) -> String {
    number.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_ascii_uppercase()
}

/// An all-digit number without its leading zeros.
fn unpadded(compact: &str) -> Option<String> {
    compact.bytes().all(|b| b.is_ascii_digit()).then(|| compact.trim_start_matches('0').to_owned())
}

/// NACHA's dishonored (R61 to R70) and contested dishonored (R71 to R77) returns: an ODFI
/// refusing a return, and an RDFI contesting that. Neither returns the original entry.
fn dishonor_or_contest(code: &str) -> bool {
    code.strip_prefix('R').and_then(|n| n.parse::<u8>().ok()).is_some_and(|n| (61..=77).contains(&n))
}

/// A booked entry with neither an end-to-end id nor a trace number.
fn names_no_order(answer: &Answer) -> bool {
    matches!(answer, Answer::Entry(e) if e.end_to_end_id.is_none() && e.ach_trace_number.is_none())
}

/// The internal accounts of the connection, by the numbers a bank names them with.
async fn accounts_of(ctx: &Ctx<'_>, connection_id: &str) -> Result<AccountNumbers> {
    let max = crate::bank::cutoff::claim::ACCOUNTS_MAX;
    let accounts = internal_account::of_connection(ctx.store, ctx.scope, connection_id, max).await?;
    let mut out = AccountNumbers::default();
    for account in accounts {
        for number in account.account_details.iter().filter_map(|d| d.account_number.as_ref()) {
            out.insert(number, &account.id);
        }
    }
    Ok(out)
}

/// One file's staging: what it touched so far, each thing read once and written once.
struct Staging<'a, 'c> {
    ctx: &'a Ctx<'c>,
    batch: &'a mut WriteBatch,
    format: AnswerFormat,
    effects: Effects,
    orders: Orders,
    fixes: Corrections,
    reconciler: Reconciler,
    /// Account number or IBAN -> internal account id.
    accounts: AccountNumbers,
    /// (internal account, date) -> the latest time its balances give, and its balances: one
    /// report each.
    balances: BTreeMap<(String, String), (Option<String>, Vec<NewBalance>)>,
    /// The transactions earlier files made under the bank references this file carries, by
    /// what makes one booking ([`booking_key`]): each takes up one entry of this file telling
    /// the same booking again.
    booked: HashMap<BookingKey, Vec<String>>,
}

/// One booking as a bank tells it: the internal account, the bank's own reference for it, its
/// direction, amount and booking date, and the order reference it carries (end-to-end id or
/// trace number: the items of one batch entry share the entry's bank reference).
type BookingKey = (String, String, Direction, i64, String, Option<String>);

impl Staging<'_, '_> {
    fn note(&mut self, note: String) {
        self.effects.note(note);
    }

    /// The settlement key of an entry that names no order: its account, direction, currency
    /// and amount (`None` for a reversal, which only a reference may tie to an order, or an
    /// account not of this connection).
    fn settlement_key(&self, entry: &StatementEntry) -> Option<String> {
        let account = self.account_of(&entry.account).filter(|_| !entry.reversal)?;
        Some(payment_order::settlement_key(&account, entry.direction, entry.currency, entry.amount))
    }

    fn account_of(&self, account: &AccountRef) -> Option<String> {
        [&account.iban, &account.account_number].into_iter().flatten().find_map(|n| self.accounts.find(n))
    }

    async fn returned(&mut self, ret: &AchReturn) -> Result<()> {
        let what = format!("return {} of trace number {}", ret.code, ret.original_trace_number);
        if dishonor_or_contest(&ret.code) {
            self.note(format!(
                "{what}: a dishonored or contested return (R61 to R77) answers an earlier return, not the entry: the order stays as it is"
            ));
            return Ok(());
        }
        let Some(tracked) = self.orders.by_trace_number(self.ctx, &ret.original_trace_number).await? else {
            self.note(format!("{what}: no payment order carried it"));
            return Ok(());
        };
        let (code, reason) = returns::code_and_reason(Some(&ret.code), return_title(&ret.code));
        let outcome = Outcome::Returned {
            code,
            reason,
            additional_information: ret.addenda_information.clone(),
            date_of_death: ret.date_of_death.clone(),
            settled_by: None,
        };
        match answers::apply(self.ctx, self.batch, tracked, outcome).await? {
            Applied::Moved(_) => self.effects.returns += 1,
            Applied::Skipped(why) => self.note(format!("{what}: {why}")),
        }
        Ok(())
    }

    async fn status_report(&mut self, status: &PaymentStatus) -> Result<()> {
        let outcome = match status.outcome {
            StatusOutcome::Accepted => None,
            StatusOutcome::Settled => Some(Outcome::Completed),
            StatusOutcome::Rejected => Some(Outcome::Failed { reason: rejection_reason(status) }),
        };
        let what = format!("status report for end-to-end id {}", status.end_to_end_id);
        let Some(tracked) = self.orders.by_end_to_end_id(self.ctx, &status.end_to_end_id).await? else {
            // Even an acceptance names an order, and one no order has is worth telling.
            self.note(format!("{what}: no payment order has it"));
            return Ok(());
        };
        let Some(outcome) = outcome else { return Ok(()) };
        if let Applied::Skipped(why) = answers::apply(self.ctx, self.batch, tracked, outcome).await? {
            self.note(format!("{what}: {why}"));
        }
        Ok(())
    }

    async fn corrected(&mut self, correction: &AchCorrection) -> Result<()> {
        let what = format!("notification of change {} of trace number {}", correction.code, correction.original_trace_number);
        let Some(tracked) = self.orders.by_trace_number(self.ctx, &correction.original_trace_number).await? else {
            self.note(format!("{what}: no payment order carried it"));
            return Ok(());
        };
        let account_id = tracked.order.receiving_account_id.to_string();
        let change = match correction::change_of(&correction.code, &correction.corrected_data) {
            Ok(change) => change,
            Err(why) => {
                self.note(format!("{what}: {why}"));
                return Ok(());
            }
        };
        let sent_at = payment_order::carry::sent_at(&tracked.order);
        match self.fixes.correct(self.ctx, &account_id, &change, sent_at).await? {
            Ok(()) => self.effects.corrections += 1,
            Err(why) => self.note(format!("{what}: {why}")),
        }
        Ok(())
    }

    /// A booked entry: a transaction, which completes the order it settles (or returns it, when
    /// it is a reversal), or else reconciles an expected payment, or stays unreconciled. An
    /// entry of no money (a bank may book 0) is only noted: a transaction moves a positive amount.
    async fn booked(&mut self, entry: &StatementEntry) -> Result<()> {
        if entry.amount <= 0 {
            let reference = [&entry.end_to_end_id, &entry.ach_trace_number, &entry.bank_reference].into_iter().flatten().next();
            let reference = reference.map_or("without reference", String::as_str);
            self.note(format!(
                "entry {reference}: an amount of {} {} moves no money; no transaction was made",
                entry.amount, entry.currency
            ));
            return Ok(());
        }
        let (what, order_id) = self.settled_order(entry).await?;
        let account = match (self.account_of(&entry.account), &order_id) {
            (Some(account), _) => account,
            (None, Some(id)) => {
                self.orders.by_id(self.ctx, id).await?.map(|t| t.order.originating_account_id.to_string()).unwrap_or_default()
            }
            (None, None) => String::new(),
        };
        if account.is_empty() {
            self.note(format!("{what}: the statement's account is not an internal account of this connection"));
            return Ok(());
        }
        let key = booking_key(entry, &account);
        if let Some(booked) = self.booked_before(key.as_ref()) {
            // The same booking told again (a camt.054, then the day's camt.053): one transaction.
            let reference = entry.bank_reference.as_deref().unwrap_or_default();
            self.note(format!("{what}: already booked as transaction {booked} (bank reference {reference} on this account)"));
            return Ok(());
        }
        let order_id = match order_id {
            Some(id) => self.paid_from(&what, &id, &account).await?.then_some(id),
            None => None,
        };
        let mut txn = transaction::stage_new(self.ctx, self.batch, new_transaction(entry, account))?;
        self.effects.transactions += 1;
        if let Some(id) = order_id {
            return self.settle_order(&id, entry, &mut txn).await;
        }
        if self.reconciler.reconcile(self.ctx, self.batch, &mut txn).await?.is_some() {
            self.effects.reconciled += 1;
        }
        Ok(())
    }

    /// Reads at once the transactions earlier files booked under the bank references this
    /// file's entries carry, into [`Staging::booked`].
    async fn preload_bookings(&mut self, answers: &[Answer]) -> Result<()> {
        let mut references: Vec<String> = answers
            .iter()
            .filter_map(|a| match a {
                Answer::Entry(e) => bank_reference(e),
                _ => None,
            })
            .collect();
        references.sort_unstable();
        references.dedup();
        for booked in transaction::with_vendor_ids(self.ctx, &references).await? {
            if let Some(key) = booked_key(&booked) {
                self.booked.entry(key).or_default().push(booked.id);
            }
        }
        Ok(())
    }

    /// The transaction an earlier file made for the booking `key` names, taken up by this
    /// entry: as many entries as earlier files booked under one key are told again, and the
    /// rest are new (a batch's equal items, or a file that lists one booking twice, book each).
    /// An entry without the bank's reference cannot be told apart from another, so it is
    /// always booked.
    fn booked_before(&mut self, key: Option<&BookingKey>) -> Option<String> {
        self.booked.get_mut(key?)?.pop()
    }

    /// Whether the statement's account is the one order `id` pays from: a line of another
    /// account's statement is that account's money, never the order's (noted, not settled).
    async fn paid_from(&mut self, what: &str, id: &str, account: &str) -> Result<bool> {
        let Some(tracked) = self.orders.by_id(self.ctx, id).await? else { return Ok(false) };
        let paying = tracked.order.originating_account_id.to_string();
        if paying == account {
            return Ok(true);
        }
        self.note(format!("{what}: it is on the statement of internal account {account}, and the order pays from {paying}"));
        Ok(false)
    }

    /// The order an entry names (by end-to-end id, else trace number) and settles, if any.
    async fn settled_order(&mut self, entry: &StatementEntry) -> Result<(String, Option<String>)> {
        let (what, tracked) = match (&entry.end_to_end_id, &entry.ach_trace_number) {
            (Some(e2e), _) => (format!("entry with end-to-end id {e2e}"), self.orders.by_end_to_end_id(self.ctx, e2e).await?),
            (None, Some(trace)) => (format!("entry with trace number {trace}"), self.orders.by_trace_number(self.ctx, trace).await?),
            (None, None) => {
                let what = format!("entry {}", entry.bank_reference.as_deref().unwrap_or("without reference"));
                match self.settlement_key(entry) {
                    Some(key) => (what, self.orders.by_settlement(self.ctx, &key, &entry.booking_date).await?),
                    None => (what, None),
                }
            }
        };
        let Some(tracked) = tracked else { return Ok((what, None)) };
        match settles(&tracked.order, entry).and_then(|()| not_yet_booked(&tracked.order, entry)) {
            Ok(()) => Ok((what, Some(tracked.order.id.to_string()))),
            Err(why) => {
                let note = format!("{what}: {why}");
                self.note(note);
                Ok((what, None))
            }
        }
    }

    async fn settle_order(&mut self, order_id: &str, entry: &StatementEntry, txn: &mut transaction::Transaction) -> Result<()> {
        let Some(tracked) = self.orders.by_id(self.ctx, order_id).await? else { return Ok(()) };
        let booking = Booking { transaction_id: txn.id.clone(), line_item_id: new_id() };
        let outcome = match entry.reversal {
            true => {
                let (code, reason) = match entry.return_code.as_deref() {
                    Some(code) => returns::code_and_reason(Some(code), return_title(code)),
                    None => returns::code_and_reason(None, Some("Returned by the receiving bank (a reversal was booked)")),
                };
                Outcome::Returned { code, reason, additional_information: None, date_of_death: None, settled_by: Some(booking.clone()) }
            }
            false => Outcome::Completed,
        };
        // Linked first, so the events of the move carry the order as it ends up.
        answers::link_transaction(tracked, &txn.id);
        let moved = matches!(answers::apply(self.ctx, self.batch, tracked, outcome).await?, Applied::Moved(_));
        if !moved {
            // No status moved (an earlier answer already completed or returned the order), but
            // the booking is still the order's (or its return's): linked, with an event, and
            // matched all the same.
            if entry.reversal {
                answers::settle_return(self.ctx, self.batch, tracked, &booking).await?;
            }
            answers::record_update(self.ctx, self.batch, tracked)?;
        }
        let settles = match (entry.reversal, answers::current_return(tracked)) {
            (true, Some(ret)) => Settles::Return(ret.id.clone()),
            _ => Settles::PaymentOrder(order_id.to_owned()),
        };
        let failed = tracked.order.status() == payment_order::status::Status::Failed && !entry.reversal;
        transaction::stage_line_item_as(self.ctx, self.batch, txn, settles, entry.amount, booking.line_item_id)?;
        if moved && entry.reversal {
            self.effects.returns += 1;
        }
        if failed {
            // The books say the order failed and that its money left: linked, as the bank says,
            // and told, for an operator to take up with the bank.
            self.note(format!(
                "payment order {order_id} failed, yet the bank booked its money (transaction {}): check with the bank",
                txn.id
            ));
        }
        Ok(())
    }

    fn balance(&mut self, balance: &StatementBalance) {
        let Some(account) = self.account_of(&balance.account) else {
            let named = balance.account.iban.clone().or_else(|| balance.account.account_number.clone()).unwrap_or_default();
            self.note(format!("balance of account {named}: not an internal account of this connection"));
            return;
        };
        let code = crate::bank::formats::iso20022::camt::balance_code(&balance.balance_type).unwrap_or("OTHR");
        let (time, balances) = self.balances.entry((account, balance.as_of_date.clone())).or_default();
        // The report is as of the latest time its balances give (`HH:MM:SS` sorts as text).
        *time = time.take().max(balance.as_of_time.clone());
        balances.push(NewBalance {
            balance_type: balance.balance_type.clone(),
            amount: balance.amount,
            currency: balance.currency,
            vendor_code: code.to_owned(),
            vendor_code_type: Some("iso20022".into()),
        });
    }

    fn finish(mut self) -> Result<Effects> {
        let report_type = if self.format == AnswerFormat::Camt053 { "previous_day" } else { "real_time" };
        for ((account, date), (time, balances)) in std::mem::take(&mut self.balances) {
            // A statement that gives no time at all (its mandatory CreDtTm missing) is as of
            // when Payrail read it, in UTC.
            let as_of_time = time.unwrap_or_else(|| self.ctx.now.clock_time());
            let new = NewBalanceReport {
                internal_account_id: account,
                balance_report_type: report_type.into(),
                as_of_date: date,
                as_of_time,
                balances,
            };
            balance_report::stage_balance_report(self.ctx, self.batch, new)?;
            self.effects.balance_reports += 1;
        }
        self.effects.order_ids = self.orders.finish(self.ctx, self.batch)?;
        self.effects.orders = self.effects.order_ids.len() as u64;
        self.fixes.finish(self.ctx, self.batch)?;
        Ok(self.effects)
    }
}

/// What makes an entry one booking ([`BookingKey`]), on the internal account `account`.
fn booking_key(entry: &StatementEntry, account: &str) -> Option<BookingKey> {
    let item = entry.end_to_end_id.clone().or_else(|| entry.ach_trace_number.clone());
    let direction = transaction_direction(entry.direction);
    Some((account.to_owned(), bank_reference(entry)?, direction, entry.amount, entry.booking_date.clone(), item))
}

/// The [`BookingKey`] of a transaction an earlier file made, read back from what
/// [`new_transaction`] kept of its entry: the same key [`booking_key`] gives that entry.
fn booked_key(booked: &transaction::Transaction) -> Option<BookingKey> {
    let item = ["end_to_end_id", "ach_trace_number"].iter().find_map(|k| booked.details.get(*k).cloned());
    let reference = booked.vendor_id.clone()?;
    Some((booked.internal_account_id.clone(), reference, booked.direction, booked.amount, booked.as_of_date.clone(), item))
}

/// The bank's own reference of a booked entry, when it gives one (ISO's placeholders for none,
/// `NOTPROVIDED` and `NONREF`, are none).
fn bank_reference(entry: &StatementEntry) -> Option<String> {
    let placeholder = |r: &str| r.eq_ignore_ascii_case("NOTPROVIDED") || r.eq_ignore_ascii_case("NONREF");
    entry.bank_reference.clone().filter(|r| !r.trim().is_empty() && !placeholder(r.trim()))
}

fn transaction_direction(direction: EntryDirection) -> Direction {
    match direction {
        EntryDirection::Credit => Direction::Credit,
        EntryDirection::Debit => Direction::Debit,
    }
}

fn new_transaction(entry: &StatementEntry, internal_account_id: String) -> NewTransaction {
    let mut details = std::collections::BTreeMap::new();
    for (key, value) in
        [("end_to_end_id", &entry.end_to_end_id), ("ach_trace_number", &entry.ach_trace_number), ("value_date", &entry.value_date)]
    {
        if let Some(value) = value {
            details.insert(key.into(), value.clone());
        }
    }
    if entry.reversal {
        details.insert("reversal".into(), "true".into());
    }
    if let Some(party) = &entry.counterparty {
        transaction::name_counterparty(&mut details, party);
    }
    NewTransaction {
        internal_account_id,
        amount: entry.amount,
        currency: entry.currency,
        direction: transaction_direction(entry.direction),
        as_of_date: entry.booking_date.clone(),
        as_of_time: entry.booking_time.clone(),
        transaction_type: entry
            .rail
            .clone()
            .filter(|r| transaction::TRANSACTION_TYPES.contains(&r.as_str()))
            .unwrap_or_else(|| "other".into()),
        vendor_description: transaction::description(&entry.description),
        vendor_code: None,
        vendor_code_type: None,
        vendor_id: entry.bank_reference.clone(),
        posted: true,
        details,
        custom_identifiers: BTreeMap::new(),
    }
}

/// The title of a NACHA (`R01`) or ISO (`AC04`) return reason code, if known.
fn return_title(code: &str) -> Option<&'static str> {
    crate::bank::formats::nacha::return_reasons::return_reason(code)
        .or_else(|| crate::bank::formats::iso20022::return_reasons::return_reason(code))
}

/// `AC04: Closed account number` from a rejection's code and text, whichever it has.
fn rejection_reason(status: &PaymentStatus) -> String {
    match (&status.reason_code, &status.reason) {
        (Some(code), Some(text)) => format!("{code}: {text}"),
        (Some(code), None) => format!("{code}: {}", return_title(code).unwrap_or("rejected by the bank")),
        (None, Some(text)) => text.clone(),
        (None, None) => "rejected by the bank".into(),
    }
}

/// Whether the order's money (or, for a reversal, its return's) is still to be booked: each is
/// booked once, so a second booking (the same entry in a later statement) settles nothing and
/// is noted.
fn not_yet_booked(order: &crate::domain::payment_order::PaymentOrder, entry: &StatementEntry) -> std::result::Result<(), String> {
    match (entry.reversal, &order.current_return) {
        (true, Some(ret)) if ret.transaction_id.is_some() => {
            Err(format!("its return {} is already booked by transaction {}", ret.id, ret.transaction_id.as_deref().unwrap_or_default()))
        }
        (true, _) => Ok(()),
        // The money back of a return is booked apart (its transaction is the return's, and may
        // come first): only another booking of the order's own money makes this one a second.
        (false, _) => {
            let returned = order.current_return.as_ref().and_then(|r| r.transaction_id.as_deref());
            match order.transaction_ids.iter().find(|t| Some(t.as_str()) != returned) {
                Some(booked) => Err(format!("payment order {} is already booked by transaction {booked}", order.id)),
                None => Ok(()),
            }
        }
    }
}

/// Whether a booked entry is the order's money: the same amount and currency, and the way the
/// order moves it (a credit order takes money out: a debit; a reversal puts it back).
fn settles(order: &crate::domain::payment_order::PaymentOrder, entry: &StatementEntry) -> std::result::Result<(), String> {
    if order.amount.minor_units() != entry.amount || order.currency != entry.currency {
        return Err(format!(
            "its amount {} {} is not the order's {} {}",
            entry.amount,
            entry.currency,
            order.amount.minor_units(),
            order.currency
        ));
    }
    let out = order.direction == Direction::Credit;
    let expected = if out != entry.reversal { EntryDirection::Debit } else { EntryDirection::Credit };
    if entry.direction != expected {
        return Err(format!("it is a {:?} and the order is a {}", entry.direction, order.direction.as_str()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b5_an_account_is_found_however_the_bank_writes_its_number_but_never_a_neighbours() {
        let mut numbers = AccountNumbers::default();
        numbers.insert("5550001111", "a");
        numbers.insert("DE89 3704 0044 0532 0130 00", "eur");
        numbers.insert("0077700", "padded");
        numbers.insert("77700", "plain");
        assert_eq!(numbers.find("0000005550001111").as_deref(), Some("a"), "zero-padded");
        assert_eq!(numbers.find(" 5550001111 ").as_deref(), Some("a"));
        assert_eq!(numbers.find("de89370400440532013000").as_deref(), Some("eur"), "an IBAN in any case and spacing");
        assert_eq!(numbers.find("0077700").as_deref(), Some("padded"), "an exact match first");
        assert_eq!(numbers.find("77700").as_deref(), Some("plain"));
        assert_eq!(numbers.find("000077700"), None, "two accounts differ only by zeros: only an exact number names one");
        assert_eq!(numbers.find("5550002222"), None);
    }
}
