//! Claiming a connection's due orders into a new file, exactly once (SPEC B2).
//!
//! The connection's approved live orders of one rail are read a page at a time (by the
//! `status`, `type` and `originating_account_id` terms, the accounts being the connection's),
//! never all at once. Each page's due orders (no `process_after`, or one past) that the rail can
//! carry are claimed in one commit: every order replaced, guarded by the version read, with
//! status `processing` and its `begin_processing` event; the part holding their frozen entries;
//! the file record's new totals, guarded by its version; and the run's lease as a fence. An order
//! someone changed since it was read (a client's cancel won the race) fails the commit; it is left
//! out and the rest claimed again. An order is thus in one file or none: never in two.
//!
//! The file is recorded (with the values its header will carry) before its first claim, and only
//! when there is something to claim: no empty files.

use std::collections::{HashMap, VecDeque};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use super::Run;
use super::files::{self, BankFile, FileStatus, Group, HeaderValues, Part};
use super::items::{AccountSnap, Item, Rail, ach_entry, iso_debtor, iso_transfer, to_offset};
use crate::bank::calendar;
use crate::bank::formats::nacha::FileIdModifier;
use crate::base::log_limit::LogLimit;
use crate::domain::common::new_id;
use crate::domain::external_account::{self, ExternalAccount};
use crate::domain::internal_account::{self, InternalAccount};
use crate::domain::payment_order::{self, PaymentOrder, carry};
use crate::error::{Error, Result};
use crate::store::{Filter, ListQuery, StoredObject, Write, WriteBatch};

/// Orders one file carries at most; the rest go in the next file of the same cut-off.
pub const FILE_ORDERS_MAX: u64 = 1_000_000;
/// Internal accounts of one connection a cut-off reads at most.
pub const ACCOUNTS_MAX: usize = 100_000;
/// Accounts named in one order query (`originating_account_id` in a list of them).
const ACCOUNTS_PER_QUERY: usize = 200;
/// Commits of a chunk that may fail with none of its orders changed (the store's own conflicts).
const CLAIM_ATTEMPTS_MAX: usize = 8;

/// The connection's internal accounts.
pub async fn accounts(run: &Run<'_>) -> Result<Vec<InternalAccount>> {
    internal_account::of_connection(run.store.as_ref(), &run.scope, &run.connection_id, ACCOUNTS_MAX).await
}

/// An order ready to claim: as read (and the version it was read at), its frozen item and the
/// group it goes in.
struct Placed {
    order: PaymentOrder,
    version: i64,
    item: Item,
    key: String,
    debtor_account_id: String,
}

/// A file being filled and what this run claimed into it.
pub struct Filled {
    pub file: files::Stored,
    /// The file reached [`FILE_ORDERS_MAX`]: more due orders may be waiting.
    pub full: bool,
}

/// How often one order left approved by every cut-off is logged again: each sandbox pass and
/// each cut-off meets it, and one line a pass per order flooded the log.
const STUCK_LOG_EVERY: Duration = Duration::from_secs(600);
static STUCK_LOG: LazyLock<LogLimit> = LazyLock::new(|| LogLimit::new(STUCK_LOG_EVERY));

/// Claims the due orders of `rail` into a new file; `None` when nothing was claimed.
///
/// Up to the store's [`Store::bulk_in_flight`](crate::store::Store::bulk_in_flight) chunks'
/// commits are in flight while the next page is read and its claim prepared (reads and the
/// store's writers run beside this task), so a cut-off costs about the larger of the two rather
/// than their sum. Each chunk is prepared on the file record the chunk before it leads to and
/// guarded by that record's version, so the commits land in order or not at all: a chunk that
/// loses an order to another writer fails, and so does every chunk after it, and those are
/// claimed again from what did commit.
pub async fn fill(run: &Run<'_>, rail: Rail, accounts: &[InternalAccount]) -> Result<Option<Filled>> {
    let mut in_flight = VecDeque::new();
    let filled = fill_pipelined(run, rail, accounts, &mut in_flight).await;
    // Whatever failed, every commit still in flight ends before the step does (and before the
    // run gives its lease back).
    for f in in_flight {
        let _ = outcome(f.commit).await;
    }
    filled
}

async fn fill_pipelined(
    run: &Run<'_>,
    rail: Rail,
    accounts: &[InternalAccount],
    in_flight: &mut VecDeque<InFlight>,
) -> Result<Option<Filled>> {
    let debtors: HashMap<&str, &InternalAccount> = accounts.iter().map(|a| (a.id.as_str(), a)).collect();
    let depth = run.store.bulk_in_flight().max(1);
    let mut file: Option<files::Stored> = None;
    for chunk in accounts.chunks(ACCOUNTS_PER_QUERY) {
        let ids: Vec<String> = chunk.iter().map(|a| a.id.clone()).collect();
        let mut after_seq = None;
        loop {
            run.lease.check()?;
            let page = run.store.list(&orders_query(run, rail, &ids, after_seq)).await?;
            after_seq = page.next_seq;
            let placed = place(run, rail, page.items, &debtors).await?;
            if !placed.is_empty() {
                if file.is_none() {
                    file = Some(create_file(run, rail).await?);
                }
                let open = file.as_mut().expect("made above");
                let mut prepared = claim_batch(run, &expected(open, in_flight), &placed, &debtors)?;
                if in_flight.len() >= depth && !land_front(run, open, in_flight, &debtors).await? {
                    prepared = claim_batch(run, open, &placed, &debtors)?;
                }
                let (next, batch) = prepared;
                let claimed = next.order_count;
                let store = run.store.clone();
                in_flight.push_back(InFlight { next, placed, commit: tokio::spawn(async move { store.commit(batch).await }) });
                if claimed >= FILE_ORDERS_MAX {
                    land_all(run, open, in_flight, &debtors).await?;
                    return Ok(file.map(|file| Filled { file, full: true }));
                }
            }
            if after_seq.is_none() {
                break;
            }
        }
    }
    if let Some(open) = file.as_mut() {
        land_all(run, open, in_flight, &debtors).await?;
    }
    Ok(file.map(|file| Filled { file, full: false }))
}

/// A chunk's claim being committed, and the file record it leads to.
struct InFlight {
    next: BankFile,
    placed: Vec<Placed>,
    commit: tokio::task::JoinHandle<Result<()>>,
}

/// The file record as it will be once every chunk in flight has landed.
fn expected(open: &files::Stored, in_flight: &VecDeque<InFlight>) -> files::Stored {
    match in_flight.back() {
        Some(last) => files::Stored { scope: open.scope.clone(), file: last.next.clone(), version: open.version + in_flight.len() as i64 },
        None => open.clone(),
    }
}

async fn outcome(commit: tokio::task::JoinHandle<Result<()>>) -> Result<()> {
    commit.await.map_err(|e| Error::internal(format!("a claim's commit task failed: {e}")))?
}

/// Waits for every chunk in flight, oldest first.
async fn land_all(
    run: &Run<'_>,
    open: &mut files::Stored,
    in_flight: &mut VecDeque<InFlight>,
    debtors: &HashMap<&str, &InternalAccount>,
) -> Result<()> {
    while !in_flight.is_empty() {
        land_front(run, open, in_flight, debtors).await?;
    }
    Ok(())
}

/// Waits for the oldest chunk in flight; true if it committed as prepared. If orders in it
/// changed meanwhile, the chunks after it cannot land either (each is guarded by the file
/// version the one before it leads to): they are waited for, and their orders still unchanged
/// claimed again with the failed chunk's by [`claim_chunk`] (and false returned).
async fn land_front(
    run: &Run<'_>,
    open: &mut files::Stored,
    in_flight: &mut VecDeque<InFlight>,
    debtors: &HashMap<&str, &InternalAccount>,
) -> Result<bool> {
    let Some(f) = in_flight.pop_front() else { return Ok(true) };
    match outcome(f.commit).await {
        Ok(()) => {
            open.file = f.next;
            open.version += 1;
            Ok(true)
        }
        Err(Error::Conflict { parameter: None, .. }) => {
            let mut placed = f.placed;
            while let Some(later) = in_flight.pop_front() {
                match outcome(later.commit).await {
                    Err(Error::Conflict { parameter: None, .. }) => placed.extend(later.placed),
                    Err(err) => return Err(err),
                    Ok(()) => {
                        return Err(Error::internal(format!(
                            "bank file {}: a claim landed after the one before it failed; the cut-off stops",
                            open.file.id
                        )));
                    }
                }
            }
            check_file_unchanged(run, open).await?;
            let kept = still_unchanged(run, placed).await?;
            claim_chunk(run, open, kept, debtors).await?;
            Ok(false)
        }
        Err(err) => Err(err),
    }
}

fn orders_query(run: &Run<'_>, rail: Rail, account_ids: &[String], after_seq: Option<i64>) -> ListQuery {
    ListQuery {
        kind: payment_order::KIND,
        scope: run.scope.clone(),
        filters: vec![
            Filter::Eq { name: "status".into(), value: "approved".into() },
            Filter::Eq { name: "type".into(), value: rail.payment_type().as_str().into() },
            Filter::AnyOf { name: "originating_account_id".into(), values: account_ids.to_vec() },
        ],
        after_seq,
        limit: run.store.bulk_chunk(),
    }
}

/// The page's due orders that the rail can carry, each with its frozen item; the others are
/// left approved (and logged, when the rail cannot carry them).
async fn place(run: &Run<'_>, rail: Rail, page: Vec<StoredObject>, debtors: &HashMap<&str, &InternalAccount>) -> Result<Vec<Placed>> {
    let mut due: Vec<(StoredObject, PaymentOrder)> = Vec::with_capacity(page.len());
    for stored in page {
        let order = carry::read(&stored)?;
        if run.is_due(&order) {
            due.push((stored, order));
        }
    }
    let receiving = receiving_accounts(run, &due).await?;
    let mut out = Vec::with_capacity(due.len());
    for (stored, order) in due {
        let Some(snap) = receiving.get(order.receiving_account_id.as_str()) else {
            if let Some(suppressed) = STUCK_LOG.admit(&format!("{}/gone", order.id), Instant::now()) {
                tracing::warn!(order = %order.id, suppressed, "a due payment order's receiving account is gone; it stays approved");
            }
            continue;
        };
        let item = Item::of(&order, snap.clone());
        let key = match rail {
            Rail::Ach => ach_entry(&item, run.now).map(|(key, _)| key.to_key()),
            Rail::Iso(iso_rail) => iso_transfer(iso_rail, &item).and_then(|_| {
                // The paying account must be one the file can name (a SEPA debtor by IBAN), or the
                // file could never be written and its orders would wait in it forever.
                let bic = run.settings.iso20022.as_ref().map(|s| s.debtor_agent_bic.as_str());
                match debtors.get(order.originating_account_id.as_str()) {
                    Some(debtor) => {
                        iso_debtor(iso_rail, &AccountSnap::of_internal(debtor), bic).map(|_| order.originating_account_id.to_string())
                    }
                    None => Err(Error::invalid("originating_account_id", "the paying account is not on this connection")),
                }
            }),
        };
        match key {
            Ok(key) => {
                let debtor_account_id = order.originating_account_id.to_string();
                out.push(Placed { order, version: stored.version, item, key, debtor_account_id })
            }
            Err(err) => {
                if let Some(suppressed) = STUCK_LOG.admit(&format!("{}/rail", order.id), Instant::now()) {
                    tracing::warn!(
                        order = %order.id, rail = rail.as_str(), error = %err, suppressed,
                        "a due payment order cannot be carried by its rail; it stays approved (it should have been refused at creation)"
                    );
                }
            }
        }
    }
    Ok(out)
}

/// The receiving external accounts of `orders`, frozen, by id.
async fn receiving_accounts(run: &Run<'_>, orders: &[(StoredObject, PaymentOrder)]) -> Result<HashMap<String, AccountSnap>> {
    let mut ids: Vec<String> = orders.iter().map(|(_, o)| o.receiving_account_id.to_string()).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let limit = ids.len();
    let query =
        ListQuery { kind: external_account::KIND, scope: run.scope.clone(), filters: vec![Filter::IdIn(ids)], after_seq: None, limit };
    let mut out = HashMap::new();
    for stored in run.store.list(&query).await?.items {
        let account: ExternalAccount =
            serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored external account {}: {e}", stored.id)))?;
        out.insert(stored.id, AccountSnap::of_external(&account));
    }
    Ok(out)
}

/// Records a new file of `rail` (before anything is claimed into it), with the day's next file
/// id modifier and every value its header will carry.
async fn create_file(run: &Run<'_>, rail: Rail) -> Result<files::Stored> {
    let created_at = run.now;
    let local = super::local_time(&run.settings.timezone, created_at)?;
    let eastern = calendar::to_eastern(to_offset(created_at));
    let day = match rail {
        Rail::Ach => format!("{:04}{:02}{:02}", eastern.year(), u8::from(eastern.month()), eastern.day()),
        Rail::Iso(_) => local.strftime("%Y%m%d").to_string(),
    };
    let id = new_id();
    // The sandbox bank takes a file at every step, far more than NACHA's 36 a day: its files
    // all carry modifier A and are told apart by their id's random tail in the name (its head
    // is a timestamp that files of the same minute share).
    let sandbox_bank = run.is_sandbox_bank();
    let sequence = match sandbox_bank {
        true => 0,
        false => files::count_of_day(run.store.as_ref(), &run.scope, &BankFile::day_key(&run.connection_id, rail.as_str(), &day)).await?,
    };
    let modifier = FileIdModifier::nth(sequence).ok_or_else(|| Error::Conflict {
        message: format!(
            "connection {} made 36 {} files on {day} already: NACHA's file id modifiers are used up",
            run.connection_id,
            rail.as_str()
        ),
        parameter: None,
        retry_after_s: None,
    })?;
    let name = match sandbox_bank {
        // `sbx-20261126204652-9b3c01fe-sepa`: its stem is the pain.001 MsgId, at most 35 with a
        // group's `-N`.
        true => format!("sbx-{}-{}-{}.{}", local.strftime("%Y%m%d%H%M%S"), &id[id.len() - 8..], rail.as_str(), rail.extension()),
        false => format!("payrail-{}-{}-{}.{}", local.strftime("%Y%m%d-%H%M"), modifier.as_char(), rail.as_str(), rail.extension()),
    };
    let header = HeaderValues {
        created_at,
        sequence,
        file_id_modifier: modifier.as_char().to_string(),
        ach: if rail == Rail::Ach { run.settings.ach.clone() } else { None },
        iso20022: if rail == Rail::Ach { None } else { run.settings.iso20022.clone() },
        execution_date: super::business_day(rail, &run.settings.timezone, created_at)?.to_string(),
        day,
    };
    let file = BankFile {
        id,
        object: files::KIND.into(),
        live_mode: run.scope.live_mode,
        connection_id: run.connection_id.clone(),
        name,
        direction: "outbound".into(),
        rail: rail.as_str().into(),
        status: FileStatus::Claimed,
        order_count: 0,
        credit_total: 0,
        debit_total: 0,
        sha256: None,
        size_bytes: None,
        header,
        groups: Vec::new(),
        trace_start: None,
        upload_attempts: 0,
        last_error: None,
        next_attempt_at: None,
        created_at,
        written_at: None,
        uploaded_at: None,
        updated_at: created_at,
    };
    let stored = files::Stored { scope: run.scope.clone(), file, version: 1 };
    let mut batch = WriteBatch::new();
    batch.push(run.lease.fence());
    batch.push(stored.insert()?);
    // Two files of one connection never share a name, whatever happens.
    batch.push(Write::Unique {
        key: files::name_key(&run.connection_id, &stored.file.name),
        parameter: "name".into(),
        message: format!("connection {} already has a file named {}", run.connection_id, stored.file.name),
    });
    run.store.commit(batch).await?;
    tracing::info!(connection = %run.connection_id, file = %stored.file.id, name = %stored.file.name, "bank file recorded");
    Ok(stored)
}

/// Claims `placed` into `file`, leaving out orders that changed since they were read; returns
/// how many were claimed.
///
/// Each failed commit leaves out at least one order a client changed, so clients busy with the
/// same orders slow a cut-off down but never stop it: after a conflict the rest is claimed in
/// halves (the next change then costs only its half a commit), and only commits that fail with
/// no order changed are counted against [`CLAIM_ATTEMPTS_MAX`].
async fn claim_chunk(
    run: &Run<'_>,
    file: &mut files::Stored,
    placed: Vec<Placed>,
    debtors: &HashMap<&str, &InternalAccount>,
) -> Result<usize> {
    let mut pending = VecDeque::from([placed]);
    let (mut claimed, mut fruitless) = (0, 0);
    while let Some(piece) = pending.pop_front() {
        if piece.is_empty() {
            continue;
        }
        let (next, batch) = claim_batch(run, file, &piece, debtors)?;
        match run.store.commit(batch).await {
            Ok(()) => {
                file.file = next;
                file.version += 1;
                claimed += piece.len();
            }
            Err(Error::Conflict { parameter: None, .. }) => {
                check_file_unchanged(run, file).await?;
                let tried = piece.len();
                let mut kept = still_unchanged(run, piece).await?;
                if kept.len() == tried {
                    fruitless += 1;
                    if fruitless >= CLAIM_ATTEMPTS_MAX {
                        return Err(Error::Conflict {
                            message: "payment orders kept conflicting while they were claimed, unchanged".into(),
                            parameter: None,
                            retry_after_s: Some(1),
                        });
                    }
                }
                let second = kept.split_off(kept.len().div_ceil(2));
                pending.push_front(second);
                pending.push_front(kept);
            }
            Err(err) => return Err(err),
        }
    }
    Ok(claimed)
}

/// The file's next record and the batch that claims `placed` into it.
fn claim_batch(
    run: &Run<'_>,
    file: &files::Stored,
    placed: &[Placed],
    debtors: &HashMap<&str, &InternalAccount>,
) -> Result<(BankFile, WriteBatch)> {
    let mut next = file.file.clone();
    let mut parts: Vec<(usize, Vec<Item>)> = Vec::new();
    for p in placed {
        let index = match next.groups.iter().position(|g| g.key == p.key) {
            Some(index) => index,
            None => {
                let debtor =
                    (next.rail != "ach").then(|| debtors.get(p.debtor_account_id.as_str()).map(|a| AccountSnap::of_internal(a))).flatten();
                let index = next.groups.len();
                next.groups.push(Group { index, key: p.key.clone(), count: 0, credit_total: 0, debit_total: 0, parts: 0, debtor });
                index
            }
        };
        let group = &mut next.groups[index];
        group.count += 1;
        let amount = p.item.minor_units();
        if p.item.is_credit() {
            group.credit_total += amount;
            next.credit_total += amount;
        } else {
            group.debit_total += amount;
            next.debit_total += amount;
        }
        next.order_count += 1;
        match parts.iter_mut().find(|(g, _)| *g == index) {
            Some((_, items)) => items.push(p.item.clone()),
            None => parts.push((index, vec![p.item.clone()])),
        }
    }
    next.updated_at = run.now;
    let mut new_parts = Vec::with_capacity(parts.len());
    for (index, items) in parts {
        let n = next.groups[index].parts;
        next.groups[index].parts += 1;
        new_parts.push((n, Part { file_id: next.id.clone(), group: index, items }));
    }
    let mut batch = WriteBatch::new();
    batch.push(run.lease.fence());
    for (n, part) in &new_parts {
        batch.push(files::part_record(&run.scope, &next, part.group, *n, part)?);
    }
    for p in placed {
        batch.writes.extend(carry::claim(&run.scope, p.order.clone(), p.version, &next.id, run.now)?);
    }
    // The file record last: the chunk after this one waits for this one's commit only once its
    // own orders are written (a store writes a batch's replaces in order).
    batch.push(file.replace(&next)?);
    Ok((next, batch))
}

/// Fails unless the file is still as this run last wrote it.
async fn check_file_unchanged(run: &Run<'_>, file: &files::Stored) -> Result<()> {
    match files::get(run.store.as_ref(), &run.scope, &file.file.id).await? {
        Some(now) if now.version == file.version => Ok(()),
        _ => Err(Error::Conflict {
            message: format!("bank file {} was changed by another worker during its cut-off", file.file.id),
            parameter: Some("lease".into()),
            retry_after_s: Some(1),
        }),
    }
}

/// The orders of `placed` nobody changed since they were read.
async fn still_unchanged(run: &Run<'_>, placed: Vec<Placed>) -> Result<Vec<Placed>> {
    let ids: Vec<String> = placed.iter().map(|p| p.order.id.to_string()).collect();
    let limit = ids.len();
    let query = ListQuery { kind: payment_order::KIND, scope: run.scope.clone(), filters: vec![Filter::IdIn(ids)], after_seq: None, limit };
    let versions: HashMap<String, i64> = run.store.list(&query).await?.items.into_iter().map(|s| (s.id, s.version)).collect();
    let (kept, lost): (Vec<Placed>, Vec<Placed>) = placed.into_iter().partition(|p| versions.get(p.order.id.as_str()) == Some(&p.version));
    for p in &lost {
        tracing::info!(order = %p.order.id, "a payment order changed while it was being claimed (a cancel won the race?); left as it is");
    }
    Ok(kept)
}
