//! The rate-limit middleware: 429 with `Retry-After` once a key has used its burst and its
//! rate (SPEC L3). The buckets are the application core's (`app::rate_limit`).

use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::auth::Principal;
use crate::app::AppState;
use crate::error::Error;

/// Middleware (after authentication): 429 once a key has used its burst and its rate.
pub async fn limit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if state.rate_limiter.enabled()
        && let Some(principal) = request.extensions().get::<Principal>()
        && let Err(retry_after_s) = state.rate_limiter.take(&principal.key.id, Instant::now())
    {
        return Error::RateLimited { retry_after_s }.into_response();
    }
    next.run(request).await
}
