//! Returns (SPEC B5, B7): a bank's word that a payment came back, with its code (`R01`...), in
//! Modern Treasury's `return` shape ([`ReturnObject`], which a returned payment order also
//! embeds as `current_return`). Each return is a stored document too, so
//! `GET /api/returns/{id}` of an order's `current_return.id` finds it.
//!
//! Clients never create returns: the inbound worker stages one with [`stage_return`] inside the
//! batch that applies the bank's file (and moves the order to `returned` in the same batch); the
//! sandbox bank does the same for its magic amount.

use super::api_key::Scope;
use super::common::new_id;
use super::enums::PaymentType;
use super::listing::{self, ListedPage, PageSpec};
use super::payment_order::PaymentOrder;
pub use super::payment_order::ReturnObject;
use super::time::Timestamp;
use super::{Ctx, event, kinds};
use crate::error::{Error, Result};
use crate::store::{Filter, ObjectRecord, Term, Write, WriteBatch};

pub const KIND: &str = kinds::RETURN;

/// What the bank said of a return (all optional but the code a NACHA return always has).
#[derive(Debug, Clone, Default)]
pub struct NewReturn {
    /// The bank's return code (`R01`...); `None` for a wire returned without one.
    pub code: Option<String>,
    pub reason: Option<String>,
    pub additional_information: Option<String>,
    /// `YYYY-MM-DD`, for R14 and R15.
    pub date_of_death: Option<String>,
    /// The transaction that booked the returned money, when the file says, and its line item
    /// for the return: the return is then `reconciled`.
    pub transaction_id: Option<String>,
    pub transaction_line_item_id: Option<String>,
    /// The raw record, as the bank wrote it.
    pub data: Option<serde_json::Value>,
}

/// The codes a return may carry: Modern Treasury's `return.code` enum, which the official SDKs
/// check. A bank's code outside it (an ISO reason such as `AC04`) goes in the reason instead.
const CODES: &[&str] = &[
    "901",
    "902",
    "903",
    "904",
    "905",
    "907",
    "908",
    "909",
    "910",
    "911",
    "912",
    "914",
    "C01",
    "C02",
    "C03",
    "C05",
    "C06",
    "C07",
    "C08",
    "C09",
    "C13",
    "C14",
    "R01",
    "R02",
    "R03",
    "R04",
    "R05",
    "R06",
    "R07",
    "R08",
    "R09",
    "R10",
    "R11",
    "R12",
    "R13",
    "R14",
    "R15",
    "R16",
    "R17",
    "R18",
    "R19",
    "R20",
    "R21",
    "R22",
    "R23",
    "R24",
    "R25",
    "R26",
    "R27",
    "R28",
    "R29",
    "R30",
    "R31",
    "R32",
    "R33",
    "R34",
    "R35",
    "R36",
    "R37",
    "R38",
    "R39",
    "R40",
    "R41",
    "R42",
    "R43",
    "R44",
    "R45",
    "R46",
    "R47",
    "R50",
    "R51",
    "R52",
    "R53",
    "R61",
    "R62",
    "R67",
    "R68",
    "R69",
    "R70",
    "R71",
    "R72",
    "R73",
    "R74",
    "R75",
    "R76",
    "R77",
    "R80",
    "R81",
    "R82",
    "R83",
    "R84",
    "R85",
    "currencycloud",
];

/// The `code` and `reason` of a return the bank gave `code` (if any) and `title` for: a code
/// outside [`CODES`] is kept in the reason (`AC04: Closed Account Number`), never as the code.
pub fn code_and_reason(code: Option<&str>, title: Option<&str>) -> (Option<String>, String) {
    let title = title.unwrap_or("Returned by the receiving bank");
    match code {
        Some(code) if CODES.contains(&code) => (Some(code.to_owned()), title.to_owned()),
        Some(code) => (None, format!("{code}: {title}")),
        None => (None, title.to_owned()),
    }
}

/// Payment types that have a return type of the same name (the SDK's `ReturnType`).
const RETURN_TYPES: &[PaymentType] = &[
    PaymentType::Ach,
    PaymentType::AuBecs,
    PaymentType::Bacs,
    PaymentType::Book,
    PaymentType::Check,
    PaymentType::CrossBorder,
    PaymentType::Eft,
    PaymentType::GbFps,
    PaymentType::Neft,
    PaymentType::NzBecs,
    PaymentType::Rtp,
    PaymentType::Sepa,
    PaymentType::Stablecoin,
    PaymentType::Wire,
    PaymentType::Zengin,
];

/// The return of `order` the bank reported, as of `now` (nothing staged).
pub fn build(order: &PaymentOrder, new: NewReturn, now: Timestamp) -> ReturnObject {
    ReturnObject {
        id: new_id(),
        object: KIND.into(),
        live_mode: order.live_mode,
        amount: order.amount,
        currency: order.currency,
        code: new.code,
        reason: new.reason,
        failure_reason: None,
        additional_information: new.additional_information,
        corrections: None,
        current_return: None,
        data: new.data,
        date_of_death: new.date_of_death,
        discarded_at: None,
        internal_account_id: Some(order.originating_account_id.to_string()),
        ledger_transaction_id: None,
        reconciliation_status: if new.transaction_id.is_some() { "reconciled" } else { "unreconciled" }.into(),
        reference_numbers: Vec::new(),
        returnable_id: Some(order.id.to_string()),
        returnable_type: Some(kinds::PAYMENT_ORDER.into()),
        role: "originating".into(),
        status: "completed".into(),
        transaction_id: new.transaction_id,
        transaction_line_item_id: new.transaction_line_item_id,
        return_type: if RETURN_TYPES.contains(&order.payment_type) { order.payment_type.as_str().into() } else { "manual".into() },
        created_at: now,
        updated_at: now,
    }
}

/// Stages a return of `order` in `batch` (for the inbound worker): the stored return and its
/// `created` event. The caller puts it in the order's `current_return` and moves the order to
/// `returned` in the same batch.
pub fn stage_return(ctx: &Ctx<'_>, batch: &mut WriteBatch, order: &PaymentOrder, new: NewReturn) -> Result<ReturnObject> {
    let ret = build(order, new, ctx.now);
    stage_record(ctx, batch, &ret, order.counterparty_id.as_ref().map(|id| id.as_str()))?;
    Ok(ret)
}

/// Stages an already built return: its document and its `created` event.
pub fn stage_record(ctx: &Ctx<'_>, batch: &mut WriteBatch, ret: &ReturnObject, counterparty_id: Option<&str>) -> Result<()> {
    let json = serde_json::to_string(ret).map_err(|e| Error::internal(format!("return: {e}")))?;
    batch.push(Write::Insert(record(ctx.scope, ret, counterparty_id, json.clone())));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &ret.id, &json, ctx.now)?));
    Ok(())
}

/// Stages the change of a stored return (a booking that settles it, found later): its
/// document, against the version stored, and its `updated` event (SPEC E4).
pub async fn stage_update(ctx: &Ctx<'_>, batch: &mut WriteBatch, ret: &ReturnObject, counterparty_id: Option<&str>) -> Result<()> {
    let stored = ctx.store.get(KIND, ctx.scope, &ret.id).await?.ok_or_else(|| Error::internal(format!("return {} is gone", ret.id)))?;
    let json = serde_json::to_string(ret).map_err(|e| Error::internal(format!("return: {e}")))?;
    batch.push(Write::Replace { record: record(ctx.scope, ret, counterparty_id, json.clone()), expected_version: stored.version });
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", &ret.id, &json, ctx.now)?));
    Ok(())
}

fn record(scope: &Scope, ret: &ReturnObject, counterparty_id: Option<&str>, doc: String) -> ObjectRecord {
    let mut terms = Vec::new();
    terms.extend(ret.returnable_id.as_ref().map(|id| Term::new("returnable_id", id)));
    terms.extend(ret.returnable_type.as_ref().map(|t| Term::new("returnable_type", t)));
    terms.extend(ret.internal_account_id.as_ref().map(|id| Term::new("internal_account_id", id)));
    terms.extend(counterparty_id.map(|id| Term::new("counterparty_id", id)));
    ObjectRecord { id: ret.id.clone(), kind: KIND, scope: scope.clone(), parent_id: None, created_at: ret.created_at, doc, terms }
}

pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    listing::stored_doc(ctx, KIND, id, "return").await
}

/// MT's `returnable_type` values.
pub const RETURNABLE_TYPES: &[&str] = &["incoming_payment_detail", "payment_order", "return", "reversal"];

/// Filters of `GET /api/returns`, parsed where the query is read.
#[derive(Debug, Default)]
pub struct ReturnFilter {
    pub returnable_id: Option<String>,
    pub returnable_type: Option<String>,
    pub internal_account_id: Option<String>,
    pub counterparty_id: Option<String>,
}

pub async fn list(ctx: &Ctx<'_>, filter: &ReturnFilter, page: PageSpec) -> Result<ListedPage> {
    let filters: Vec<Filter> = [
        listing::eq("returnable_id", filter.returnable_id.as_deref()),
        listing::eq("returnable_type", filter.returnable_type.as_deref()),
        listing::eq("internal_account_id", filter.internal_account_id.as_deref()),
        listing::eq("counterparty_id", filter.counterparty_id.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    listing::stored_page(ctx, KIND, filters, page).await
}

#[cfg(test)]
mod code_tests {
    use super::code_and_reason;

    #[test]
    fn b5_only_modern_treasury_return_codes_are_codes() {
        assert_eq!(code_and_reason(Some("R01"), Some("Insufficient Funds")), (Some("R01".into()), "Insufficient Funds".into()));
        assert_eq!(code_and_reason(Some("AC04"), Some("Closed Account Number")), (None, "AC04: Closed Account Number".into()));
        assert_eq!(code_and_reason(Some("R99"), None), (None, "R99: Returned by the receiving bank".into()));
        assert_eq!(code_and_reason(None, None), (None, "Returned by the receiving bank".into()));
    }
}
