//! The admin listener (SPEC K3): plain HTTP, loopback by default, `/healthz`, `/metrics` and
//! `/openapi.json` (the API's OpenAPI document, `crate::api::openapi`).
//! It serves nothing of the API and needs no key; keep it off public interfaces.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::AppState;

pub fn router(state: AppState) -> Router {
    Router::new().route("/healthz", get(healthz)).route("/metrics", get(metrics)).route("/openapi.json", get(openapi)).with_state(state)
}

/// The OpenAPI document, generated once.
async fn openapi() -> impl IntoResponse {
    static DOCUMENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let body = DOCUMENT.get_or_init(crate::api::openapi::json).clone();
    ([(header::CONTENT_TYPE, "application/json")], body)
}

async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    // Healthy means the store answers a read.
    match state.store.api_key("healthz-probe").await {
        Ok(_) => (StatusCode::OK, "ok\n"),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "store unavailable\n"),
    }
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render())
}
