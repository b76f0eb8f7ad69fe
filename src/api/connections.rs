//! `GET /api/connections`: the caller's bank connections (SPEC B1), Modern Treasury's
//! `connection` shape, no secret. Connections are registered from the command line only.

use axum::extract::State;
use axum::response::Response;

use crate::app::AppState;
use crate::domain::connection;
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::pagination::Paging;

pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(paging.reply(connection::list(&state.ctx(&scope), paging.spec).await?))
}
