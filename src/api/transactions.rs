//! `/api/transactions` (retrieve, list, update metadata) and their line items
//! (`/api/transactions/{id}/line_items`, `/api/transaction_line_items[/{id}]`). Transactions
//! are made by the bank's answers (SPEC B5), never by a client.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{MetadataParams, PageParams};
use super::{ok_json, param, parsed, unsupported_filters};
use crate::app::{AppState, WriteContext};
use crate::domain::enums::Direction;
use crate::domain::transaction::{
    self, LineItemFilter, TRANSACTION_TYPES, Transaction, TransactionFilter, TransactionLineItem, TransactionPatch,
};
use crate::domain::validate;
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

#[utoipa::path(
    get,
    path = "/api/transactions/{id}",
    tag = "transactions",
    operation_id = "retrieveTransaction",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The transaction.", body = Transaction)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(transaction::get(&state.ctx(&scope), &id).await?))
}

/// `true` or `false`, or a 422 naming the parameter.
fn boolean(name: &str, text: &str) -> Result<bool, Error> {
    match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::invalid(name, format!("{name} must be true or false"))),
    }
}

#[utoipa::path(
    get,
    path = "/api/transactions",
    tag = "transactions",
    operation_id = "listTransactions",
    params(
        PageParams,
        ("internal_account_id" = Option<String>, Query),
        ("virtual_account_id" = Option<String>, Query, description = "Payrail has no virtual accounts: any value matches nothing."),
        ("direction" = Option<String>, Query, description = "credit or debit."),
        ("payment_type" = Option<String>, Query, description = "A transaction type such as ach, wire or other."),
        ("type" = Option<String>, Query, description = "The same as payment_type, read when payment_type is not given."),
        ("posted" = Option<bool>, Query),
        ("vendor_id" = Option<String>, Query),
        ("description" = Option<String>, Query, description = "Part of the bank's description (any case)."),
        ("as_of_date_start" = Option<String>, Query, format = Date),
        ("as_of_date_end" = Option<String>, Query, format = Date),
        MetadataParams,
    ),
    responses(
        (status = 200, description = "A page of transactions, newest first.", body = [Transaction]),
    ),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    unsupported_filters(&query, &["counterparty_id", "transactable_type"])?;
    // MT names the rail `payment_type`; `type` (the field's own name) is read the same way.
    let type_param = if query.get("payment_type").is_some() { "payment_type" } else { "type" };
    let filter = TransactionFilter {
        internal_account_id: param(&query, "internal_account_id"),
        virtual_account_id: param(&query, "virtual_account_id"),
        direction: parsed(&query, "direction", Direction::parse)?,
        transaction_type: parsed(&query, type_param, |name, text| validate::one_of(name, text, TRANSACTION_TYPES))?,
        posted: parsed(&query, "posted", boolean)?,
        vendor_id: param(&query, "vendor_id"),
        description: param(&query, "description"),
        as_of_date_start: param(&query, "as_of_date_start"),
        as_of_date_end: param(&query, "as_of_date_end"),
        metadata: query.metadata(),
    };
    Ok(paging.reply(transaction::list(&state.ctx(&scope), &filter, paging.spec).await?))
}

#[utoipa::path(
    patch,
    path = "/api/transactions/{id}",
    tag = "transactions",
    operation_id = "updateTransaction",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = TransactionPatch,
    responses((status = 200, description = "The updated transaction.", body = Transaction)),
)]
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<TransactionPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(transaction::update(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &patch).await?))
}

#[utoipa::path(
    get,
    path = "/api/transactions/{id}/line_items",
    tag = "transactions",
    operation_id = "listTransactionLineItemsOfTransaction",
    params(
        ("id" = String, Path, description = "The transaction's id."),
        PageParams,
        ("type" = Option<String>, Query, description = "originating or receiving."),
    ),
    responses(
        (status = 200, description = "A page of the transaction's line items, newest first.", body = [TransactionLineItem]),
    ),
)]
pub async fn line_items_of(
    State(state): State<AppState>,
    principal: Principal,
    paging: Paging,
    PathId(id): PathId,
    query: QueryParams,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(paging.reply(transaction::line_items_of(&state.ctx(&scope), &id, param(&query, "type"), paging.spec).await?))
}

#[utoipa::path(
    get,
    path = "/api/transaction_line_items",
    tag = "transactions",
    operation_id = "listTransactionLineItems",
    params(
        PageParams,
        ("id[]" = Option<Vec<String>>, Query, description = "Only these line items (also read as id, and as MT's id[KEY], the SDKs' form)."),
        ("transaction_id" = Option<String>, Query),
        ("type" = Option<String>, Query, description = "originating or receiving."),
    ),
    responses(
        (status = 200, description = "A page of transaction line items, newest first.", body = [TransactionLineItem]),
    ),
)]
pub async fn list_line_items(
    State(state): State<AppState>,
    principal: Principal,
    paging: Paging,
    query: QueryParams,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let filter =
        LineItemFilter { ids: query.all_keyed("id"), transaction_id: param(&query, "transaction_id"), line_type: param(&query, "type") };
    Ok(paging.reply(transaction::list_line_items(&state.ctx(&scope), &filter, paging.spec).await?))
}

#[utoipa::path(
    get,
    path = "/api/transaction_line_items/{id}",
    tag = "transactions",
    operation_id = "retrieveTransactionLineItem",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The transaction line item.", body = TransactionLineItem)),
)]
pub async fn retrieve_line_item(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(transaction::get_line_item(&state.ctx(&scope), &id).await?))
}
