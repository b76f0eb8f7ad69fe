//! `/api/ledger_account_statements`: create (201) and retrieve an account's balances at both
//! ends of an effective-time window (SPEC G1, G5).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{created_json, ok_json};
use crate::app::{AppState, WriteContext};
use crate::domain::ledger::statements::{self, LedgerAccountStatement, StatementInput};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId};

#[utoipa::path(
    post,
    path = "/api/ledger_account_statements",
    tag = "ledger_account_statements",
    operation_id = "createLedgerAccountStatement",
    request_body = StatementInput,
    responses((status = 201, description = "The statement: the account's balances at both ends of the window.", body = LedgerAccountStatement)),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<StatementInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(created_json(statements::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?))
}

#[utoipa::path(
    get,
    path = "/api/ledger_account_statements/{id}",
    tag = "ledger_account_statements",
    operation_id = "getLedgerAccountStatement",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The statement.", body = LedgerAccountStatement)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(statements::get(&state.ctx(&scope), &id).await?))
}
