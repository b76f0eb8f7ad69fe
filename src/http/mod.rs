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

use axum::Router;
use axum::body::Body;
use axum::extract::MatchedPath;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use tower::ServiceExt;

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
    /// The state a server runs with: its clock and rate limits come from its configuration.
    pub fn serving(store: Arc<dyn Store>, config: Arc<Config>) -> Self {
        AppState(Arc::new(Shared {
            store,
            clock: config.clock.clone(),
            metrics: Arc::default(),
            rate_limiter: Arc::new(rate_limit::RateLimiter::new(config.rate_limit_per_sec, config.rate_limit_burst)),
            config,
        }))
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

/// The API as served: the front door, then the routes. `/api` and everything under it sits
/// behind authentication; nothing else is served.
#[derive(Clone)]
pub struct Api {
    state: AppState,
    routes: Router,
}

/// The API for [`serve::serve`].
pub fn router(state: AppState) -> Api {
    let mut routes = crate::api::routes()
        .route_layer(middleware::from_fn_with_state(state.clone(), idempotency::layer))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    // Every layer costs every request (the benchmark saw 9 % of a ping here): none when off.
    // It limits authenticated requests only, so the fallback passes it untouched.
    if state.rate_limiter.enabled() {
        routes = routes.layer(middleware::from_fn_with_state(state.clone(), rate_limit::limit));
    }
    Api { routes: routes.with_state(state.clone()), state }
}

impl Api {
    /// Every request's way in, in front of the router rather than a layer of it (a layer is a
    /// boxed future, a cloned service and its own allocations on every request): watches the
    /// body (a reply sent before the body was read closes the connection), authenticates
    /// everything under `/api` before routing, so unknown paths there answer 401 rather than
    /// 404 (A2), and records the request's metrics (K3). Never logs headers: they carry the key.
    pub async fn handle(&self, request: hyper::Request<hyper::body::Incoming>) -> Response {
        let state = &self.state;
        let started = Instant::now();
        let method = request.method().clone();
        let (mut request, body_read) = unread_body::watch(request.map(Body::new), state.config.body_limit_bytes);
        let mut response = match auth::authenticate_request(state, &mut request).await {
            Ok(()) => self.routes.clone().oneshot(request).await.unwrap_or_else(|never| match never {}),
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
}

async fn not_found(uri: axum::http::Uri) -> Error {
    let message = if auth::is_api_path(uri.path()) { "No such API path." } else { "Not found. The API lives under /api." };
    Error::NotFound { message: message.into() }
}

async fn method_not_allowed() -> Error {
    Error::MethodNotAllowed
}
