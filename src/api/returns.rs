//! `/api/returns`: retrieve and list the returns banks reported (SPEC B5, B7).

use axum::extract::State;
use axum::response::Response;

use super::{ok_json, param, parsed};
use crate::app::AppState;
use crate::domain::returns::{self, RETURNABLE_TYPES, ReturnFilter};
use crate::domain::validate;
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{PathId, QueryParams};
use crate::http::pagination::Paging;

pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(returns::get(&state.ctx(&scope), &id).await?))
}

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
