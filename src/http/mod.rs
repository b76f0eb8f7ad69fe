//! Everything HTTP: the router, TLS, authentication, idempotency, errors, paging, metrics.
//! Nothing outside this module knows HTTP.

pub mod admin;
pub mod auth;
pub mod conn_limit;
pub mod error;
pub mod extract;
pub mod head_errors;
pub mod idempotency;
pub mod pagination;
pub mod rate_limit;
pub mod serve;
pub mod tls;
pub mod unread_body;

use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::MatchedPath;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use tower::ServiceExt;

use crate::app::AppState;
use crate::error::Error;

/// The API as served: the front door, then the routes. `/api` and everything under it sits
/// behind authentication; nothing else is served.
#[derive(Clone)]
pub struct Api {
    state: AppState,
    routes: Router,
}

/// The API for [`serve::serve`]: `routes` (the resources, from `api/`) behind the front door,
/// authentication, idempotency and rate limits.
pub fn router(state: AppState, routes: Router<AppState>) -> Api {
    let replayed = || middleware::from_fn_with_state(state.clone(), idempotency::fallback_layer);
    let mut routes = routes
        .route_layer(middleware::from_fn_with_state(state.clone(), idempotency::layer))
        .fallback(axum::handler::Handler::layer(not_found, replayed()))
        .method_not_allowed_fallback(axum::handler::Handler::layer(method_not_allowed, replayed()));
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
    /// 404 (A2), then refuses a body announced over the limit (L5: before any of it is read or
    /// its idempotency key is claimed), and records the request's metrics (K3). Never logs headers: they carry the key.
    pub async fn handle(&self, request: hyper::Request<hyper::body::Incoming>) -> Response {
        let state = &self.state;
        let started = Instant::now();
        let method = request.method().clone();
        let (mut request, body_read) =
            unread_body::watch(request.map(Body::new), unread_body::drain_bytes_max(state.config.body_limit_bytes));
        let admitted = match auth::authenticate_request(state, &mut request).await {
            Ok(()) => within_body_limit(&request, state.config.body_limit_bytes),
            Err(err) => Err(err),
        };
        let mut response = match admitted {
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

/// 413 for a request whose `Content-Length` (as hyper parsed it) exceeds the body limit. A
/// chunked body announces nothing; reading it stops at the limit instead (`extract::read_body`).
fn within_body_limit(request: &axum::extract::Request, limit_bytes: usize) -> Result<(), Error> {
    use hyper::body::Body as _;
    let announced = request.body().size_hint().lower();
    if announced > u64::try_from(limit_bytes).unwrap_or(u64::MAX) {
        return Err(Error::PayloadTooLarge { limit_bytes });
    }
    Ok(())
}

async fn not_found(uri: axum::http::Uri) -> Error {
    let message = if auth::is_api_path(uri.path()) { "No such API path." } else { "Not found. The API lives under /api." };
    Error::NotFound { message: message.into() }
}

async fn method_not_allowed() -> Error {
    Error::MethodNotAllowed
}
