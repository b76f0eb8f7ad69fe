//! `/api/external_accounts`: create (201), retrieve, list, update, delete (204).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{MetadataParams, PageParams};
use super::{created_json, no_content, ok_json, param};
use crate::app::AppState;
use crate::app::WriteContext;
use crate::domain::external_account::{self, ExternalAccount, ExternalAccountFilter, ExternalAccountInput, ExternalAccountPatch};
use crate::domain::payment_order::receiving::OrdersToSend;
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

#[utoipa::path(
    post,
    path = "/api/external_accounts",
    tag = "external_accounts",
    operation_id = "createExternalAccount",
    request_body = ExternalAccountInput,
    responses((status = 201, description = "The external account.", body = ExternalAccount)),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<ExternalAccountInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let json = external_account::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?;
    Ok(created_json(json))
}

#[utoipa::path(
    get,
    path = "/api/external_accounts/{id}",
    tag = "external_accounts",
    operation_id = "retrieveExternalAccount",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The external account.", body = ExternalAccount)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(external_account::get(&state.ctx(&scope), &id).await?))
}

#[utoipa::path(
    get,
    path = "/api/external_accounts",
    tag = "external_accounts",
    operation_id = "listExternalAccounts",
    params(
        PageParams,
        ("counterparty_id" = Option<String>, Query),
        ("party_name" = Option<String>, Query, description = "Part of the party name (any case)."),
        ("external_id" = Option<String>, Query),
        MetadataParams,
    ),
    responses(
        (status = 200, description = "A page of external accounts, newest first.", body = [ExternalAccount]),
    ),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    let spec = paging.spec;
    let filter = ExternalAccountFilter {
        counterparty_id: param(&query, "counterparty_id"),
        party_name: param(&query, "party_name"),
        external_id: param(&query, "external_id"),
        metadata: query.metadata(),
    };
    Ok(paging.reply(external_account::list(&state.ctx(&scope), &filter, spec).await?))
}

#[utoipa::path(
    patch,
    path = "/api/external_accounts/{id}",
    tag = "external_accounts",
    operation_id = "updateExternalAccount",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = ExternalAccountPatch,
    responses(
        (status = 200, description = "The updated external account.", body = ExternalAccount),
    ),
)]
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<ExternalAccountPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let json =
        external_account::update(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &patch, &OrdersToSend).await?;
    Ok(ok_json(json))
}

#[utoipa::path(
    delete,
    path = "/api/external_accounts/{id}",
    tag = "external_accounts",
    operation_id = "deleteExternalAccount",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 204, description = "Deleted.")),
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
) -> Result<Response, Error> {
    let scope = principal.scope();
    external_account::delete(&state.ctx(&scope), &state.committer(&write, StatusCode::NO_CONTENT.as_u16()), &id, &OrdersToSend).await?;
    Ok(no_content())
}
