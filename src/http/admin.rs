//! The admin listener (SPEC K3): plain HTTP, loopback by default, `/healthz`, `/metrics` and
//! `/openapi.json` (the API's OpenAPI document, which the caller hands in: `http/` knows no
//! resource).
//! It serves nothing of the API and needs no key; keep it off public interfaces.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::app::AppState;

/// The admin routes; `openapi` makes the OpenAPI document, once, on its first request.
pub fn router(state: AppState, openapi: fn() -> String) -> Router {
    let document = std::sync::Arc::new(std::sync::OnceLock::new());
    let serve_document = move || {
        let document = document.clone();
        async move { ([(header::CONTENT_TYPE, "application/json")], document.get_or_init(openapi).clone()) }
    };
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(serve_document))
        .with_state(state)
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
