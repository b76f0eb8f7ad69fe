//! `/api/ledger_transactions`: create (201), retrieve, list, update (post, archive, metadata),
//! reversal (201) and versions (SPEC G1, G2, G4, G5).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{created_json, newest_first_only, ok_json, param, time_filter, unsupported_filters};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::transactions::{self, ReversalInput, TransactionFilter, TransactionInput, TransactionPatch};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;
use crate::store::Filter;

/// Known filters Payrail does not serve yet: refused, never silently ignored.
const UNSUPPORTED: &[&str] = &["posted_at", "updated_at", "amount", "partially_posts_ledger_transaction_id"];

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
    newest_first_only(&query)?;
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
        ledger_account_settlement_id: param(&query, "ledger_account_settlement_id"),
        ledger_account_category_id: param(&query, "ledger_account_category_id"),
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
    let filters = version_list_filters(&query)?;
    let scope = principal.scope();
    Ok(paging.reply(transactions::versions(&state.ctx(&scope), Some(&id), filters, paging.spec).await?))
}

/// `GET /api/ledger_transaction_versions?ledger_transaction_id=...` (the SDKs' `versions.list`).
pub async fn versions(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    let filters = version_list_filters(&query)?;
    let scope = principal.scope();
    let id = param(&query, "ledger_transaction_id");
    Ok(paging.reply(transactions::versions(&state.ctx(&scope), id.as_deref(), filters, paging.spec).await?))
}

/// The filters both versions lists take: `version[...]` ranges and `created_at[...]`.
fn version_list_filters(query: &QueryParams) -> Result<Vec<Filter>, Error> {
    unsupported_filters(query, &["ledger_account_statement_id"])?;
    let mut filters = transactions::version_filters(|name| query.get(name))?;
    let (created_from, created_to) = time_filter(query, "created_at")?;
    filters.extend(created_from.map(Filter::CreatedFrom));
    filters.extend(created_to.map(Filter::CreatedTo));
    Ok(filters)
}
