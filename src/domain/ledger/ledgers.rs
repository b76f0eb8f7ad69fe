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

/// MT's `ledger`, as stored and served.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger)]
pub struct Ledger {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub discarded_at: Option<Timestamp>,
    pub name: String,
    pub description: Option<String>,
    #[schema(schema_with = super::super::schema::metadata)]
    pub metadata: Metadata,
}

/// MT's `ledger_create_request`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_create_request)]
pub struct LedgerInput {
    #[schema(value_type = String, required = true)]
    pub name: Option<String>,
    pub description: Option<String>,
    #[schema(schema_with = super::super::schema::metadata_or_null)]
    pub metadata: Option<Metadata>,
}

/// MT's `ledger_update_request`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_update_request)]
pub struct LedgerPatch {
    pub name: Option<String>,
    #[serde(default, deserialize_with = "super::super::common::nullable")]
    pub description: Option<Option<String>>,
    #[schema(schema_with = super::super::schema::metadata_patch_or_null)]
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
        let before = ledger.clone();
        if let Some(name) = &patch.name {
            ledger.name = validate::text("name", name, TEXT_LEN_MAX)?;
        }
        if let Some(description) = &patch.description {
            ledger.description = validate::opt_text("description", description.as_deref(), TEXT_LEN_MAX)?;
        }
        if let Some(metadata) = &patch.metadata {
            ledger.metadata = validate::merge_metadata("metadata", &ledger.metadata, metadata)?;
        }
        if crate::domain::unchanged(&before, &ledger, |l| &mut l.updated_at) {
            return Ok(stored.doc); // nothing changes: no event (SPEC E4)
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
        super::super::kinds::LEDGER_ACCOUNT,
        vec![Filter::Eq { name: "ledger_id".into(), value: id.to_owned() }],
        PageSpec { per_page: 1, after_seq: None },
    )
    .await?;
    if !accounts.items.is_empty() {
        return Err(Error::invalid("id", "the ledger still holds ledger accounts; delete them first"));
    }
    let categories = listing::fetch(
        ctx,
        super::super::kinds::LEDGER_ACCOUNT_CATEGORY,
        vec![Filter::Eq { name: "ledger_id".into(), value: id.to_owned() }],
        PageSpec { per_page: 1, after_seq: None },
    )
    .await?;
    if !categories.items.is_empty() {
        return Err(Error::invalid("id", "the ledger still holds ledger account categories; delete them first"));
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

/// Makes the batch fail with a conflict (which `retry_on_conflict` runs again) if another batch
/// guarded by the same ledger commits first: the ledger's document is written back unchanged
/// under its version. Changes to the ledger's graph of nested categories take this guard, so a
/// cycle check and the write it permits are never judged against a graph a racing nesting has
/// changed since (two nestings that would close a cycle together cannot both commit). The
/// ledger as served does not change, so no event is written for it.
pub async fn guard(ctx: &Ctx<'_>, batch: &mut WriteBatch, id: &str) -> Result<()> {
    let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger"))?;
    let ledger = parse(&stored)?;
    batch.push(Write::Replace { record: ledger.record(ctx.scope, stored.doc), expected_version: stored.version });
    Ok(())
}
