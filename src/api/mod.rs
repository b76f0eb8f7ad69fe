//! The API's resources, one module each: thin handlers that parse, call the domain, reply.

mod api_keys;
mod counterparties;
mod events;
mod external_accounts;
mod internal_accounts;
pub mod openapi;
mod payment_orders;
mod ping;
mod webhook_endpoints;

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::app::AppState;
use crate::http::extract::QueryParams;
use crate::http::idempotency::json_response;

/// Every API route, under `/api` (spelled out rather than nested: a nested router costs every
/// request a second routing pass and a rewritten URI).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/ping", get(ping::ping))
        .route("/api/api_keys/current", get(api_keys::current))
        .route("/api/counterparties", get(counterparties::list).post(counterparties::create))
        .route("/api/counterparties/{id}", get(counterparties::retrieve).patch(counterparties::update).delete(counterparties::delete))
        .route("/api/external_accounts", get(external_accounts::list).post(external_accounts::create))
        .route(
            "/api/external_accounts/{id}",
            get(external_accounts::retrieve).patch(external_accounts::update).delete(external_accounts::delete),
        )
        .route("/api/internal_accounts", get(internal_accounts::list).post(internal_accounts::create))
        .route("/api/internal_accounts/{id}", get(internal_accounts::retrieve).patch(internal_accounts::update))
        .route("/api/payment_orders", get(payment_orders::list).post(payment_orders::create))
        .route("/api/payment_orders/{id}", get(payment_orders::retrieve).patch(payment_orders::update))
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

fn ok_json(json: String) -> Response {
    json_response(StatusCode::OK, Bytes::from(json))
}

fn created_json(json: String) -> Response {
    json_response(StatusCode::CREATED, Bytes::from(json))
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
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
