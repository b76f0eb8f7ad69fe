//! `/api/ledger_account_settlements`: create (201), retrieve, list, update (post or archive a
//! pending one); adding or removing entries by hand is refused with a 422 (SPEC G1, G6).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{CreatedAtParams, DateTimeRange, IdsParams, MetadataParams, PageParams};
use super::{created_json, ok_json, param, time_filter};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::settlements::{self, Settlement, SettlementEntriesInput, SettlementFilter, SettlementInput, SettlementPatch};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

/// `updated_at[gt|gte|lt|lte|eq]`, for the OpenAPI document.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct UpdatedAtParams {
    /// Only settlements last updated within these bounds (a date bound is its whole UTC day).
    #[param(style = DeepObject, explode, inline)]
    updated_at: Option<DateTimeRange>,
}

#[utoipa::path(
    post,
    path = "/api/ledger_account_settlements",
    tag = "ledger_account_settlements",
    operation_id = "createLedgerAccountSettlement",
    request_body = SettlementInput,
    responses((status = 201, description = "The settlement, with the transaction that settles what it took.", body = Settlement)),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<SettlementInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(created_json(settlements::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?))
}

#[utoipa::path(
    get,
    path = "/api/ledger_account_settlements/{id}",
    tag = "ledger_account_settlements",
    operation_id = "getLedgerAccountSettlement",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The settlement.", body = Settlement)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(settlements::get(&state.ctx(&scope), &id).await?))
}

#[utoipa::path(
    get,
    path = "/api/ledger_account_settlements",
    tag = "ledger_account_settlements",
    operation_id = "listLedgerAccountSettlements",
    params(
        PageParams,
        IdsParams,
        ("ledger_id" = Option<String>, Query),
        ("settled_ledger_account_id" = Option<String>, Query),
        ("settlement_entry_direction" = Option<String>, Query, description = "credit or debit."),
        ("ledger_transaction_id" = Option<String>, Query),
        CreatedAtParams,
        UpdatedAtParams,
        MetadataParams,
    ),
    responses((status = 200, description = "A page of settlements, newest first.", body = [Settlement])),
)]
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

#[utoipa::path(
    patch,
    path = "/api/ledger_account_settlements/{id}",
    tag = "ledger_account_settlements",
    operation_id = "updateLedgerAccountSettlement",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = SettlementPatch,
    responses((status = 200, description = "The updated settlement; its transaction follows its status.", body = Settlement)),
)]
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

/// The `PATCH` of [`change_entries`], for the OpenAPI document.
#[utoipa::path(
    patch,
    path = "/api/ledger_account_settlements/{id}/ledger_entries",
    tag = "ledger_account_settlements",
    operation_id = "patchLedgerAccountSettlementEntries",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = SettlementEntriesInput,
    responses(
        (status = 422, description = "Always (when the settlement exists): Payrail does not support drafting settlements, whose entries are picked by hand (parameter ledger_entry_ids)."),
    ),
)]
#[allow(dead_code)]
fn add_entries() {}

/// The `DELETE` of [`change_entries`], for the OpenAPI document.
#[utoipa::path(
    delete,
    path = "/api/ledger_account_settlements/{id}/ledger_entries",
    tag = "ledger_account_settlements",
    operation_id = "deleteLedgerAccountSettlementEntries",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = SettlementEntriesInput,
    responses(
        (status = 400, description = "Malformed JSON."),
        (status = 413, description = "The body is too large."),
        (status = 415, description = "The body is not JSON."),
        (status = 422, description = "Always (when the settlement exists): Payrail does not support drafting settlements, whose entries are picked by hand (parameter ledger_entry_ids)."),
    ),
)]
#[allow(dead_code)]
fn remove_entries() {}

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
