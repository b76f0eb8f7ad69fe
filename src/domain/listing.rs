//! Building list queries and list bodies, the same way for every resource (SPEC L1, L2).

use super::Ctx;
use super::time::Timestamp;
use super::validate::Metadata;
use crate::error::{Error, Result};
use crate::store::{Filter, ListQuery, Page, StoredObject, Term};

/// A page request in domain terms: how many, and after which position.
#[derive(Debug, Clone, Copy)]
pub struct PageSpec {
    pub per_page: usize,
    pub after_seq: Option<i64>,
}

/// A page ready to send: the JSON array and the position to continue after.
#[derive(Debug)]
pub struct ListedPage {
    pub json: Vec<u8>,
    pub next_seq: Option<i64>,
}

pub fn metadata_terms(metadata: &Metadata) -> impl Iterator<Item = Term> + '_ {
    metadata.iter().map(|(k, v)| Term::new(format!("metadata.{k}"), v.clone()))
}

pub fn metadata_filters(pairs: &[(String, String)]) -> Vec<Filter> {
    pairs.iter().map(|(k, v)| Filter::Eq { name: format!("metadata.{k}"), value: v.clone() }).collect()
}

/// `id[]=...` as a filter, when any were given.
pub fn any_id(ids: &[String]) -> Option<Filter> {
    (!ids.is_empty()).then(|| Filter::IdIn(ids.to_vec()))
}

/// `name[]=...` (or a single `name=...`) as a filter on a term, when any were given.
pub fn any_of(name: &str, values: &[String]) -> Option<Filter> {
    match values {
        [] => None,
        [one] => Some(Filter::Eq { name: name.to_owned(), value: one.clone() }),
        _ => Some(Filter::AnyOf { name: name.to_owned(), values: values.to_vec() }),
    }
}

pub fn eq(name: &str, value: Option<&str>) -> Option<Filter> {
    value.map(|v| Filter::Eq { name: name.to_owned(), value: v.to_owned() })
}

/// A case-insensitive substring filter over a term stored lower-cased.
pub fn contains(name: &str, value: Option<&str>) -> Option<Filter> {
    value.map(|v| Filter::Contains { name: name.to_owned(), needle: v.to_lowercase() })
}

/// A time bound from a query parameter: RFC 3339, a date (`2026-01-31`: its first instant for a
/// lower bound, its last for an upper one), or a date-time without offset (read as UTC).
pub fn time_bound(param: &str, value: Option<&str>, upper: bool) -> Result<Option<Timestamp>> {
    let Some(text) = value.filter(|v| !v.is_empty()) else { return Ok(None) };
    let parsed = Timestamp::parse_rfc3339_or_utc(text).or_else(|| {
        let day_start = Timestamp::parse_rfc3339(&format!("{text}T00:00:00Z"))?;
        Some(if upper { day_start.plus_secs(86_400).plus_micros(-1) } else { day_start })
    });
    parsed.map(Some).ok_or_else(|| Error::invalid(param, format!("{param} must be a date (YYYY-MM-DD) or an RFC 3339 date-time")))
}

/// Runs a list query for `kind` in the caller's scope.
pub async fn fetch(ctx: &Ctx<'_>, kind: &'static str, filters: Vec<Filter>, page: PageSpec) -> Result<Page> {
    let query = ListQuery { kind, scope: ctx.scope.clone(), filters, after_seq: page.after_seq, limit: page.per_page };
    ctx.store.list(&query).await
}

/// Every object of `kind` in the caller's scope whose term `name` is one of `keys`, newest first
/// (every page, `page_size` at a time): a worker's lookups of many keys in one query.
pub async fn with_keys(ctx: &Ctx<'_>, kind: &'static str, name: &str, keys: &[String], page_size: usize) -> Result<Vec<StoredObject>> {
    let (mut out, mut after_seq) = (Vec::new(), None);
    loop {
        let filters = vec![Filter::Keys { name: name.to_owned(), values: keys.to_vec() }];
        let page = ctx.store.list(&ListQuery { kind, scope: ctx.scope.clone(), filters, after_seq, limit: page_size }).await?;
        out.extend(page.items);
        match page.next_seq {
            Some(seq) => after_seq = Some(seq),
            None => return Ok(out),
        }
    }
}

/// Joins stored documents into a JSON array without re-serialising them.
pub fn json_array<'a>(docs: impl Iterator<Item = &'a str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(1024);
    out.push(b'[');
    for (i, doc) in docs.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(doc.as_bytes());
    }
    out.push(b']');
    out
}

pub fn docs(items: &[StoredObject]) -> impl Iterator<Item = &str> {
    items.iter().map(|item| item.doc.as_str())
}

/// One resource of `kind` in the caller's scope, as stored: its document is the API's JSON.
/// `what` names it in the 404.
pub async fn stored_doc(ctx: &Ctx<'_>, kind: &'static str, id: &str, what: &str) -> Result<String> {
    let found = ctx.store.get(kind, ctx.scope, id).await?;
    found.map(|o| o.doc).ok_or_else(|| Error::not_found(what))
}

/// The object of `kind` in the caller's scope with id `id`, or else the one whose `external_id`
/// it is, among those `keep` accepts (MT's GET by id or external_id). An external id that
/// several kept objects share (in two ledgers, say) names none of them: 422 asking for the id.
pub async fn by_id_or_external_id(
    ctx: &Ctx<'_>,
    kind: &'static str,
    id: &str,
    what: &str,
    keep: impl Fn(&StoredObject) -> Result<bool>,
) -> Result<StoredObject> {
    if let Some(found) = ctx.store.get(kind, ctx.scope, id).await? {
        return Ok(found);
    }
    let mut kept = Vec::new();
    for object in with_keys(ctx, kind, "external_id", &[id.to_owned()], 100).await? {
        if keep(&object)? {
            kept.push(object);
        }
    }
    match kept.len() {
        0 => Err(Error::not_found(what)),
        1 => Ok(kept.remove(0)),
        n => Err(Error::invalid("id", format!("{n} of your {what}s have this external_id (one per ledger); ask for it by its id"))),
    }
}

/// A page of resources whose stored documents are returned as they are.
pub async fn stored_page(ctx: &Ctx<'_>, kind: &'static str, filters: Vec<Filter>, page: PageSpec) -> Result<ListedPage> {
    let found = fetch(ctx, kind, filters, page).await?;
    Ok(ListedPage { json: json_array(docs(&found.items)), next_seq: found.next_seq })
}
