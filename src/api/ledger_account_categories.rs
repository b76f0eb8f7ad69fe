//! `/api/ledger_account_categories`: create (201), retrieve, list, update, delete (200 with the
//! category); put accounts in and take them out, nest categories and unnest them (200 without a
//! body, as Modern Treasury answers). Balances are summed over the category's tree, current or
//! as of `balances[effective_at]` / `balances[as_of_date]` (SPEC G1, G3, G5).

use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::Response;

use super::{created_json, ok_json, param};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::BalanceQuery;
use crate::domain::ledger::categories::{self, CategoryFilter, CategoryInput, CategoryPatch};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::idempotency::json_response;
use crate::http::pagination::Paging;

/// Balance parameters of ledger accounts that a category does not take: its balances have no
/// window to report, and versions are per account.
const UNSUPPORTED_BALANCES: &[&str] =
    &["balances[effective_at_lower_bound]", "balances[effective_at_upper_bound]", "balances[as_of_lock_version]"];

/// `{id}` and the second id of a membership's path.
pub struct PathPair(String, String);

impl<S: Send + Sync> FromRequestParts<S> for PathPair {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path((id, other)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|_| Error::NotFound { message: "resource not found".into() })?;
        Ok(PathPair(id, other))
    }
}

fn balances(query: &QueryParams) -> Result<BalanceQuery, Error> {
    if let Some(name) = UNSUPPORTED_BALANCES.iter().find(|name| query.get(name).is_some()) {
        return Err(Error::invalid(
            *name,
            format!("a ledger account category's balances take balances[effective_at] or balances[as_of_date], not {name}"),
        ));
    }
    BalanceQuery::parse(|name| query.get(name))
}

/// MT's answer to a membership change: 200, no body.
fn done() -> Response {
    json_response(StatusCode::OK, Bytes::new())
}

pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<CategoryInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(created_json(categories::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?))
}

pub async fn retrieve(
    State(state): State<AppState>,
    principal: Principal,
    PathId(id): PathId,
    query: QueryParams,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(categories::get(&state.ctx(&scope), &id, &balances(&query)?).await?))
}

pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    let balances = balances(&query)?;
    let filter = CategoryFilter {
        ids: query.all("id"),
        names: query.all("name"),
        ledger_id: param(&query, "ledger_id"),
        currency: param(&query, "currency"),
        external_id: param(&query, "external_id"),
        parent_ledger_account_category_id: param(&query, "parent_ledger_account_category_id"),
        ledger_account_id: param(&query, "ledger_account_id"),
        metadata: query.metadata(),
    };
    Ok(paging.reply(categories::list(&state.ctx(&scope), &filter, &balances, paging.spec).await?))
}

pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<CategoryPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(categories::update(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &patch).await?))
}

pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(categories::delete(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id).await?))
}

pub async fn add_account(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathPair(id, account_id): PathPair,
) -> Result<Response, Error> {
    let scope = principal.scope();
    categories::add_account(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &account_id).await?;
    Ok(done())
}

pub async fn remove_account(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathPair(id, account_id): PathPair,
) -> Result<Response, Error> {
    let scope = principal.scope();
    categories::remove_account(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &account_id).await?;
    Ok(done())
}

pub async fn nest(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathPair(id, sub_id): PathPair,
) -> Result<Response, Error> {
    let scope = principal.scope();
    categories::nest(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &sub_id).await?;
    Ok(done())
}

pub async fn unnest(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathPair(id, sub_id): PathPair,
) -> Result<Response, Error> {
    let scope = principal.scope();
    categories::unnest(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &sub_id).await?;
    Ok(done())
}
