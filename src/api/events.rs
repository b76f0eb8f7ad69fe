//! `/api/events`: the change log of every resource (SPEC E4), list and retrieve.

use axum::extract::State;
use axum::response::Response;

use super::{listed, ok_json, page_spec, param};
use crate::domain::event::{self, EventFilter};
use crate::domain::listing::time_bound;
use crate::error::Error;
use crate::http::AppState;
use crate::http::auth::Principal;
use crate::http::extract::{PathId, QueryParams};

pub async fn retrieve(State(state): State<AppState>, principal: Principal, PathId(id): PathId) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(event::get(&state.ctx(&scope), &id).await?))
}

pub async fn list(State(state): State<AppState>, principal: Principal, query: QueryParams) -> Result<Response, Error> {
    let scope = principal.scope();
    let spec = page_spec(&query)?;
    let filter = EventFilter {
        resource: param(&query, "resource"),
        event_name: param(&query, "event_name"),
        entity_id: param(&query, "entity_id"),
        event_time_start: time_bound("event_time_start", query.get("event_time_start"), false)?,
        event_time_end: time_bound("event_time_end", query.get("event_time_end"), true)?,
    };
    Ok(listed(event::list(&state.ctx(&scope), &filter, spec).await?, spec))
}
