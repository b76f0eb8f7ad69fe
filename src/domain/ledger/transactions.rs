//! Ledger transactions (SPEC G2 to G6): create (pending or posted), get, list, update (post or
//! archive a pending one; description and metadata), reversal, and versions.
//!
//! A transaction is checked here for what can be judged from the request and the accounts as
//! read (accounts exist, share one ledger, currencies match, entries balance per currency);
//! what depends on the accounts' state at commit (`lock_version`, balance conditions) is
//! checked by the store inside the commit ([`Write::LedgerPost`]), so racing writers can never
//! both pass a check that only one of them may pass.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::super::api_key::Scope;
use super::super::common::new_id;
use super::super::enums::{self, Direction, LedgerStatus};
use super::super::listing::{self, ListedPage, PageSpec};
use super::super::money::Amount;
use super::super::time::Timestamp;
use super::super::validate::{self, Metadata, MetadataPatch, TEXT_LEN_MAX};
use super::super::{Commit, Ctx, event, retry_on_conflict};
use super::accounts::{self, AccountRecord};
use super::entries::{self, LedgerEntry};
use super::{date_of, effective_at, external_id_key, parse_date};
use crate::base::ledger::{BalanceCondition, BalanceKind, Comparison};
use crate::error::{Error, Result};
use crate::store::ledger::{AccountGuard, LedgerLine};
use crate::store::{Filter, ObjectRecord, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = super::super::kinds::LEDGER_TRANSACTION;
pub const VERSION_KIND: &str = super::super::kinds::LEDGER_TRANSACTION_VERSION;
/// Entries one transaction may hold at most.
pub const ENTRIES_MAX: usize = 1_000;

/// MT's `ledger_transaction`, as stored and served (its entries embedded).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LedgerTransaction {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub description: Option<String>,
    pub status: LedgerStatus,
    pub metadata: Metadata,
    pub effective_at: Timestamp,
    pub effective_date: String,
    pub ledger_entries: Vec<LedgerEntry>,
    pub posted_at: Option<Timestamp>,
    pub ledger_id: String,
    pub ledgerable_type: Option<String>,
    pub ledgerable_id: Option<String>,
    pub external_id: Option<String>,
    pub reverses_ledger_transaction_id: Option<String>,
    pub reversed_by_ledger_transaction_id: Option<String>,
    pub partially_posts_ledger_transaction_id: Option<String>,
    pub archived_reason: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct EntryInput {
    pub amount: Option<Value>,
    pub amount_string: Option<String>,
    pub effective_at: Option<String>,
    pub direction: Option<String>,
    pub ledger_account_id: Option<String>,
    pub lock_version: Option<Value>,
    pub pending_balance_amount: Option<BTreeMap<String, Value>>,
    pub posted_balance_amount: Option<BTreeMap<String, Value>>,
    pub available_balance_amount: Option<BTreeMap<String, Value>>,
    pub show_resulting_ledger_account_balances: Option<bool>,
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TransactionInput {
    pub description: Option<String>,
    pub status: Option<String>,
    pub metadata: Option<Metadata>,
    pub effective_at: Option<String>,
    pub effective_date: Option<String>,
    #[serde(default)]
    pub ledger_entries: Option<Vec<EntryInput>>,
    pub external_id: Option<String>,
    pub ledgerable_type: Option<String>,
    pub ledgerable_id: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct TransactionPatch {
    #[serde(default, deserialize_with = "super::super::common::nullable")]
    pub description: Option<Option<String>>,
    pub status: Option<String>,
    pub metadata: Option<MetadataPatch>,
    pub effective_at: Option<String>,
    pub ledger_entries: Option<Vec<EntryInput>>,
    pub ledgerable_type: Option<String>,
    pub ledgerable_id: Option<String>,
    #[serde(default, deserialize_with = "super::super::common::nullable")]
    pub external_id: Option<Option<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ReversalInput {
    pub description: Option<String>,
    pub status: Option<String>,
    pub metadata: Option<Metadata>,
    pub effective_at: Option<String>,
    pub external_id: Option<String>,
    pub ledgerable_type: Option<String>,
    pub ledgerable_id: Option<String>,
}

/// An entry as requested, checked on its own.
struct EntryPlan {
    account_id: String,
    debit: bool,
    amount: Amount,
    lock_version: Option<i64>,
    conditions: Vec<BalanceCondition>,
    metadata: Metadata,
}

fn integer(param: &str, value: &Value) -> Result<i64> {
    value.as_i64().ok_or_else(|| Error::invalid(param, format!("{param} must be a whole number")))
}

fn conditions(param: &str, kind: BalanceKind, given: Option<&BTreeMap<String, Value>>) -> Result<Vec<BalanceCondition>> {
    let Some(given) = given else { return Ok(vec![]) };
    given
        .iter()
        .map(|(op, value)| {
            let parameter = format!("{param}[{op}]");
            let comparison = Comparison::parse(op)
                .ok_or_else(|| Error::invalid(&parameter, format!("{param} takes gt, gte, lt, lte or eq (got {op})")))?;
            Ok(BalanceCondition { kind, comparison, value: integer(&parameter, value)?, parameter })
        })
        .collect()
}

impl EntryInput {
    fn plan(&self, at: usize, txn_effective_at: Timestamp) -> Result<EntryPlan> {
        let param = |field: &str| format!("ledger_entries[{at}].{field}");
        let amount = match (&self.amount, &self.amount_string) {
            (Some(value), _) => integer(&param("amount"), value)?,
            (None, Some(text)) => {
                text.parse::<i64>().map_err(|_| Error::invalid(param("amount_string"), "amount_string must be a whole number"))?
            }
            (None, None) => return Err(Error::missing(param("amount"))),
        };
        if let (Some(_), Some(text)) = (&self.amount, &self.amount_string)
            && text.parse::<i64>().ok() != Some(amount)
        {
            return Err(Error::invalid(param("amount_string"), "amount_string must say the same amount as amount"));
        }
        if let Some(text) = &self.effective_at
            && effective_at(&param("effective_at"), text)? != txn_effective_at
        {
            return Err(Error::invalid(param("effective_at"), "an entry's effective_at must be its transaction's"));
        }
        if self.show_resulting_ledger_account_balances == Some(true) {
            return Err(Error::invalid(
                param("show_resulting_ledger_account_balances"),
                "Payrail does not return resulting balances on create; read the entry with show_balances=true",
            ));
        }
        let account_id = self.ledger_account_id.as_deref().ok_or_else(|| Error::missing(param("ledger_account_id")))?;
        let lock_version = self.lock_version.as_ref().filter(|v| !v.is_null()).map(|v| integer(&param("lock_version"), v)).transpose()?;
        let mut all = conditions(&param("pending_balance_amount"), BalanceKind::Pending, self.pending_balance_amount.as_ref())?;
        all.extend(conditions(&param("posted_balance_amount"), BalanceKind::Posted, self.posted_balance_amount.as_ref())?);
        all.extend(conditions(&param("available_balance_amount"), BalanceKind::Available, self.available_balance_amount.as_ref())?);
        Ok(EntryPlan {
            account_id: validate::id(&param("ledger_account_id"), account_id)?,
            debit: Direction::parse(&param("direction"), self.direction.as_deref().ok_or_else(|| Error::missing(param("direction")))?)?
                == Direction::Debit,
            amount: Amount::parse(&param("amount"), amount)?,
            lock_version,
            conditions: all,
            metadata: validate::metadata(&param("metadata"), self.metadata.as_ref())?,
        })
    }
}

/// A transaction ready to commit: its document, and what the store must apply and check.
struct Built {
    txn: LedgerTransaction,
    lines: Vec<LedgerLine>,
    guards: Vec<AccountGuard>,
}

/// Checks the entries against their accounts and each other (G2) and builds the transaction.
fn build(head: LedgerTransaction, plans: Vec<EntryPlan>, accounts: &[AccountRecord]) -> Result<Built> {
    let mut txn = head;
    let mut sums: BTreeMap<(String, u8), (i128, i128)> = BTreeMap::new();
    let (mut lines, mut guards) = (Vec::with_capacity(plans.len()), Vec::new());
    for (at, plan) in plans.into_iter().enumerate() {
        let param = format!("ledger_entries[{at}].ledger_account_id");
        let account = accounts
            .iter()
            .find(|a| a.id == plan.account_id)
            .ok_or_else(|| Error::invalid(&param, format!("{param} does not name an existing ledger account")))?;
        if txn.ledger_id.is_empty() {
            txn.ledger_id = account.ledger_id.clone();
        } else if account.ledger_id != txn.ledger_id {
            return Err(Error::invalid(&param, "every entry's ledger account must belong to the same ledger"));
        }
        let sum = sums.entry((account.currency.clone(), account.currency_exponent)).or_default();
        let amount = plan.amount.minor_units();
        if plan.debit {
            sum.0 += i128::from(amount)
        } else {
            sum.1 += i128::from(amount)
        }
        let entry = LedgerEntry {
            id: new_id(),
            object: entries::KIND.into(),
            live_mode: txn.live_mode,
            created_at: txn.created_at,
            updated_at: txn.created_at,
            discarded_at: None,
            amount,
            amount_string: amount.to_string(),
            effective_at: txn.effective_at,
            direction: if plan.debit { Direction::Debit } else { Direction::Credit },
            status: txn.status,
            ledger_account_id: account.id.clone(),
            ledger_account_lock_version: plan.lock_version,
            ledger_account_currency: account.currency.clone(),
            ledger_account_currency_exponent: account.currency_exponent,
            ledger_transaction_id: txn.id.clone(),
            resulting_ledger_account_balances: None,
            metadata: plan.metadata,
        };
        lines.push(LedgerLine {
            entry_id: entry.id.clone(),
            account_id: account.id.clone(),
            effective_at: txn.effective_at,
            debit: plan.debit,
            amount,
            pending: txn.status == LedgerStatus::Pending,
        });
        if plan.lock_version.is_some() || !plan.conditions.is_empty() {
            let lock_version = plan.lock_version.map(|v| (v, format!("ledger_entries[{at}].lock_version")));
            guards.push(AccountGuard { account_id: account.id.clone(), lock_version, conditions: plan.conditions });
        }
        txn.ledger_entries.push(entry);
    }
    if let Some(((code, _), (debits, credits))) = sums.iter().find(|(_, (d, c))| d != c) {
        return Err(Error::invalid(
            "ledger_entries",
            format!("the entries do not balance in {code}: debits total {debits}, credits total {credits}; they must be equal"),
        ));
    }
    Ok(Built { txn, lines, guards })
}

impl LedgerTransaction {
    fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = listing::metadata_terms(&self.metadata).collect();
        terms.push(Term::new("ledger_id", &self.ledger_id));
        terms.push(Term::new("status", self.status.as_str()));
        terms.push(Term::new("effective_at", self.effective_at.to_string()));
        let accounts: BTreeSet<&str> = self.ledger_entries.iter().map(|e| e.ledger_account_id.as_str()).collect();
        terms.extend(accounts.into_iter().map(|id| Term::new("ledger_account_id", id)));
        terms.extend(self.external_id.as_ref().map(|v| Term::new("external_id", v)));
        terms.extend(self.reverses_ledger_transaction_id.as_ref().map(|v| Term::new("reverses_ledger_transaction_id", v)));
        terms.extend(self.ledgerable_id.as_ref().map(|v| Term::new("ledgerable_id", v)));
        terms.extend(self.ledgerable_type.as_ref().map(|v| Term::new("ledgerable_type", v)));
        terms
    }

    fn record(&self, scope: &Scope, doc: String) -> ObjectRecord {
        ObjectRecord {
            id: self.id.clone(),
            kind: KIND,
            scope: scope.clone(),
            parent_id: None,
            created_at: self.created_at,
            doc,
            terms: self.terms(),
        }
    }

    /// MT's `ledger_transaction_version` of this transaction as it now is.
    fn version_record(&self, scope: &Scope, version: i64, now: Timestamp) -> Result<ObjectRecord> {
        let mut doc = serde_json::to_value(self).map_err(|e| Error::internal(format!("ledger transaction: {e}")))?;
        let id = new_id();
        doc["ledger_transaction_id"] = Value::String(self.id.clone());
        doc["id"] = Value::String(id.clone());
        doc["object"] = Value::String(VERSION_KIND.into());
        doc["version"] = Value::from(version);
        doc["created_at"] = serde_json::json!(now);
        if let Some(map) = doc.as_object_mut() {
            map.remove("updated_at");
        }
        for entry in doc["ledger_entries"].as_array_mut().into_iter().flatten() {
            if let Some(map) = entry.as_object_mut() {
                map.remove("updated_at");
                map.remove("discarded_at");
            }
        }
        Ok(ObjectRecord {
            id,
            kind: VERSION_KIND,
            scope: scope.clone(),
            parent_id: Some(self.id.clone()),
            created_at: now,
            doc: doc.to_string(),
            terms: vec![Term::new("ledger_transaction_id", &self.id), Term::new("version", format!("{version:020}"))],
        })
    }
}

fn to_json(txn: &LedgerTransaction) -> Result<String> {
    serde_json::to_string(txn).map_err(|e| Error::internal(format!("ledger transaction: {e}")))
}

pub fn parse(stored: &StoredObject) -> Result<LedgerTransaction> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored ledger transaction {}: {e}", stored.id)))
}

/// The effective time a request gives (`effective_at`, else the start of `effective_date`,
/// else now).
fn effective_time(at: Option<&str>, date: Option<&str>, now: Timestamp) -> Result<Timestamp> {
    match (at, date) {
        (Some(text), _) => effective_at("effective_at", text),
        (None, Some(date)) => parse_date("effective_date", date),
        (None, None) => Ok(now),
    }
}

fn ledgerable(kind: Option<&str>, id: Option<&str>) -> Result<(Option<String>, Option<String>)> {
    let kind = kind.map(|t| validate::one_of("ledgerable_type", t, enums::LEDGER_TRANSACTION_LEDGERABLE_TYPES)).transpose()?;
    let id = id.map(|id| validate::id("ledgerable_id", id)).transpose()?;
    if kind.is_some() != id.is_some() {
        let missing = if id.is_some() { "ledgerable_type" } else { "ledgerable_id" };
        return Err(Error::invalid(missing, "ledgerable_id and ledgerable_type go together"));
    }
    Ok((kind, id))
}

/// A new transaction's head (no entries, no ledger yet) from what every creation gives.
struct Head<'a> {
    status: Option<&'a str>,
    default_status: LedgerStatus,
    description: Option<&'a str>,
    metadata: Option<&'a Metadata>,
    effective_at: Timestamp,
    external_id: Option<&'a str>,
    ledgerable: (Option<String>, Option<String>),
}

impl Head<'_> {
    fn build(self, ctx: &Ctx<'_>) -> Result<LedgerTransaction> {
        let status = match self.status {
            Some(text) => LedgerStatus::parse("status", text)?,
            None => self.default_status,
        };
        if status == LedgerStatus::Archived {
            return Err(Error::invalid("status", "a ledger transaction is created pending or posted"));
        }
        Ok(LedgerTransaction {
            id: new_id(),
            object: KIND.into(),
            live_mode: ctx.scope.live_mode,
            created_at: ctx.now,
            updated_at: ctx.now,
            description: validate::opt_text("description", self.description, TEXT_LEN_MAX)?,
            status,
            metadata: validate::metadata("metadata", self.metadata)?,
            effective_at: self.effective_at,
            effective_date: date_of(self.effective_at),
            ledger_entries: Vec::new(),
            posted_at: (status == LedgerStatus::Posted).then_some(ctx.now),
            ledger_id: String::new(),
            ledgerable_type: self.ledgerable.0,
            ledgerable_id: self.ledgerable.1,
            external_id: validate::opt_text("external_id", self.external_id, TEXT_LEN_MAX)?,
            reverses_ledger_transaction_id: None,
            reversed_by_ledger_transaction_id: None,
            partially_posts_ledger_transaction_id: None,
            archived_reason: None,
        })
    }
}

/// Reads the accounts the plans name; an id the caller cannot see is a 422 naming its entry.
async fn accounts_of(ctx: &Ctx<'_>, plans: &[EntryPlan]) -> Result<Vec<AccountRecord>> {
    let ids: Vec<String> = plans.iter().map(|p| p.account_id.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    Ok(accounts::load(ctx, &ids).await?.into_iter().map(|(record, _)| record).collect())
}

/// Stages a built transaction: its accounts' preconditions, its postings, its documents, its
/// first version and its `created` event. Returns the reply.
fn stage_new(ctx: &Ctx<'_>, batch: &mut WriteBatch, built: Built) -> Result<String> {
    let Built { txn, lines, guards } = built;
    for account_id in lines.iter().map(|l| &l.account_id).collect::<BTreeSet<_>>() {
        batch.push(Write::Require {
            kind: accounts::KIND,
            scope: ctx.scope.clone(),
            id: account_id.clone(),
            parameter: "ledger_entries".into(),
        });
    }
    if let Some(external_id) = &txn.external_id {
        batch.push(Write::Unique {
            key: external_id_key(KIND, &txn.ledger_id, external_id),
            parameter: "external_id".into(),
            message: "external_id is already used by a pending or posted ledger transaction of this ledger".into(),
        });
    }
    batch.push(Write::LedgerPost { lines, guards });
    let json = to_json(&txn)?;
    batch.push(Write::Insert(txn.record(ctx.scope, json.clone())));
    for entry in &txn.ledger_entries {
        batch.push(Write::Insert(entry.record(ctx.scope, &txn.ledger_id)?));
    }
    batch.push(Write::Insert(txn.version_record(ctx.scope, 1, ctx.now)?));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &txn.id, &json, ctx.now)?));
    Ok(json)
}

/// Checks a create request against its accounts and builds the transaction (nothing staged).
async fn plan(ctx: &Ctx<'_>, input: &TransactionInput) -> Result<Built> {
    let effective = effective_time(input.effective_at.as_deref(), input.effective_date.as_deref(), ctx.now)?;
    let head = Head {
        status: input.status.as_deref(),
        default_status: LedgerStatus::Pending,
        description: input.description.as_deref(),
        metadata: input.metadata.as_ref(),
        effective_at: effective,
        external_id: input.external_id.as_deref(),
        ledgerable: ledgerable(input.ledgerable_type.as_deref(), input.ledgerable_id.as_deref())?,
    }
    .build(ctx)?;
    let given = input.ledger_entries.as_deref().ok_or_else(|| Error::missing("ledger_entries"))?;
    if given.is_empty() || given.len() > ENTRIES_MAX {
        return Err(Error::invalid("ledger_entries", format!("ledger_entries must hold 1 to {ENTRIES_MAX} entries")));
    }
    let plans = given.iter().enumerate().map(|(at, e)| e.plan(at, effective)).collect::<Result<Vec<_>>>()?;
    let accounts = accounts_of(ctx, &plans).await?;
    build(head, plans, &accounts)
}

pub async fn create(ctx: &Ctx<'_>, commit: &dyn Commit, input: &TransactionInput) -> Result<String> {
    let built = plan(ctx, input).await?;
    let mut batch = WriteBatch::new();
    let json = stage_new(ctx, &mut batch, built)?;
    commit.commit(batch, &json).await?;
    Ok(json)
}

pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    listing::stored_doc(ctx, KIND, id, "ledger transaction").await
}

#[derive(Debug, Default)]
pub struct TransactionFilter {
    pub ids: Vec<String>,
    pub ledger_id: Option<String>,
    pub ledger_account_id: Option<String>,
    pub statuses: Vec<String>,
    pub external_id: Option<String>,
    pub reverses_ledger_transaction_id: Option<String>,
    pub ledgerable_id: Option<String>,
    pub ledgerable_type: Option<String>,
    pub effective: Vec<Filter>,
    pub metadata: Vec<(String, String)>,
}

pub async fn list(ctx: &Ctx<'_>, filter: &TransactionFilter, page: PageSpec) -> Result<ListedPage> {
    for status in &filter.statuses {
        LedgerStatus::parse("status", status)?;
    }
    let mut filters: Vec<Filter> = [
        listing::any_id(&filter.ids),
        listing::eq("ledger_id", filter.ledger_id.as_deref()),
        listing::eq("ledger_account_id", filter.ledger_account_id.as_deref()),
        listing::any_of("status", &filter.statuses),
        listing::eq("external_id", filter.external_id.as_deref()),
        listing::eq("reverses_ledger_transaction_id", filter.reverses_ledger_transaction_id.as_deref()),
        listing::eq("ledgerable_id", filter.ledgerable_id.as_deref()),
        listing::eq("ledgerable_type", filter.ledgerable_type.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    filters.extend(filter.effective.iter().cloned());
    filters.extend(listing::metadata_filters(&filter.metadata));
    listing::stored_page(ctx, KIND, filters, page).await
}

/// The entries of `txn` as stored, each with its stored version (for replacing them).
async fn stored_entries(ctx: &Ctx<'_>, txn_id: &str) -> Result<Vec<(LedgerEntry, i64)>> {
    let children = ctx.store.children(entries::KIND, ctx.scope, &[txn_id.to_owned()]).await?;
    children.iter().map(|c| Ok((entries::parse(c)?, c.version))).collect()
}

/// Stages the transaction's new state: its document, every entry, a new version and `event_name`.
async fn stage_change(
    ctx: &Ctx<'_>,
    batch: &mut WriteBatch,
    txn: &LedgerTransaction,
    stored: &StoredObject,
    event_name: &str,
) -> Result<String> {
    let json = to_json(txn)?;
    let versions: BTreeMap<String, i64> = stored_entries(ctx, &txn.id).await?.into_iter().map(|(e, v)| (e.id, v)).collect();
    for entry in &txn.ledger_entries {
        let expected_version = *versions.get(&entry.id).ok_or_else(|| Error::internal("a ledger entry went missing"))?;
        batch.push(Write::Replace { record: entry.record(ctx.scope, &txn.ledger_id)?, expected_version });
    }
    batch.push(Write::Replace { record: txn.record(ctx.scope, json.clone()), expected_version: stored.version });
    batch.push(Write::Insert(txn.version_record(ctx.scope, stored.version + 1, ctx.now)?));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, event_name, &txn.id, &json, ctx.now)?));
    Ok(json)
}

fn lines_of(txn: &LedgerTransaction) -> Vec<LedgerLine> {
    txn.ledger_entries
        .iter()
        .map(|e| LedgerLine {
            entry_id: e.id.clone(),
            account_id: e.ledger_account_id.clone(),
            effective_at: e.effective_at,
            debit: e.direction == Direction::Debit,
            amount: e.amount,
            pending: true,
        })
        .collect()
}

/// Moves a pending transaction to `to` (posted or archived), staging the store's half.
fn settle(batch: &mut WriteBatch, txn: &mut LedgerTransaction, to: LedgerStatus, now: Timestamp) {
    batch.push(Write::LedgerSettle { lines: lines_of(txn), post: to == LedgerStatus::Posted });
    if to == LedgerStatus::Archived
        && let Some(external_id) = &txn.external_id
    {
        // An archived transaction's external_id may be used again (MT: only one pending or
        // posted transaction may have it).
        batch.push(Write::ReleaseUnique { key: external_id_key(KIND, &txn.ledger_id, external_id) });
    }
    txn.status = to;
    if to == LedgerStatus::Posted {
        txn.posted_at = Some(now);
    }
    for entry in &mut txn.ledger_entries {
        entry.status = to;
        entry.updated_at = now;
    }
}

impl TransactionPatch {
    /// Applies the patch; the event name the change writes.
    fn apply(&self, batch: &mut WriteBatch, txn: &mut LedgerTransaction, now: Timestamp) -> Result<&'static str> {
        if self.ledger_entries.is_some() {
            return Err(Error::invalid(
                "ledger_entries",
                "Payrail does not replace a transaction's entries; archive it and create another",
            ));
        }
        if let Some(text) = &self.effective_at
            && effective_at("effective_at", text)? != txn.effective_at
        {
            return Err(Error::invalid(
                "effective_at",
                "Payrail does not move a transaction's effective_at; archive it and create another",
            ));
        }
        let to = self.status.as_deref().map(|s| LedgerStatus::parse("status", s)).transpose()?.filter(|s| *s != txn.status);
        let reconciles = self.ledgerable_type.is_some() || self.ledgerable_id.is_some() || self.external_id.is_some();
        if txn.status != LedgerStatus::Pending && (to.is_some() || reconciles) {
            let param = if to.is_some() {
                "status"
            } else if self.external_id.is_some() {
                "external_id"
            } else {
                "ledgerable_id"
            };
            return Err(Error::invalid(
                param,
                format!(
                    "the ledger transaction is {}: only its description and metadata can change (a posted one is corrected by a reversal)",
                    txn.status
                ),
            ));
        }
        if to.is_some() && txn.ledgerable_type.as_deref() == Some("payment_order") {
            return Err(Error::invalid("status", "this ledger transaction follows its payment order's status; it cannot be set by hand"));
        }
        if to == Some(LedgerStatus::Pending) {
            return Err(Error::invalid("status", "a ledger transaction cannot go back to pending"));
        }
        if let Some(description) = &self.description {
            txn.description = validate::opt_text("description", description.as_deref(), TEXT_LEN_MAX)?;
        }
        if let Some(metadata) = &self.metadata {
            txn.metadata = validate::merge_metadata("metadata", &txn.metadata, metadata)?;
        }
        if self.ledgerable_type.is_some() || self.ledgerable_id.is_some() {
            (txn.ledgerable_type, txn.ledgerable_id) = ledgerable(self.ledgerable_type.as_deref(), self.ledgerable_id.as_deref())?;
        }
        if let Some(external_id) = &self.external_id {
            let new = validate::opt_text("external_id", external_id.as_deref(), TEXT_LEN_MAX)?;
            if new != txn.external_id {
                if let Some(old) = &txn.external_id {
                    batch.push(Write::ReleaseUnique { key: external_id_key(KIND, &txn.ledger_id, old) });
                }
                if let Some(value) = &new {
                    batch.push(Write::Unique {
                        key: external_id_key(KIND, &txn.ledger_id, value),
                        parameter: "external_id".into(),
                        message: "external_id is already used by a pending or posted ledger transaction of this ledger".into(),
                    });
                }
                txn.external_id = new;
            }
        }
        txn.updated_at = now;
        Ok(match to {
            Some(to) => {
                settle(batch, txn, to, now);
                if to == LedgerStatus::Posted { "posted" } else { "archived" }
            }
            None => "updated",
        })
    }
}

pub async fn update(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &TransactionPatch) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger transaction"))?;
        let mut txn = parse(&stored)?;
        let mut batch = WriteBatch::new();
        let event_name = patch.apply(&mut batch, &mut txn, ctx.now)?;
        let json = stage_change(ctx, &mut batch, &txn, &stored, event_name).await?;
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

/// `POST /ledger_transactions/{id}/reversal`: a new transaction with every entry of a posted
/// one turned around (posted unless asked otherwise, effective when the original was unless
/// asked otherwise), linked both ways. A transaction is reversed at most once.
pub async fn reverse(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, input: &ReversalInput) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger transaction"))?;
        let mut original = parse(&stored)?;
        if original.status != LedgerStatus::Posted {
            return Err(Error::invalid("id", format!("only a posted ledger transaction can be reversed; this one is {}", original.status)));
        }
        if original.reversed_by_ledger_transaction_id.is_some() {
            return Err(Error::invalid("id", "this ledger transaction was already reversed"));
        }
        let built = reversal_of(ctx, &original, input).await?;
        original.reversed_by_ledger_transaction_id = Some(built.txn.id.clone());
        original.updated_at = ctx.now;
        let mut batch = WriteBatch::new();
        stage_change(ctx, &mut batch, &original, &stored, "updated").await?;
        let json = stage_new(ctx, &mut batch, built)?;
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

/// The transaction that reverses `original`: every entry turned around, posted unless asked
/// otherwise, effective when the original was unless asked otherwise.
async fn reversal_of(ctx: &Ctx<'_>, original: &LedgerTransaction, input: &ReversalInput) -> Result<Built> {
    let effective = match input.effective_at.as_deref() {
        Some(text) => effective_at("effective_at", text)?,
        None => original.effective_at,
    };
    let mut head = Head {
        status: input.status.as_deref(),
        default_status: LedgerStatus::Posted,
        description: input.description.as_deref(),
        metadata: input.metadata.as_ref(),
        effective_at: effective,
        external_id: input.external_id.as_deref(),
        ledgerable: ledgerable(input.ledgerable_type.as_deref(), input.ledgerable_id.as_deref())?,
    }
    .build(ctx)?;
    head.reverses_ledger_transaction_id = Some(original.id.clone());
    let plans = original
        .ledger_entries
        .iter()
        .map(|e| {
            let amount = Amount::parse("amount", e.amount)?;
            Ok(EntryPlan {
                account_id: e.ledger_account_id.clone(),
                debit: e.direction == Direction::Credit,
                amount,
                lock_version: None,
                conditions: vec![],
                metadata: e.metadata.clone(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let accounts = accounts_of(ctx, &plans).await?;
    build(head, plans, &accounts)
}

/// The versions of transaction `id` (or of every transaction, with `None`), newest first.
pub async fn versions(ctx: &Ctx<'_>, id: Option<&str>, version: Option<&str>, page: PageSpec) -> Result<ListedPage> {
    if let Some(id) = id
        && ctx.store.get(KIND, ctx.scope, id).await?.is_none()
    {
        return Err(Error::not_found("ledger transaction"));
    }
    let version = version
        .map(|v| v.parse::<i64>().map(|v| format!("{v:020}")).map_err(|_| Error::invalid("version", "version must be a whole number")))
        .transpose()?;
    let filters: Vec<Filter> =
        [listing::eq("ledger_transaction_id", id), listing::eq("version", version.as_deref())].into_iter().flatten().collect();
    listing::stored_page(ctx, VERSION_KIND, filters, page).await
}

/// Stages the replacement of `entry`'s copy inside its transaction; the transaction's ledger.
async fn replace_entry_copy(ctx: &Ctx<'_>, batch: &mut WriteBatch, entry: &LedgerEntry) -> Result<String> {
    let stored =
        ctx.store.get(KIND, ctx.scope, &entry.ledger_transaction_id).await?.ok_or_else(|| Error::not_found("ledger transaction"))?;
    let mut txn = parse(&stored)?;
    for copy in txn.ledger_entries.iter_mut().filter(|e| e.id == entry.id) {
        *copy = entry.clone();
    }
    batch.push(Write::Replace { record: txn.record(ctx.scope, to_json(&txn)?), expected_version: stored.version });
    Ok(txn.ledger_id)
}

/// Effective-time filters of a list (`effective_at[gte]=...`, `effective_date[lt]=...`, and a
/// bare `effective_at=`/`effective_date=` for equality), as filters on the `effective_at` term.
pub fn effective_filters<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Result<Vec<Filter>> {
    let mut out = Vec::new();
    for field in ["effective_at", "effective_date"] {
        for op in ["", "[eq]", "[gt]", "[gte]", "[lt]", "[lte]"] {
            let name = format!("{field}{op}");
            let Some(text) = get(&name) else { continue };
            let (first, last) = if field == "effective_date" {
                let start = parse_date(&name, text)?;
                (start, start.plus_secs(86_400).plus_micros(-1))
            } else {
                let at = effective_at(&name, text)?;
                (at, at)
            };
            let (from, to) = match op {
                "" | "[eq]" => (Some(first), Some(last)),
                "[gt]" => (Some(last.plus_micros(1)), None),
                "[gte]" => (Some(first), None),
                "[lt]" => (None, Some(first.plus_micros(-1))),
                _ => (None, Some(last)),
            };
            out.extend(from.map(|at| Filter::AtLeast { name: "effective_at".into(), value: at.to_string() }));
            out.extend(to.map(|at| Filter::AtMost { name: "effective_at".into(), value: at.to_string() }));
        }
    }
    Ok(out)
}

/// Prefixes the parameter of a 422 or 409 with `prefix` (`ledger_transaction.`), for errors of a
/// transaction written inside another resource's request.
pub fn prefixed(err: Error, prefix: &str) -> Error {
    match err {
        Error::Invalid { code, parameter, message } => Error::Invalid { code, parameter: format!("{prefix}{parameter}"), message },
        Error::Conflict { message, parameter: Some(p), retry_after_s } if p != "Idempotency-Key" => {
            Error::Conflict { message, parameter: Some(format!("{prefix}{p}")), retry_after_s }
        }
        other => other,
    }
}

/// Prefixes the parameters the store would name when one of `writes` fails.
fn prefix_writes(writes: &mut [Write], prefix: &str) {
    for write in writes {
        match write {
            Write::Require { parameter, .. } | Write::Unique { parameter, .. } => *parameter = format!("{prefix}{parameter}"),
            Write::LedgerPost { guards, .. } => {
                for guard in guards {
                    if let Some((_, parameter)) = &mut guard.lock_version {
                        *parameter = format!("{prefix}{parameter}");
                    }
                    for condition in &mut guard.conditions {
                        condition.parameter = format!("{prefix}{}", condition.parameter);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Stages a payment order's inline `ledger_transaction` (SPEC G7): created pending with the
/// order, linked to it (`ledgerable_type` `payment_order`), its status then following the
/// order's ([`follow_order`]). Every refusal names `ledger_transaction.<field>`. Returns the
/// transaction's id.
pub async fn stage_for_order(ctx: &Ctx<'_>, batch: &mut WriteBatch, given: &Value, order_id: &str) -> Result<String> {
    const PREFIX: &str = "ledger_transaction.";
    let input: TransactionInput = serde_json::from_value(given.clone())
        .map_err(|e| Error::invalid("ledger_transaction", format!("ledger_transaction is not a ledger transaction: {e}")))?;
    let staged = async {
        if input.status.as_deref().is_some_and(|s| s != "pending") {
            return Err(Error::invalid("status", "a payment order's ledger transaction starts pending and follows the order's status"));
        }
        if input.ledgerable_type.is_some() || input.ledgerable_id.is_some() {
            let param = if input.ledgerable_type.is_some() { "ledgerable_type" } else { "ledgerable_id" };
            return Err(Error::invalid(param, "a payment order's ledger transaction is linked to the order by Payrail"));
        }
        let mut linked = input.clone();
        linked.status = Some("pending".into());
        linked.ledgerable_type = Some("payment_order".into());
        linked.ledgerable_id = Some(order_id.to_owned());
        let built = plan(ctx, &linked).await?;
        let id = built.txn.id.clone();
        let start = batch.writes.len();
        stage_new(ctx, batch, built)?;
        prefix_writes(&mut batch.writes[start..], PREFIX);
        Ok(id)
    };
    staged.await.map_err(|e| prefixed(e, PREFIX))
}

/// What a payment order's ledger transaction does when the order moves on (SPEC G7, as MT
/// documents it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// The order completed: the transaction posts.
    Post,
    /// The order was cancelled, denied, failed or stopped: no money moved, the transaction is archived.
    Archive,
    /// The order was returned or reversed: the transaction stays posted (posting it first if it
    /// was still pending) and a reversing transaction is written.
    Reverse,
}

/// Stages what `follow` asks of the order's ledger transaction `txn_id`; a transaction already
/// where `follow` would take it is left alone (a move is applied once).
/// A reversal is linked to `reversal_link` (`ledgerable_type`, `ledgerable_id`: the return).
pub async fn follow_order(
    ctx: &Ctx<'_>,
    batch: &mut WriteBatch,
    txn_id: &str,
    follow: Follow,
    reversal_link: Option<(&str, &str)>,
) -> Result<()> {
    let stored =
        ctx.store.get(KIND, ctx.scope, txn_id).await?.ok_or_else(|| Error::internal("a payment order's ledger transaction is gone"))?;
    let mut txn = parse(&stored)?;
    let event_name = match (follow, txn.status) {
        (_, LedgerStatus::Archived) => return Ok(()),
        (Follow::Post, LedgerStatus::Posted) => return Ok(()),
        (Follow::Archive, LedgerStatus::Posted) => return Ok(()),
        (Follow::Reverse, LedgerStatus::Posted) if txn.reversed_by_ledger_transaction_id.is_some() => return Ok(()),
        (Follow::Archive, LedgerStatus::Pending) => {
            settle(batch, &mut txn, LedgerStatus::Archived, ctx.now);
            "archived"
        }
        (Follow::Post | Follow::Reverse, LedgerStatus::Pending) => {
            settle(batch, &mut txn, LedgerStatus::Posted, ctx.now);
            "posted"
        }
        (Follow::Reverse, LedgerStatus::Posted) => "updated",
    };
    txn.updated_at = ctx.now;
    if follow == Follow::Reverse {
        let (ledgerable_type, ledgerable_id) = match reversal_link {
            Some((kind, id)) => (Some(kind.to_owned()), Some(id.to_owned())),
            None => (txn.ledgerable_type.clone(), txn.ledgerable_id.clone()),
        };
        let input = ReversalInput { ledgerable_type, ledgerable_id, ..ReversalInput::default() };
        let built = reversal_of(ctx, &txn, &input).await?;
        txn.reversed_by_ledger_transaction_id = Some(built.txn.id.clone());
        stage_change(ctx, batch, &txn, &stored, event_name).await?;
        stage_new(ctx, batch, built)?;
        return Ok(());
    }
    stage_change(ctx, batch, &txn, &stored, event_name).await?;
    Ok(())
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct EntryPatch {
    pub metadata: Option<MetadataPatch>,
}

/// `PATCH /ledger_entries/{id}`: updates an entry's metadata, in the entry and in its transaction's copy of it.
pub async fn update_entry(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &EntryPatch) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(entries::KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger entry"))?;
        let mut entry = entries::parse(&stored)?;
        if let Some(metadata) = &patch.metadata {
            entry.metadata = validate::merge_metadata("metadata", &entry.metadata, metadata)?;
        }
        entry.updated_at = ctx.now;
        let mut batch = WriteBatch::new();
        let ledger_id = replace_entry_copy(ctx, &mut batch, &entry).await?;
        let json = entries::to_json(&entry)?;
        batch.push(Write::Replace { record: entry.record(ctx.scope, &ledger_id)?, expected_version: stored.version });
        batch.push(Write::Insert(event::record(ctx.scope, entries::KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}
