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
    /// The transaction that booked the returned money, when the file says.
    pub transaction_id: Option<String>,
    /// The raw record, as the bank wrote it.
    pub data: Option<serde_json::Value>,
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
        reconciliation_status: "unreconciled".into(),
        reference_numbers: Vec::new(),
        returnable_id: Some(order.id.to_string()),
        returnable_type: Some(kinds::PAYMENT_ORDER.into()),
        role: "originating".into(),
        status: "completed".into(),
        transaction_id: new.transaction_id,
        transaction_line_item_id: None,
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
