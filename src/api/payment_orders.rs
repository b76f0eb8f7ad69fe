//! `/api/payment_orders`: create (201), retrieve, list, update (fields and status).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{MetadataParams, PageParams};
use super::{created_json, ok_json, param, parsed};
use crate::app::AppState;
use crate::app::WriteContext;
use crate::domain::enums::{Direction, PaymentType, Priority};
use crate::domain::listing::time_bound;
use crate::domain::payment_order::ops::{self, PaymentOrderFilter};
use crate::domain::payment_order::status::Status;
use crate::domain::payment_order::{PaymentOrder, PaymentOrderInput, PaymentOrderPatch};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

#[utoipa::path(
    post,
    path = "/api/payment_orders",
    tag = "payment_orders",
    operation_id = "createPaymentOrder",
    request_body = PaymentOrderInput,
    responses(
        (status = 201, description = "The payment order (status approved).", body = PaymentOrder),
    ),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<PaymentOrderInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let json = ops::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?;
    Ok(created_json(json))
}

#[utoipa::path(
    get,
    path = "/api/payment_orders/{id}",
    tag = "payment_orders",
    operation_id = "retrievePaymentOrder",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The payment order.", body = PaymentOrder)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(ops::get(&state.ctx(&scope), &id).await?))
}

#[utoipa::path(
    get,
    path = "/api/payment_orders",
    tag = "payment_orders",
    operation_id = "listPaymentOrders",
    params(
        PageParams,
        ("type" = Option<String>, Query, description = "A payment type such as ach or wire."),
        ("priority" = Option<String>, Query, description = "high or normal."),
        ("counterparty_id" = Option<String>, Query),
        ("originating_account_id" = Option<String>, Query),
        ("external_id" = Option<String>, Query),
        ("status" = Option<String>, Query, description = "A payment order status."),
        ("direction" = Option<String>, Query, description = "credit or debit."),
        ("reference_number" = Option<String>, Query),
        ("transaction_id" = Option<String>, Query),
        ("effective_date_start" = Option<String>, Query, format = Date),
        ("effective_date_end" = Option<String>, Query, format = Date),
        ("created_at_start" = Option<String>, Query, description = "A date (YYYY-MM-DD) or an RFC 3339 date-time."),
        ("created_at_end" = Option<String>, Query, description = "A date (YYYY-MM-DD) or an RFC 3339 date-time."),
        ("process_after_start" = Option<String>, Query, description = "A date (YYYY-MM-DD) or an RFC 3339 date-time."),
        ("process_after_end" = Option<String>, Query, description = "A date (YYYY-MM-DD) or an RFC 3339 date-time."),
        MetadataParams,
    ),
    responses(
        (status = 200, description = "A page of payment orders, newest first.", body = [PaymentOrder]),
    ),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    let spec = paging.spec;
    // Fields are read in this order, which is the order refusals come in: the time bounds,
    // then type, priority, status and direction (the dates last, in the domain).
    let filter = PaymentOrderFilter {
        created_from: time_bound("created_at_start", query.get("created_at_start"), false)?,
        created_to: time_bound("created_at_end", query.get("created_at_end"), true)?,
        process_after_start: time_bound("process_after_start", query.get("process_after_start"), false)?,
        process_after_end: time_bound("process_after_end", query.get("process_after_end"), true)?,
        payment_type: parsed(&query, "type", PaymentType::parse)?,
        priority: parsed(&query, "priority", Priority::parse)?,
        status: parsed(&query, "status", Status::parse_named)?,
        direction: parsed(&query, "direction", Direction::parse)?,
        counterparty_id: param(&query, "counterparty_id"),
        originating_account_id: param(&query, "originating_account_id"),
        external_id: param(&query, "external_id"),
        reference_number: param(&query, "reference_number"),
        transaction_id: param(&query, "transaction_id"),
        effective_date_start: param(&query, "effective_date_start"),
        effective_date_end: param(&query, "effective_date_end"),
        metadata: query.metadata(),
    };
    Ok(paging.reply(ops::list(&state.ctx(&scope), &filter, spec).await?))
}

#[utoipa::path(
    patch,
    path = "/api/payment_orders/{id}",
    tag = "payment_orders",
    operation_id = "updatePaymentOrder",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = PaymentOrderPatch,
    responses((status = 200, description = "The updated payment order.", body = PaymentOrder)),
)]
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<PaymentOrderPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let json = ops::update(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &patch).await?;
    Ok(ok_json(json))
}
