//! `GET /api/ping`: proves the key works.

use axum::Json;
use serde::Serialize;

use crate::http::auth::Principal;

/// `{"ping": "pong"}`.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = ping_response)]
pub struct Pong {
    ping: &'static str,
}

/// Answers `pong` to any valid key.
#[utoipa::path(
    get,
    path = "/api/ping",
    tag = "ping",
    operation_id = "ping",
    responses((status = 200, description = "The key works.", body = Pong)),
)]
pub async fn ping(_principal: Principal) -> Json<Pong> {
    Json(Pong { ping: "pong" })
}
