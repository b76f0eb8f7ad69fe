//! Incoming payment details (issue 21): credits (and debits) that arrived by ACH, wire, RTP...
//! without Payrail having sent anything, in Modern Treasury's `incoming_payment_detail` shape.
//! Clients read, list and tag them (metadata).
//!
//! In sandbox mode `POST /api/simulations/incoming_payment_details/create_async` makes one, as
//! MT's sandbox does: the detail (status `completed`), the transaction that books it, a line
//! item linking the two, and the reconciliation of an expected payment it matches, all in one
//! commit ([`simulate`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::api_key::Scope;
use super::common::new_id;
use super::enums::Direction;
use super::expected_payment;
use super::listing::{self, ListedPage, PageSpec};
use super::money::{Amount, Currency};
use super::payment_order::ops::date;
use super::time::Timestamp;
use super::transaction::{self, NewTransaction, Settles};
use super::validate::{self, Metadata, MetadataPatch, TEXT_LEN_MAX};
use super::{Commit, Ctx, event, internal_account, kinds, require, retry_on_conflict};
use crate::error::{Error, Result};
use crate::store::{Filter, ObjectRecord, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = kinds::INCOMING_PAYMENT_DETAIL;
/// MT's incoming payment detail statuses.
pub use super::enums::INCOMING_PAYMENT_DETAIL_STATUSES as STATUSES;
/// MT's incoming payment detail types.
pub use super::enums::INCOMING_PAYMENT_DETAIL_TYPES as TYPES;
/// The description a simulation gives when the client gives none.
pub const SIMULATED_DESCRIPTION: &str = "Simulated incoming payment";

/// MT's `incoming_payment_detail`, as stored and served.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = incoming_payment_detail)]
pub struct IncomingPaymentDetail {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub internal_account_id: String,
    pub virtual_account_id: Option<String>,
    pub virtual_account: Option<Value>,
    pub transaction_line_item_id: Option<String>,
    pub transaction_id: Option<String>,
    pub ledger_transaction_id: Option<String>,
    #[serde(rename = "type")]
    #[schema(schema_with = super::schema::incoming_payment_detail_type)]
    pub payment_type: String,
    #[schema(schema_with = super::schema::object)]
    pub data: Value,
    pub amount: i64,
    #[schema(schema_with = super::schema::currency)]
    pub currency: Currency,
    #[schema(schema_with = super::schema::direction)]
    pub direction: Direction,
    #[schema(schema_with = super::schema::incoming_payment_detail_status)]
    pub status: String,
    #[schema(schema_with = super::schema::metadata)]
    pub metadata: Metadata,
    #[schema(schema_with = super::schema::date)]
    pub as_of_date: String,
    pub vendor_id: Option<String>,
    pub originating_routing_number: Option<String>,
    #[schema(schema_with = super::schema::routing_number_type_or_null)]
    pub originating_routing_number_type: Option<String>,
    pub originating_account_number: Option<String>,
    pub originating_account_number_safe: Option<String>,
    #[schema(schema_with = super::schema::account_number_type_or_null)]
    pub originating_account_number_type: Option<String>,
    pub originating_party_name: Option<String>,
    pub originating_party_address: Option<Value>,
    pub originating_party_vendor_identifier: Option<String>,
    pub receiving_account_number: Option<String>,
    pub receiving_account_number_safe: Option<String>,
    pub subtype: Option<String>,
    #[schema(schema_with = super::schema::reconciliation_status)]
    pub reconciliation_status: String,
}

/// The simulation's body (MT's `incoming_payment_detail_create_request`).
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = incoming_payment_detail_create_request)]
pub struct SimulationInput {
    /// `ach` when not given.
    #[serde(rename = "type")]
    #[schema(schema_with = super::schema::incoming_payment_detail_type_or_null)]
    pub payment_type: Option<String>,
    /// `credit` when not given.
    #[schema(schema_with = super::schema::direction_or_null)]
    pub direction: Option<String>,
    #[schema(value_type = i64, required = true, minimum = 1, maximum = 9_007_199_254_740_991.0)]
    pub amount: Option<i64>,
    /// The internal account's currency when not given.
    #[schema(schema_with = super::schema::currency_or_null)]
    pub currency: Option<String>,
    #[schema(value_type = String, required = true, format = "uuid")]
    pub internal_account_id: Option<String>,
    /// Payrail has no virtual accounts (422); not in the published schema.
    #[schema(ignore)]
    pub virtual_account_id: Option<String>,
    /// Today when not given.
    #[schema(schema_with = super::schema::date_or_null)]
    pub as_of_date: Option<String>,
    pub description: Option<String>,
    pub subtype: Option<String>,
    #[schema(schema_with = super::schema::object_or_null)]
    pub data: Option<Value>,
}

impl IncomingPaymentDetail {
    fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = listing::metadata_terms(&self.metadata).collect();
        terms.push(Term::new("internal_account_id", &self.internal_account_id));
        terms.push(Term::new("direction", self.direction.as_str()));
        terms.push(Term::new("status", &self.status));
        terms.push(Term::new("type", &self.payment_type));
        terms.push(Term::new("as_of_date", &self.as_of_date));
        terms.extend(self.subtype.as_ref().map(|s| Term::new("subtype", s)));
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

fn to_json(detail: &IncomingPaymentDetail) -> Result<String> {
    serde_json::to_string(detail).map_err(|e| Error::internal(format!("incoming payment detail: {e}")))
}

fn parse(stored: &StoredObject) -> Result<IncomingPaymentDetail> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored incoming payment detail {}: {e}", stored.id)))
}

/// The simulated detail, checked, before anything is staged (its transaction ids unset).
async fn build(ctx: &Ctx<'_>, batch: &mut WriteBatch, input: &SimulationInput) -> Result<IncomingPaymentDetail> {
    if input.virtual_account_id.is_some() {
        return Err(Error::invalid("virtual_account_id", "Payrail has no virtual accounts"));
    }
    let payment_type = validate::one_of("type", input.payment_type.as_deref().unwrap_or("ach"), TYPES)?;
    let direction = Direction::parse("direction", input.direction.as_deref().unwrap_or("credit"))?;
    let amount = Amount::parse("amount", input.amount.ok_or_else(|| Error::missing("amount"))?)?.minor_units();
    let as_of_date = match &input.as_of_date {
        Some(day) => date("as_of_date", day)?,
        None => ctx.now.to_string()[..10].to_owned(),
    };
    let subtype = validate::opt_text("subtype", input.subtype.as_deref(), TEXT_LEN_MAX)?;
    let data = match &input.data {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(object @ Value::Object(_)) => object.clone(),
        Some(_) => return Err(Error::invalid("data", "data must be an object")),
    };
    let account_id = input.internal_account_id.as_deref().ok_or_else(|| Error::missing("internal_account_id"))?;
    let account = internal_account::parse(&require(ctx, batch, kinds::INTERNAL_ACCOUNT, account_id, "internal_account_id").await?)?;
    let currency = validate::account_currency(
        input.currency.as_deref(),
        account.currency,
        "the internal account's",
        "an account's transactions are all in its own currency",
    )?;
    Ok(IncomingPaymentDetail {
        id: new_id(),
        object: KIND.into(),
        live_mode: ctx.scope.live_mode,
        created_at: ctx.now,
        updated_at: ctx.now,
        internal_account_id: account.id,
        virtual_account_id: None,
        virtual_account: None,
        transaction_line_item_id: None,
        transaction_id: None,
        ledger_transaction_id: None,
        payment_type,
        data,
        amount,
        currency,
        direction,
        status: "completed".into(),
        metadata: Metadata::new(),
        as_of_date,
        vendor_id: None,
        originating_routing_number: None,
        originating_routing_number_type: None,
        originating_account_number: None,
        originating_account_number_safe: None,
        originating_account_number_type: None,
        originating_party_name: None,
        originating_party_address: None,
        originating_party_vendor_identifier: None,
        receiving_account_number: None,
        receiving_account_number_safe: None,
        subtype,
        reconciliation_status: "unreconciled".into(),
    })
}

/// `POST /api/simulations/incoming_payment_details/create_async` (sandbox only): the detail,
/// its booked transaction, their line item, and the expected payment it reconciles, if any, in
/// one commit. Answers the detail.
pub async fn simulate(ctx: &Ctx<'_>, commit: &dyn Commit, input: &SimulationInput) -> Result<String> {
    if ctx.scope.live_mode {
        return Err(Error::invalid("live_mode", "simulations run in sandbox mode only: use a sandbox API key"));
    }
    // An expected payment another request (or the sandbox bank) reconciled meanwhile is read
    // again: this one then reconciles another, or none. The caller did nothing that conflicts.
    retry_on_conflict(|| simulate_once(ctx, commit, input)).await
}

async fn simulate_once(ctx: &Ctx<'_>, commit: &dyn Commit, input: &SimulationInput) -> Result<String> {
    let mut batch = WriteBatch::new();
    let mut detail = build(ctx, &mut batch, input).await?;
    let description = input.description.as_deref().map(|d| validate::text("description", d, TEXT_LEN_MAX)).transpose()?;
    let new = NewTransaction {
        internal_account_id: detail.internal_account_id.clone(),
        amount: detail.amount,
        currency: detail.currency,
        direction: detail.direction,
        as_of_date: detail.as_of_date.clone(),
        as_of_time: None,
        transaction_type: detail.payment_type.clone(),
        vendor_description: Some(description.unwrap_or_else(|| SIMULATED_DESCRIPTION.into())),
        vendor_code: None,
        vendor_code_type: None,
        vendor_id: None,
        posted: true,
        details: Default::default(),
        custom_identifiers: Default::default(),
    };
    let mut booked = transaction::stage_new(ctx, &mut batch, new)?;
    let reconciled = expected_payment::reconcile(ctx, &mut batch, &mut booked).await?;
    let item =
        transaction::stage_line_item(ctx, &mut batch, &mut booked, Settles::IncomingPaymentDetail(detail.id.clone()), detail.amount)?;
    detail.transaction_id = Some(booked.id.clone());
    detail.transaction_line_item_id = Some(item.id);
    if reconciled.is_some() {
        detail.reconciliation_status = "reconciled".into();
    }
    let json = to_json(&detail)?;
    batch.push(Write::Insert(detail.record(ctx.scope, json.clone())));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &detail.id, &json, ctx.now)?));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "completed", &detail.id, &json, ctx.now)?));
    commit.commit(batch, &json).await?;
    Ok(json)
}

pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    listing::stored_doc(ctx, KIND, id, "incoming payment detail").await
}

/// Filters of `GET /api/incoming_payment_details`, parsed where the query is read.
#[derive(Debug, Default)]
pub struct IncomingPaymentDetailFilter {
    pub direction: Option<Direction>,
    pub status: Option<String>,
    pub payment_type: Option<String>,
    pub subtype: Option<String>,
    pub virtual_account_id: Option<String>,
    pub as_of_date_start: Option<String>,
    pub as_of_date_end: Option<String>,
    pub metadata: Vec<(String, String)>,
}

pub async fn list(ctx: &Ctx<'_>, filter: &IncomingPaymentDetailFilter, page: PageSpec) -> Result<ListedPage> {
    let status = filter.status.as_deref().map(|s| validate::one_of("status", s, STATUSES)).transpose()?;
    let payment_type = filter.payment_type.as_deref().map(|t| validate::one_of("type", t, TYPES)).transpose()?;
    let mut filters: Vec<Filter> = [
        listing::eq("direction", filter.direction.map(Direction::as_str)),
        listing::eq("status", status.as_deref()),
        listing::eq("type", payment_type.as_deref()),
        listing::eq("subtype", filter.subtype.as_deref()),
        // Payrail has no virtual accounts: no detail is in one.
        listing::eq("virtual_account_id", filter.virtual_account_id.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    filters.extend(transaction::date_range("as_of_date", filter.as_of_date_start.as_deref(), filter.as_of_date_end.as_deref())?);
    filters.extend(listing::metadata_filters(&filter.metadata));
    listing::stored_page(ctx, KIND, filters, page).await
}

/// The body of `PATCH /api/incoming_payment_details/{id}`: metadata only, as in MT.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = incoming_payment_detail_update_request)]
pub struct IncomingPaymentDetailPatch {
    #[schema(schema_with = super::schema::metadata_patch_or_null)]
    pub metadata: Option<MetadataPatch>,
}

pub async fn update(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &IncomingPaymentDetailPatch) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("incoming payment detail"))?;
        let Some(metadata) = &patch.metadata else { return Ok(stored.doc) };
        let mut detail = parse(&stored)?;
        let before = detail.clone();
        detail.metadata = validate::merge_metadata("metadata", &detail.metadata, metadata)?;
        if crate::domain::unchanged(&before, &detail, |d| &mut d.updated_at) {
            return Ok(stored.doc); // the metadata it holds: no event (SPEC E4)
        }
        detail.updated_at = ctx.now;
        let json = to_json(&detail)?;
        let mut batch = WriteBatch::new();
        batch.push(Write::Replace { record: detail.record(ctx.scope, json.clone()), expected_version: stored.version });
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}
