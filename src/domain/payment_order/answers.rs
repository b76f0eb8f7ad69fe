//! The bank's answers applied to payment orders (SPEC B4, B5): a `pain.002` rejection fails an
//! order, a NACHA return returns it, a booked statement entry that matches it completes it.
//!
//! One answer file may speak of an order more than once (a statement entry, then its return), so
//! the orders a file touches are read once into [`Orders`], moved in memory, and each is replaced
//! once at the end ([`Orders::finish`]) against the version first read: a client or another
//! instance that changed the order meanwhile makes the whole file's commit fail with a conflict,
//! and the file is applied again from the start at the next poll.
//!
//! An answer that does not fit the order's status (a rejection of an order the bank already
//! settled, the same return twice across two files) moves nothing and is reported back as a
//! note, never an error: the bank's file is still applied whole.

use std::collections::HashMap;

use serde::Deserialize;

use super::ops::{follow_ledger, parse, record, to_json};
use super::status::{Actor, Status};
use super::{KIND, PaymentOrder};
use crate::domain::Ctx;
use crate::domain::payment_order::ReturnObject;
use crate::domain::{event, kinds, returns};
use crate::error::{Error, Result};
use crate::store::{Write, WriteBatch};

/// What a bank's answer does to an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A booked entry settled it.
    Completed,
    /// The bank refused it (`pain.002` RJCT): `reason` becomes `vendor_failure_reason`.
    Failed { reason: String },
    /// It came back: the bank's code (`R01`), its reason, what else the bank said
    /// (`additional_information`, `date_of_death` for R14 and R15), and the booking that
    /// settles the return when a statement's reversal is what returned it.
    Returned {
        code: Option<String>,
        reason: String,
        additional_information: Option<String>,
        date_of_death: Option<String>,
        settled_by: Option<Booking>,
    },
}

/// A booked transaction and its line item for what it settles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Booking {
    pub transaction_id: String,
    pub line_item_id: String,
}

/// An order one file touched, as it stands after the file's answers so far.
#[derive(Debug)]
pub struct Tracked {
    pub order: PaymentOrder,
    version: i64,
    moved: bool,
}

/// What applying one answer to an order did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The order moved to this status (a returned order carries its new `current_return`).
    Moved(Status),
    /// Nothing moved; why (the order's status did not allow it).
    Skipped(String),
}

/// The orders one answer file touches, each read once and replaced once.
///
/// A trace number names an order only among those sent over the file's connection: trace
/// numbers are unique per connection (`bank::cutoff` numbers them from a counter of the
/// connection), not across connections, two of which may share an ODFI. Should one come round
/// again (after 9,999,999 entries), the newest order that carried it is the one it names.
pub struct Orders {
    connection_id: String,
    by_id: HashMap<String, Tracked>,
    trace_to_id: HashMap<String, Option<String>>,
    /// Settlement key -> the orders awaiting settlement under it, oldest first.
    key_to_ids: HashMap<String, Vec<String>>,
    /// Bank file id -> whether the connection sent it.
    files: HashMap<String, bool>,
}

/// What an order needs to know of the bank file that carried it.
#[derive(Deserialize)]
struct FileConnection {
    connection_id: String,
}

impl Orders {
    /// The orders a file of the connection `connection_id` may speak of.
    pub fn of_connection(connection_id: &str) -> Self {
        Orders {
            connection_id: connection_id.to_owned(),
            by_id: HashMap::new(),
            trace_to_id: HashMap::new(),
            key_to_ids: HashMap::new(),
            files: HashMap::new(),
        }
    }

    /// The order `id` of the caller's tenant, if there is one.
    pub async fn by_id(&mut self, ctx: &Ctx<'_>, id: &str) -> Result<Option<&mut Tracked>> {
        if !self.by_id.contains_key(id) {
            let Some(stored) = ctx.store.get(KIND, ctx.scope, id).await? else { return Ok(None) };
            let order = parse(&stored)?;
            self.by_id.insert(id.to_owned(), Tracked { order, version: stored.version, moved: false });
        }
        Ok(self.by_id.get_mut(id))
    }

    /// The order of the connection whose `pain.001` `EndToEndId` is `end_to_end_id`: its UUID
    /// without dashes (`bank::formats::iso20022::end_to_end_id`). A status report about an ACH
    /// entry names it by its 15-digit trace number instead. An order another connection carried
    /// is none of this file's business, as for trace numbers.
    pub async fn by_end_to_end_id(&mut self, ctx: &Ctx<'_>, end_to_end_id: &str) -> Result<Option<&mut Tracked>> {
        match uuid_of(end_to_end_id) {
            Some(id) => {
                let Some(tracked) = self.by_id(ctx, &id).await? else { return Ok(None) };
                let file_id = super::carry::bank_file_id(&tracked.order).map(str::to_owned);
                if !self.sent_here(ctx, file_id.as_deref()).await? {
                    return Ok(None);
                }
                Ok(self.by_id.get_mut(&id))
            }
            None if end_to_end_id.len() == 15 && end_to_end_id.bytes().all(|b| b.is_ascii_digit()) => {
                self.by_trace_number(ctx, end_to_end_id).await
            }
            None => Ok(None),
        }
    }

    /// The ACH order of the connection whose entry carried the trace number `trace` (its
    /// `reference_numbers`).
    pub async fn by_trace_number(&mut self, ctx: &Ctx<'_>, trace: &str) -> Result<Option<&mut Tracked>> {
        if !self.trace_to_id.contains_key(trace) {
            self.load_traces(ctx, &[trace.to_owned()]).await?;
        }
        match self.trace_to_id.get(trace).cloned().flatten() {
            Some(id) => Ok(self.by_id.get_mut(&id)),
            None => Ok(None),
        }
    }

    /// Reads at once the ACH orders that carried `traces` (a file of thousands of returns looks
    /// its orders up a chunk at a time, not one query per return).
    pub async fn preload_traces(&mut self, ctx: &Ctx<'_>, traces: &[&str]) -> Result<()> {
        let wanted = not_in(traces, &self.trace_to_id);
        self.load_traces(ctx, &wanted).await
    }

    async fn load_traces(&mut self, ctx: &Ctx<'_>, traces: &[String]) -> Result<()> {
        for chunk in traces.chunks(PRELOAD_CHUNK) {
            // Newest first, so an order of the connection found first for a trace is its newest.
            for stored in with_keys(ctx, "reference_number", chunk).await? {
                let order = parse(&stored)?;
                if !self.sent_here(ctx, super::carry::bank_file_id(&order)).await? {
                    continue;
                }
                for trace in ach_traces(&order) {
                    self.trace_to_id.entry(trace.to_owned()).or_insert_with(|| Some(stored.id.clone()));
                }
                self.by_id.entry(stored.id.clone()).or_insert(Tracked { order, version: stored.version, moved: false });
            }
            for trace in chunk {
                self.trace_to_id.entry(trace.clone()).or_insert(None);
            }
        }
        Ok(())
    }

    /// The oldest order still awaiting settlement under the settlement key `key` (its account,
    /// the entry's direction there, currency and amount) whose effective date is within
    /// [`WINDOW_DAYS_BEFORE`] / [`WINDOW_DAYS_AFTER`] of `booked` (`YYYY-MM-DD`): what a booked
    /// entry that names no order settles (SPEC B5).
    pub async fn by_settlement(&mut self, ctx: &Ctx<'_>, key: &str, booked: &str) -> Result<Option<&mut Tracked>> {
        if !self.key_to_ids.contains_key(key) {
            self.preload_settlements(ctx, &[key]).await?;
        }
        let Some(booked) = day(booked) else { return Ok(None) };
        let within = |order: &PaymentOrder| {
            day(&order.effective_date).is_some_and(|effective| {
                let days = (booked - effective).whole_days();
                (-WINDOW_DAYS_BEFORE..=WINDOW_DAYS_AFTER).contains(&days)
            })
        };
        let candidates = self.key_to_ids.get(key).map(Vec::as_slice).unwrap_or_default();
        let found =
            candidates.iter().find(|id| self.by_id.get(*id).is_some_and(|t| t.order.awaiting_settlement() && within(&t.order))).cloned();
        Ok(found.and_then(|id| self.by_id.get_mut(&id)))
    }

    /// Reads at once the orders awaiting settlement under `keys`.
    pub async fn preload_settlements(&mut self, ctx: &Ctx<'_>, keys: &[&str]) -> Result<()> {
        let wanted = not_in(keys, &self.key_to_ids);
        for chunk in wanted.chunks(PRELOAD_CHUNK) {
            for stored in with_keys(ctx, super::SETTLEMENT_TERM, chunk).await? {
                let order = parse(&stored)?;
                self.key_to_ids.entry(order.settlement_key()).or_default().push(stored.id.clone());
                self.by_id.entry(stored.id.clone()).or_insert(Tracked { order, version: stored.version, moved: false });
            }
            for key in chunk {
                // Listed newest first.
                self.key_to_ids.entry(key.clone()).or_default().reverse();
            }
        }
        Ok(())
    }

    /// Whether the bank file `file_id` that carried an order (none: no file did) is this
    /// connection's.
    async fn sent_here(&mut self, ctx: &Ctx<'_>, file_id: Option<&str>) -> Result<bool> {
        let Some(file_id) = file_id else { return Ok(false) };
        if let Some(known) = self.files.get(file_id) {
            return Ok(*known);
        }
        let ours = match ctx.store.get(kinds::BANK_FILE, ctx.scope, file_id).await? {
            Some(stored) => {
                let file: FileConnection =
                    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored bank file {file_id}: {e}")))?;
                file.connection_id == self.connection_id
            }
            None => false,
        };
        self.files.insert(file_id.to_owned(), ours);
        Ok(ours)
    }

    /// Stages the replace of every order that moved, each against the version first read, and
    /// gives their ids, sorted.
    pub fn finish(self, ctx: &Ctx<'_>, batch: &mut WriteBatch) -> Result<Vec<String>> {
        let mut moved = Vec::new();
        for tracked in self.by_id.into_values().filter(|t| t.moved) {
            let json = to_json(&tracked.order)?;
            batch.push(Write::Replace { record: record(ctx, &tracked.order, json), expected_version: tracked.version });
            moved.push(tracked.order.id.to_string());
        }
        moved.sort_unstable();
        Ok(moved)
    }
}

/// How many days before an order's effective date a booked entry that names no order may
/// settle it (a bank may book an early-dated entry), and how many after (ACH settles a day or
/// two after; a statement may come days later).
pub const WINDOW_DAYS_BEFORE: i64 = 3;
pub const WINDOW_DAYS_AFTER: i64 = 7;

fn day(text: &str) -> Option<time::Date> {
    time::Date::parse(text, time::macros::format_description!("[year]-[month]-[day]")).ok()
}

/// Keys (trace numbers, settlement keys) looked up per query.
const PRELOAD_CHUNK: usize = 500;

/// `keys` not yet looked up in `known`, each once.
fn not_in<V>(keys: &[&str], known: &HashMap<String, V>) -> Vec<String> {
    let mut wanted: Vec<String> = keys.iter().filter(|k| !known.contains_key(**k)).map(|k| (*k).to_owned()).collect();
    wanted.sort_unstable();
    wanted.dedup();
    wanted
}

/// Every order whose term `name` is one of `keys`, newest first (all pages).
async fn with_keys(ctx: &Ctx<'_>, name: &str, keys: &[String]) -> Result<Vec<crate::store::StoredObject>> {
    crate::domain::listing::with_keys(ctx, KIND, name, keys, PRELOAD_CHUNK).await
}

/// The ACH trace numbers among `order`'s reference numbers.
fn ach_traces(order: &PaymentOrder) -> impl Iterator<Item = &str> {
    order
        .reference_numbers
        .iter()
        .filter(|r| r["reference_number_type"] == super::carry::ACH_TRACE_NUMBER)
        .filter_map(|r| r["reference_number"].as_str())
}

/// `01920dfa78547011a1ff441cc96a09e9` as `01920dfa-7854-7011-a1ff-441cc96a09e9`.
fn uuid_of(hex: &str) -> Option<String> {
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let h = hex.to_ascii_lowercase();
    Some(format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..]))
}

/// The statuses an order passes through to reach `to` from where it is, as the bank moves it:
/// an entry that settles an order still `processing` (its file's upload not yet recorded) takes
/// it through `sent`.
fn path_to(from: Status, to: Status) -> Option<Vec<Status>> {
    match (from, to) {
        (Status::Processing, Status::Completed) => Some(vec![Status::Sent, Status::Completed]),
        (Status::Processing, Status::Returned) => Some(vec![Status::Sent, Status::Returned]),
        (from, to) if from.transition(to, Actor::Bank).is_ok() => Some(vec![to]),
        _ => None,
    }
}

/// Applies one answer to a tracked order: its status, the return or failure it records, an
/// event per status reached, and what that does to its ledger transaction (SPEC G7).
pub async fn apply(ctx: &Ctx<'_>, batch: &mut WriteBatch, tracked: &mut Tracked, outcome: Outcome) -> Result<Applied> {
    let to = match &outcome {
        Outcome::Completed => Status::Completed,
        Outcome::Failed { .. } => Status::Failed,
        Outcome::Returned { .. } => Status::Returned,
    };
    let from = tracked.order.status();
    let Some(path) = path_to(from, to) else {
        return Ok(Applied::Skipped(format!(
            "payment order {} is {from}; the bank's answer would make it {to}",
            tracked.order.id.as_str()
        )));
    };
    for step in path {
        let order = &mut tracked.order;
        order.status = order.status.transition(step, Actor::Bank)?;
        order.updated_at = ctx.now;
        match (&outcome, step) {
            (Outcome::Failed { reason }, Status::Failed) => order.vendor_failure_reason = Some(reason.clone()),
            (Outcome::Returned { code, reason, additional_information, date_of_death, settled_by }, Status::Returned) => {
                let new = returns::NewReturn {
                    code: code.clone(),
                    reason: Some(reason.clone()),
                    additional_information: additional_information.clone(),
                    date_of_death: date_of_death.clone(),
                    transaction_id: settled_by.as_ref().map(|b| b.transaction_id.clone()),
                    transaction_line_item_id: settled_by.as_ref().map(|b| b.line_item_id.clone()),
                    data: None,
                };
                let ret = returns::build(order, new, ctx.now);
                // A document of its own too (`GET /api/returns/{id}`), with its `created` event.
                returns::stage_record(ctx, batch, &ret, order.counterparty_id.as_ref().map(|id| id.as_str()))?;
                order.current_return = Some(ret);
            }
            _ => {}
        }
        let json = to_json(order)?;
        batch.push(Write::Insert(event::record(ctx.scope, KIND, step.event_name(), order.id.as_str(), &json, ctx.now)?));
        follow_ledger(ctx, batch, order, step).await?;
    }
    tracked.moved = true;
    Ok(Applied::Moved(to))
}

/// Links a booked transaction to the order it settles (`transaction_ids`, and the order is
/// `reconciled`); replaced with the order's other changes.
pub fn link_transaction(tracked: &mut Tracked, transaction_id: &str) {
    let order = &mut tracked.order;
    if !order.transaction_ids.iter().any(|id| id == transaction_id) {
        order.transaction_ids.push(transaction_id.to_owned());
    }
    order.reconciliation_status = "reconciled".into();
    tracked.moved = true;
}

/// Records that `booking` settles the order's return, which an earlier answer made (a NACHA
/// return, then the statement booking its money back): on the order's copy and on the stored
/// return, with its event. A return already settled keeps its booking.
pub async fn settle_return(ctx: &Ctx<'_>, batch: &mut WriteBatch, tracked: &mut Tracked, booking: &Booking) -> Result<()> {
    let counterparty_id = tracked.order.counterparty_id.as_ref().map(|id| id.to_string());
    let Some(ret) = tracked.order.current_return.as_mut().filter(|r| r.transaction_id.is_none()) else { return Ok(()) };
    ret.transaction_id = Some(booking.transaction_id.clone());
    ret.transaction_line_item_id = Some(booking.line_item_id.clone());
    ret.reconciliation_status = "reconciled".into();
    ret.updated_at = ctx.now;
    tracked.moved = true;
    returns::stage_update(ctx, batch, ret, counterparty_id.as_deref()).await
}

/// Stages the order's `updated` event, for a change that moved no status (a booking linked to
/// an order an earlier answer completed): every change writes its event (SPEC E4).
pub fn record_update(ctx: &Ctx<'_>, batch: &mut WriteBatch, tracked: &Tracked) -> Result<()> {
    let json = to_json(&tracked.order)?;
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", tracked.order.id.as_str(), &json, ctx.now)?));
    Ok(())
}

/// The return an order got from this file, if it was returned by it.
pub fn current_return(tracked: &Tracked) -> Option<&ReturnObject> {
    tracked.order.current_return.as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b5_end_to_end_ids_map_back_to_order_ids() {
        assert_eq!(uuid_of("01920dfa78547011a1ff441cc96a09e9").as_deref(), Some("01920dfa-7854-7011-a1ff-441cc96a09e9"));
        assert_eq!(uuid_of("01920DFA78547011A1FF441CC96A09E9").as_deref(), Some("01920dfa-7854-7011-a1ff-441cc96a09e9"));
        assert_eq!(uuid_of("NOTPROVIDED"), None);
        assert_eq!(uuid_of("01920dfa-7854-7011-a1ff-441cc96a09"), None);
    }

    #[test]
    fn b4_settling_an_order_still_processing_passes_through_sent() {
        assert_eq!(path_to(Status::Processing, Status::Completed), Some(vec![Status::Sent, Status::Completed]));
        assert_eq!(path_to(Status::Sent, Status::Completed), Some(vec![Status::Completed]));
        assert_eq!(path_to(Status::Completed, Status::Returned), Some(vec![Status::Returned]));
        assert_eq!(path_to(Status::Sent, Status::Failed), Some(vec![Status::Failed]));
        assert_eq!(path_to(Status::Completed, Status::Failed), None);
        assert_eq!(path_to(Status::Returned, Status::Returned), None);
        assert_eq!(path_to(Status::Approved, Status::Completed), None);
    }
}
