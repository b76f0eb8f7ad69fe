//! `/api/incoming_payment_details` (retrieve, list, update metadata) and the sandbox's
//! `POST /api/simulations/incoming_payment_details/create_async` (202, the detail).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{ok_json, param, parsed};
use crate::app::{AppState, WriteContext};
use crate::domain::enums::Direction;
use crate::domain::incoming_payment_detail::{self, IncomingPaymentDetailFilter, IncomingPaymentDetailPatch, SimulationInput};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::idempotency::json_response;
use crate::http::pagination::Paging;

pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(incoming_payment_detail::get(&state.ctx(&scope), &id).await?))
}

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
