//! The API's resources, one module each: thin handlers that parse, call the domain, reply.

mod api_keys;
mod ping;

use axum::Router;
use axum::routing::get;

use crate::http::AppState;

pub fn routes() -> Router<AppState> {
    Router::new().route("/ping", get(ping::ping)).route("/api_keys/current", get(api_keys::current))
}
