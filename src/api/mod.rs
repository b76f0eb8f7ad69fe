//! The API's resources, one module each: thin handlers that parse, call the domain, reply.

mod api_keys;
mod balance_reports;
mod connections;
mod counterparties;
mod events;
mod expected_payments;
mod external_accounts;
mod incoming_payment_details;
mod internal_accounts;
mod ledger_account_balance_monitors;
mod ledger_account_categories;
mod ledger_account_settlements;
mod ledger_account_statements;
mod ledger_accounts;
mod ledger_entries;
mod ledger_transactions;
mod ledgers;
pub mod openapi;
mod payment_orders;
mod ping;
mod returns;
mod transactions;
mod webhook_endpoints;

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};

use crate::app::AppState;
use crate::domain::listing::time_bound;
use crate::domain::time::Timestamp;
use crate::http::extract::QueryParams;
use crate::http::idempotency::json_response;

/// Every API route, under `/api` (spelled out rather than nested: a nested router costs every
/// request a second routing pass and a rewritten URI).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/ping", get(ping::ping))
        .route("/api/api_keys/current", get(api_keys::current))
        .route("/api/connections", get(connections::list))
        .route("/api/counterparties", get(counterparties::list).post(counterparties::create))
        .route("/api/counterparties/{id}", get(counterparties::retrieve).patch(counterparties::update).delete(counterparties::delete))
        .route("/api/external_accounts", get(external_accounts::list).post(external_accounts::create))
        .route(
            "/api/external_accounts/{id}",
            get(external_accounts::retrieve).patch(external_accounts::update).delete(external_accounts::delete),
        )
        .route("/api/internal_accounts", get(internal_accounts::list).post(internal_accounts::create))
        .route("/api/internal_accounts/{id}", get(internal_accounts::retrieve).patch(internal_accounts::update))
        .route("/api/internal_accounts/{id}/balance_reports", get(balance_reports::list))
        .route("/api/internal_accounts/{id}/balance_reports/{report_id}", get(balance_reports::retrieve))
        .route("/api/transactions", get(transactions::list))
        .route("/api/transactions/{id}", get(transactions::retrieve).patch(transactions::update))
        .route("/api/transactions/{id}/line_items", get(transactions::line_items_of))
        .route("/api/transaction_line_items", get(transactions::list_line_items))
        .route("/api/transaction_line_items/{id}", get(transactions::retrieve_line_item))
        .route("/api/returns", get(returns::list))
        .route("/api/returns/{id}", get(returns::retrieve))
        .route("/api/expected_payments", get(expected_payments::list).post(expected_payments::create))
        .route(
            "/api/expected_payments/{id}",
            get(expected_payments::retrieve).patch(expected_payments::update).delete(expected_payments::delete),
        )
        .route("/api/incoming_payment_details", get(incoming_payment_details::list))
        .route("/api/incoming_payment_details/{id}", get(incoming_payment_details::retrieve).patch(incoming_payment_details::update))
        .route("/api/simulations/incoming_payment_details/create_async", axum::routing::post(incoming_payment_details::simulate))
        .route("/api/payment_orders", get(payment_orders::list).post(payment_orders::create))
        .route("/api/payment_orders/{id}", get(payment_orders::retrieve).patch(payment_orders::update))
        .route("/api/ledgers", get(ledgers::list).post(ledgers::create))
        .route("/api/ledgers/{id}", get(ledgers::retrieve).patch(ledgers::update).delete(ledgers::delete))
        .route("/api/ledger_accounts", get(ledger_accounts::list).post(ledger_accounts::create))
        .route("/api/ledger_accounts/{id}", get(ledger_accounts::retrieve).patch(ledger_accounts::update).delete(ledger_accounts::delete))
        .route(
            "/api/ledger_account_balance_monitors",
            get(ledger_account_balance_monitors::list).post(ledger_account_balance_monitors::create),
        )
        .route(
            "/api/ledger_account_balance_monitors/{id}",
            get(ledger_account_balance_monitors::retrieve)
                .patch(ledger_account_balance_monitors::update)
                .delete(ledger_account_balance_monitors::delete),
        )
        .route("/api/ledger_account_settlements", get(ledger_account_settlements::list).post(ledger_account_settlements::create))
        .route("/api/ledger_account_settlements/{id}", get(ledger_account_settlements::retrieve).patch(ledger_account_settlements::update))
        .route(
            "/api/ledger_account_settlements/{id}/ledger_entries",
            axum::routing::patch(ledger_account_settlements::change_entries).delete(ledger_account_settlements::change_entries),
        )
        .route("/api/ledger_account_categories", get(ledger_account_categories::list).post(ledger_account_categories::create))
        .route(
            "/api/ledger_account_categories/{id}",
            get(ledger_account_categories::retrieve).patch(ledger_account_categories::update).delete(ledger_account_categories::delete),
        )
        .route(
            "/api/ledger_account_categories/{id}/ledger_accounts/{ledger_account_id}",
            put(ledger_account_categories::add_account).delete(ledger_account_categories::remove_account),
        )
        .route(
            "/api/ledger_account_categories/{id}/ledger_account_categories/{sub_category_id}",
            put(ledger_account_categories::nest).delete(ledger_account_categories::unnest),
        )
        .route("/api/ledger_account_statements", axum::routing::post(ledger_account_statements::create))
        .route("/api/ledger_account_statements/{id}", get(ledger_account_statements::retrieve))
        .route("/api/ledger_transactions", get(ledger_transactions::list).post(ledger_transactions::create))
        .route("/api/ledger_transactions/{id}", get(ledger_transactions::retrieve).patch(ledger_transactions::update))
        .route("/api/ledger_transactions/{id}/reversal", axum::routing::post(ledger_transactions::reversal))
        .route("/api/ledger_transactions/{id}/versions", get(ledger_transactions::versions_of))
        .route("/api/ledger_transaction_versions", get(ledger_transactions::versions))
        .route("/api/ledger_entries", get(ledger_entries::list))
        .route("/api/ledger_entries/{id}", get(ledger_entries::retrieve).patch(ledger_entries::update))
        .route("/api/events", get(events::list))
        .route("/api/events/{id}", get(events::retrieve))
        .route("/api/webhook_endpoints", get(webhook_endpoints::list).post(webhook_endpoints::create))
        .route("/api/webhook_endpoints/{id}", get(webhook_endpoints::retrieve).delete(webhook_endpoints::delete))
        .route("/api/webhook_endpoints/{id}/deliveries", get(webhook_endpoints::deliveries))
        .route("/api/webhook_endpoints/{id}/deliveries/{delivery_id}", get(webhook_endpoints::delivery))
        .route("/api/webhook_endpoints/{id}/deliveries/{delivery_id}/resend", axum::routing::post(webhook_endpoints::resend))
}

/// The paging parameters of every list (SPEC L1), for the OpenAPI document.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// The `X-After-Cursor` of the previous page; absent or empty for the first page.
    pub after_cursor: Option<String>,
    /// Items per page: 25 by default; values above 100 are read as 100.
    #[param(minimum = 1)]
    pub per_page: Option<u64>,
}

/// `metadata[key]=value` filters of a list, ANDed (SPEC L2), for the OpenAPI document.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MetadataParams {
    /// Only items whose metadata has each of these key-value pairs.
    #[param(style = DeepObject, explode)]
    pub metadata: Option<std::collections::BTreeMap<String, String>>,
}

/// `id[]=...` (also read as `id=...`, repeated): only these items, for the OpenAPI document.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct IdsParams {
    /// Only the items with these ids (also read as `id`).
    #[param(rename = "id[]")]
    ids: Option<Vec<String>>,
}

/// The bounds of a time filter, `name[gt]=...` and so on (all given must hold), for the OpenAPI
/// document: dates and times as RFC 3339 date-times.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(description = "Bounds on an instant (RFC 3339): each of gt, gte, lt, lte, eq given must hold.")]
pub struct DateTimeRange {
    #[schema(nullable = false, format = DateTime)]
    gt: Option<String>,
    #[schema(nullable = false, format = DateTime)]
    gte: Option<String>,
    #[schema(nullable = false, format = DateTime)]
    lt: Option<String>,
    #[schema(nullable = false, format = DateTime)]
    lte: Option<String>,
    #[schema(nullable = false, format = DateTime)]
    eq: Option<String>,
}

/// The bounds of a date filter, `name[gte]=2026-01-31` and so on (all given must hold; a day
/// is all of its UTC instants), for the OpenAPI document.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(description = "Bounds on a UTC day (YYYY-MM-DD): each of gt, gte, lt, lte, eq given must hold.")]
pub struct DateRange {
    #[schema(nullable = false, format = Date)]
    gt: Option<String>,
    #[schema(nullable = false, format = Date)]
    gte: Option<String>,
    #[schema(nullable = false, format = Date)]
    lt: Option<String>,
    #[schema(nullable = false, format = Date)]
    lte: Option<String>,
    #[schema(nullable = false, format = Date)]
    eq: Option<String>,
}

/// `created_at[gt|gte|lt|lte|eq]` (see [`time_filter`]), for the OpenAPI document.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct CreatedAtParams {
    /// Only items created within these bounds (a date bound is its whole UTC day).
    #[param(style = DeepObject, explode, inline)]
    created_at: Option<DateTimeRange>,
}

/// `order_by[created_at]=desc` (see [`newest_first_only`]), for the OpenAPI document.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
#[schema(description = "Payrail lists newest first by creation only.")]
pub struct NewestFirst {
    #[schema(schema_with = newest_first)]
    created_at: Option<String>,
}

fn newest_first() -> utoipa::openapi::schema::Object {
    crate::domain::schema::string_enum(&["desc"])
}

/// The order of a list that MT lets clients choose: Payrail lists newest first only.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct OrderByParams {
    /// Newest first by creation, the only order served (any other is a 422).
    #[param(style = DeepObject, explode, inline)]
    order_by: Option<NewestFirst>,
}

fn ok_json(json: String) -> Response {
    json_response(StatusCode::OK, Bytes::from(json))
}

fn created_json(json: String) -> Response {
    json_response(StatusCode::CREATED, Bytes::from(json))
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// Refuses a list filter Payrail knows from Modern Treasury's reference but does not serve yet
/// (`name`, `name[...]` or `name[]`): a 422 naming it beats a page that silently ignored it.
fn unsupported_filters(query: &QueryParams, names: &[&str]) -> Result<(), crate::error::Error> {
    for (key, _) in &query.0 {
        let base = key.split('[').next().unwrap_or(key);
        if names.contains(&base) {
            return Err(crate::error::Error::invalid(key.clone(), format!("Payrail does not filter this list by {base} yet")));
        }
    }
    Ok(())
}

/// Lists come newest first (by creation), which is MT's default order: `order_by[created_at]=desc`
/// says just that and is accepted; any other `order_by[...]` (MT's `effective_at`, or
/// ascending) is refused with a 422 naming it rather than answered in an order not asked for.
fn newest_first_only(query: &QueryParams) -> Result<(), crate::error::Error> {
    for (key, value) in &query.0 {
        if key == "order_by[created_at]" && value == "desc" {
            continue;
        }
        if key == "order_by" || key.starts_with("order_by[") {
            return Err(crate::error::Error::invalid(
                key.clone(),
                format!("Payrail lists newest first only (order_by[created_at]=desc); {key}={value} is not supported yet"),
            ));
        }
    }
    Ok(())
}

/// MT's `name[gt|gte|lt|lte|eq]=...` time filters as an inclusive range; a bare `name=...` is
/// read as `[eq]`, as the other range filters read it (never ignored: the name is known).
fn time_filter(query: &QueryParams, name: &str) -> Result<(Option<Timestamp>, Option<Timestamp>), crate::error::Error> {
    crate::http::extract::unknown_operator(query, &[name])?;
    let bound = |op: &str, upper: bool| time_bound(&format!("{name}[{op}]"), query.get(&format!("{name}[{op}]")), upper);
    let (gt, gte, lt, lte) = (bound("gt", true)?, bound("gte", false)?, bound("lt", false)?, bound("lte", true)?);
    let (eq_from, eq_to) = (bound("eq", false)?, bound("eq", true)?);
    let (bare_from, bare_to) = (time_bound(name, query.get(name), false)?, time_bound(name, query.get(name), true)?);
    let from = [gt.map(|t| t.plus_micros(1)), gte, eq_from, bare_from].into_iter().flatten().max();
    let to = [lt.map(|t| t.plus_micros(-1)), lte, eq_to, bare_to].into_iter().flatten().min();
    Ok((from, to))
}

/// A ledger list's `effective_at[...]` and `effective_date[...]` window (an unknown operator on
/// either is a 422 naming it).
fn effective_filter(query: &QueryParams) -> Result<crate::domain::ledger::EffectiveRange, crate::error::Error> {
    crate::http::extract::unknown_operator(query, &["effective_at", "effective_date"])?;
    crate::domain::ledger::effective_range(|name| query.get(name))
}

/// A query parameter, owned.
fn param(query: &QueryParams, name: &str) -> Option<String> {
    query.get(name).filter(|v| !v.is_empty()).map(str::to_owned)
}

/// A query parameter parsed by the domain's `parse(param, text)`: a 422 naming it when it does
/// not parse, `None` when absent or empty.
fn parsed<T>(
    query: &QueryParams,
    name: &str,
    parse: impl Fn(&str, &str) -> Result<T, crate::error::Error>,
) -> Result<Option<T>, crate::error::Error> {
    query.get(name).filter(|v| !v.is_empty()).map(|v| parse(name, v)).transpose()
}
