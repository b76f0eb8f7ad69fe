//! `GET /api/api_keys/current`: the key in use (never its secret or hash).

use axum::Json;

use crate::domain::api_key::ApiKey;
use crate::http::auth::Principal;

/// The API key this request authenticated with.
#[utoipa::path(
    get,
    path = "/api/api_keys/current",
    tag = "api_keys",
    operation_id = "retrieveCurrentApiKey",
    responses((status = 200, description = "The key in use.", body = ApiKey)),
)]
pub async fn current(principal: Principal) -> Json<ApiKey> {
    Json(principal.key.as_ref().clone())
}
