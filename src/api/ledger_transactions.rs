//! `/api/ledger_transactions`: create (201), retrieve, list, update (post, archive, metadata),
//! reversal (201) and versions (SPEC G1, G2, G4, G5).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{created_json, ok_json, param, unsupported_filters};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::transactions::{self, ReversalInput, TransactionFilter, TransactionInput, TransactionPatch};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

/// Known filters Payrail does not serve yet: refused, never silently ignored.
const UNSUPPORTED: &[&str] = &[
    "posted_at",
    "updated_at",
    "amount",
    "ledger_account_category_id",
    "ledger_account_settlement_id",
    "partially_posts_ledger_transaction_id",
];

pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<TransactionInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(created_json(transactions::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?))
}

pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(transactions::get(&state.ctx(&scope), &id).await?))
}

pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    unsupported_filters(&query, UNSUPPORTED)?;
    let scope = principal.scope();
    let filter = TransactionFilter {
        ids: query.all("id"),
        ledger_id: param(&query, "ledger_id"),
        ledger_account_id: param(&query, "ledger_account_id"),
        statuses: query.all("status"),
        external_id: param(&query, "external_id"),
        reverses_ledger_transaction_id: param(&query, "reverses_ledger_transaction_id"),
        ledgerable_id: param(&query, "ledgerable_id"),
        ledgerable_type: param(&query, "ledgerable_type"),
        effective: transactions::effective_filters(|name| query.get(name))?,
        metadata: query.metadata(),
    };
    Ok(paging.reply(transactions::list(&state.ctx(&scope), &filter, paging.spec).await?))
}

pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<TransactionPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(transactions::update(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &patch).await?))
}

pub async fn reversal(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(input): JsonBody<ReversalInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(created_json(transactions::reverse(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &id, &input).await?))
}

/// `GET /api/ledger_transactions/{id}/versions`.
pub async fn versions_of(
    State(state): State<AppState>,
    principal: Principal,
    PathId(id): PathId,
    paging: Paging,
    query: QueryParams,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(paging.reply(transactions::versions(&state.ctx(&scope), Some(&id), query.get("version"), paging.spec).await?))
}

/// `GET /api/ledger_transaction_versions?ledger_transaction_id=...`.
pub async fn versions(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    unsupported_filters(&query, &["created_at", "ledger_account_statement_id"])?;
    let scope = principal.scope();
    let id = param(&query, "ledger_transaction_id");
    Ok(paging.reply(transactions::versions(&state.ctx(&scope), id.as_deref(), query.get("version"), paging.spec).await?))
}
