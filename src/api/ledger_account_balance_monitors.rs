//! `/api/ledger_account_balance_monitors`: create (201), retrieve, list, update, delete (200
//! with the monitor); crossings are reported by the `ledger_monitor` worker (SPEC G1).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{IdsParams, MetadataParams, PageParams};
use super::{created_json, ok_json, param};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::monitors::{self, MonitorFilter, MonitorInput, MonitorPatch, Served as LedgerAccountBalanceMonitor};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

#[utoipa::path(
    post,
    path = "/api/ledger_account_balance_monitors",
    tag = "ledger_account_balance_monitors",
    operation_id = "createLedgerAccountBalanceMonitor",
    request_body = MonitorInput,
    responses((status = 201, description = "The monitor, with its account's current balance state.", body = LedgerAccountBalanceMonitor)),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<MonitorInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(created_json(monitors::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?))
}

#[utoipa::path(
    get,
    path = "/api/ledger_account_balance_monitors/{id}",
    tag = "ledger_account_balance_monitors",
    operation_id = "getLedgerAccountBalanceMonitor",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The monitor.", body = LedgerAccountBalanceMonitor)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(monitors::get(&state.ctx(&scope), &id).await?))
}

#[utoipa::path(
    get,
    path = "/api/ledger_account_balance_monitors",
    tag = "ledger_account_balance_monitors",
    operation_id = "listLedgerAccountBalanceMonitors",
    params(PageParams, IdsParams, ("ledger_account_id" = Option<String>, Query), MetadataParams),
    responses((status = 200, description = "A page of monitors, newest first.", body = [LedgerAccountBalanceMonitor])),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    let filter = MonitorFilter { ids: query.all("id"), ledger_account_id: param(&query, "ledger_account_id"), metadata: query.metadata() };
    Ok(paging.reply(monitors::list(&state.ctx(&scope), &filter, paging.spec).await?))
}

#[utoipa::path(
    patch,
    path = "/api/ledger_account_balance_monitors/{id}",
    tag = "ledger_account_balance_monitors",
    operation_id = "updateLedgerAccountBalanceMonitor",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = MonitorPatch,
    responses((status = 200, description = "The updated monitor.", body = LedgerAccountBalanceMonitor)),
)]
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<MonitorPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(monitors::update(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &patch).await?))
}

#[utoipa::path(
    delete,
    path = "/api/ledger_account_balance_monitors/{id}",
    tag = "ledger_account_balance_monitors",
    operation_id = "deleteLedgerAccountBalanceMonitor",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The deleted monitor, `discarded_at` set.", body = LedgerAccountBalanceMonitor)),
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(monitors::delete(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id).await?))
}
