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

use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::middleware::{self, Next};
use axum::response::Response;
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
    let mut api = crate::api::routes()
        .route_layer(middleware::from_fn(remember_route))
        .fallback(api_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), idempotency::layer));
    // Every layer costs every request (the benchmark saw 9 % of a ping here): none when off.
    if state.rate_limiter.enabled() {
        api = api.layer(middleware::from_fn_with_state(state.clone(), rate_limit::limit));
    }
    Router::new()
        .nest("/api", api)
        .fallback(not_found)
        // Outside the router, so every path under /api (unknown ones, `/api/` itself) answers
        // 401 before anything can answer 404 (SPEC A2).
        .layer(middleware::from_fn_with_state(state.clone(), auth::require_api_key))
        .layer(middleware::from_fn_with_state(state.clone(), metrics::track))
        .layer(middleware::from_fn(unread_body::close_if_unread))
        .layer(DefaultBodyLimit::max(limit))
        .layer(Extension(extract::BodyLimit(limit)))
        .with_state(state)
}

/// Copies the matched route onto the response, where the outer metrics layer can read it.
async fn remember_route(request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().cloned();
    let mut response = next.run(request).await;
    if let Some(route) = route {
        response.extensions_mut().insert(route);
    }
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
