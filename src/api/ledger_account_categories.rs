//! `/api/ledger_account_categories`: create (201), retrieve, list, update, delete (200 with the
//! category); put accounts in and take them out, nest categories and unnest them (200 without a
//! body, as Modern Treasury answers). Balances are summed over the category's tree, current or
//! as of `balances[effective_at]` / `balances[as_of_date]` (SPEC G1, G3, G5).

use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::Response;

use super::{IdsParams, MetadataParams, PageParams};
use super::{created_json, ok_json, param};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::BalanceQuery;
use crate::domain::ledger::categories::{self, CategoryFilter, CategoryInput, CategoryPatch, LedgerAccountCategory};
use crate::domain::schema;
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

/// Balance parameters of ledger accounts that a category does not take: its balances have no
/// window to report, and versions are per account.
const UNSUPPORTED_BALANCES: &[&str] =
    &["balances[effective_at_lower_bound]", "balances[effective_at_upper_bound]", "balances[as_of_lock_version]"];

/// The body of `PATCH /api/ledger_account_categories/{id}` (MT's
/// `ledger_account_category_update_request`), for the OpenAPI document only: the handler takes
/// `CategoryPatch`, the fields categories share with ledger accounts (`ledger::NamedPatch`); a
/// test checks the two publish the same fields.
#[derive(utoipa::ToSchema)]
#[schema(
    as = ledger_account_category_update_request,
    description = "Fields to change; metadata merges (a key given null or an empty string is removed)."
)]
#[allow(dead_code)]
pub struct CategoryPatchDoc {
    name: Option<String>,
    description: Option<String>,
    #[schema(schema_with = schema::metadata_patch_or_null)]
    metadata: Option<String>,
    external_id: Option<String>,
}

/// `balances[...]` of a category (see [`balances`]), for the OpenAPI document.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(description = "The balances to serve: as of an instant or the end of a UTC day (inclusive).")]
pub struct CategoryBalancesQuery {
    /// Balances as of this instant, inclusive.
    #[schema(nullable = false, format = DateTime)]
    effective_at: Option<String>,
    /// Balances as of the end of this UTC day.
    #[schema(nullable = false, format = Date)]
    as_of_date: Option<String>,
}

/// The `balances[...]` parameter of a category's read, for the OpenAPI document.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct CategoryBalancesParams {
    /// Which balances to serve (current ones when absent, SPEC G5).
    #[param(style = DeepObject, explode, inline)]
    balances: Option<CategoryBalancesQuery>,
}

/// `{id}` and the second id of a membership's path.
pub struct PathPair(String, String);

impl<S: Send + Sync> FromRequestParts<S> for PathPair {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        use crate::http::extract::{path_id, path_not_found};
        let Path((id, other)) = Path::<(String, String)>::from_request_parts(parts, state).await.map_err(|_| path_not_found())?;
        Ok(PathPair(path_id(id)?, path_id(other)?))
    }
}

fn balances(query: &QueryParams) -> Result<BalanceQuery, Error> {
    BalanceQuery::refuse_unknown(query.0.iter().map(|(k, _)| k.as_str()))?;
    if let Some(name) = UNSUPPORTED_BALANCES.iter().find(|name| query.get(name).is_some()) {
        return Err(Error::invalid(
            *name,
            format!("a ledger account category's balances take balances[effective_at] or balances[as_of_date], not {name}"),
        ));
    }
    BalanceQuery::parse(|name| query.get(name))
}

/// MT's answer to a membership change: 200, no body, and so no content type (a JSON type on
/// zero bytes makes the Node SDK parse nothing as JSON and throw, though the change was made).
fn done() -> Response {
    axum::response::IntoResponse::into_response(StatusCode::OK)
}

#[utoipa::path(
    post,
    path = "/api/ledger_account_categories",
    tag = "ledger_account_categories",
    operation_id = "createLedgerAccountCategory",
    request_body = CategoryInput,
    responses((status = 201, description = "The ledger account category.", body = LedgerAccountCategory)),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<CategoryInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(created_json(categories::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?))
}

#[utoipa::path(
    get,
    path = "/api/ledger_account_categories/{id}",
    tag = "ledger_account_categories",
    operation_id = "getLedgerAccountCategory",
    params(("id" = String, Path, description = "The resource's id."), CategoryBalancesParams),
    responses(
        (status = 200, description = "The category, with the balances of its tree.", body = LedgerAccountCategory),
        (status = 422, description = "A `balances[...]` parameter is malformed or not taken by categories, or the tree's balances add up past 2^63 - 1."),
    ),
)]
pub async fn retrieve(
    State(state): State<AppState>,
    principal: Principal,
    PathId(id): PathId,
    query: QueryParams,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(categories::get(&state.ctx(&scope), &id, &balances(&query)?).await?))
}

#[utoipa::path(
    get,
    path = "/api/ledger_account_categories",
    tag = "ledger_account_categories",
    operation_id = "listLedgerAccountCategories",
    params(
        PageParams,
        IdsParams,
        ("name[]" = Option<Vec<String>>, Query, description = "Only categories with one of these names (also read as name)."),
        ("ledger_id" = Option<String>, Query),
        ("currency" = Option<String>, Query),
        ("external_id" = Option<String>, Query),
        ("parent_ledger_account_category_id" = Option<String>, Query, description = "Only categories nested directly in this one."),
        ("ledger_account_id" = Option<String>, Query, description = "Only categories holding this account directly."),
        MetadataParams,
        CategoryBalancesParams,
    ),
    responses((status = 200, description = "A page of categories, newest first, with their balances.", body = [LedgerAccountCategory])),
)]
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

#[utoipa::path(
    patch,
    path = "/api/ledger_account_categories/{id}",
    tag = "ledger_account_categories",
    operation_id = "updateLedgerAccountCategory",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = CategoryPatchDoc,
    responses((status = 200, description = "The updated category.", body = LedgerAccountCategory)),
)]
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

#[utoipa::path(
    delete,
    path = "/api/ledger_account_categories/{id}",
    tag = "ledger_account_categories",
    operation_id = "deleteLedgerAccountCategory",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The deleted category, `discarded_at` set; its memberships and nestings go with it.", body = LedgerAccountCategory)),
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(categories::delete(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id).await?))
}

#[utoipa::path(
    put,
    path = "/api/ledger_account_categories/{id}/ledger_accounts/{ledger_account_id}",
    tag = "ledger_account_categories",
    operation_id = "addLedgerAccountToLedgerAccountCategory",
    params(("id" = String, Path, description = "The resource's id."), ("ledger_account_id" = String, Path, description = "The ledger account's id.")),
    responses(
        (status = 200, description = "The account is in the category. No body."),
        (status = 409, description = "A concurrent change to the category won; retry."),
        (status = 422, description = "The account is of another ledger or currency than the category."),
    ),
)]
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

#[utoipa::path(
    delete,
    path = "/api/ledger_account_categories/{id}/ledger_accounts/{ledger_account_id}",
    tag = "ledger_account_categories",
    operation_id = "removeLedgerAccountFromLedgerAccountCategory",
    params(("id" = String, Path, description = "The resource's id."), ("ledger_account_id" = String, Path, description = "The ledger account's id.")),
    responses(
        (status = 200, description = "The account is out of the category. No body."),
        (status = 409, description = "A concurrent change to the category won; retry."),
    ),
)]
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

#[utoipa::path(
    put,
    path = "/api/ledger_account_categories/{id}/ledger_account_categories/{sub_category_id}",
    tag = "ledger_account_categories",
    operation_id = "addLedgerAccountCategoryToLedgerAccountCategory",
    params(("id" = String, Path, description = "The resource's id."), ("sub_category_id" = String, Path, description = "The nested category's id.")),
    responses(
        (status = 200, description = "The category is nested. No body."),
        (status = 409, description = "A concurrent change to the category won; retry."),
        (status = 422, description = "The categories differ in ledger or currency, or the nesting would make a cycle."),
    ),
)]
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

#[utoipa::path(
    delete,
    path = "/api/ledger_account_categories/{id}/ledger_account_categories/{sub_category_id}",
    tag = "ledger_account_categories",
    operation_id = "deleteLedgerAccountCategoryFromLedgerAccountCategory",
    params(("id" = String, Path, description = "The resource's id."), ("sub_category_id" = String, Path, description = "The nested category's id.")),
    responses(
        (status = 200, description = "The category is no longer nested. No body."),
        (status = 409, description = "A concurrent change to the category won; retry."),
    ),
)]
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
