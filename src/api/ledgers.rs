//! `/api/ledgers`: create (201), retrieve, list, update, delete (200 with the ledger). SPEC G1.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{IdsParams, MetadataParams, PageParams};
use super::{created_json, ok_json, unsupported_filters};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::ledgers::{self, Ledger, LedgerInput, LedgerPatch};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

#[utoipa::path(
    post,
    path = "/api/ledgers",
    tag = "ledgers",
    operation_id = "createLedger",
    request_body = LedgerInput,
    responses((status = 201, description = "The ledger.", body = Ledger)),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<LedgerInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(created_json(ledgers::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?))
}

#[utoipa::path(
    get,
    path = "/api/ledgers/{id}",
    tag = "ledgers",
    operation_id = "getLedger",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The ledger.", body = Ledger)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(ledgers::get(&state.ctx(&scope), &id).await?))
}

#[utoipa::path(
    get,
    path = "/api/ledgers",
    tag = "ledgers",
    operation_id = "listLedgers",
    params(PageParams, IdsParams, MetadataParams),
    responses((status = 200, description = "A page of ledgers, newest first.", body = [Ledger])),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    unsupported_filters(&query, &["updated_at"])?;
    let scope = principal.scope();
    Ok(paging.reply(ledgers::list(&state.ctx(&scope), &query.metadata(), &query.all("id"), paging.spec).await?))
}

#[utoipa::path(
    patch,
    path = "/api/ledgers/{id}",
    tag = "ledgers",
    operation_id = "updateLedger",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = LedgerPatch,
    responses((status = 200, description = "The updated ledger.", body = Ledger)),
)]
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

#[utoipa::path(
    delete,
    path = "/api/ledgers/{id}",
    tag = "ledgers",
    operation_id = "deleteLedger",
    params(("id" = String, Path, description = "The resource's id.")),
    responses(
        (status = 200, description = "The deleted ledger, `discarded_at` set.", body = Ledger),
        (status = 422, description = "The ledger still holds ledger accounts or categories (parameter id)."),
    ),
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(ledgers::delete(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id).await?))
}
