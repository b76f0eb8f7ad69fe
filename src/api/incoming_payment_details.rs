//! `/api/incoming_payment_details` (retrieve, list, update metadata) and the sandbox's
//! `POST /api/simulations/incoming_payment_details/create_async` (202, the detail).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{MetadataParams, PageParams};
use super::{ok_json, param, parsed};
use crate::app::{AppState, WriteContext};
use crate::domain::enums::Direction;
use crate::domain::incoming_payment_detail::{
    self, IncomingPaymentDetail, IncomingPaymentDetailFilter, IncomingPaymentDetailPatch, SimulationInput,
};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::idempotency::json_response;
use crate::http::pagination::Paging;

#[utoipa::path(
    get,
    path = "/api/incoming_payment_details/{id}",
    tag = "incoming_payment_details",
    operation_id = "retrieveIncomingPaymentDetail",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The incoming payment detail.", body = IncomingPaymentDetail)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(incoming_payment_detail::get(&state.ctx(&scope), &id).await?))
}

#[utoipa::path(
    get,
    path = "/api/incoming_payment_details",
    tag = "incoming_payment_details",
    operation_id = "listIncomingPaymentDetails",
    params(
        PageParams,
        ("direction" = Option<String>, Query, description = "credit or debit."),
        ("status" = Option<String>, Query, description = "completed, pending or returned."),
        ("type" = Option<String>, Query, description = "A payment type such as ach or wire."),
        ("subtype" = Option<String>, Query),
        ("virtual_account_id" = Option<String>, Query, description = "Payrail has no virtual accounts: any value matches nothing."),
        ("as_of_date_start" = Option<String>, Query, format = Date),
        ("as_of_date_end" = Option<String>, Query, format = Date),
        MetadataParams,
    ),
    responses(
        (status = 200, description = "A page of incoming payment details, newest first.", body = [IncomingPaymentDetail]),
    ),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    let filter = IncomingPaymentDetailFilter {
        direction: parsed(&query, "direction", Direction::parse)?,
        status: param(&query, "status"),
        payment_type: param(&query, "type"),
        subtype: param(&query, "subtype"),
        virtual_account_id: param(&query, "virtual_account_id"),
        as_of_date_start: param(&query, "as_of_date_start"),
        as_of_date_end: param(&query, "as_of_date_end"),
        metadata: query.metadata(),
    };
    Ok(paging.reply(incoming_payment_detail::list(&state.ctx(&scope), &filter, paging.spec).await?))
}

#[utoipa::path(
    patch,
    path = "/api/incoming_payment_details/{id}",
    tag = "incoming_payment_details",
    operation_id = "updateIncomingPaymentDetail",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = IncomingPaymentDetailPatch,
    responses((status = 200, description = "The updated incoming payment detail.", body = IncomingPaymentDetail)),
)]
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<IncomingPaymentDetailPatch>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let committer = state.committer(&write, StatusCode::OK.as_u16());
    Ok(ok_json(incoming_payment_detail::update(&state.ctx(&scope), &committer, &id, &patch).await?))
}

/// MT answers the simulation 202 with the detail it made.
#[utoipa::path(
    post,
    path = "/api/simulations/incoming_payment_details/create_async",
    tag = "incoming_payment_details",
    operation_id = "createAsyncIncomingPaymentDetail",
    request_body = SimulationInput,
    responses(
        (
            status = 202,
            description = "The incoming payment detail (status completed), with the transaction that booked it and the \
                           expected payment it reconciled, if any. Sandbox only: a live key gets a 422 naming live_mode.",
            body = IncomingPaymentDetail,
        ),
    ),
)]
pub async fn simulate(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<SimulationInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let committer = state.committer(&write, StatusCode::ACCEPTED.as_u16());
    let json = incoming_payment_detail::simulate(&state.ctx(&scope), &committer, &input).await?;
    Ok(json_response(StatusCode::ACCEPTED, Bytes::from(json)))
}
