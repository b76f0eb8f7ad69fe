//! `/api/internal_accounts`: create (201), retrieve, list, update.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{created_json, listed, ok_json, page_spec, param};
use crate::domain::internal_account::{self, InternalAccountFilter, InternalAccountInput, InternalAccountPatch};
use crate::error::Error;
use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::idempotency::WriteContext;

pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<InternalAccountInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let json = internal_account::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED), &input).await?;
    Ok(created_json(json))
}

pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(internal_account::get(&state.ctx(&scope), &id).await?))
}

pub async fn list(State(state): State<AppState>, principal: Principal, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    let spec = page_spec(&query)?;
    let filter = InternalAccountFilter {
        counterparty_id: param(&query, "counterparty_id"),
        currency: param(&query, "currency"),
        external_id: param(&query, "external_id"),
        status: param(&query, "status"),
        payment_type: param(&query, "payment_type"),
        payment_direction: param(&query, "payment_direction"),
        metadata: query.metadata(),
    };
    Ok(listed(internal_account::list(&state.ctx(&scope), &filter, spec).await?, spec))
}

pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<InternalAccountPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let json = internal_account::update(&state.ctx(&scope), &state.committer(&write, StatusCode::OK), &id, &patch).await?;
    Ok(ok_json(json))
}
