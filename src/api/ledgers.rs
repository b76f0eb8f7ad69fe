//! `/api/ledgers`: create (201), retrieve, list, update, delete (200 with the ledger). SPEC G1.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{created_json, ok_json, unsupported_filters};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::ledgers::{self, LedgerInput, LedgerPatch};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<LedgerInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(created_json(ledgers::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?))
}

pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(ledgers::get(&state.ctx(&scope), &id).await?))
}

pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    unsupported_filters(&query, &["updated_at"])?;
    let scope = principal.scope();
    Ok(paging.reply(ledgers::list(&state.ctx(&scope), &query.metadata(), &query.all("id"), paging.spec).await?))
}

pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<LedgerPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(ledgers::update(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &patch).await?))
}

pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(ledgers::delete(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id).await?))
}
