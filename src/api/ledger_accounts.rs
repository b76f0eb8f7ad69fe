//! `/api/ledger_accounts`: create (201), retrieve, list, update, delete (200 with the account);
//! `balances[...]` reads balances as of an effective time or version (SPEC G3, G5).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{CreatedAtParams, IdsParams, MetadataParams, PageParams};
use super::{created_json, ok_json, param, time_filter, unsupported_filters};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::BalanceQuery;
use crate::domain::ledger::accounts::{self, AccountFilter, AccountInput, AccountPatch, LedgerAccount};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

/// Known filters Payrail does not serve yet: refused, never silently ignored.
const UNSUPPORTED: &[&str] = &["pending_balance_amount", "posted_balance_amount", "available_balance_amount", "updated_at"];

/// `balances[...]` (see `BalanceQuery::parse`), for the OpenAPI document: which balances an
/// account is served with. `effective_at` or `as_of_date` (inclusive) and
/// `effective_at_upper_bound` (exclusive) are not given together.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(
    description = "The balances to serve: as of an instant or the end of a day (inclusive), or over a window of effective time (lower bound inclusive, upper exclusive), or up to a version of the account. effective_at or as_of_date do not go with effective_at_upper_bound."
)]
pub struct BalancesQuery {
    /// Balances as of this instant, inclusive.
    #[schema(nullable = false, format = DateTime)]
    effective_at: Option<String>,
    /// Balances as of the end of this UTC day.
    #[schema(nullable = false, format = Date)]
    as_of_date: Option<String>,
    /// Only entries effective at or after it.
    #[schema(nullable = false, format = DateTime)]
    effective_at_lower_bound: Option<String>,
    /// Only entries effective before it.
    #[schema(nullable = false, format = DateTime)]
    effective_at_upper_bound: Option<String>,
    /// Only entries written up to this version of the account.
    #[schema(nullable = false, minimum = 0)]
    as_of_lock_version: Option<i64>,
}

/// The `balances[...]` parameter of a ledger account's read, for the OpenAPI document.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct BalancesParams {
    /// Which balances to serve (current ones when absent, SPEC G5).
    #[param(style = DeepObject, explode, inline)]
    balances: Option<BalancesQuery>,
}

#[utoipa::path(
    post,
    path = "/api/ledger_accounts",
    tag = "ledger_accounts",
    operation_id = "createLedgerAccount",
    request_body = AccountInput,
    responses((status = 201, description = "The ledger account, with zero balances.", body = LedgerAccount)),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<AccountInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(created_json(accounts::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?))
}

#[utoipa::path(
    get,
    path = "/api/ledger_accounts/{id}",
    tag = "ledger_accounts",
    operation_id = "getLedgerAccount",
    params(("id" = String, Path, description = "The ledger account's id, or its external_id."), BalancesParams),
    responses(
        (status = 200, description = "The ledger account, with its balances.", body = LedgerAccount),
        (status = 422, description = "A `balances[...]` parameter is malformed, or the bounds given do not go together."),
    ),
)]
pub async fn retrieve(
    State(state): State<AppState>,
    principal: Principal,
    PathId(id): PathId,
    query: QueryParams,
) -> Result<Response, Error> {
    let scope = principal.scope();
    BalanceQuery::refuse_unknown(query.0.iter().map(|(k, _)| k.as_str()))?;
    let balances = BalanceQuery::parse(|name| query.get(name))?;
    Ok(ok_json(accounts::get(&state.ctx(&scope), &id, &balances).await?))
}

#[utoipa::path(
    get,
    path = "/api/ledger_accounts",
    tag = "ledger_accounts",
    operation_id = "listLedgerAccounts",
    params(
        PageParams,
        IdsParams,
        ("name[]" = Option<Vec<String>>, Query, description = "Only accounts with one of these names (also read as name)."),
        ("ledger_id" = Option<String>, Query),
        ("external_id" = Option<String>, Query),
        ("currency" = Option<String>, Query),
        ("normal_balance" = Option<String>, Query, description = "credit or debit."),
        ("ledger_account_category_id" = Option<String>, Query, description = "Only accounts in this category's tree."),
        CreatedAtParams,
        MetadataParams,
        BalancesParams,
    ),
    responses((status = 200, description = "A page of ledger accounts, newest first, with their balances.", body = [LedgerAccount])),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    unsupported_filters(&query, UNSUPPORTED)?;
    let scope = principal.scope();
    BalanceQuery::refuse_unknown(query.0.iter().map(|(k, _)| k.as_str()))?;
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
        ledger_account_category_id: param(&query, "ledger_account_category_id"),
    };
    Ok(paging.reply(accounts::list(&state.ctx(&scope), &filter, &balances, paging.spec).await?))
}

#[utoipa::path(
    patch,
    path = "/api/ledger_accounts/{id}",
    tag = "ledger_accounts",
    operation_id = "updateLedgerAccount",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = AccountPatch,
    responses((status = 200, description = "The updated ledger account.", body = LedgerAccount)),
)]
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

#[utoipa::path(
    delete,
    path = "/api/ledger_accounts/{id}",
    tag = "ledger_accounts",
    operation_id = "deleteLedgerAccount",
    params(("id" = String, Path, description = "The resource's id.")),
    responses(
        (status = 200, description = "The deleted ledger account, `discarded_at` set.", body = LedgerAccount),
        (status = 422, description = "Entries were written to the account (parameter id)."),
    ),
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(accounts::delete(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id).await?))
}
