//! `GET /api/connections`: the caller's bank connections (SPEC B1), Modern Treasury's
//! `connection` shape, no secret. Connections are registered from the command line only.

use axum::extract::State;
use axum::response::Response;

use super::{PageParams, unsupported_filters};
use crate::app::AppState;
use crate::domain::connection::{self, Connection};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::QueryParams;
use crate::http::pagination::Paging;

#[utoipa::path(
    get,
    path = "/api/connections",
    tag = "connections",
    operation_id = "listConnections",
    params(PageParams),
    responses(
        (
            status = 200,
            description = "A page of the organization's bank connections, newest first; in sandbox mode the built-in \
                           sandbox connection last.",
            body = [Connection],
        ),
    ),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    unsupported_filters(&query, &["vendor_customer_id", "entity"])?;
    let scope = principal.scope();
    Ok(paging.reply(connection::list(&state.ctx(&scope), paging.spec).await?))
}
