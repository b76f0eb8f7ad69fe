//! Ledger entries: one side of a ledger transaction on one account. Written with their
//! transaction (see `transactions`), read here: get, list, and the balances each resulted in
//! (`show_balances`), summed by the store from the entries up to it in effective order (G5).
//! An entry's metadata is changed with its transaction's copy (`transactions::update_entry`).

use futures_util::future::{try_join, try_join_all};
use serde::{Deserialize, Serialize};

use super::super::Ctx;
use super::super::api_key::Scope;
use super::super::enums::{Direction, LedgerStatus};
use super::super::listing::{self, ListedPage, PageSpec};
use super::super::time::Timestamp;
use super::super::validate::Metadata;
use super::{BalancesDoc, EffectiveRange, LedgerCurrency, balances};
use crate::base::ledger::Window;
use crate::error::{Error, Result};
use crate::store::ledger;
use crate::store::{Filter, ObjectRecord, PostingFilter, StoredObject, Term};

pub const KIND: &str = super::super::kinds::LEDGER_ENTRY;

/// MT's `ledger_entry`, as stored and served (`resulting_ledger_account_balances` is filled in
/// only when asked for, never stored).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_entry)]
pub struct LedgerEntry {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub discarded_at: Option<Timestamp>,
    pub amount: i64,
    pub amount_string: String,
    pub effective_at: Timestamp,
    #[schema(schema_with = super::super::schema::direction)]
    pub direction: Direction,
    #[schema(schema_with = super::super::schema::ledger_status)]
    pub status: LedgerStatus,
    pub ledger_account_id: String,
    /// The `lock_version` the request gave for this entry, if it gave one.
    pub ledger_account_lock_version: Option<i64>,
    pub ledger_account_currency: String,
    pub ledger_account_currency_exponent: u8,
    pub ledger_transaction_id: String,
    pub resulting_ledger_account_balances: Option<BalancesDoc>,
    #[schema(schema_with = super::super::schema::metadata)]
    pub metadata: Metadata,
}

impl LedgerEntry {
    /// What its lists filter on: its metadata and its account. Its transaction is its parent,
    /// found by the parent index, and its ledger is never asked for (storage layout level 2);
    /// its direction, status and effective time are read from its posting row (level 3).
    pub fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = listing::metadata_terms(&self.metadata).collect();
        terms.push(Term::new("ledger_account_id", &self.ledger_account_id));
        terms
    }

    pub fn record(&self, scope: &Scope) -> Result<ObjectRecord> {
        Ok(ObjectRecord {
            id: self.id.clone(),
            kind: KIND,
            scope: scope.clone(),
            parent_id: Some(self.ledger_transaction_id.clone()),
            created_at: self.created_at,
            doc: to_json(self)?,
            terms: self.terms(),
        })
    }

    pub fn currency(&self) -> LedgerCurrency {
        LedgerCurrency { code: self.ledger_account_currency.clone(), exponent: self.ledger_account_currency_exponent }
    }
}

pub fn to_json(entry: &LedgerEntry) -> Result<String> {
    serde_json::to_string(entry).map_err(|e| Error::internal(format!("ledger entry: {e}")))
}

pub fn parse(stored: &StoredObject) -> Result<LedgerEntry> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored ledger entry {}: {e}", stored.id)))
}

/// Fills in each live entry's resulting balances: the sums of its account's entries up to and
/// including it, in effective order (effective time, then the account's version).
pub async fn with_balances(ctx: &Ctx<'_>, entries: &mut [LedgerEntry]) -> Result<()> {
    let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
    let accounts: Vec<String> = entries.iter().map(|e| e.ledger_account_id.clone()).collect();
    let (versions, states) = try_join(ctx.store.ledger_entry_versions(&ids), ctx.store.ledger_accounts(&accounts)).await?;
    let mut asked = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let version = versions.iter().find(|(id, _)| *id == entry.id).map(|(_, v)| *v);
        let credit_normal = states.iter().find(|(id, _)| *id == entry.ledger_account_id).map(|(_, s)| s.credit_normal);
        let (Some(version), Some(credit_normal)) = (version, credit_normal) else { continue };
        if entry.status == LedgerStatus::Archived {
            continue;
        }
        let window = Window { through_entry: Some((entry.effective_at.as_micros(), version)), ..Window::default() };
        asked.push((index, credit_normal, window));
    }
    // Together, so that a store that answers concurrent reads in one statement does so.
    let sums =
        try_join_all(asked.iter().map(|(index, _, window)| ctx.store.ledger_window(&entries[*index].ledger_account_id, window))).await?;
    for ((index, credit_normal, _), totals) in asked.into_iter().zip(sums) {
        let entry = &mut entries[index];
        entry.resulting_ledger_account_balances = Some(balances(&totals, credit_normal, &entry.currency())?);
    }
    Ok(())
}

pub async fn get(ctx: &Ctx<'_>, id: &str, show_balances: bool) -> Result<String> {
    let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger entry"))?;
    let mut entry = parse(&stored)?;
    if show_balances {
        with_balances(ctx, std::slice::from_mut(&mut entry)).await?;
    }
    to_json(&entry)
}

/// What a list of entries (or, `of_parent`, of transactions) asks of the entries' posting
/// rows (storage layout level 3).
pub(super) struct PostingAsk<'a> {
    /// The list's `ledger_account_id` (also a term): narrows the rows looked at.
    pub account: Option<&'a str>,
    pub direction: Option<&'a str>,
    pub statuses: &'a [String],
    pub effective: &'a EffectiveRange,
    pub of_parent: bool,
}

/// The direction, statuses and effective window a list asks for, as a condition on the
/// entries' posting rows, or none when it asks for none of them.
pub(super) fn posting_filter(ask: PostingAsk<'_>) -> Result<Option<Filter>> {
    let PostingAsk { account, direction, statuses, effective, of_parent } = ask;
    let debit = direction.map(|d| Direction::parse("direction", d).map(|d| d == Direction::Debit)).transpose()?;
    let statuses = match statuses {
        [] => None,
        given => Some(given.iter().map(|s| LedgerStatus::parse("status", s).map(status_code)).collect::<Result<Vec<_>>>()?),
    };
    if debit.is_none() && statuses.is_none() && *effective == EffectiveRange::default() {
        return Ok(None);
    }
    let filter = PostingFilter {
        account_id: account.map(str::to_owned),
        debit,
        statuses,
        effective_from: effective.from.map(Timestamp::as_micros),
        effective_to: effective.to.map(Timestamp::as_micros),
        version_max: None,
    };
    Ok(Some(Filter::Posting { filter, of_parent }))
}

/// Where an entry of this status is kept in `ledger_postings`.
fn status_code(status: LedgerStatus) -> i16 {
    match status {
        LedgerStatus::Pending => ledger::STATUS_PENDING,
        LedgerStatus::Posted => ledger::STATUS_POSTED,
        LedgerStatus::Archived => ledger::STATUS_ARCHIVED,
    }
}

#[derive(Debug, Default)]
pub struct EntryFilter {
    pub ids: Vec<String>,
    pub ledger_account_id: Option<String>,
    pub ledger_transaction_id: Option<String>,
    pub direction: Option<String>,
    pub statuses: Vec<String>,
    pub effective: EffectiveRange,
    pub metadata: Vec<(String, String)>,
    pub show_balances: bool,
    /// Entries this ledger account settlement took (with the settlement's own entry on the
    /// settled account).
    pub ledger_account_settlement_id: Option<String>,
    /// Entries on an account in this category's tree.
    pub ledger_account_category_id: Option<String>,
    /// Entries a statement covers: its account's, effective within its window.
    pub ledger_account_statement_id: Option<String>,
}

pub async fn list(ctx: &Ctx<'_>, filter: &EntryFilter, page: PageSpec) -> Result<ListedPage> {
    let mut filters: Vec<Filter> = [
        listing::any_id(&filter.ids),
        listing::eq("ledger_account_id", filter.ledger_account_id.as_deref()),
        filter.ledger_transaction_id.as_ref().map(|id| Filter::Parent(id.clone())),
        filter.ledger_account_settlement_id.as_ref().map(|id| Filter::SettledBy { settlement_id: id.clone(), of_parent: false }),
        posting_filter(PostingAsk {
            account: filter.ledger_account_id.as_deref(),
            direction: filter.direction.as_deref(),
            statuses: &filter.statuses,
            effective: &filter.effective,
            of_parent: false,
        })?,
    ]
    .into_iter()
    .flatten()
    .collect();
    filters.extend(listing::metadata_filters(&filter.metadata));
    if let Some(category) = &filter.ledger_account_category_id {
        filters.push(super::categories::accounts_filter(ctx, category, "ledger_account_category_id", Some("ledger_account_id")).await?);
    }
    if let Some(statement) = &filter.ledger_account_statement_id {
        filters.extend(super::statements::entry_filters(ctx, statement).await?);
    }
    if !filter.show_balances {
        return listing::stored_page(ctx, KIND, filters, page).await;
    }
    let found = listing::fetch(ctx, KIND, filters, page).await?;
    let mut entries = found.items.iter().map(parse).collect::<Result<Vec<_>>>()?;
    with_balances(ctx, &mut entries).await?;
    let docs = entries.iter().map(to_json).collect::<Result<Vec<_>>>()?;
    Ok(ListedPage { json: listing::json_array(docs.iter().map(String::as_str)), next_seq: found.next_seq })
}
