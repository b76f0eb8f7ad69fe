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
use super::{EffectiveRange, date_of, effective_at, external_id_key, parse_date};
use crate::base::ledger::{BalanceCondition, BalanceKind, Comparison};
use crate::error::{Error, Result};
use crate::store::ledger::{AccountGuard, LedgerLine};
use crate::store::{Filter, ObjectRecord, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = super::super::kinds::LEDGER_TRANSACTION;
pub const VERSION_KIND: &str = super::super::kinds::LEDGER_TRANSACTION_VERSION;
/// Entries one transaction may hold at most.
pub const ENTRIES_MAX: usize = 1_000;

/// MT's `ledger_transaction`, as stored and served (its entries embedded).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_transaction)]
pub struct LedgerTransaction {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub description: Option<String>,
    #[schema(schema_with = super::super::schema::ledger_status)]
    pub status: LedgerStatus,
    #[schema(schema_with = super::super::schema::metadata)]
    pub metadata: Metadata,
    pub effective_at: Timestamp,
    #[schema(schema_with = super::super::schema::date)]
    pub effective_date: String,
    pub ledger_entries: Vec<LedgerEntry>,
    pub posted_at: Option<Timestamp>,
    pub ledger_id: String,
    #[schema(schema_with = super::super::schema::ledger_transaction_ledgerable_type_or_null)]
    pub ledgerable_type: Option<String>,
    pub ledgerable_id: Option<String>,
    pub external_id: Option<String>,
    pub reverses_ledger_transaction_id: Option<String>,
    pub reversed_by_ledger_transaction_id: Option<String>,
    pub partially_posts_ledger_transaction_id: Option<String>,
    pub archived_reason: Option<String>,
}

/// MT's `ledger_entry_create_request`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_entry_create_request)]
pub struct EntryInput {
    /// Required unless `amount_string` is given.
    #[schema(schema_with = super::super::schema::entry_amount)]
    pub amount: Option<Value>,
    /// The amount as text; when both are given they must agree.
    #[schema(nullable = false, pattern = "^[0-9]+$")]
    pub amount_string: Option<String>,
    /// When given, the transaction's own `effective_at`.
    #[schema(schema_with = super::super::schema::date_time_or_null)]
    pub effective_at: Option<String>,
    #[schema(schema_with = super::super::schema::direction, required = true)]
    pub direction: Option<String>,
    #[schema(value_type = String, required = true, format = "uuid")]
    pub ledger_account_id: Option<String>,
    /// The account's `lock_version` the entry is written against (409 when it moved on, SPEC G4).
    #[schema(value_type = Option<i64>)]
    pub lock_version: Option<Value>,
    #[schema(schema_with = super::super::schema::balance_condition_or_null)]
    pub pending_balance_amount: Option<BTreeMap<String, Value>>,
    #[schema(schema_with = super::super::schema::balance_condition_or_null)]
    pub posted_balance_amount: Option<BTreeMap<String, Value>>,
    #[schema(schema_with = super::super::schema::balance_condition_or_null)]
    pub available_balance_amount: Option<BTreeMap<String, Value>>,
    /// Not supported (`true` is refused): read the entry with `show_balances=true`.
    #[schema(ignore)]
    pub show_resulting_ledger_account_balances: Option<bool>,
    #[schema(schema_with = super::super::schema::metadata_or_null)]
    pub metadata: Option<Metadata>,
}

/// MT's `ledger_transaction_create_request`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_transaction_create_request)]
pub struct TransactionInput {
    pub description: Option<String>,
    /// `pending` (the default) or `posted`.
    #[schema(schema_with = transaction_create_status_or_null)]
    pub status: Option<String>,
    #[schema(schema_with = super::super::schema::metadata_or_null)]
    pub metadata: Option<Metadata>,
    /// Now when neither it nor `effective_date` is given; years 1 to 9999.
    #[schema(schema_with = super::super::schema::date_time_or_null)]
    pub effective_at: Option<String>,
    /// The start of that UTC day, when `effective_at` is not given.
    #[schema(schema_with = super::super::schema::date_or_null)]
    pub effective_date: Option<String>,
    /// 1 to 1000 entries, balancing per currency (SPEC G2).
    #[serde(default)]
    #[schema(value_type = Vec<EntryInput>, required = true, min_items = 1, max_items = 1000)]
    pub ledger_entries: Option<Vec<EntryInput>>,
    pub external_id: Option<String>,
    /// Given with `ledgerable_id`.
    #[schema(schema_with = super::super::schema::ledger_transaction_ledgerable_type_or_null)]
    pub ledgerable_type: Option<String>,
    /// Given with `ledgerable_type`.
    #[schema(format = "uuid")]
    pub ledgerable_id: Option<String>,
}

/// MT's `ledger_transaction_update_request`. A pending transaction can be posted or archived,
/// and its `external_id` and ledgerable link changed; any transaction's description and metadata.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_transaction_update_request)]
pub struct TransactionPatch {
    #[serde(default, deserialize_with = "super::super::common::nullable")]
    pub description: Option<Option<String>>,
    /// `posted` or `archived` moves a pending transaction; its current status changes nothing.
    #[schema(schema_with = super::super::schema::ledger_status_or_null)]
    pub status: Option<String>,
    #[schema(schema_with = super::super::schema::metadata_patch_or_null)]
    pub metadata: Option<MetadataPatch>,
    /// Accepted only when it is the transaction's own (Payrail does not move a transaction).
    #[schema(ignore)]
    pub effective_at: Option<String>,
    /// Not supported: Payrail does not replace a transaction's entries.
    #[schema(ignore)]
    pub ledger_entries: Option<Vec<EntryInput>>,
    #[schema(schema_with = super::super::schema::ledger_transaction_ledgerable_type_or_null)]
    pub ledgerable_type: Option<String>,
    #[schema(format = "uuid")]
    pub ledgerable_id: Option<String>,
    #[serde(default, deserialize_with = "super::super::common::nullable")]
    pub external_id: Option<Option<String>>,
}

/// MT's `ledger_transaction_reversal_create_request`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_transaction_reversal_create_request)]
pub struct ReversalInput {
    pub description: Option<String>,
    /// `posted` (the default) or `pending`.
    #[schema(schema_with = transaction_create_status_or_null)]
    pub status: Option<String>,
    #[schema(schema_with = super::super::schema::metadata_or_null)]
    pub metadata: Option<Metadata>,
    /// The original's when absent; years 1 to 9999.
    #[schema(schema_with = super::super::schema::date_time_or_null)]
    pub effective_at: Option<String>,
    pub external_id: Option<String>,
    /// Given with `ledgerable_id`.
    #[schema(schema_with = super::super::schema::ledger_transaction_ledgerable_type_or_null)]
    pub ledgerable_type: Option<String>,
    /// Given with `ledgerable_type`.
    #[schema(format = "uuid")]
    pub ledgerable_id: Option<String>,
}

/// MT's `ledger_transaction_version`, for the OpenAPI document only: the document
/// `version_record` writes (the transaction as it then was, without `updated_at`, with the
/// version's own id and `created_at`, its `ledger_transaction_id` and `version`). A test checks
/// that the two name the same fields.
#[derive(utoipa::ToSchema)]
#[schema(as = ledger_transaction_version)]
#[allow(dead_code)]
pub struct VersionDoc {
    id: String,
    object: String,
    live_mode: bool,
    created_at: Timestamp,
    description: Option<String>,
    #[schema(schema_with = super::super::schema::ledger_status)]
    status: LedgerStatus,
    #[schema(schema_with = super::super::schema::metadata)]
    metadata: Metadata,
    effective_at: Timestamp,
    #[schema(schema_with = super::super::schema::date)]
    effective_date: String,
    ledger_entries: Vec<VersionEntryDoc>,
    posted_at: Option<Timestamp>,
    ledger_id: String,
    #[schema(schema_with = super::super::schema::ledger_transaction_ledgerable_type_or_null)]
    ledgerable_type: Option<String>,
    ledgerable_id: Option<String>,
    external_id: Option<String>,
    reverses_ledger_transaction_id: Option<String>,
    reversed_by_ledger_transaction_id: Option<String>,
    partially_posts_ledger_transaction_id: Option<String>,
    archived_reason: Option<String>,
    ledger_transaction_id: String,
    version: i64,
}

/// MT's `ledger_entry_of_transaction_version`, for the OpenAPI document only: an entry of a
/// [`VersionDoc`] (a `ledger_entry` without `updated_at` and `discarded_at`).
#[derive(utoipa::ToSchema)]
#[schema(as = ledger_entry_of_transaction_version)]
#[allow(dead_code)]
pub struct VersionEntryDoc {
    id: String,
    object: String,
    live_mode: bool,
    created_at: Timestamp,
    amount: i64,
    amount_string: String,
    effective_at: Timestamp,
    #[schema(schema_with = super::super::schema::direction)]
    direction: Direction,
    #[schema(schema_with = super::super::schema::ledger_status)]
    status: LedgerStatus,
    ledger_account_id: String,
    ledger_account_lock_version: Option<i64>,
    ledger_account_currency: String,
    ledger_account_currency_exponent: u8,
    ledger_transaction_id: String,
    resulting_ledger_account_balances: Option<super::BalancesDoc>,
    #[schema(schema_with = super::super::schema::metadata)]
    metadata: Metadata,
}

/// The statuses a ledger transaction is created with.
fn transaction_create_status_or_null() -> utoipa::openapi::schema::Object {
    super::super::schema::nullable_string_enum(&["pending", "posted"])
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
        if lock_version.is_some_and(|v| v < 0) {
            // No account is ever at a negative version: a mistake, not a race (409).
            return Err(Error::invalid(param("lock_version"), format!("{} must be 0 or more", param("lock_version"))));
        }
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
        // Its status and effective time are read from its entries' posting rows (storage
        // layout level 3).
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
            // Its transaction is its parent (found by the parent index, storage layout level 2).
            terms: vec![Term::new("version", format!("{version:020}"))],
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
        (Some(text), Some(date)) => {
            let at = effective_at("effective_at", text)?;
            parse_date("effective_date", date)?;
            // Both may be given only when they say the same day (in UTC, or as the instant was
            // written, with its offset); else which one counts is a guess.
            if date_of(at) != date && text.get(..10) != Some(date) {
                return Err(Error::invalid(
                    "effective_date",
                    format!("effective_date {date} is not the day of effective_at {text}: give one of them"),
                ));
            }
            Ok(at)
        }
        (Some(text), None) => effective_at("effective_at", text),
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
    accounts::records(ctx, &ids).await
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
        batch.push(Write::Insert(entry.record(ctx.scope)?));
    }
    batch.push(Write::Insert(txn.version_record(ctx.scope, 1, ctx.now)?));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &txn.id, &json, ctx.now)?));
    Ok(json)
}

/// A transaction Payrail writes on behalf of another resource (a ledger account settlement):
/// two or more entries on accounts the caller already read and checked.
pub(crate) struct Internal<'a> {
    pub status: LedgerStatus,
    pub description: Option<&'a str>,
    pub effective_at: Timestamp,
    /// (account, debit, amount) of each entry.
    pub entries: Vec<(&'a AccountRecord, bool, i64)>,
}

/// Checks and stages an [`Internal`] transaction exactly as a created one (postings, documents,
/// first version, `created` event). Returns the transaction's id and its entries' ids, in order.
pub(crate) fn stage_internal(ctx: &Ctx<'_>, batch: &mut WriteBatch, spec: Internal<'_>) -> Result<(String, Vec<String>)> {
    let head = Head {
        status: Some(spec.status.as_str()),
        default_status: spec.status,
        description: spec.description,
        metadata: None,
        effective_at: spec.effective_at,
        external_id: None,
        ledgerable: (None, None),
    }
    .build(ctx)?;
    let plans = spec
        .entries
        .iter()
        .map(|(account, debit, amount)| {
            Ok(EntryPlan {
                account_id: account.id.clone(),
                debit: *debit,
                amount: Amount::parse("amount", *amount)?,
                lock_version: None,
                conditions: vec![],
                metadata: Metadata::new(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let accounts: Vec<AccountRecord> = spec.entries.iter().map(|(account, _, _)| (*account).clone()).collect();
    let built = build(head, plans, &accounts)?;
    let ids = (built.txn.id.clone(), built.txn.ledger_entries.iter().map(|e| e.id.clone()).collect());
    stage_new(ctx, batch, built)?;
    Ok(ids)
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
    super::require_ledgerable(ctx, &mut batch, built.txn.ledgerable_type.as_deref(), built.txn.ledgerable_id.as_deref()).await?;
    let json = stage_new(ctx, &mut batch, built)?;
    commit.commit(batch, &json).await?;
    Ok(json)
}

/// By id, or by `external_id` among the transactions that are not archived (as MT serves it).
pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    let not_archived = |stored: &StoredObject| Ok(parse(stored)?.status != LedgerStatus::Archived);
    Ok(listing::by_id_or_external_id(ctx, KIND, id, "ledger transaction", not_archived).await?.doc)
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
    pub effective: EffectiveRange,
    pub metadata: Vec<(String, String)>,
    /// Transactions with an entry that this ledger account settlement took.
    pub ledger_account_settlement_id: Option<String>,
    /// Transactions with an entry on an account in this category's tree.
    pub ledger_account_category_id: Option<String>,
}

pub async fn list(ctx: &Ctx<'_>, filter: &TransactionFilter, page: PageSpec) -> Result<ListedPage> {
    if let Some(kind) = &filter.ledgerable_type {
        validate::one_of("ledgerable_type", kind, enums::LEDGER_TRANSACTION_LEDGERABLE_TYPES)?;
    }
    let mut filters: Vec<Filter> = [
        listing::any_id(&filter.ids),
        listing::eq("ledger_id", filter.ledger_id.as_deref()),
        listing::eq("ledger_account_id", filter.ledger_account_id.as_deref()),
        // Its status and effective time are its entries' (storage layout level 3).
        entries::posting_filter(entries::PostingAsk {
            account: filter.ledger_account_id.as_deref(),
            direction: None,
            statuses: &filter.statuses,
            effective: &filter.effective,
            of_parent: true,
        })?,
        listing::eq("external_id", filter.external_id.as_deref()),
        listing::eq("reverses_ledger_transaction_id", filter.reverses_ledger_transaction_id.as_deref()),
        listing::eq("ledgerable_id", filter.ledgerable_id.as_deref()),
        listing::eq("ledgerable_type", filter.ledgerable_type.as_deref()),
        filter.ledger_account_settlement_id.as_ref().map(|id| Filter::SettledBy { settlement_id: id.clone(), of_parent: true }),
    ]
    .into_iter()
    .flatten()
    .collect();
    filters.extend(listing::metadata_filters(&filter.metadata));
    if let Some(category) = &filter.ledger_account_category_id {
        filters.push(super::categories::accounts_filter(ctx, category, "ledger_account_category_id", Some("ledger_account_id")).await?);
    }
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
        batch.push(Write::Replace { record: entry.record(ctx.scope)?, expected_version });
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
        if patch.status.as_deref().is_some_and(|to| to != txn.status.as_str()) && settled_by_settlement(ctx, id).await? {
            return Err(Error::invalid(
                "status",
                "this ledger transaction follows its ledger account settlement's status; update the settlement",
            ));
        }
        let mut batch = WriteBatch::new();
        let before = txn.clone();
        let event_name = patch.apply(&mut batch, &mut txn, ctx.now)?;
        if event_name == "updated" && crate::domain::unchanged(&before, &txn, |t| &mut t.updated_at) {
            // Nothing changes (an empty patch, the status it has, the metadata it holds): no
            // version, no event, and the transaction as it is (SPEC E4).
            return Ok(stored.doc);
        }
        if patch.ledgerable_id.is_some() {
            super::require_ledgerable(ctx, &mut batch, txn.ledgerable_type.as_deref(), txn.ledgerable_id.as_deref()).await?;
        }
        if txn.status == LedgerStatus::Archived && before.status != LedgerStatus::Archived {
            unlink_reversed(ctx, &mut batch, &txn).await?;
        }
        let json = stage_change(ctx, &mut batch, &txn, &stored, event_name).await?;
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

/// A reversal archived while pending reversed nothing: the transaction it was to reverse no
/// longer names it in `reversed_by_ledger_transaction_id` (a change of that transaction, with
/// its version and `updated` event).
async fn unlink_reversed(ctx: &Ctx<'_>, batch: &mut WriteBatch, reversal: &LedgerTransaction) -> Result<()> {
    let Some(original_id) = &reversal.reverses_ledger_transaction_id else { return Ok(()) };
    let Some(stored) = ctx.store.get(KIND, ctx.scope, original_id).await? else { return Ok(()) };
    let mut original = parse(&stored)?;
    if original.reversed_by_ledger_transaction_id.as_deref() != Some(reversal.id.as_str()) {
        return Ok(());
    }
    original.reversed_by_ledger_transaction_id = None;
    original.updated_at = ctx.now;
    stage_change(ctx, batch, &original, &stored, "updated").await?;
    Ok(())
}

/// Whether `txn` is a payment order's own (its payout, or the reversal its return or its bank
/// reversal wrote), whose effect follows the order (SPEC G7).
async fn follows_an_order(ctx: &Ctx<'_>, txn: &LedgerTransaction) -> Result<bool> {
    let reversed = match (txn.ledgerable_type.as_deref(), &txn.reverses_ledger_transaction_id) {
        (Some("payment_order"), _) => return Ok(true),
        (Some("return"), Some(reversed)) => reversed,
        _ => return Ok(false),
    };
    Ok(match ctx.store.get(KIND, ctx.scope, reversed).await? {
        Some(stored) => parse(&stored)?.ledgerable_type.as_deref() == Some("payment_order"),
        None => false,
    })
}

/// Whether `txn` stands reversed: its reversal exists and is not archived. A pending reversal
/// that was archived reverses nothing, so the transaction may be reversed again.
async fn stands_reversed(ctx: &Ctx<'_>, txn: &LedgerTransaction) -> Result<bool> {
    let Some(by) = &txn.reversed_by_ledger_transaction_id else { return Ok(false) };
    Ok(match ctx.store.get(KIND, ctx.scope, by).await? {
        Some(stored) => parse(&stored)?.status != LedgerStatus::Archived,
        None => false,
    })
}

/// Whether transaction `id` is a ledger account settlement's: its status then follows the
/// settlement's (posting or archiving it by hand would leave the settlement's entries taken
/// while its money moved otherwise).
async fn settled_by_settlement(ctx: &Ctx<'_>, id: &str) -> Result<bool> {
    let filters = vec![Filter::Eq { name: "ledger_transaction_id".into(), value: id.to_owned() }];
    let page = PageSpec { per_page: 1, after_seq: None };
    Ok(!listing::fetch(ctx, super::super::kinds::LEDGER_ACCOUNT_SETTLEMENT, filters, page).await?.items.is_empty())
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
        if stands_reversed(ctx, &original).await? {
            return Err(Error::invalid("id", "this ledger transaction was already reversed"));
        }
        if follows_an_order(ctx, &original).await? {
            // Its order's return writes its reversal (G7); one by hand as well would count the
            // money's return twice, or leave the order's return with nothing to reverse. The
            // return's own reversal is the order's too: undoing it would put the money back out.
            return Err(Error::invalid(
                "id",
                "this ledger transaction follows a payment order (its payout, or its return's reversal): it is not reversed by hand",
            ));
        }
        let built = reversal_of(ctx, &original, input).await?;
        original.reversed_by_ledger_transaction_id = Some(built.txn.id.clone());
        original.updated_at = ctx.now;
        let mut batch = WriteBatch::new();
        super::require_ledgerable(ctx, &mut batch, input.ledgerable_type.as_deref(), input.ledgerable_id.as_deref()).await?;
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

/// The versions of transaction `id` (or of every transaction, with `None`) that `filters`
/// (from [`version_filters`] and creation times) keep, newest first.
pub async fn versions(ctx: &Ctx<'_>, id: Option<&str>, filters: Vec<Filter>, page: PageSpec) -> Result<ListedPage> {
    if let Some(id) = id
        && ctx.store.get(KIND, ctx.scope, id).await?.is_none()
    {
        return Err(Error::not_found("ledger transaction"));
    }
    let mut all: Vec<Filter> = id.map(|id| Filter::Parent(id.to_owned())).into_iter().collect();
    all.extend(filters);
    listing::stored_page(ctx, VERSION_KIND, all, page).await
}

/// Version filters of a versions list as the SDKs send them (`version[gte]=2`, `version[eq]=1`,
/// and a bare `version=1` for equality), as one inclusive range on the zero-padded `version`
/// term; a range that holds no version matches nothing.
pub fn version_filters<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Result<Vec<Filter>> {
    let (mut from, mut to) = (0i128, i128::from(i64::MAX));
    for op in ["", "[eq]", "[gt]", "[gte]", "[lt]", "[lte]"] {
        let name = format!("version{op}");
        let Some(text) = get(&name).filter(|t| !t.is_empty()) else { continue };
        let v = text
            .parse::<i64>()
            .ok()
            .filter(|v| *v >= 0)
            .map(i128::from)
            .ok_or_else(|| Error::invalid(&name, format!("{name} must be a whole number, 0 or more")))?;
        match op {
            "[gt]" => from = from.max(v + 1),
            "[gte]" => from = from.max(v),
            "[lt]" => to = to.min(v - 1),
            "[lte]" => to = to.min(v),
            _ => (from, to) = (from.max(v), to.min(v)),
        }
    }
    if from > to {
        return Ok(vec![Filter::IdIn(vec![])]);
    }
    let mut out = Vec::new();
    if from > 0 {
        out.push(Filter::AtLeast { name: "version".into(), value: format!("{from:020}") });
    }
    if to < i128::from(i64::MAX) {
        out.push(Filter::AtMost { name: "version".into(), value: format!("{to:020}") });
    }
    Ok(out)
}

/// Stages the replacement of `entry`'s copy inside its transaction.
async fn replace_entry_copy(ctx: &Ctx<'_>, batch: &mut WriteBatch, entry: &LedgerEntry) -> Result<()> {
    let stored =
        ctx.store.get(KIND, ctx.scope, &entry.ledger_transaction_id).await?.ok_or_else(|| Error::not_found("ledger transaction"))?;
    let mut txn = parse(&stored)?;
    for copy in txn.ledger_entries.iter_mut().filter(|e| e.id == entry.id) {
        *copy = entry.clone();
    }
    batch.push(Write::Replace { record: txn.record(ctx.scope, to_json(&txn)?), expected_version: stored.version });
    Ok(())
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
    let reversed = follow == Follow::Reverse && stands_reversed(ctx, &txn).await?;
    let event_name = match (follow, txn.status) {
        (_, LedgerStatus::Archived) => return Ok(()),
        (Follow::Post, LedgerStatus::Posted) => return Ok(()),
        (Follow::Archive, LedgerStatus::Posted) => return Ok(()),
        (Follow::Reverse, LedgerStatus::Posted) if reversed => return Ok(()),
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
        // Effective when the money came back, not when it left: the books showed it out
        // until then, so every as-of balance and statement of the days between stays as it was
        // (never before the original, which may have been dated ahead).
        let effective_at = Some(ctx.now.max(txn.effective_at).to_string());
        let input = ReversalInput { ledgerable_type, ledgerable_id, effective_at, ..ReversalInput::default() };
        let built = reversal_of(ctx, &txn, &input).await?;
        txn.reversed_by_ledger_transaction_id = Some(built.txn.id.clone());
        stage_change(ctx, batch, &txn, &stored, event_name).await?;
        stage_new(ctx, batch, built)?;
        return Ok(());
    }
    stage_change(ctx, batch, &txn, &stored, event_name).await?;
    Ok(())
}

/// MT's `ledger_entry_update_request`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_entry_update_request)]
pub struct EntryPatch {
    #[schema(schema_with = super::super::schema::metadata_patch_or_null)]
    pub metadata: Option<MetadataPatch>,
}

/// `PATCH /ledger_entries/{id}`: updates an entry's metadata, in the entry and in its transaction's copy of it.
pub async fn update_entry(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &EntryPatch) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(entries::KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger entry"))?;
        let mut entry = entries::parse(&stored)?;
        let metadata = match &patch.metadata {
            Some(patch) => validate::merge_metadata("metadata", &entry.metadata, patch)?,
            None => entry.metadata.clone(),
        };
        if metadata == entry.metadata {
            return Ok(stored.doc); // nothing changes: no event (SPEC E4)
        }
        entry.metadata = metadata;
        entry.updated_at = ctx.now;
        let mut batch = WriteBatch::new();
        replace_entry_copy(ctx, &mut batch, &entry).await?;
        let json = entries::to_json(&entry)?;
        batch.push(Write::Replace { record: entry.record(ctx.scope)?, expected_version: stored.version });
        batch.push(Write::Insert(event::record(ctx.scope, entries::KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn property_names(schema: utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>) -> BTreeSet<String> {
        let value = serde_json::to_value(schema).unwrap();
        value["properties"].as_object().unwrap().keys().cloned().collect()
    }

    fn keys(value: &Value) -> BTreeSet<String> {
        value.as_object().unwrap().keys().cloned().collect()
    }

    /// The published `ledger_transaction_version` names exactly the fields a version holds.
    #[test]
    fn g1_version_schema_names_what_a_version_holds() {
        let now = Timestamp::parse_rfc3339("2026-03-01T00:00:00Z").unwrap();
        let entry = LedgerEntry {
            id: new_id(),
            object: entries::KIND.into(),
            live_mode: false,
            created_at: now,
            updated_at: now,
            discarded_at: None,
            amount: 1,
            amount_string: "1".into(),
            effective_at: now,
            direction: Direction::Debit,
            status: LedgerStatus::Pending,
            ledger_account_id: new_id(),
            ledger_account_lock_version: None,
            ledger_account_currency: "USD".into(),
            ledger_account_currency_exponent: 2,
            ledger_transaction_id: new_id(),
            resulting_ledger_account_balances: None,
            metadata: Metadata::new(),
        };
        let txn = LedgerTransaction {
            id: new_id(),
            object: KIND.into(),
            live_mode: false,
            created_at: now,
            updated_at: now,
            description: None,
            status: LedgerStatus::Pending,
            metadata: Metadata::new(),
            effective_at: now,
            effective_date: date_of(now),
            ledger_entries: vec![entry],
            posted_at: None,
            ledger_id: new_id(),
            ledgerable_type: None,
            ledgerable_id: None,
            external_id: None,
            reverses_ledger_transaction_id: None,
            reversed_by_ledger_transaction_id: None,
            partially_posts_ledger_transaction_id: None,
            archived_reason: None,
        };
        let scope = Scope { organization_id: "org".into(), live_mode: false };
        let record = txn.version_record(&scope, 1, now).unwrap();
        let version: Value = serde_json::from_str(&record.doc).unwrap();
        assert_eq!(keys(&version), property_names(<VersionDoc as utoipa::PartialSchema>::schema()));
        assert_eq!(keys(&version["ledger_entries"][0]), property_names(<VersionEntryDoc as utoipa::PartialSchema>::schema()));
    }
}
