//! `/api/counterparties`: create (201), retrieve, list, update, delete (204).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{created_json, listed, no_content, ok_json, page_spec, param};
use crate::domain::counterparty::{self, CounterpartyFilter, CounterpartyInput, CounterpartyPatch};
use crate::domain::listing::time_bound;
use crate::error::Error;
use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::idempotency::WriteContext;

pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<CounterpartyInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let json = counterparty::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED), &input).await?;
    Ok(created_json(json))
}

pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(counterparty::get(&state.ctx(&scope), &id).await?))
}

pub async fn list(State(state): State<AppState>, principal: Principal, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    let spec = page_spec(&query)?;
    let filter = CounterpartyFilter {
        name: param(&query, "name"),
        email: param(&query, "email"),
        external_id: param(&query, "external_id"),
        metadata: query.metadata(),
        created_from: time_bound("created_at_lower_bound", query.get("created_at_lower_bound"), false)?,
        created_to: time_bound("created_at_upper_bound", query.get("created_at_upper_bound"), true)?,
    };
    Ok(listed(counterparty::list(&state.ctx(&scope), &filter, spec).await?, spec))
}

pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<CounterpartyPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let json = counterparty::update(&state.ctx(&scope), &state.committer(&write, StatusCode::OK), &id, &patch).await?;
    Ok(ok_json(json))
}

pub async fn delete(State(state): State<AppState>, principal: Principal, write: WriteContext, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    counterparty::delete(&state.ctx(&scope), &state.committer(&write, StatusCode::NO_CONTENT), &id).await?;
    Ok(no_content())
}
