//! Events (SPEC E4): every change of a resource writes one, in the same transaction, carrying
//! the resource exactly as the API returned it.

use serde::Serialize;
use serde_json::value::RawValue;

use super::api_key::Scope;
use super::common::new_id;
use super::time::Timestamp;
use crate::error::{Error, Result};
use crate::store::{ObjectRecord, Term};

pub const KIND: &str = super::kinds::EVENT;

/// An event as stored and served (`GET /api/events`).
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = event)]
pub struct EventDoc<'a> {
    id: &'a str,
    object: &'static str,
    live_mode: bool,
    resource: &'a str,
    event_name: &'a str,
    event_time: Timestamp,
    entity_id: &'a str,
    /// The resource as the API returned it after the change.
    #[schema(value_type = Object)]
    data: &'a RawValue,
    created_at: Timestamp,
    updated_at: Timestamp,
}

/// The event record for a change to `entity_id` (a `resource` such as `counterparty`).
pub fn record(scope: &Scope, resource: &str, event_name: &str, entity_id: &str, data_json: &str, now: Timestamp) -> Result<ObjectRecord> {
    let id = new_id();
    let data: &RawValue = serde_json::from_str(data_json).map_err(|e| Error::internal(format!("event data: {e}")))?;
    let doc = EventDoc {
        id: &id,
        object: "event",
        live_mode: scope.live_mode,
        resource,
        event_name,
        event_time: now,
        entity_id,
        data,
        created_at: now,
        updated_at: now,
    };
    let doc = serde_json::to_string(&doc).map_err(|e| Error::internal(format!("event: {e}")))?;
    Ok(ObjectRecord {
        id,
        kind: KIND,
        scope: scope.clone(),
        parent_id: None,
        created_at: now,
        doc,
        terms: vec![Term::new("resource", resource), Term::new("event_name", event_name), Term::new("entity_id", entity_id)],
    })
}

/// Filters of `GET /api/events`.
#[derive(Debug, Default)]
pub struct EventFilter {
    pub resource: Option<String>,
    pub event_name: Option<String>,
    pub entity_id: Option<String>,
    pub event_time_start: Option<Timestamp>,
    pub event_time_end: Option<Timestamp>,
}

pub async fn list(ctx: &super::Ctx<'_>, filter: &EventFilter, page: super::listing::PageSpec) -> Result<super::listing::ListedPage> {
    use super::listing::eq;
    use crate::store::Filter;
    let mut filters: Vec<Filter> = [
        eq("resource", filter.resource.as_deref()),
        eq("event_name", filter.event_name.as_deref()),
        eq("entity_id", filter.entity_id.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    filters.extend(filter.event_time_start.map(Filter::CreatedFrom));
    filters.extend(filter.event_time_end.map(Filter::CreatedTo));
    super::listing::stored_page(ctx, KIND, filters, page).await
}

pub async fn get(ctx: &super::Ctx<'_>, id: &str) -> Result<String> {
    super::listing::stored_doc(ctx, KIND, id, "event").await
}
