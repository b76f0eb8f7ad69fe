//! `/api/counterparties`: create (201), retrieve, list, update, delete (204).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{MetadataParams, PageParams};
use super::{created_json, no_content, ok_json, param, unsupported_filters};
use crate::app::AppState;
use crate::app::WriteContext;
use crate::domain::counterparty::{self, Counterparty, CounterpartyFilter, CounterpartyInput, CounterpartyPatch};
use crate::domain::listing::time_bound;
use crate::domain::payment_order::receiving::OrdersToSend;
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

#[utoipa::path(
    post,
    path = "/api/counterparties",
    tag = "counterparties",
    operation_id = "createCounterparty",
    request_body = CounterpartyInput,
    responses(
        (status = 201, description = "The counterparty, with its accounts.", body = Counterparty),
    ),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<CounterpartyInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let json = counterparty::create(&state.ctx(&scope), &state.committer(&write, StatusCode::CREATED.as_u16()), &input).await?;
    Ok(created_json(json))
}

#[utoipa::path(
    get,
    path = "/api/counterparties/{id}",
    tag = "counterparties",
    operation_id = "retrieveCounterparty",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The counterparty.", body = Counterparty)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(counterparty::get(&state.ctx(&scope), &id).await?))
}

#[utoipa::path(
    get,
    path = "/api/counterparties",
    tag = "counterparties",
    operation_id = "listCounterparties",
    params(
        PageParams,
        ("name" = Option<String>, Query, description = "Part of the name (any case)."),
        ("email" = Option<String>, Query, description = "Part of the email address (any case)."),
        ("external_id" = Option<String>, Query),
        MetadataParams,
        ("created_at_lower_bound" = Option<String>, Query, description = "A date (YYYY-MM-DD) or an RFC 3339 date-time."),
        ("created_at_upper_bound" = Option<String>, Query, description = "A date (YYYY-MM-DD) or an RFC 3339 date-time."),
    ),
    responses(
        (status = 200, description = "A page of counterparties, newest first.", body = [Counterparty]),
    ),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    unsupported_filters(&query, &["legal_entity_id"])?;
    let scope = principal.scope();
    let spec = paging.spec;
    let filter = CounterpartyFilter {
        name: param(&query, "name"),
        email: param(&query, "email"),
        external_id: param(&query, "external_id"),
        metadata: query.metadata(),
        created_from: time_bound("created_at_lower_bound", query.get("created_at_lower_bound"), false)?,
        created_to: time_bound("created_at_upper_bound", query.get("created_at_upper_bound"), true)?,
    };
    Ok(paging.reply(counterparty::list(&state.ctx(&scope), &filter, spec).await?))
}

#[utoipa::path(
    patch,
    path = "/api/counterparties/{id}",
    tag = "counterparties",
    operation_id = "updateCounterparty",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = CounterpartyPatch,
    responses((status = 200, description = "The updated counterparty.", body = Counterparty)),
)]
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<CounterpartyPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let json = counterparty::update(&state.ctx(&scope), &state.committer(&write, StatusCode::OK.as_u16()), &id, &patch).await?;
    Ok(ok_json(json))
}

#[utoipa::path(
    delete,
    path = "/api/counterparties/{id}",
    tag = "counterparties",
    operation_id = "deleteCounterparty",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 204, description = "Deleted, with its accounts.")),
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
) -> Result<Response, Error> {
    let scope = principal.scope();
    counterparty::delete(&state.ctx(&scope), &state.committer(&write, StatusCode::NO_CONTENT.as_u16()), &id, &OrdersToSend).await?;
    Ok(no_content())
}
