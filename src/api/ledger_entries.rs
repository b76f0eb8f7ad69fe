//! `/api/ledger_entries`: retrieve, list (`show_balances` adds the balances each entry resulted
//! in), update metadata (SPEC G1, G5).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::ledger_transactions::EffectiveParams;
use super::{IdsParams, MetadataParams, OrderByParams, PageParams};
use super::{effective_filter, newest_first_only, ok_json, param, unsupported_filters};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::entries::{self, EntryFilter, LedgerEntry};
use crate::domain::ledger::transactions::{EntryPatch, update_entry};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

/// Known filters Payrail does not serve yet: refused, never silently ignored.
const UNSUPPORTED: &[&str] = &["ledger_account_payout_id", "updated_at", "as_of_lock_version", "ledger_account_lock_version", "amount"];

fn show_balances(query: &QueryParams) -> Result<bool, Error> {
    match query.get("show_balances") {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(Error::invalid("show_balances", "show_balances must be true or false")),
    }
}

#[utoipa::path(
    get,
    path = "/api/ledger_entries/{id}",
    tag = "ledger_entries",
    operation_id = "getLedgerEntry",
    params(
        ("id" = String, Path, description = "The resource's id."),
        ("show_balances" = Option<bool>, Query, description = "true adds the balances the entry resulted in."),
    ),
    responses(
        (status = 200, description = "The ledger entry.", body = LedgerEntry),
        (status = 422, description = "show_balances is neither true nor false."),
    ),
)]
pub async fn retrieve(
    State(state): State<AppState>,
    principal: Principal,
    PathId(id): PathId,
    query: QueryParams,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(entries::get(&state.ctx(&scope), &id, show_balances(&query)?).await?))
}

#[utoipa::path(
    get,
    path = "/api/ledger_entries",
    tag = "ledger_entries",
    operation_id = "listLedgerEntries",
    params(
        PageParams,
        IdsParams,
        ("ledger_account_id" = Option<String>, Query),
        ("ledger_transaction_id" = Option<String>, Query),
        ("direction" = Option<String>, Query, description = "credit or debit."),
        ("status[]" = Option<Vec<String>>, Query, description = "Only entries with one of these statuses: pending, posted or archived (also read as status)."),
        ("ledger_account_settlement_id" = Option<String>, Query, description = "Only entries this settlement took."),
        ("ledger_account_category_id" = Option<String>, Query, description = "Only entries on an account in this category's tree."),
        ("ledger_account_statement_id" = Option<String>, Query, description = "Only the entries this statement covers."),
        ("show_balances" = Option<bool>, Query, description = "true adds the balances each entry resulted in."),
        EffectiveParams,
        MetadataParams,
        OrderByParams,
    ),
    responses((status = 200, description = "A page of ledger entries, newest first.", body = [LedgerEntry])),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    unsupported_filters(&query, UNSUPPORTED)?;
    newest_first_only(&query)?;
    match query.get("show_deleted") {
        None | Some("" | "false") => {}
        Some("true") => return Err(Error::invalid("show_deleted", "Payrail never deletes ledger entries; show_deleted is not supported")),
        Some(_) => return Err(Error::invalid("show_deleted", "show_deleted must be true or false")),
    }
    let scope = principal.scope();
    let filter = EntryFilter {
        ids: query.all("id"),
        ledger_account_id: param(&query, "ledger_account_id"),
        ledger_transaction_id: param(&query, "ledger_transaction_id"),
        direction: param(&query, "direction"),
        statuses: query.all("status"),
        effective: effective_filter(&query)?,
        metadata: query.metadata(),
        show_balances: show_balances(&query)?,
        ledger_account_settlement_id: param(&query, "ledger_account_settlement_id"),
        ledger_account_category_id: param(&query, "ledger_account_category_id"),
        ledger_account_statement_id: param(&query, "ledger_account_statement_id"),
    };
    Ok(paging.reply(entries::list(&state.ctx(&scope), &filter, paging.spec).await?))
}

#[utoipa::path(
    patch,
    path = "/api/ledger_entries/{id}",
    tag = "ledger_entries",
    operation_id = "updateLedgerEntry",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = EntryPatch,
    responses((status = 200, description = "The updated ledger entry (its transaction's copy changes with it).", body = LedgerEntry)),
)]
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<EntryPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(update_entry(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &patch).await?))
}
