//! `/api/ledger_transactions`: create (201), retrieve, list, update (post, archive, metadata),
//! reversal (201) and versions (SPEC G1, G2, G4, G5).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{CreatedAtParams, DateRange, DateTimeRange, IdsParams, MetadataParams, OrderByParams, PageParams};
use super::{created_json, effective_filter, newest_first_only, ok_json, param, time_filter, unsupported_filters};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::transactions::{
    self, LedgerTransaction, ReversalInput, TransactionFilter, TransactionInput, TransactionPatch, VersionDoc,
};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;
use crate::store::Filter;

/// Known filters Payrail does not serve yet: refused, never silently ignored.
const UNSUPPORTED: &[&str] = &["posted_at", "updated_at", "amount", "partially_posts_ledger_transaction_id"];

/// `effective_at[...]` and `effective_date[...]` of a list of transactions or entries (see
/// `domain::ledger::effective_range`), for the OpenAPI document.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct EffectiveParams {
    /// Only those effective within these bounds (years 1 to 9999).
    #[param(style = DeepObject, explode, inline)]
    effective_at: Option<DateTimeRange>,
    /// Only those effective within these UTC days (a date-time names the day it is written on).
    #[param(style = DeepObject, explode, inline)]
    effective_date: Option<DateRange>,
}

/// The bounds of a version filter, `version[gte]=2` and so on (all given must hold), for the
/// OpenAPI document.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(description = "Bounds on a version number: each of gt, gte, lt, lte, eq given must hold.")]
pub struct VersionRange {
    #[schema(nullable = false, minimum = 0)]
    gt: Option<i64>,
    #[schema(nullable = false, minimum = 0)]
    gte: Option<i64>,
    #[schema(nullable = false, minimum = 0)]
    lt: Option<i64>,
    #[schema(nullable = false, minimum = 0)]
    lte: Option<i64>,
    #[schema(nullable = false, minimum = 0)]
    eq: Option<i64>,
}

/// `version[...]` of a versions list (see `transactions::version_filters`), for the OpenAPI document.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct VersionParams {
    /// Only versions within these bounds (the first is 1).
    #[param(style = DeepObject, explode, inline)]
    version: Option<VersionRange>,
    /// Only these versions (also read as `id`, repeated).
    #[param(rename = "id[]")]
    ids: Option<Vec<String>>,
}

#[utoipa::path(
    post,
    path = "/api/ledger_transactions",
    tag = "ledger_transactions",
    operation_id = "createLedgerTransaction",
    request_body = TransactionInput,
    responses((status = 201, description = "The ledger transaction, with its entries.", body = LedgerTransaction)),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<TransactionInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(created_json(transactions::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?))
}

#[utoipa::path(
    get,
    path = "/api/ledger_transactions/{id}",
    tag = "ledger_transactions",
    operation_id = "getLedgerTransaction",
    params(("id" = String, Path, description = "The ledger transaction's id, or the external_id of one that is not archived.")),
    responses((status = 200, description = "The ledger transaction, with its entries.", body = LedgerTransaction)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(transactions::get(&state.ctx(&scope), &id).await?))
}

#[utoipa::path(
    get,
    path = "/api/ledger_transactions",
    tag = "ledger_transactions",
    operation_id = "listLedgerTransactions",
    params(
        PageParams,
        IdsParams,
        ("ledger_id" = Option<String>, Query),
        ("ledger_account_id" = Option<String>, Query, description = "Only transactions with an entry on this account."),
        ("status[]" = Option<Vec<String>>, Query, description = "Only transactions with one of these statuses: pending, posted or archived (also read as status)."),
        ("external_id" = Option<String>, Query),
        ("reverses_ledger_transaction_id" = Option<String>, Query),
        ("ledgerable_id" = Option<String>, Query),
        ("ledgerable_type" = Option<String>, Query),
        ("ledger_account_settlement_id" = Option<String>, Query, description = "Only transactions with an entry this settlement took."),
        ("ledger_account_category_id" = Option<String>, Query, description = "Only transactions with an entry on an account in this category's tree."),
        EffectiveParams,
        MetadataParams,
        OrderByParams,
    ),
    responses((status = 200, description = "A page of ledger transactions, newest first.", body = [LedgerTransaction])),
)]
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
        effective: effective_filter(&query)?,
        metadata: query.metadata(),
        ledger_account_settlement_id: param(&query, "ledger_account_settlement_id"),
        ledger_account_category_id: param(&query, "ledger_account_category_id"),
    };
    Ok(paging.reply(transactions::list(&state.ctx(&scope), &filter, paging.spec).await?))
}

#[utoipa::path(
    patch,
    path = "/api/ledger_transactions/{id}",
    tag = "ledger_transactions",
    operation_id = "updateLedgerTransaction",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = TransactionPatch,
    responses((status = 200, description = "The updated ledger transaction.", body = LedgerTransaction)),
)]
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

#[utoipa::path(
    post,
    path = "/api/ledger_transactions/{id}/reversal",
    tag = "ledger_transactions",
    operation_id = "CreateLedgerTransactionReversal",
    params(("id" = String, Path, description = "The posted transaction to reverse.")),
    request_body = ReversalInput,
    responses((status = 201, description = "The reversing transaction: every entry turned around.", body = LedgerTransaction)),
)]
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
#[utoipa::path(
    get,
    path = "/api/ledger_transactions/{id}/versions",
    tag = "ledger_transactions",
    operation_id = "listLedgerTransactionVersionsNested",
    params(("id" = String, Path, description = "The ledger transaction's id."), PageParams, VersionParams, CreatedAtParams),
    responses((status = 200, description = "A page of the transaction's versions, newest first.", body = [VersionDoc])),
)]
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
#[utoipa::path(
    get,
    path = "/api/ledger_transaction_versions",
    tag = "ledger_transactions",
    operation_id = "listLedgerTransactionVersions",
    params(
        PageParams,
        ("ledger_transaction_id" = Option<String>, Query, description = "Only this transaction's versions (404 if there is no such transaction)."),
        VersionParams,
        CreatedAtParams,
    ),
    responses(
        (status = 200, description = "A page of ledger transaction versions, newest first.", body = [VersionDoc]),
        (status = 404, description = "`ledger_transaction_id` names no transaction."),
    ),
)]
pub async fn versions(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    let filters = version_list_filters(&query)?;
    let scope = principal.scope();
    let id = param(&query, "ledger_transaction_id");
    Ok(paging.reply(transactions::versions(&state.ctx(&scope), id.as_deref(), filters, paging.spec).await?))
}

/// The filters both versions lists take: `version[...]` ranges and `created_at[...]`.
fn version_list_filters(query: &QueryParams) -> Result<Vec<Filter>, Error> {
    unsupported_filters(query, &["ledger_account_statement_id"])?;
    crate::http::extract::unknown_operator(query, &["version"])?;
    let mut filters = transactions::version_filters(|name| query.get(name))?;
    let (created_from, created_to) = time_filter(query, "created_at")?;
    filters.extend(created_from.map(Filter::CreatedFrom));
    filters.extend(created_to.map(Filter::CreatedTo));
    let ids = query.all("id");
    if !ids.is_empty() {
        filters.push(Filter::IdIn(ids));
    }
    Ok(filters)
}
