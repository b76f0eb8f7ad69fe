//! Everything HTTP: the router, TLS, authentication, idempotency, errors, paging, metrics.
//! Nothing outside this module knows HTTP.

pub mod admin;
pub mod auth;
pub mod error;
pub mod extract;
pub mod idempotency;
pub mod metrics;
pub mod pagination;
pub mod rate_limit;
pub mod serve;
pub mod tls;
pub mod unread_body;

use std::sync::Arc;

use std::time::Instant;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};

use crate::config::Config;
use crate::domain::Ctx;
use crate::domain::api_key::Scope;
use crate::domain::time::Clock;
use crate::error::Error;
use crate::store::Store;

/// What every handler can reach. Cloned by every layer of every request, so one pointer.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

pub struct Shared {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub config: Arc<Config>,
    pub metrics: Arc<metrics::Metrics>,
    pub rate_limiter: Arc<rate_limit::RateLimiter>,
}

impl AppState {
    pub fn new(shared: Shared) -> Self {
        AppState(Arc::new(shared))
    }

    /// The domain's view of a request: store, tenant, and the time it runs at.
    pub fn ctx<'a>(&'a self, scope: &'a Scope) -> Ctx<'a> {
        Ctx { store: self.store.as_ref(), scope, now: self.clock.now() }
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The API router: `/api` and everything under it behind authentication, nothing else served.
pub fn router(state: AppState) -> Router {
    let limit = state.config.body_limit_bytes;
    // Per route, so the layer sees the matched route (for metrics) and unknown paths and methods
    // answer 404 / 405 without claiming a key.
    let mut api = crate::api::routes()
        .route_layer(middleware::from_fn_with_state(state.clone(), idempotency::layer))
        .fallback(api_not_found)
        .method_not_allowed_fallback(method_not_allowed);
    // Every layer costs every request (the benchmark saw 9 % of a ping here): none when off.
    if state.rate_limiter.enabled() {
        api = api.layer(middleware::from_fn_with_state(state.clone(), rate_limit::limit));
    }
    Router::new()
        .nest("/api", api)
        .fallback(not_found)
        // Outside the router, so every path under /api (unknown ones, `/api/` itself) answers
        // 401 before anything can answer 404 (SPEC A2).
        .layer(middleware::from_fn_with_state(state.clone(), front_door))
        .layer(DefaultBodyLimit::max(limit))
        .layer(Extension(extract::BodyLimit(limit)))
        .with_state(state)
}

/// Every request's way in, as one layer (each layer costs every request: six of them were a
/// tenth of a ping): watches the body (a reply sent before the body was read closes the
/// connection), authenticates everything under `/api` before routing, so unknown paths there
/// answer 401 rather than 404 (A2), and records the request's metrics (K3). Never logs headers:
/// they carry the key.
async fn front_door(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let (mut request, body_read) = unread_body::watch(request);
    let mut response = match auth::authenticate_request(&state, &mut request).await {
        Ok(()) => next.run(request).await,
        Err(err) => err.into_response(),
    };
    unread_body::close_if_unread(&mut response, body_read.as_deref());
    let route = response.extensions().get::<MatchedPath>().map_or("unmatched", |p| p.as_str());
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    state.metrics.observe(route, &method, status, elapsed.as_secs_f64());
    tracing::debug!(%method, %route, status, elapsed_us = elapsed.as_micros() as u64, "request");
    response
}

async fn api_not_found() -> Error {
    Error::NotFound { message: "No such API path.".into() }
}

async fn not_found() -> Error {
    Error::NotFound { message: "Not found. The API lives under /api.".into() }
}

async fn method_not_allowed() -> Error {
    Error::MethodNotAllowed
}
