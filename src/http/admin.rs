//! The admin listener (SPEC K3): plain HTTP, loopback by default, `/healthz`, `/metrics` and
//! `/openapi.json` (the API's OpenAPI document, which the caller hands in: `http/` knows no
//! resource).
//! It serves nothing of the API and needs no key; keep it off public interfaces.

use std::time::Duration;

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

/// How long `/healthz` waits for the store: it answers within a second whatever the database
/// does (SPEC H3). The store is asked to answer a little sooner (a probe it cannot finish in
/// time may go on in the background, see `Store::health`); this bound is the backstop.
const HEALTH_BOUND: Duration = Duration::from_millis(800);
const HEALTH_PROBE: Duration = Duration::from_millis(700);

async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    // Healthy means the store takes writes now (on PostgreSQL: a writable primary answers).
    match tokio::time::timeout(HEALTH_BOUND, state.store.health(HEALTH_PROBE)).await {
        Ok(Ok(())) => (StatusCode::OK, "ok\n"),
        Ok(Err(_)) => (StatusCode::SERVICE_UNAVAILABLE, "store unavailable\n"),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "store did not answer in time\n"),
    }
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render())
}
