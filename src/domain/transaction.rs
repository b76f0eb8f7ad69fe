//! Transactions (SPEC B5): money the bank says moved in or out of an internal account, one per
//! booked statement entry, in Modern Treasury's `transaction` shape; and their line items (MT's
//! `transaction_line_item`), each linking a transaction to what it settles: a payment order, a
//! return, an incoming payment detail or an expected payment.
//!
//! Clients never create transactions: the inbound worker (and the sandbox's simulation) stage
//! them with [`stage_new`] and link them with [`stage_line_item`], inside the batch that applies
//! the bank's file, so a transaction, its links and their events commit with everything else
//! the file says. Clients read them, list them and change their metadata.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::api_key::Scope;
use super::common::new_id;
use super::enums::Direction;
use super::listing::{self, ListedPage, PageSpec};
use super::money::Currency;
use super::time::Timestamp;
use super::validate::{self, Metadata, MetadataPatch, TEXT_LEN_MAX};
use super::{Commit, Ctx, event, kinds, retry_on_conflict};
use crate::error::{Error, Result};
use crate::store::{Filter, ObjectRecord, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = kinds::TRANSACTION;
pub const LINE_ITEM_KIND: &str = kinds::TRANSACTION_LINE_ITEM;

/// MT's transaction `type`: the payment types, and `other` for what the bank does not say.
pub use super::enums::TRANSACTION_TYPES;

/// Keys of a transaction's `details` naming its counterparty as the bank's statement did
/// (`RltdPties`), when it did.
pub const COUNTERPARTY_NAME: &str = "counterparty_name";
pub const COUNTERPARTY_ACCOUNT_NUMBER: &str = "counterparty_account_number";
pub const COUNTERPARTY_IBAN: &str = "counterparty_iban";

/// Writes the counterparty a statement names into a transaction's `details` (the keys above,
/// each only when given); [`counterparty_accounts`] reads them back.
pub fn name_counterparty(details: &mut BTreeMap<String, String>, party: &super::bank_answer::Party) {
    let named = [
        (COUNTERPARTY_NAME, &party.name),
        (COUNTERPARTY_IBAN, &party.account.iban),
        (COUNTERPARTY_ACCOUNT_NUMBER, &party.account.account_number),
    ];
    for (key, value) in named {
        if let Some(value) = value {
            details.insert(key.into(), value.clone());
        }
    }
}

/// The account numbers and IBANs the bank named `transaction`'s counterparty with.
pub fn counterparty_accounts(transaction: &Transaction) -> Vec<&str> {
    [COUNTERPARTY_IBAN, COUNTERPARTY_ACCOUNT_NUMBER]
        .into_iter()
        .filter_map(|key| transaction.details.get(key).map(String::as_str))
        .collect()
}

/// Reads a stored `details` object. Releases before 2026-11-29 stored a reversal's flag as a
/// JSON `true`; any value that is not a string is read as its JSON text (`"true"`).
fn string_values<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<BTreeMap<String, String>, D::Error> {
    let raw: BTreeMap<String, serde_json::Value> = serde::Deserialize::deserialize(deserializer)?;
    Ok(raw
        .into_iter()
        .map(|(key, value)| match value {
            serde_json::Value::String(text) => (key, text),
            other => (key, other.to_string()),
        })
        .collect())
}

/// MT's `transaction`, as stored and served.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = transaction)]
pub struct Transaction {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub discarded_at: Option<Timestamp>,
    /// Positive, in minor units of `currency`; `direction` says which way it moved.
    pub amount: i64,
    pub amount_string: String,
    #[schema(schema_with = crate::domain::schema::currency)]
    pub currency: Currency,
    #[schema(schema_with = crate::domain::schema::direction)]
    pub direction: Direction,
    pub vendor_description: Option<String>,
    pub vendor_code: Option<String>,
    pub vendor_code_type: Option<String>,
    pub vendor_id: Option<String>,
    /// `YYYY-MM-DD`: the day the bank booked it.
    #[schema(schema_with = crate::domain::schema::date)]
    pub as_of_date: String,
    /// `HH:MM:SS`, when the bank said.
    pub as_of_time: Option<String>,
    pub as_of_timezone: Option<String>,
    pub internal_account_id: String,
    #[schema(schema_with = crate::domain::schema::metadata)]
    pub metadata: Metadata,
    pub posted: bool,
    pub vendor_customer_id: Option<String>,
    /// True once a line item links it to what it settles.
    pub reconciled: bool,
    #[serde(rename = "type")]
    #[schema(schema_with = crate::domain::schema::transaction_type)]
    pub transaction_type: String,
    /// String values only, as MT's reference types it (its SDKs refuse anything else).
    #[schema(schema_with = crate::domain::schema::string_map)]
    #[serde(deserialize_with = "string_values")]
    pub details: BTreeMap<String, String>,
    pub foreign_exchange_rate: Option<serde_json::Value>,
    pub custom_identifiers: BTreeMap<String, String>,
    /// The stored version this was read at (`None` while only staged): what a later change of
    /// the stored transaction must still find.
    #[serde(skip)]
    pub version: Option<i64>,
    /// Whether a batch already holds this transaction's write (its insert, or a replace staged
    /// by a line item), so a later change rewrites that write instead of adding another.
    #[serde(skip)]
    pub staged: bool,
}

/// What the inbound worker knows of a booked entry; [`stage_new`] makes the transaction.
#[derive(Debug, Clone)]
pub struct NewTransaction {
    pub internal_account_id: String,
    /// Positive, in minor units of `currency`.
    pub amount: i64,
    pub currency: Currency,
    pub direction: Direction,
    /// `YYYY-MM-DD`.
    pub as_of_date: String,
    pub as_of_time: Option<String>,
    /// One of [`TRANSACTION_TYPES`] (`other` when the bank does not say).
    pub transaction_type: String,
    pub vendor_description: Option<String>,
    /// The bank's code for the entry (a BAI2 or ISO 20022 bank transaction code).
    pub vendor_code: Option<String>,
    /// MT's `vendor_code_type`, such as `iso20022` or `bai2`.
    pub vendor_code_type: Option<String>,
    /// The bank's own reference of the entry.
    pub vendor_id: Option<String>,
    pub posted: bool,
    /// Anything else the file said (end-to-end id, trace number...), as an object.
    pub details: BTreeMap<String, String>,
    pub custom_identifiers: BTreeMap<String, String>,
}

/// What a line item says a transaction settles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settles {
    PaymentOrder(String),
    Return(String),
    IncomingPaymentDetail(String),
    /// An expected payment: MT records it as `expected_payment_id`, with no transactable.
    ExpectedPayment(String),
}

impl Settles {
    fn transactable(&self) -> Option<(&'static str, &str)> {
        match self {
            Settles::PaymentOrder(id) => Some((kinds::PAYMENT_ORDER, id)),
            Settles::Return(id) => Some((kinds::RETURN, id)),
            Settles::IncomingPaymentDetail(id) => Some((kinds::INCOMING_PAYMENT_DETAIL, id)),
            Settles::ExpectedPayment(_) => None,
        }
    }

    /// `originating` for money Payrail sent (and its returns), `receiving` for money that came in.
    fn line_type(&self) -> &'static str {
        match self {
            Settles::PaymentOrder(_) | Settles::Return(_) => "originating",
            Settles::IncomingPaymentDetail(_) | Settles::ExpectedPayment(_) => "receiving",
        }
    }
}

/// MT's `transaction_line_item`, as stored and served.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = transaction_line_item)]
pub struct TransactionLineItem {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub discarded_at: Option<Timestamp>,
    #[serde(rename = "type")]
    #[schema(schema_with = crate::domain::schema::transaction_line_item_type)]
    pub line_type: String,
    #[schema(schema_with = crate::domain::schema::transactable_type_or_null)]
    pub transactable_type: Option<String>,
    pub transactable_id: Option<String>,
    pub amount: i64,
    pub description: String,
    pub counterparty_id: Option<String>,
    pub expected_payment_id: Option<String>,
    pub transaction_id: String,
    pub reconciliation_group_id: Option<String>,
    pub reconcilable: bool,
}

impl Transaction {
    fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = listing::metadata_terms(&self.metadata).collect();
        terms.push(Term::new("internal_account_id", &self.internal_account_id));
        terms.push(Term::new("direction", self.direction.as_str()));
        terms.push(Term::new("currency", self.currency.code()));
        terms.push(Term::new("as_of_date", &self.as_of_date));
        terms.push(Term::new("type", &self.transaction_type));
        terms.push(Term::new("posted", bool_text(self.posted)));
        terms.push(Term::new("reconciled", bool_text(self.reconciled)));
        terms.extend(self.vendor_id.as_ref().map(|v| Term::new("vendor_id", v)));
        terms.extend(self.vendor_description.as_ref().map(|d| Term::new("description", d.to_lowercase())));
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
}

fn bool_text(value: bool) -> &'static str {
    if value { "true" } else { "false" }
}

fn to_json<T: Serialize>(what: &str, value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::internal(format!("{what}: {e}")))
}

/// The stored transaction, with the version it was read at.
pub fn parse(stored: &StoredObject) -> Result<Transaction> {
    let mut transaction: Transaction =
        serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored transaction {}: {e}", stored.id)))?;
    transaction.version = Some(stored.version);
    Ok(transaction)
}

fn build(ctx: &Ctx<'_>, new: NewTransaction) -> Result<Transaction> {
    if new.amount <= 0 {
        return Err(Error::invalid("amount", "a transaction's amount is positive; its direction says which way it moved"));
    }
    let transaction_type = validate::one_of("type", &new.transaction_type, TRANSACTION_TYPES)?;
    super::payment_order::ops::date("as_of_date", &new.as_of_date)?;
    Ok(Transaction {
        id: new_id(),
        object: KIND.into(),
        live_mode: ctx.scope.live_mode,
        created_at: ctx.now,
        updated_at: ctx.now,
        discarded_at: None,
        amount: new.amount,
        amount_string: new.amount.to_string(),
        currency: new.currency,
        direction: new.direction,
        vendor_description: new.vendor_description,
        vendor_code: new.vendor_code,
        vendor_code_type: new.vendor_code_type,
        vendor_id: new.vendor_id,
        as_of_date: new.as_of_date,
        as_of_time: new.as_of_time,
        as_of_timezone: None,
        internal_account_id: new.internal_account_id,
        metadata: Metadata::new(),
        posted: new.posted,
        vendor_customer_id: None,
        reconciled: false,
        transaction_type,
        details: new.details,
        foreign_exchange_rate: None,
        custom_identifiers: new.custom_identifiers,
        version: None,
        staged: false,
    })
}

/// References read per query by [`with_vendor_ids`].
const VENDOR_IDS_PER_QUERY: usize = 500;

/// The transactions booked under any of the bank's own references `vendor_ids` (its
/// `AcctSvcrRef`), read a chunk of references at a time: a bank tells one booking twice (an
/// intraday camt.054, then the day's camt.053; a statement sent again), and the second telling
/// is found among these.
pub async fn with_vendor_ids(ctx: &Ctx<'_>, vendor_ids: &[String]) -> Result<Vec<Transaction>> {
    let mut out = Vec::new();
    for chunk in vendor_ids.chunks(VENDOR_IDS_PER_QUERY) {
        for stored in listing::with_keys(ctx, KIND, "vendor_id", chunk, VENDOR_IDS_PER_QUERY).await? {
            out.push(parse(&stored)?);
        }
    }
    Ok(out)
}

/// Stages a new transaction in `batch` (for the inbound worker and the sandbox simulation):
/// its insert and its `created` event. The caller's `ctx.scope` is the internal account's
/// organization and mode, and `internal_account_id` names an account the caller resolved there
/// (internal accounts are never deleted, so nothing is re-checked at commit: a file of 50,000
/// entries pays no lookup per entry).
pub fn stage_new(ctx: &Ctx<'_>, batch: &mut WriteBatch, new: NewTransaction) -> Result<Transaction> {
    let mut transaction = build(ctx, new)?;
    let json = to_json("transaction", &transaction)?;
    transaction.staged = true;
    batch.push(Write::Insert(transaction.record(ctx.scope, json.clone())));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &transaction.id, &json, ctx.now)?));
    Ok(transaction)
}

/// Stages the transaction's current document: rewrites its insert or replace when `batch`
/// already holds one (searched from the end: it is usually among the last writes), or replaces
/// the stored one at the version it was read at.
fn restage(ctx: &Ctx<'_>, batch: &mut WriteBatch, transaction: &mut Transaction, json: String) -> Result<()> {
    let record = transaction.record(ctx.scope, json);
    if !transaction.staged {
        let version = transaction.version.ok_or_else(|| Error::internal("a transaction neither staged nor read from the store"))?;
        batch.push(Write::Replace { record, expected_version: version });
        transaction.staged = true;
        return Ok(());
    }
    let staged = batch.writes.iter_mut().rev().find_map(|write| match write {
        Write::Insert(staged) | Write::Replace { record: staged, .. } if staged.kind == KIND && staged.id == transaction.id => Some(staged),
        _ => None,
    });
    *staged.ok_or_else(|| Error::internal("a staged transaction missing from its batch"))? = record;
    Ok(())
}

/// Stages a line item linking `transaction` to what it settles (`amount` in minor units, signed
/// as MT does: positive), with its `created` event; the transaction becomes `reconciled` (with a
/// `reconciled` event) if it was not yet. `transaction` is updated in place, so several line
/// items can be staged on it in one batch.
pub fn stage_line_item(
    ctx: &Ctx<'_>,
    batch: &mut WriteBatch,
    transaction: &mut Transaction,
    settles: Settles,
    amount: i64,
) -> Result<TransactionLineItem> {
    stage_line_item_as(ctx, batch, transaction, settles, amount, new_id())
}

/// [`stage_line_item`] with the line item's id chosen beforehand (what it settles names it).
pub fn stage_line_item_as(
    ctx: &Ctx<'_>,
    batch: &mut WriteBatch,
    transaction: &mut Transaction,
    settles: Settles,
    amount: i64,
    id: String,
) -> Result<TransactionLineItem> {
    let transactable = settles.transactable();
    let item = TransactionLineItem {
        id,
        object: LINE_ITEM_KIND.into(),
        live_mode: ctx.scope.live_mode,
        created_at: ctx.now,
        updated_at: ctx.now,
        discarded_at: None,
        line_type: settles.line_type().into(),
        transactable_type: transactable.map(|(kind, _)| kind.to_owned()),
        transactable_id: transactable.map(|(_, id)| id.to_owned()),
        amount,
        description: transaction.vendor_description.clone().unwrap_or_default(),
        counterparty_id: None,
        expected_payment_id: match &settles {
            Settles::ExpectedPayment(id) => Some(id.clone()),
            _ => None,
        },
        transaction_id: transaction.id.clone(),
        reconciliation_group_id: None,
        reconcilable: true,
    };
    let json = to_json("transaction line item", &item)?;
    batch.push(Write::Insert(line_item_record(ctx.scope, &item, json.clone())));
    batch.push(Write::Insert(event::record(ctx.scope, LINE_ITEM_KIND, "created", &item.id, &json, ctx.now)?));
    if !transaction.reconciled {
        transaction.reconciled = true;
        transaction.updated_at = ctx.now;
        let json = to_json("transaction", &*transaction)?;
        restage(ctx, batch, transaction, json.clone())?;
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "reconciled", &transaction.id, &json, ctx.now)?));
    }
    Ok(item)
}

fn line_item_record(scope: &Scope, item: &TransactionLineItem, doc: String) -> ObjectRecord {
    let mut terms = vec![Term::new("transaction_id", &item.transaction_id), Term::new("type", &item.line_type)];
    terms.extend(item.transactable_type.as_ref().map(|t| Term::new("transactable_type", t)));
    terms.extend(item.transactable_id.as_ref().map(|t| Term::new("transactable_id", t)));
    terms.extend(item.expected_payment_id.as_ref().map(|t| Term::new("expected_payment_id", t)));
    ObjectRecord {
        id: item.id.clone(),
        kind: LINE_ITEM_KIND,
        scope: scope.clone(),
        parent_id: Some(item.transaction_id.clone()),
        created_at: item.created_at,
        doc,
        terms,
    }
}

pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    listing::stored_doc(ctx, KIND, id, "transaction").await
}

/// Filters of `GET /api/transactions`, parsed where the query is read.
#[derive(Debug, Default)]
pub struct TransactionFilter {
    pub internal_account_id: Option<String>,
    pub virtual_account_id: Option<String>,
    pub direction: Option<Direction>,
    pub transaction_type: Option<String>,
    pub posted: Option<bool>,
    pub vendor_id: Option<String>,
    pub description: Option<String>,
    pub as_of_date_start: Option<String>,
    pub as_of_date_end: Option<String>,
    pub metadata: Vec<(String, String)>,
}

pub async fn list(ctx: &Ctx<'_>, filter: &TransactionFilter, page: PageSpec) -> Result<ListedPage> {
    let mut filters: Vec<Filter> = [
        listing::eq("internal_account_id", filter.internal_account_id.as_deref()),
        // Payrail has no virtual accounts: a transaction is never in one.
        listing::eq("virtual_account_id", filter.virtual_account_id.as_deref()),
        listing::eq("direction", filter.direction.map(Direction::as_str)),
        listing::eq("type", filter.transaction_type.as_deref()),
        listing::eq("posted", filter.posted.map(bool_text)),
        listing::eq("vendor_id", filter.vendor_id.as_deref()),
        listing::contains("description", filter.description.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    filters.extend(date_range("as_of_date", filter.as_of_date_start.as_deref(), filter.as_of_date_end.as_deref())?);
    filters.extend(listing::metadata_filters(&filter.metadata));
    listing::stored_page(ctx, KIND, filters, page).await
}

/// `{name}_start` / `{name}_end` date filters (inclusive) on a `YYYY-MM-DD` term.
pub fn date_range(name: &str, start: Option<&str>, end: Option<&str>) -> Result<Vec<Filter>> {
    let mut out = Vec::new();
    if let Some(start) = start {
        let value = super::payment_order::ops::date(&format!("{name}_start"), start)?;
        out.push(Filter::AtLeast { name: name.into(), value });
    }
    if let Some(end) = end {
        let value = super::payment_order::ops::date(&format!("{name}_end"), end)?;
        out.push(Filter::AtMost { name: name.into(), value });
    }
    Ok(out)
}

/// The body of `PATCH /api/transactions/{id}`: metadata only, as in MT.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = transaction_update_request)]
pub struct TransactionPatch {
    #[schema(schema_with = crate::domain::schema::metadata_patch_or_null)]
    pub metadata: Option<MetadataPatch>,
}

pub async fn update(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &TransactionPatch) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("transaction"))?;
        let Some(metadata) = &patch.metadata else { return Ok(stored.doc) };
        let mut transaction = parse(&stored)?;
        let before = transaction.clone();
        transaction.metadata = validate::merge_metadata("metadata", &transaction.metadata, metadata)?;
        if crate::domain::unchanged(&before, &transaction, |t| &mut t.updated_at) {
            return Ok(stored.doc); // the metadata it holds: no event (SPEC E4)
        }
        transaction.updated_at = ctx.now;
        let json = to_json("transaction", &transaction)?;
        let mut batch = WriteBatch::new();
        batch.push(Write::Replace { record: transaction.record(ctx.scope, json.clone()), expected_version: stored.version });
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

/// Filters of `GET /api/transaction_line_items`.
#[derive(Debug, Default)]
pub struct LineItemFilter {
    pub ids: Vec<String>,
    pub transaction_id: Option<String>,
    pub line_type: Option<String>,
}

pub async fn list_line_items(ctx: &Ctx<'_>, filter: &LineItemFilter, page: PageSpec) -> Result<ListedPage> {
    let line_type = filter.line_type.as_deref().map(|t| validate::one_of("type", t, super::enums::LINE_ITEM_TYPES)).transpose()?;
    let filters: Vec<Filter> = [
        listing::any_id(&filter.ids),
        listing::eq("transaction_id", filter.transaction_id.as_deref()),
        listing::eq("type", line_type.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    listing::stored_page(ctx, LINE_ITEM_KIND, filters, page).await
}

/// `GET /api/transactions/{id}/line_items`: a 404 when the transaction is not the caller's.
pub async fn line_items_of(ctx: &Ctx<'_>, transaction_id: &str, line_type: Option<String>, page: PageSpec) -> Result<ListedPage> {
    ctx.store.get(KIND, ctx.scope, transaction_id).await?.ok_or_else(|| Error::not_found("transaction"))?;
    let filter = LineItemFilter { transaction_id: Some(transaction_id.to_owned()), line_type, ..LineItemFilter::default() };
    list_line_items(ctx, &filter, page).await
}

pub async fn get_line_item(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    listing::stored_doc(ctx, LINE_ITEM_KIND, id, "transaction line item").await
}

/// A transaction's description as `vendor_description` allows (free text, capped).
pub fn description(text: &str) -> Option<String> {
    let trimmed: String = text.trim().chars().filter(|c| !c.is_control()).take(TEXT_LEN_MAX).collect();
    (!trimmed.is_empty()).then_some(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_are_read_as_strings_whatever_an_older_release_stored() {
        #[derive(Deserialize)]
        struct Stored {
            #[serde(deserialize_with = "string_values")]
            details: BTreeMap<String, String>,
        }
        let stored: Stored = serde_json::from_str(r#"{"details": {"reversal": true, "end_to_end_id": "e2e", "n": 7}}"#).unwrap();
        let expected: BTreeMap<String, String> =
            [("end_to_end_id", "e2e"), ("n", "7"), ("reversal", "true")].into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        assert_eq!(stored.details, expected);
    }

    #[test]
    fn b5_line_items_say_what_they_settle_as_mt_does() {
        assert_eq!(Settles::PaymentOrder("po".into()).transactable(), Some(("payment_order", "po")));
        assert_eq!(Settles::Return("r".into()).transactable(), Some(("return", "r")));
        assert_eq!(Settles::IncomingPaymentDetail("i".into()).transactable(), Some(("incoming_payment_detail", "i")));
        assert_eq!(Settles::ExpectedPayment("e".into()).transactable(), None);
        assert_eq!(Settles::PaymentOrder("po".into()).line_type(), "originating");
        assert_eq!(Settles::ExpectedPayment("e".into()).line_type(), "receiving");
    }

    #[test]
    fn descriptions_are_trimmed_and_capped() {
        assert_eq!(description("  PAYROLL\n"), Some("PAYROLL".into()));
        assert_eq!(description("   "), None);
        assert_eq!(description(&"x".repeat(400)).map(|d| d.len()), Some(TEXT_LEN_MAX));
    }
}
