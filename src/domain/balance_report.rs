//! Balance reports (SPEC B5): an internal account's balances as the bank reported them on a
//! day (a `camt.053`'s OPBD and CLBD as `opening_ledger` and `closing_ledger`), in Modern
//! Treasury's `balance_report` shape, served under the account
//! (`GET /api/internal_accounts/{id}/balance_reports[/{id}]`). The inbound worker stages them
//! with [`stage_balance_report`]; clients only read them.

use serde::{Deserialize, Serialize};

use super::api_key::Scope;
use super::common::new_id;
use super::listing::{self, ListedPage, PageSpec};
use super::money::Currency;
use super::time::Timestamp;
use super::validate;
use super::{Ctx, event, kinds};
use crate::error::{Error, Result};
use crate::store::{Filter, ObjectRecord, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = kinds::BALANCE_REPORT;

/// MT's `balance_report_type` values.
pub use super::enums::BALANCE_REPORT_TYPES as REPORT_TYPES;
/// MT's `balance_type` values.
pub use super::enums::BALANCE_TYPES;

/// MT's `balance`, one line of a report.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = balance)]
pub struct Balance {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Signed, in minor units of `currency` (negative: the account is overdrawn).
    pub amount: i64,
    pub amount_string: String,
    #[schema(schema_with = super::schema::currency)]
    pub currency: Currency,
    #[schema(schema_with = super::schema::balance_type)]
    pub balance_type: String,
    pub vendor_code: String,
    pub vendor_code_type: Option<String>,
    #[schema(schema_with = super::schema::date_or_null)]
    pub as_of_date: Option<String>,
    pub as_of_time: Option<String>,
    #[schema(schema_with = super::schema::date_or_null)]
    pub value_date: Option<String>,
}

/// MT's `balance_report`, as stored and served.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = balance_report)]
pub struct BalanceReport {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    #[schema(schema_with = super::schema::balance_report_type)]
    pub balance_report_type: String,
    #[schema(schema_with = super::schema::date)]
    pub as_of_date: String,
    /// `HH:MM:SS`. Reports recorded before the time was kept read as `00:00:00`.
    #[serde(deserialize_with = "time_or_midnight")]
    #[schema(schema_with = super::schema::time)]
    pub as_of_time: String,
    pub balances: Vec<Balance>,
    pub internal_account_id: String,
}

/// One balance as the bank reported it.
#[derive(Debug, Clone)]
pub struct NewBalance {
    /// One of [`BALANCE_TYPES`] (`opening_ledger` for OPBD, `closing_ledger` for CLBD...).
    pub balance_type: String,
    /// Signed, in minor units of `currency`.
    pub amount: i64,
    pub currency: Currency,
    /// The bank's own code for it (`OPBD`, `CLBD`...).
    pub vendor_code: String,
    /// MT's `vendor_code_type` (`iso20022`, `bai2`...).
    pub vendor_code_type: Option<String>,
}

/// A report as the inbound worker read it.
#[derive(Debug, Clone)]
pub struct NewBalanceReport {
    pub internal_account_id: String,
    /// One of [`REPORT_TYPES`]: `previous_day` for an end-of-day statement.
    pub balance_report_type: String,
    /// `YYYY-MM-DD`.
    pub as_of_date: String,
    /// `HH:MM:SS`, as the bank gave it.
    pub as_of_time: String,
    pub balances: Vec<NewBalance>,
}

fn time_or_midnight<'de, D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<String, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_else(|| "00:00:00".into()))
}

fn build(ctx: &Ctx<'_>, new: NewBalanceReport) -> Result<BalanceReport> {
    let report_type = validate::one_of("balance_report_type", &new.balance_report_type, REPORT_TYPES)?;
    super::payment_order::ops::date("as_of_date", &new.as_of_date)?;
    if !crate::base::time::is_clock_time(&new.as_of_time) {
        return Err(Error::invalid("as_of_time", format!("{:?} is not a time (HH:MM:SS)", new.as_of_time)));
    }
    let balances = new
        .balances
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            let balance_type = validate::one_of(&format!("balances[{i}].balance_type"), &b.balance_type, BALANCE_TYPES)?;
            Ok(Balance {
                id: new_id(),
                object: "balance".into(),
                live_mode: ctx.scope.live_mode,
                created_at: ctx.now,
                updated_at: ctx.now,
                amount: b.amount,
                amount_string: b.amount.to_string(),
                currency: b.currency,
                balance_type,
                vendor_code: b.vendor_code,
                vendor_code_type: b.vendor_code_type,
                as_of_date: Some(new.as_of_date.clone()),
                as_of_time: Some(new.as_of_time.clone()),
                value_date: None,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(BalanceReport {
        id: new_id(),
        object: KIND.into(),
        live_mode: ctx.scope.live_mode,
        created_at: ctx.now,
        updated_at: ctx.now,
        balance_report_type: report_type,
        as_of_date: new.as_of_date,
        as_of_time: new.as_of_time,
        balances,
        internal_account_id: new.internal_account_id,
    })
}

fn record(scope: &Scope, report: &BalanceReport, doc: String) -> ObjectRecord {
    ObjectRecord {
        id: report.id.clone(),
        kind: KIND,
        scope: scope.clone(),
        parent_id: Some(report.internal_account_id.clone()),
        created_at: report.created_at,
        doc,
        terms: vec![
            Term::new("internal_account_id", &report.internal_account_id),
            Term::new("as_of_date", &report.as_of_date),
            Term::new("balance_report_type", &report.balance_report_type),
        ],
    }
}

/// Stages a balance report of an internal account in `batch` (for the inbound worker): the
/// report and its `created` event. `internal_account_id` names an account the caller resolved
/// in `ctx.scope` (internal accounts are never deleted).
pub fn stage_balance_report(ctx: &Ctx<'_>, batch: &mut WriteBatch, new: NewBalanceReport) -> Result<BalanceReport> {
    let report = build(ctx, new)?;
    let json = serde_json::to_string(&report).map_err(|e| Error::internal(format!("balance report: {e}")))?;
    batch.push(Write::Insert(record(ctx.scope, &report, json.clone())));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &report.id, &json, ctx.now)?));
    Ok(report)
}

async fn account_exists(ctx: &Ctx<'_>, internal_account_id: &str) -> Result<()> {
    ctx.store.get(kinds::INTERNAL_ACCOUNT, ctx.scope, internal_account_id).await?.ok_or_else(|| Error::not_found("internal account"))?;
    Ok(())
}

/// One report of the account; a 404 when either is not the caller's or they do not belong together.
pub async fn get(ctx: &Ctx<'_>, internal_account_id: &str, id: &str) -> Result<String> {
    account_exists(ctx, internal_account_id).await?;
    let stored: Option<StoredObject> = ctx.store.get(KIND, ctx.scope, id).await?;
    stored.filter(|s| s.parent_id.as_deref() == Some(internal_account_id)).map(|s| s.doc).ok_or_else(|| Error::not_found("balance report"))
}

/// Filters of the account's list: MT's `as_of_date` and `balance_report_type`.
#[derive(Debug, Default)]
pub struct BalanceReportFilter {
    pub as_of_date: Option<String>,
    pub balance_report_type: Option<String>,
}

pub async fn list(ctx: &Ctx<'_>, internal_account_id: &str, filter: &BalanceReportFilter, page: PageSpec) -> Result<ListedPage> {
    let as_of_date = filter.as_of_date.as_deref().map(|d| super::payment_order::ops::date("as_of_date", d)).transpose()?;
    let report_type =
        filter.balance_report_type.as_deref().map(|t| validate::one_of("balance_report_type", t, REPORT_TYPES)).transpose()?;
    account_exists(ctx, internal_account_id).await?;
    let filters: Vec<Filter> = [
        listing::eq("internal_account_id", Some(internal_account_id)),
        listing::eq("as_of_date", as_of_date.as_deref()),
        listing::eq("balance_report_type", report_type.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    listing::stored_page(ctx, KIND, filters, page).await
}
