//! `/api/returns`: retrieve and list the returns banks reported (SPEC B5, B7).

use axum::extract::State;
use axum::response::Response;

use super::PageParams;
use super::{ok_json, param, parsed};
use crate::app::AppState;
use crate::domain::returns::{self, RETURNABLE_TYPES, ReturnFilter, ReturnObject};
use crate::domain::validate;
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{PathId, QueryParams};
use crate::http::pagination::Paging;

#[utoipa::path(
    get,
    path = "/api/returns/{id}",
    tag = "returns",
    operation_id = "retrieveReturn",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The return.", body = ReturnObject)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(returns::get(&state.ctx(&scope), &id).await?))
}

#[utoipa::path(
    get,
    path = "/api/returns",
    tag = "returns",
    operation_id = "listReturns",
    params(
        PageParams,
        ("returnable_id" = Option<String>, Query),
        (
            "returnable_type" = Option<String>,
            Query,
            description = "incoming_payment_detail, payment_order, return or reversal."
        ),
        ("internal_account_id" = Option<String>, Query),
        ("counterparty_id" = Option<String>, Query),
    ),
    responses(
        (status = 200, description = "A page of returns, newest first.", body = [ReturnObject]),
    ),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    let filter = ReturnFilter {
        returnable_id: param(&query, "returnable_id"),
        returnable_type: parsed(&query, "returnable_type", |name, text| validate::one_of(name, text, RETURNABLE_TYPES))?,
        internal_account_id: param(&query, "internal_account_id"),
        counterparty_id: param(&query, "counterparty_id"),
    };
    Ok(paging.reply(returns::list(&state.ctx(&scope), &filter, paging.spec).await?))
}
