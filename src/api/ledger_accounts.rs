//! `/api/ledger_accounts`: create (201), retrieve, list, update, delete (200 with the account);
//! `balances[...]` reads balances as of an effective time or version (SPEC G3, G5).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{created_json, ok_json, param, time_filter, unsupported_filters};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::BalanceQuery;
use crate::domain::ledger::accounts::{self, AccountFilter, AccountInput, AccountPatch};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

/// Known filters Payrail does not serve yet: refused, never silently ignored.
const UNSUPPORTED: &[&str] =
    &["pending_balance_amount", "posted_balance_amount", "available_balance_amount", "updated_at", "ledger_account_category_id"];

pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<AccountInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(created_json(accounts::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?))
}

pub async fn retrieve(
    State(state): State<AppState>,
    principal: Principal,
    PathId(id): PathId,
    query: QueryParams,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let balances = BalanceQuery::parse(|name| query.get(name))?;
    Ok(ok_json(accounts::get(&state.ctx(&scope), &id, &balances).await?))
}

pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    unsupported_filters(&query, UNSUPPORTED)?;
    let scope = principal.scope();
    let balances = BalanceQuery::parse(|name| query.get(name))?;
    let (created_from, created_to) = time_filter(&query, "created_at")?;
    let filter = AccountFilter {
        ids: query.all("id"),
        names: query.all("name"),
        ledger_id: param(&query, "ledger_id"),
        external_id: param(&query, "external_id"),
        currency: param(&query, "currency"),
        normal_balance: param(&query, "normal_balance"),
        metadata: query.metadata(),
        created_from,
        created_to,
    };
    Ok(paging.reply(accounts::list(&state.ctx(&scope), &filter, &balances, paging.spec).await?))
}

pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<AccountPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(accounts::update(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &patch).await?))
}

pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(accounts::delete(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id).await?))
}
