//! `/api/events`: the change log of every resource (SPEC E4), list and retrieve.

use axum::extract::State;
use axum::response::Response;

use super::PageParams;
use super::{ok_json, param};
use crate::app::AppState;
use crate::domain::event::{self, EventDoc, EventFilter};
use crate::domain::listing::time_bound;
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{PathId, QueryParams};
use crate::http::pagination::Paging;

#[utoipa::path(
    get,
    path = "/api/events/{id}",
    tag = "events",
    operation_id = "retrieveEvent",
    params(("id" = String, Path, description = "The resource's id.")),
    responses((status = 200, description = "The event.", body = EventDoc)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(event::get(&state.ctx(&scope), &id).await?))
}

#[utoipa::path(
    get,
    path = "/api/events",
    tag = "events",
    operation_id = "listEvents",
    params(
        PageParams,
        ("resource" = Option<String>, Query, description = "The kind of resource, such as payment_order."),
        ("event_name" = Option<String>, Query, description = "Such as created or completed."),
        ("entity_id" = Option<String>, Query, description = "The id of the resource that changed."),
        ("event_time_start" = Option<String>, Query, description = "A date (YYYY-MM-DD) or an RFC 3339 date-time."),
        ("event_time_end" = Option<String>, Query, description = "A date (YYYY-MM-DD) or an RFC 3339 date-time."),
    ),
    responses(
        (status = 200, description = "A page of events, newest first.", body = [EventDoc]),
    ),
)]
pub async fn list(State(state): State<AppState>, principal: Principal, paging: Paging, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    let spec = paging.spec;
    let filter = EventFilter {
        resource: param(&query, "resource"),
        event_name: param(&query, "event_name"),
        entity_id: param(&query, "entity_id"),
        event_time_start: time_bound("event_time_start", query.get("event_time_start"), false)?,
        event_time_end: time_bound("event_time_end", query.get("event_time_end"), true)?,
    };
    Ok(paging.reply(event::list(&state.ctx(&scope), &filter, spec).await?))
}
