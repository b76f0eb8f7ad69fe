//! `/api/webhook_endpoints` (SPEC W): create (201, the only reply with the secret), retrieve,
//! list, delete (204); an endpoint's deliveries, one delivery, and resending a failed one.

use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::Response;

use super::PageParams;
use super::{created_json, no_content, ok_json, param};
use crate::app::AppState;
use crate::app::WriteContext;
use crate::domain::webhook::{self, CreatedEndpoint, EndpointInput, WebhookEndpoint};
use crate::domain::webhook_delivery::{self, Delivery};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

/// `{id}` and `{delivery_id}` of a delivery's path.
pub struct DeliveryPath {
    endpoint_id: String,
    delivery_id: String,
}

impl<S: Send + Sync> FromRequestParts<S> for DeliveryPath {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path((endpoint_id, delivery_id)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|_| Error::NotFound { message: "resource not found".into() })?;
        Ok(DeliveryPath { endpoint_id, delivery_id })
    }
}

#[utoipa::path(
    post,
    path = "/api/webhook_endpoints",
    tag = "webhook_endpoints",
    operation_id = "createWebhookEndpoint",
    request_body = EndpointInput,
    responses(
        (status = 201, description = "The endpoint, with its signing secret (shown this once).", body = CreatedEndpoint),
    ),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<EndpointInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let committer = state.committer(&write, StatusCode::CREATED.as_u16());
    let json = webhook::create(&state.ctx(&scope), &committer, &input, &state.config.webhook_endpoint_rules()).await?;
    Ok(created_json(json))
}

#[utoipa::path(
    get,
    path = "/api/webhook_endpoints/{id}",
    tag = "webhook_endpoints",
    operation_id = "retrieveWebhookEndpoint",
    params(("id" = String, Path, description = "The resource's id.")),
    responses(
        (status = 200, description = "The endpoint (never its secret).", body = WebhookEndpoint),
    ),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(webhook::get(&state.ctx(&scope), &id).await?))
}

#[utoipa::path(
    get,
    path = "/api/webhook_endpoints",
    tag = "webhook_endpoints",
    operation_id = "listWebhookEndpoints",
    params(PageParams),
    responses(
        (status = 200, description = "A page of endpoints, newest first.", body = [WebhookEndpoint]),
    ),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging) -> Result<Response, Error> {
    let scope = principal.scope();
    let spec = paging.spec;
    Ok(paging.reply(webhook::list(&state.ctx(&scope), spec).await?))
}

#[utoipa::path(
    delete,
    path = "/api/webhook_endpoints/{id}",
    tag = "webhook_endpoints",
    operation_id = "deleteWebhookEndpoint",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 204, description = "Deleted; nothing more is sent to it.")),
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
) -> Result<Response, Error> {
    let scope = principal.scope();
    webhook::delete(&state.ctx(&scope), &state.committer(&write, StatusCode::NO_CONTENT.as_u16()), &id).await?;
    Ok(no_content())
}

#[utoipa::path(
    get,
    path = "/api/webhook_endpoints/{id}/deliveries",
    tag = "webhook_endpoints",
    operation_id = "listWebhookDeliveries",
    params(
        ("id" = String, Path, description = "The resource's id."),
        PageParams,
        ("status" = Option<String>, Query, description = "pending, delivered or failed."),
    ),
    responses(
        (status = 200, description = "A page of the endpoint's deliveries, newest first.", body = [Delivery]),
    ),
)]
pub async fn deliveries(
    State(state): State<AppState>,
    principal: Principal,
    PathId(id): PathId,
    paging: Paging,
    query: QueryParams,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let spec = paging.spec;
    let status = param(&query, "status");
    Ok(paging.reply(webhook_delivery::list(&state.ctx(&scope), &id, status.as_deref(), spec).await?))
}

#[utoipa::path(
    get,
    path = "/api/webhook_endpoints/{id}/deliveries/{delivery_id}",
    tag = "webhook_endpoints",
    operation_id = "retrieveWebhookDelivery",
    params(
        ("id" = String, Path, description = "The resource's id."),
        ("delivery_id" = String, Path, description = "The delivery's id (the X-Webhook-ID it is sent with)."),
    ),
    responses((status = 200, description = "The delivery.", body = Delivery)),
)]
pub async fn delivery(State(state): State<AppState>, principal: Principal, path: DeliveryPath) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(webhook_delivery::get(&state.ctx(&scope), &path.endpoint_id, &path.delivery_id).await?))
}

#[utoipa::path(
    post,
    path = "/api/webhook_endpoints/{id}/deliveries/{delivery_id}/resend",
    tag = "webhook_endpoints",
    operation_id = "resendWebhookDelivery",
    params(
        ("id" = String, Path, description = "The resource's id."),
        ("delivery_id" = String, Path, description = "The delivery's id (the X-Webhook-ID it is sent with)."),
    ),
    responses((status = 200, description = "The delivery, pending again.", body = Delivery)),
)]
pub async fn resend(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    path: DeliveryPath,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let retry = state.config.webhook_retry_policy();
    let committer = state.committer(&write, StatusCode::OK.as_u16());
    let json = webhook_delivery::resend(&state.ctx(&scope), &committer, &path.endpoint_id, &path.delivery_id, &retry).await?;
    Ok(ok_json(json))
}
