//! `/api/webhook_endpoints` (SPEC W): create (201, the only reply with the secret), retrieve,
//! list, delete (204); an endpoint's deliveries, one delivery, and resending a failed one.

use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::Response;

use super::{created_json, listed, no_content, ok_json, page_spec, param};
use crate::domain::webhook::{self, EndpointInput, UrlPolicy};
use crate::domain::webhook_delivery;
use crate::error::Error;
use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::idempotency::WriteContext;

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

fn policy(state: &AppState) -> UrlPolicy {
    UrlPolicy { allow_private: state.config.webhooks_allow_private }
}

pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<EndpointInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let committer = state.committer(&write, StatusCode::CREATED);
    let json = webhook::create(&state.ctx(&scope), &committer, &input, &policy(&state)).await?;
    Ok(created_json(json))
}

pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(webhook::get(&state.ctx(&scope), &id).await?))
}

pub async fn list(State(state): State<AppState>, principal: Principal, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    let spec = page_spec(&query)?;
    Ok(listed(webhook::list(&state.ctx(&scope), spec).await?, spec))
}

pub async fn delete(State(state): State<AppState>, principal: Principal, write: WriteContext, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    webhook::delete(&state.ctx(&scope), &state.committer(&write, StatusCode::NO_CONTENT), &id).await?;
    Ok(no_content())
}

pub async fn deliveries(State(state): State<AppState>, principal: Principal, PathId(id): PathId, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    let spec = page_spec(&query)?;
    let status = param(&query, "status");
    Ok(listed(webhook_delivery::list(&state.ctx(&scope), &id, status.as_deref(), spec).await?, spec))
}

pub async fn delivery(State(state): State<AppState>, principal: Principal, path: DeliveryPath) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(webhook_delivery::get(&state.ctx(&scope), &path.endpoint_id, &path.delivery_id).await?))
}

pub async fn resend(State(state): State<AppState>, principal: Principal, write: WriteContext, path: DeliveryPath) -> Result<Response, Error> {
    let scope = principal.scope();
    let retry = crate::webhooks::retry_policy(&state.config);
    let committer = state.committer(&write, StatusCode::OK);
    let json = webhook_delivery::resend(&state.ctx(&scope), &committer, &path.endpoint_id, &path.delivery_id, &retry).await?;
    Ok(ok_json(json))
}
