//! Ledgers: named books that hold ledger accounts (create, get, list, update, delete).

use serde::{Deserialize, Serialize};

use super::super::api_key::Scope;
use super::super::common::new_id;
use super::super::listing::{self, ListedPage, PageSpec};
use super::super::time::Timestamp;
use super::super::validate::{self, Metadata, MetadataPatch, TEXT_LEN_MAX};
use super::super::{Commit, Ctx, event, retry_on_conflict};
use crate::error::{Error, Result};
use crate::store::{Filter, ObjectRecord, StoredObject, Write, WriteBatch};

pub const KIND: &str = super::super::kinds::LEDGER;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ledger {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub discarded_at: Option<Timestamp>,
    pub name: String,
    pub description: Option<String>,
    pub metadata: Metadata,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LedgerInput {
    pub name: Option<String>,
    pub description: Option<String>,
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct LedgerPatch {
    pub name: Option<String>,
    #[serde(default, deserialize_with = "super::super::common::nullable")]
    pub description: Option<Option<String>>,
    pub metadata: Option<MetadataPatch>,
}

impl Ledger {
    fn record(&self, scope: &Scope, doc: String) -> ObjectRecord {
        ObjectRecord {
            id: self.id.clone(),
            kind: KIND,
            scope: scope.clone(),
            parent_id: None,
            created_at: self.created_at,
            doc,
            terms: listing::metadata_terms(&self.metadata).collect(),
        }
    }
}

fn to_json(ledger: &Ledger) -> Result<String> {
    serde_json::to_string(ledger).map_err(|e| Error::internal(format!("ledger: {e}")))
}

fn parse(stored: &StoredObject) -> Result<Ledger> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored ledger {}: {e}", stored.id)))
}

pub async fn create(ctx: &Ctx<'_>, commit: &dyn Commit, input: &LedgerInput) -> Result<String> {
    let ledger = Ledger {
        id: new_id(),
        object: KIND.into(),
        live_mode: ctx.scope.live_mode,
        created_at: ctx.now,
        updated_at: ctx.now,
        discarded_at: None,
        name: validate::text("name", input.name.as_deref().ok_or_else(|| Error::missing("name"))?, TEXT_LEN_MAX)?,
        description: validate::opt_text("description", input.description.as_deref(), TEXT_LEN_MAX)?,
        metadata: validate::metadata("metadata", input.metadata.as_ref())?,
    };
    let json = to_json(&ledger)?;
    let mut batch = WriteBatch::new();
    batch.push(Write::Insert(ledger.record(ctx.scope, json.clone())));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &ledger.id, &json, ctx.now)?));
    commit.commit(batch, &json).await?;
    Ok(json)
}

pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    listing::stored_doc(ctx, KIND, id, "ledger").await
}

pub async fn list(ctx: &Ctx<'_>, metadata: &[(String, String)], ids: &[String], page: PageSpec) -> Result<ListedPage> {
    let mut filters: Vec<Filter> = listing::metadata_filters(metadata);
    filters.extend(listing::any_id(ids));
    listing::stored_page(ctx, KIND, filters, page).await
}

pub async fn update(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &LedgerPatch) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger"))?;
        let mut ledger = parse(&stored)?;
        if let Some(name) = &patch.name {
            ledger.name = validate::text("name", name, TEXT_LEN_MAX)?;
        }
        if let Some(description) = &patch.description {
            ledger.description = validate::opt_text("description", description.as_deref(), TEXT_LEN_MAX)?;
        }
        if let Some(metadata) = &patch.metadata {
            ledger.metadata = validate::merge_metadata("metadata", &ledger.metadata, metadata)?;
        }
        ledger.updated_at = ctx.now;
        let json = to_json(&ledger)?;
        let mut batch = WriteBatch::new();
        batch.push(Write::Replace { record: ledger.record(ctx.scope, json.clone()), expected_version: stored.version });
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

/// Deletes a ledger that holds no account (MT answers 200 with the ledger, `discarded_at` set).
pub async fn delete(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str) -> Result<String> {
    let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger"))?;
    let accounts = listing::fetch(
        ctx,
        super::accounts::KIND,
        vec![Filter::Eq { name: "ledger_id".into(), value: id.to_owned() }],
        PageSpec { per_page: 1, after_seq: None },
    )
    .await?;
    if !accounts.items.is_empty() {
        return Err(Error::invalid("id", "the ledger still holds ledger accounts; delete them first"));
    }
    let mut ledger = parse(&stored)?;
    ledger.discarded_at = Some(ctx.now);
    ledger.updated_at = ctx.now;
    let json = to_json(&ledger)?;
    let mut batch = WriteBatch::new();
    batch.push(Write::Delete { kind: KIND, scope: ctx.scope.clone(), id: id.to_owned() });
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "deleted", id, &json, ctx.now)?));
    commit.commit(batch, &json).await?;
    Ok(json)
}
