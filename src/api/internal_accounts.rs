//! `/api/internal_accounts`: create (201), retrieve, list, update.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{MetadataParams, PageParams};
use super::{created_json, ok_json, param, unsupported_filters};
use crate::app::AppState;
use crate::app::WriteContext;
use crate::domain::internal_account::{self, InternalAccount, InternalAccountFilter, InternalAccountInput, InternalAccountPatch};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

#[utoipa::path(
    post,
    path = "/api/internal_accounts",
    tag = "internal_accounts",
    operation_id = "createInternalAccount",
    request_body = InternalAccountInput,
    responses((status = 201, description = "The internal account.", body = InternalAccount)),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<InternalAccountInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let json = internal_account::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?;
    Ok(created_json(json))
}

#[utoipa::path(
    get,
    path = "/api/internal_accounts/{id}",
    tag = "internal_accounts",
    operation_id = "retrieveInternalAccount",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The internal account.", body = InternalAccount)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(internal_account::get(&state.ctx(&scope), &id).await?))
}

#[utoipa::path(
    get,
    path = "/api/internal_accounts",
    tag = "internal_accounts",
    operation_id = "listInternalAccounts",
    params(
        PageParams,
        ("counterparty_id" = Option<String>, Query),
        ("currency" = Option<String>, Query),
        ("external_id" = Option<String>, Query),
        ("status" = Option<String>, Query),
        ("payment_type" = Option<String>, Query, description = "Accounts with a capability of this payment type."),
        ("payment_direction" = Option<String>, Query, description = "Accounts with a capability in this direction (credit or debit)."),
        MetadataParams,
    ),
    responses(
        (status = 200, description = "A page of internal accounts, newest first.", body = [InternalAccount]),
    ),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    unsupported_filters(&query, &["legal_entity_id"])?;
    let scope = principal.scope();
    let spec = paging.spec;
    let filter = InternalAccountFilter {
        counterparty_id: param(&query, "counterparty_id"),
        currency: param(&query, "currency"),
        external_id: param(&query, "external_id"),
        status: param(&query, "status"),
        payment_type: param(&query, "payment_type"),
        payment_direction: param(&query, "payment_direction"),
        metadata: query.metadata(),
    };
    Ok(paging.reply(internal_account::list(&state.ctx(&scope), &filter, spec).await?))
}

#[utoipa::path(
    patch,
    path = "/api/internal_accounts/{id}",
    tag = "internal_accounts",
    operation_id = "updateInternalAccount",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = InternalAccountPatch,
    responses(
        (status = 200, description = "The updated internal account.", body = InternalAccount),
    ),
)]
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<InternalAccountPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let json = internal_account::update(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &patch).await?;
    Ok(ok_json(json))
}
