//! `/api/ledger_entries`: retrieve, list (`show_balances` adds the balances each entry resulted
//! in), update metadata (SPEC G1, G5).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{ok_json, param, unsupported_filters};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::entries::{self, EntryFilter};
use crate::domain::ledger::transactions::{EntryPatch, effective_filters, update_entry};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

/// Known filters Payrail does not serve yet: refused, never silently ignored.
const UNSUPPORTED: &[&str] = &[
    "ledger_account_payout_id",
    "ledger_account_settlement_id",
    "updated_at",
    "as_of_lock_version",
    "ledger_account_lock_version",
    "ledger_account_category_id",
    "ledger_account_statement_id",
    "amount",
];

fn show_balances(query: &QueryParams) -> Result<bool, Error> {
    match query.get("show_balances") {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(Error::invalid("show_balances", "show_balances must be true or false")),
    }
}

pub async fn retrieve(
    State(state): State<AppState>,
    principal: Principal,
    PathId(id): PathId,
    query: QueryParams,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(entries::get(&state.ctx(&scope), &id, show_balances(&query)?).await?))
}

pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    unsupported_filters(&query, UNSUPPORTED)?;
    if query.get("show_deleted") == Some("true") {
        return Err(Error::invalid("show_deleted", "Payrail never deletes ledger entries; show_deleted is not supported"));
    }
    let scope = principal.scope();
    let filter = EntryFilter {
        ids: query.all("id"),
        ledger_account_id: param(&query, "ledger_account_id"),
        ledger_transaction_id: param(&query, "ledger_transaction_id"),
        direction: param(&query, "direction"),
        statuses: query.all("status"),
        effective: effective_filters(|name| query.get(name))?,
        metadata: query.metadata(),
        show_balances: show_balances(&query)?,
    };
    Ok(paging.reply(entries::list(&state.ctx(&scope), &filter, paging.spec).await?))
}

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
