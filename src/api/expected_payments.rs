//! `/api/expected_payments`: create (201), retrieve, list, update, delete (200: archived).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value};

use super::{MetadataParams, PageParams};
use super::{created_json, ok_json, param, parsed, unsupported_filters};
use crate::app::{AppState, WriteContext};
use crate::domain::enums::{Direction, PaymentType};
use crate::domain::expected_payment::{self, ExpectedPayment, ExpectedPaymentFilter, ExpectedPaymentInput};
use crate::domain::listing::time_bound;
use crate::domain::schema;
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{JsonBody, PathId, QueryParams};
use crate::http::pagination::Paging;

/// The body of `PATCH /api/expected_payments/{id}` (MT's `expected_payment_update_request`),
/// for the OpenAPI document only: the handler takes the JSON object as sent and merges it into
/// what made the expected payment (`expected_payment::update`), so each field given replaces
/// (`null` clears), metadata merges, and the result is checked as a create request is.
#[derive(utoipa::ToSchema)]
#[schema(as = expected_payment_update_request)]
#[allow(dead_code)]
pub struct ExpectedPaymentPatch {
    external_id: Option<String>,
    #[schema(nullable = false, minimum = 0, maximum = 9_007_199_254_740_991.0)]
    amount_upper_bound: Option<i64>,
    #[schema(nullable = false, minimum = 0, maximum = 9_007_199_254_740_991.0)]
    amount_lower_bound: Option<i64>,
    #[schema(schema_with = schema::direction)]
    direction: Option<String>,
    #[schema(nullable = false, format = "uuid")]
    internal_account_id: Option<String>,
    #[schema(rename = "type", schema_with = schema::payment_type_or_null)]
    payment_type: Option<String>,
    #[schema(schema_with = schema::currency_or_null)]
    currency: Option<String>,
    #[schema(schema_with = schema::date_or_null)]
    date_upper_bound: Option<String>,
    #[schema(schema_with = schema::date_or_null)]
    date_lower_bound: Option<String>,
    description: Option<String>,
    statement_descriptor: Option<String>,
    #[schema(schema_with = schema::metadata_patch)]
    metadata: Option<String>,
    #[schema(format = "uuid")]
    counterparty_id: Option<String>,
    remittance_information: Option<String>,
    #[schema(schema_with = schema::object_or_null)]
    reconciliation_groups: Option<String>,
    #[schema(schema_with = schema::object_or_null)]
    reconciliation_filters: Option<String>,
    #[schema(schema_with = schema::array_or_null)]
    reconciliation_rule_variables: Option<String>,
}

#[utoipa::path(
    post,
    path = "/api/expected_payments",
    tag = "expected_payments",
    operation_id = "createExpectedPayment",
    request_body = ExpectedPaymentInput,
    responses(
        (status = 201, description = "The expected payment (status unreconciled).", body = ExpectedPayment),
    ),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    JsonBody(input): JsonBody<ExpectedPaymentInput>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let committer = state.committer(&write, StatusCode::CREATED.as_u16());
    Ok(created_json(expected_payment::create(&state.ctx(&scope), &committer, &input).await?))
}

#[utoipa::path(
    get,
    path = "/api/expected_payments/{id}",
    tag = "expected_payments",
    operation_id = "retrieveExpectedPayment",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The expected payment.", body = ExpectedPayment)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(expected_payment::get(&state.ctx(&scope), &id).await?))
}

#[utoipa::path(
    get,
    path = "/api/expected_payments",
    tag = "expected_payments",
    operation_id = "listExpectedPayments",
    params(
        PageParams,
        ("status" = Option<String>, Query, description = "archived, partially_reconciled, reconciled or unreconciled."),
        ("internal_account_id" = Option<String>, Query),
        ("external_id" = Option<String>, Query),
        ("direction" = Option<String>, Query, description = "credit or debit."),
        ("type" = Option<String>, Query, description = "A payment type such as ach or wire."),
        ("counterparty_id" = Option<String>, Query),
        ("created_at_lower_bound" = Option<String>, Query, description = "A date (YYYY-MM-DD) or an RFC 3339 date-time."),
        ("created_at_upper_bound" = Option<String>, Query, description = "A date (YYYY-MM-DD) or an RFC 3339 date-time."),
        MetadataParams,
    ),
    responses(
        (status = 200, description = "A page of expected payments, newest first.", body = [ExpectedPayment]),
    ),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    unsupported_filters(&query, &["updated_at_lower_bound", "updated_at_upper_bound"])?;
    let filter = ExpectedPaymentFilter {
        created_from: time_bound("created_at_lower_bound", query.get("created_at_lower_bound"), false)?,
        created_to: time_bound("created_at_upper_bound", query.get("created_at_upper_bound"), true)?,
        status: param(&query, "status"),
        internal_account_id: param(&query, "internal_account_id"),
        external_id: param(&query, "external_id"),
        direction: parsed(&query, "direction", Direction::parse)?,
        payment_type: parsed(&query, "type", PaymentType::parse)?,
        counterparty_id: param(&query, "counterparty_id"),
        metadata: query.metadata(),
    };
    Ok(paging.reply(expected_payment::list(&state.ctx(&scope), &filter, paging.spec).await?))
}

#[utoipa::path(
    patch,
    path = "/api/expected_payments/{id}",
    tag = "expected_payments",
    operation_id = "updateExpectedPayment",
    params(("id" = String, Path, description = "The resource's id.")),
    request_body = ExpectedPaymentPatch,
    responses((status = 200, description = "The updated expected payment (only an unreconciled one changes).", body = ExpectedPayment)),
)]
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
    JsonBody(patch): JsonBody<Map<String, Value>>,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let committer = state.committer(&write, StatusCode::OK.as_u16());
    Ok(ok_json(expected_payment::update(&state.ctx(&scope), &committer, &id, &patch).await?))
}

#[utoipa::path(
    delete,
    path = "/api/expected_payments/{id}",
    tag = "expected_payments",
    operation_id = "deleteExpectedPayment",
    params(("id" = String, Path, description = "The resource's id.")),
    responses(
        (status = 200, description = "The expected payment, archived.", body = ExpectedPayment),
        (status = 422, description = "Only an unreconciled expected payment can be archived (parameter status)."),
    ),
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    write: WriteContext,
    PathId(id): PathId,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let committer = state.committer(&write, StatusCode::OK.as_u16());
    Ok(ok_json(expected_payment::delete(&state.ctx(&scope), &committer, &id).await?))
}
