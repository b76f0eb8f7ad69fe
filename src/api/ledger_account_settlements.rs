//! `/api/ledger_account_settlements`: create (201), retrieve, list, update (post or archive a
//! pending one); adding or removing entries by hand is refused with a 422 (SPEC G1, G6).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{created_json, ok_json, param, time_filter};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::settlements::{self, SettlementEntriesInput, SettlementFilter, SettlementInput, SettlementPatch};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<SettlementInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(created_json(settlements::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?))
}

pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(settlements::get(&state.ctx(&scope), &id).await?))
}

pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    let (created_from, created_to) = time_filter(&query, "created_at")?;
    let (updated_from, updated_to) = time_filter(&query, "updated_at")?;
    let filter = SettlementFilter {
        ids: query.all("id"),
        ledger_id: param(&query, "ledger_id"),
        settled_ledger_account_id: param(&query, "settled_ledger_account_id"),
        settlement_entry_direction: param(&query, "settlement_entry_direction"),
        ledger_transaction_id: param(&query, "ledger_transaction_id"),
        metadata: query.metadata(),
        created_from,
        created_to,
        updated_from,
        updated_to,
    };
    Ok(paging.reply(settlements::list(&state.ctx(&scope), &filter, paging.spec).await?))
}

pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<SettlementPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(settlements::update(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &patch).await?))
}

/// `PATCH` and `DELETE .../{id}/ledger_entries`: never carried out (see `settlements::change_entries`).
pub async fn change_entries(
    State(state): State<AppState>,
    principal: Principal,
    PathId(id): PathId,
    JsonBody(input): JsonBody<SettlementEntriesInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Err(settlements::change_entries(&state.ctx(&scope), &id, &input).await)
}
