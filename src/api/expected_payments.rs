//! `/api/expected_payments`: create (201), retrieve, list, update, delete (200: archived).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value};

use super::{created_json, ok_json, param, parsed, unsupported_filters};
use crate::app::{AppState, WriteContext};
use crate::domain::enums::{Direction, PaymentType};
use crate::domain::expected_payment::{self, ExpectedPaymentFilter, ExpectedPaymentInput};
use crate::domain::listing::time_bound;
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<ExpectedPaymentInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let committer = state.committer(&write, StatusCode::CREATED.as_u16());
    Ok(created_json(expected_payment::create(&state.ctx(&scope), &committer, &input).await?))
}

pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(expected_payment::get(&state.ctx(&scope), &id).await?))
}

pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    unsupported_filters(&query, &["updated_at_lower_bound", "updated_at_upper_bound"])?;
    let filter = ExpectedPaymentFilter {
        created_from: time_bound("created_at_lower_bound", query.get("created_at_lower_bound"), false)?,
        created_to: time_bound("created_at_upper_bound", query.get("created_at_upper_bound"), true)?,
        status: param(&query, "status"),
        internal_account_id: param(&query, "internal_account_id"),
        external_id: param(&query, "external_id"),
        direction: parsed(&query, "direction", Direction::parse)?,
        payment_type: parsed(&query, "type", PaymentType::parse)?,
        counterparty_id: param(&query, "counterparty_id"),
        metadata: query.metadata(),
    };
    Ok(paging.reply(expected_payment::list(&state.ctx(&scope), &filter, paging.spec).await?))
}

pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<Map<String, Value>>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let committer = state.committer(&write, StatusCode::OK.as_u16());
    Ok(ok_json(expected_payment::update(&state.ctx(&scope), &committer, &id, &patch).await?))
}

pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let committer = state.committer(&write, StatusCode::OK.as_u16());
    Ok(ok_json(expected_payment::delete(&state.ctx(&scope), &committer, &id).await?))
}
