//! `GET /api/ping`: proves the key works.

use axum::Json;
use serde_json::{Value, json};

use crate::http::auth::Principal;

pub async fn ping(_principal: Principal) -> Json<Value> {
    Json(json!({"ping": "pong"}))
}
