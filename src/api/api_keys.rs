//! `GET /api/api_keys/current`: the key in use (never its secret or hash).

use axum::Json;

use crate::domain::api_key::ApiKey;
use crate::http::auth::Principal;

pub async fn current(principal: Principal) -> Json<ApiKey> {
    Json(principal.key)
}
