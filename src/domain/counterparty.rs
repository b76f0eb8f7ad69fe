//! Counterparties: the people and businesses an organization pays or is paid by. Their bank
//! accounts are external accounts, embedded in the counterparty (SPEC E1) and stored as
//! separate objects whose parent is the counterparty, so either side can change alone.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::common::{Stamp, new_id, nullable};
use super::external_account::{self, ExternalAccountInput};
use super::listing::{self, ListedPage, PageSpec};
use super::time::Timestamp;
use super::validate::{self, Metadata, MetadataPatch, TEXT_LEN_MAX};
use super::{Commit, Ctx, event, retry_on_conflict, schema};
use crate::error::{Error, Result};
use crate::store::{Filter, ObjectRecord, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = super::kinds::COUNTERPARTY;
/// Accounts a counterparty may be created with in one request.
pub const INLINE_ACCOUNTS_MAX: usize = 20;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = counterparty)]
pub struct Counterparty {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub name: Option<String>,
    pub email: Option<String>,
    /// Filled from the counterparty's external accounts when read; stored empty.
    #[schema(schema_with = external_account::embedded_list_schema)]
    pub accounts: Vec<serde_json::Value>,
    #[schema(schema_with = schema::metadata)]
    pub metadata: Metadata,
    pub external_id: Option<String>,
    pub legal_entity_id: Option<String>,
    pub send_remittance_advice: bool,
    pub verification_status: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub discarded_at: Option<Timestamp>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[schema(as = counterparty_create_request)]
pub struct CounterpartyInput {
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = String, required = true)]
    pub name: Option<Option<String>>,
    pub email: Option<String>,
    pub external_id: Option<String>,
    #[schema(schema_with = schema::metadata_or_null)]
    pub metadata: Option<Metadata>,
    pub send_remittance_advice: Option<bool>,
    #[serde(default)]
    pub accounts: Vec<ExternalAccountInput>,
    /// MT's deprecated field, kept as given: `unverified` (the default), `needs_approval`,
    /// `verified` or `denied`.
    pub verification_status: Option<String>,
    /// Not supported (422); not in the published schema.
    #[schema(ignore)]
    pub legal_entity: Option<serde_json::Value>,
    #[schema(ignore)]
    pub legal_entity_id: Option<String>,
}

/// The values of MT's (deprecated) `verification_status`.
const VERIFICATION_STATUSES: &[&str] = &["denied", "needs_approval", "unverified", "verified"];

#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[schema(as = counterparty_update_request)]
pub struct CounterpartyPatch {
    pub name: Option<String>,
    pub email: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub external_id: Option<Option<String>>,
    #[schema(schema_with = schema::metadata_patch_or_null)]
    pub metadata: Option<MetadataPatch>,
    pub send_remittance_advice: Option<bool>,
    #[schema(ignore)]
    pub legal_entity_id: Option<String>,
}

fn no_legal_entities(present: bool, param: &str) -> Result<()> {
    if present { Err(Error::invalid(param, "legal entities are not supported by Payrail")) } else { Ok(()) }
}

impl CounterpartyInput {
    fn build(&self, stamp: Stamp) -> Result<Counterparty> {
        no_legal_entities(self.legal_entity.is_some(), "legal_entity")?;
        no_legal_entities(self.legal_entity_id.is_some(), "legal_entity_id")?;
        let verification_status = match &self.verification_status {
            Some(status) => validate::one_of("verification_status", status, VERIFICATION_STATUSES)?,
            None => "unverified".into(),
        };
        let name = match &self.name {
            Some(Some(name)) => validate::text("name", name, TEXT_LEN_MAX)?,
            _ => return Err(Error::missing("name")),
        };
        if self.accounts.len() > INLINE_ACCOUNTS_MAX {
            return Err(Error::invalid("accounts", format!("at most {INLINE_ACCOUNTS_MAX} accounts can be created with a counterparty")));
        }
        Ok(Counterparty {
            id: new_id(),
            object: KIND.into(),
            live_mode: stamp.live_mode,
            name: Some(name),
            email: self.email.as_deref().map(|e| validate::email("email", e)).transpose()?,
            accounts: Vec::new(),
            metadata: validate::metadata("metadata", self.metadata.as_ref())?,
            external_id: validate::opt_text("external_id", self.external_id.as_deref(), TEXT_LEN_MAX)?,
            legal_entity_id: None,
            send_remittance_advice: self.send_remittance_advice.unwrap_or(false),
            verification_status,
            created_at: stamp.now,
            updated_at: stamp.now,
            discarded_at: None,
        })
    }
}

impl Counterparty {
    fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = listing::metadata_terms(&self.metadata).collect();
        terms.extend(self.name.as_ref().map(|n| Term::new("name", n.to_lowercase())));
        terms.extend(self.email.as_ref().map(|e| Term::new("email", e.to_lowercase())));
        terms.extend(self.external_id.as_ref().map(|id| Term::new("external_id", id)));
        terms
    }

    /// The stored form: the counterparty without its accounts (they are objects of their own).
    fn record(&self, scope: &super::api_key::Scope) -> Result<ObjectRecord> {
        Ok(self.record_as(scope, self.stored_json()?))
    }

    /// The stored document: the counterparty without its accounts (they are stored apart).
    fn stored_json(&self) -> Result<String> {
        if self.accounts.is_empty() {
            return to_json(self);
        }
        let mut bare = self.clone();
        bare.accounts.clear();
        to_json(&bare)
    }

    fn record_as(&self, scope: &super::api_key::Scope, doc: String) -> ObjectRecord {
        ObjectRecord {
            id: self.id.clone(),
            kind: KIND,
            scope: scope.clone(),
            parent_id: None,
            created_at: self.created_at,
            doc,
            terms: self.terms(),
        }
    }

    fn apply(&mut self, patch: &CounterpartyPatch, now: Timestamp) -> Result<()> {
        no_legal_entities(patch.legal_entity_id.is_some(), "legal_entity_id")?;
        if let Some(name) = &patch.name {
            self.name = Some(validate::text("name", name, TEXT_LEN_MAX)?);
        }
        if let Some(email) = &patch.email {
            self.email = Some(validate::email("email", email)?);
        }
        if let Some(external_id) = &patch.external_id {
            self.external_id = validate::opt_text("external_id", external_id.as_deref(), TEXT_LEN_MAX)?;
        }
        if let Some(metadata) = &patch.metadata {
            self.metadata = validate::merge_metadata("metadata", &self.metadata, metadata)?;
        }
        if let Some(send) = patch.send_remittance_advice {
            self.send_remittance_advice = send;
        }
        self.updated_at = now;
        Ok(())
    }
}

fn to_json(counterparty: &Counterparty) -> Result<String> {
    serde_json::to_string(counterparty).map_err(|e| Error::internal(format!("counterparty: {e}")))
}

fn parse(stored: &StoredObject) -> Result<Counterparty> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored counterparty {}: {e}", stored.id)))
}

/// Reads counterparty `id` for a request that refers to it, and makes the batch fail if it is
/// gone by commit time. An unknown id is a 422 naming `param` (SPEC E2).
pub async fn require(ctx: &Ctx<'_>, batch: &mut WriteBatch, id: &str, param: &str) -> Result<Counterparty> {
    parse(&super::require(ctx, batch, KIND, id, param).await?)
}

/// Renders counterparties with their accounts, fetched in one query.
async fn render(ctx: &Ctx<'_>, stored: &[StoredObject]) -> Result<Vec<Counterparty>> {
    let ids: Vec<String> = stored.iter().map(|s| s.id.clone()).collect();
    let children = ctx.store.children(external_account::KIND, ctx.scope, &ids).await?;
    stored
        .iter()
        .map(|s| {
            let mut counterparty = parse(s)?;
            counterparty.accounts = children
                .iter()
                .filter(|c| c.parent_id.as_deref() == Some(&s.id))
                .map(|c| external_account::embedded(&c.doc))
                .collect::<Result<_>>()?;
            Ok(counterparty)
        })
        .collect()
}

pub async fn create(ctx: &Ctx<'_>, commit: &dyn Commit, input: &CounterpartyInput) -> Result<String> {
    let stamp = Stamp { live_mode: ctx.scope.live_mode, now: ctx.now };
    let mut counterparty = input.build(stamp)?;
    let mut batch = WriteBatch::new();
    // Without accounts the stored document is the reply itself: serialized once, not twice.
    let doc = counterparty.stored_json()?;
    batch.push(Write::Insert(counterparty.record_as(ctx.scope, doc.clone())));
    for (i, account_input) in input.accounts.iter().enumerate() {
        // An account made inside a counterparty belongs to it: any other id there names
        // nothing the caller can see yet, and is refused rather than dropped (SPEC E2).
        if account_input.counterparty_id.as_ref().is_some_and(Option::is_some) {
            let param = format!("accounts[{i}].counterparty_id");
            return Err(Error::invalid(
                param.clone(),
                format!("{param} must be left out: the account belongs to the counterparty it is created in"),
            ));
        }
        let account = account_input.build(&format!("accounts[{i}]"), Some(counterparty.id.clone()), counterparty.name.as_deref(), stamp)?;
        let json = external_account::stage_create(&mut batch, ctx, &account)?;
        counterparty.accounts.push(external_account::embedded(&json)?);
    }
    let json = if counterparty.accounts.is_empty() { doc } else { to_json(&counterparty)? };
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &counterparty.id, &json, ctx.now)?));
    commit.commit(batch, &json).await?;
    Ok(json)
}

pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("counterparty"))?;
    let rendered = render(ctx, std::slice::from_ref(&stored)).await?;
    to_json(&rendered[0])
}

#[derive(Debug, Default)]
pub struct CounterpartyFilter {
    pub name: Option<String>,
    pub email: Option<String>,
    pub external_id: Option<String>,
    pub metadata: Vec<(String, String)>,
    pub created_from: Option<Timestamp>,
    pub created_to: Option<Timestamp>,
}

pub async fn list(ctx: &Ctx<'_>, filter: &CounterpartyFilter, page: PageSpec) -> Result<ListedPage> {
    let mut filters: Vec<Filter> = [
        listing::contains("name", filter.name.as_deref()),
        listing::contains("email", filter.email.as_deref()),
        listing::eq("external_id", filter.external_id.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    filters.extend(listing::metadata_filters(&filter.metadata));
    filters.extend(filter.created_from.map(Filter::CreatedFrom));
    filters.extend(filter.created_to.map(Filter::CreatedTo));
    let found = listing::fetch(ctx, KIND, filters, page).await?;
    let rendered = render(ctx, &found.items).await?;
    let json = serde_json::to_vec(&rendered).map_err(|e| Error::internal(format!("counterparties: {e}")))?;
    Ok(ListedPage { json, next_seq: found.next_seq })
}

pub async fn update(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &CounterpartyPatch) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("counterparty"))?;
        let mut counterparty = render(ctx, std::slice::from_ref(&stored)).await?.remove(0);
        let before = counterparty.clone();
        counterparty.apply(patch, ctx.now)?;
        if super::unchanged(&before, &counterparty, |c| &mut c.updated_at) {
            return to_json(&before);
        }
        let json = to_json(&counterparty)?;
        let mut batch = WriteBatch::new();
        batch.push(Write::Replace { record: counterparty.record(ctx.scope)?, expected_version: stored.version });
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

/// Deletes the counterparty and its accounts, with a `deleted` event for each of them.
pub async fn delete(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, uses: &dyn external_account::AccountUses) -> Result<()> {
    let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("counterparty"))?;
    let last = render(ctx, std::slice::from_ref(&stored)).await?.remove(0);
    let mut batch = WriteBatch::new();
    for account in ctx.store.children(external_account::KIND, ctx.scope, std::slice::from_ref(&stored.id)).await? {
        uses.allow(ctx, &external_account::parse(&account)?, None).await?;
        // Each account must still be there at commit, so its event is never a ghost's.
        batch.push(Write::Delete { kind: external_account::KIND, scope: ctx.scope.clone(), id: account.id.clone() });
        batch.push(Write::Insert(event::record(ctx.scope, external_account::KIND, "deleted", &account.id, &account.doc, ctx.now)?));
    }
    batch.push(Write::DeleteChildren { kind: external_account::KIND, scope: ctx.scope.clone(), parent_id: id.to_owned() });
    batch.push(Write::Delete { kind: KIND, scope: ctx.scope.clone(), id: id.to_owned() });
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "deleted", id, &to_json(&last)?, ctx.now)?));
    commit.commit(batch, "").await
}
