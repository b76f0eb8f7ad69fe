//! `/api/payment_orders`: create (201), retrieve, list, update (fields and status).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{created_json, listed, ok_json, page_spec, param};
use crate::domain::listing::time_bound;
use crate::domain::payment_order::ops::{self, PaymentOrderFilter};
use crate::domain::payment_order::{PaymentOrderInput, PaymentOrderPatch};
use crate::error::Error;
use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::idempotency::WriteContext;

pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<PaymentOrderInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let json = ops::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED), &input).await?;
    Ok(created_json(json))
}

pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(ops::get(&state.ctx(&scope), &id).await?))
}

pub async fn list(State(state): State<AppState>, principal: Principal, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    let spec = page_spec(&query)?;
    let filter = PaymentOrderFilter {
        payment_type: param(&query, "type"),
        priority: param(&query, "priority"),
        counterparty_id: param(&query, "counterparty_id"),
        originating_account_id: param(&query, "originating_account_id"),
        external_id: param(&query, "external_id"),
        status: param(&query, "status"),
        direction: param(&query, "direction"),
        reference_number: param(&query, "reference_number"),
        transaction_id: param(&query, "transaction_id"),
        effective_date_start: param(&query, "effective_date_start"),
        effective_date_end: param(&query, "effective_date_end"),
        created_from: time_bound("created_at_start", query.get("created_at_start"), false)?,
        created_to: time_bound("created_at_end", query.get("created_at_end"), true)?,
        process_after_start: time_bound("process_after_start", query.get("process_after_start"), false)?,
        process_after_end: time_bound("process_after_end", query.get("process_after_end"), true)?,
        metadata: query.metadata(),
    };
    Ok(listed(ops::list(&state.ctx(&scope), &filter, spec).await?, spec))
}

pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<PaymentOrderPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let json = ops::update(&state.ctx(&scope), &state.committer(&write, StatusCode::OK), &id, &patch).await?;
    Ok(ok_json(json))
}
