//! External accounts: a counterparty's bank accounts, the receiving side of payments.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::common::{
    AccountDetail, AccountDetailInput, Address, AddressInput, ContactDetail, ContactDetailInput, PARTY_TYPES, RoutingDetail,
    RoutingDetailInput, Stamp, build_all, new_id, nullable,
};
use super::listing::{self, ListedPage, PageSpec};
use super::time::Timestamp;
use super::validate::{self, Metadata, MetadataPatch, TEXT_LEN_MAX};
use super::{Commit, Ctx, enums, event, kinds, retry_on_conflict, schema};
use crate::error::{Error, Result};
use crate::store::{Filter, ObjectRecord, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = super::kinds::EXTERNAL_ACCOUNT;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = external_account)]
pub struct ExternalAccount {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    #[schema(schema_with = schema::account_type)]
    pub account_type: String,
    pub party_name: String,
    #[schema(schema_with = schema::party_type_or_null)]
    pub party_type: Option<String>,
    pub party_address: Option<Address>,
    pub name: Option<String>,
    pub counterparty_id: Option<String>,
    pub account_details: Vec<AccountDetail>,
    pub routing_details: Vec<RoutingDetail>,
    pub contact_details: Vec<ContactDetail>,
    #[schema(schema_with = schema::metadata)]
    pub metadata: Metadata,
    pub external_id: Option<String>,
    pub ledger_account_id: Option<String>,
    pub card_id: Option<String>,
    pub verification_status: String,
    pub verification_source: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub discarded_at: Option<Timestamp>,
}

/// The fields of an external account as a client creates it (alone or inside a counterparty).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[schema(as = external_account_create_request)]
pub struct ExternalAccountInput {
    #[serde(default, deserialize_with = "nullable")]
    #[schema(format = "uuid")]
    pub counterparty_id: Option<Option<String>>,
    #[schema(schema_with = schema::account_type_or_null)]
    pub account_type: Option<String>,
    pub party_name: Option<String>,
    #[schema(schema_with = schema::party_type_or_null)]
    pub party_type: Option<String>,
    pub party_address: Option<AddressInput>,
    pub name: Option<String>,
    #[serde(default)]
    pub account_details: Vec<AccountDetailInput>,
    #[serde(default)]
    pub routing_details: Vec<RoutingDetailInput>,
    #[serde(default)]
    pub contact_details: Vec<ContactDetailInput>,
    #[schema(schema_with = schema::metadata_or_null)]
    pub metadata: Option<Metadata>,
    pub external_id: Option<String>,
    /// Not supported (422); not in the published schema.
    #[schema(ignore)]
    pub ledger_account: Option<serde_json::Value>,
    #[schema(ignore)]
    pub plaid_processor_token: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[schema(as = external_account_update_request)]
pub struct ExternalAccountPatch {
    #[schema(schema_with = schema::account_type_or_null)]
    pub account_type: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(format = "uuid")]
    pub counterparty_id: Option<Option<String>>,
    #[schema(schema_with = schema::metadata_patch_or_null)]
    pub metadata: Option<MetadataPatch>,
    #[serde(default, deserialize_with = "nullable")]
    pub name: Option<Option<String>>,
    pub party_address: Option<AddressInput>,
    pub party_name: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(schema_with = schema::party_type_or_null)]
    pub party_type: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    pub external_id: Option<Option<String>>,
}

impl ExternalAccountInput {
    /// Builds the account; `param` prefixes field names in errors (`accounts[0]` when inline).
    pub fn build(
        &self,
        param: &str,
        counterparty_id: Option<String>,
        default_party_name: Option<&str>,
        stamp: Stamp,
    ) -> Result<ExternalAccount> {
        let p = |field: &str| if param.is_empty() { field.to_owned() } else { format!("{param}.{field}") };
        if self.ledger_account.is_some() {
            return Err(Error::invalid(
                p("ledger_account"),
                "Payrail does not make a ledger account with an external account yet; create it under /api/ledger_accounts",
            ));
        }
        if self.plaid_processor_token.is_some() {
            return Err(Error::invalid(p("plaid_processor_token"), "Plaid is not supported by Payrail"));
        }
        let name = validate::opt_text(&p("name"), self.name.as_deref(), TEXT_LEN_MAX)?;
        let party_name = match self.party_name.as_deref() {
            Some(given) => validate::text(&p("party_name"), given, TEXT_LEN_MAX)?,
            None => default_party_name.or(name.as_deref()).unwrap_or_default().to_owned(),
        };
        Ok(ExternalAccount {
            id: new_id(),
            object: KIND.into(),
            live_mode: stamp.live_mode,
            account_type: match &self.account_type {
                Some(t) => validate::one_of(&p("account_type"), t, enums::ACCOUNT_TYPES)?,
                None => "other".into(),
            },
            party_name,
            party_type: self.party_type.as_deref().map(|t| validate::one_of(&p("party_type"), t, PARTY_TYPES)).transpose()?,
            party_address: self.party_address.as_ref().map(|a| a.build(&p("party_address"), stamp)).transpose()?,
            name,
            counterparty_id,
            account_details: build_all(&p("account_details"), &self.account_details, |d, at| d.build(at, stamp))?,
            routing_details: build_all(&p("routing_details"), &self.routing_details, |d, at| d.build(at, stamp))?,
            contact_details: build_all(&p("contact_details"), &self.contact_details, |d, at| d.build(at, stamp))?,
            metadata: validate::metadata(&p("metadata"), self.metadata.as_ref())?,
            external_id: validate::opt_text(&p("external_id"), self.external_id.as_deref(), TEXT_LEN_MAX)?,
            ledger_account_id: None,
            card_id: None,
            verification_status: "unverified".into(),
            verification_source: None,
            created_at: stamp.now,
            updated_at: stamp.now,
            discarded_at: None,
        })
    }
}

impl ExternalAccount {
    pub fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = listing::metadata_terms(&self.metadata).collect();
        terms.push(Term::new("party_name", self.party_name.to_lowercase()));
        terms.extend(self.counterparty_id.as_ref().map(|id| Term::new("counterparty_id", id)));
        terms.extend(self.external_id.as_ref().map(|id| Term::new("external_id", id)));
        terms
    }

    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| Error::internal(format!("external account: {e}")))
    }

    pub fn record(&self, scope: &super::api_key::Scope, json: String) -> ObjectRecord {
        ObjectRecord {
            id: self.id.clone(),
            kind: KIND,
            scope: scope.clone(),
            parent_id: self.counterparty_id.clone(),
            created_at: self.created_at,
            doc: json,
            terms: self.terms(),
        }
    }

    fn apply(&mut self, patch: &ExternalAccountPatch, stamp: Stamp) -> Result<()> {
        if let Some(t) = &patch.account_type {
            self.account_type = validate::one_of("account_type", t, enums::ACCOUNT_TYPES)?;
        }
        if let Some(cp) = &patch.counterparty_id {
            self.counterparty_id = cp.as_deref().map(|id| validate::id("counterparty_id", id)).transpose()?;
        }
        if let Some(metadata) = &patch.metadata {
            self.metadata = validate::merge_metadata("metadata", &self.metadata, metadata)?;
        }
        if let Some(name) = &patch.name {
            self.name = validate::opt_text("name", name.as_deref(), TEXT_LEN_MAX)?;
        }
        if let Some(address) = &patch.party_address {
            self.party_address = Some(address.build("party_address", stamp)?);
        }
        if let Some(party_name) = &patch.party_name {
            self.party_name = validate::text("party_name", party_name, TEXT_LEN_MAX)?;
        }
        if let Some(party_type) = &patch.party_type {
            self.party_type = party_type.as_deref().map(|t| validate::one_of("party_type", t, PARTY_TYPES)).transpose()?;
        }
        if let Some(external_id) = &patch.external_id {
            self.external_id = validate::opt_text("external_id", external_id.as_deref(), TEXT_LEN_MAX)?;
        }
        self.updated_at = stamp.now;
        Ok(())
    }
}

pub fn parse(stored: &StoredObject) -> Result<ExternalAccount> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored external account {}: {e}", stored.id)))
}

/// External accounts of one counterparty that [`of_counterparty`] reads at most.
pub const OF_COUNTERPARTY_MAX: usize = 100;

/// The external accounts of counterparty `id` (its newest [`OF_COUNTERPARTY_MAX`]), oldest first.
pub async fn of_counterparty(store: &dyn crate::store::Store, scope: &super::api_key::Scope, id: &str) -> Result<Vec<ExternalAccount>> {
    let filters = vec![Filter::Eq { name: "counterparty_id".into(), value: id.into() }];
    let query = crate::store::ListQuery { kind: KIND, scope: scope.clone(), filters, after_seq: None, limit: OF_COUNTERPARTY_MAX };
    store.list(&query).await?.items.iter().rev().map(parse).collect()
}

/// The account as embedded in its counterparty: the same object without `counterparty_id`.
/// The schema of `Counterparty.accounts`: external accounts as [`embedded`] renders them, that
/// is without `counterparty_id`.
pub fn embedded_list_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::{RefOr, schema::Schema};
    let mut item = match <ExternalAccount as utoipa::PartialSchema>::schema() {
        RefOr::T(Schema::Object(object)) => object,
        _ => unreachable!("an external account's schema is an object"),
    };
    item.properties.retain(|name, _| name != "counterparty_id");
    item.required.retain(|name| name != "counterparty_id");
    utoipa::openapi::schema::ArrayBuilder::new().items(item).build()
}

pub fn embedded(doc: &str) -> Result<serde_json::Value> {
    let mut value: serde_json::Value = serde_json::from_str(doc).map_err(|e| Error::internal(format!("stored external account: {e}")))?;
    if let Some(map) = value.as_object_mut() {
        map.shift_remove("counterparty_id");
    }
    Ok(value)
}

/// Adds the writes that create `account` (and its event) to `batch`; returns its JSON.
pub fn stage_create(batch: &mut WriteBatch, ctx: &Ctx<'_>, account: &ExternalAccount) -> Result<String> {
    let json = account.to_json()?;
    batch.push(Write::Insert(account.record(ctx.scope, json.clone())));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &account.id, &json, ctx.now)?));
    Ok(json)
}

pub async fn create(ctx: &Ctx<'_>, commit: &dyn Commit, input: &ExternalAccountInput) -> Result<String> {
    let stamp = Stamp { live_mode: ctx.scope.live_mode, now: ctx.now };
    let mut batch = WriteBatch::new();
    let (counterparty_id, counterparty_name) = match input.counterparty_id.clone().flatten() {
        Some(id) => {
            let found = super::require(ctx, &mut batch, kinds::COUNTERPARTY, &id, "counterparty_id").await?;
            (Some(id), counterparty_name(&found)?)
        }
        None => (None, None),
    };
    let account = input.build("", counterparty_id, counterparty_name.as_deref(), stamp)?;
    let json = stage_create(&mut batch, ctx, &account)?;
    commit.commit(batch, &json).await?;
    Ok(json)
}

/// The name of a stored counterparty, which its accounts copy as their `party_name` default.
fn counterparty_name(stored: &StoredObject) -> Result<Option<String>> {
    #[derive(Deserialize)]
    struct Named {
        name: Option<String>,
    }
    let named: Named = serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored counterparty {}: {e}", stored.id)))?;
    Ok(named.name)
}

pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    listing::stored_doc(ctx, KIND, id, "external account").await
}

#[derive(Debug, Default)]
pub struct ExternalAccountFilter {
    pub counterparty_id: Option<String>,
    pub party_name: Option<String>,
    pub external_id: Option<String>,
    pub metadata: Vec<(String, String)>,
}

pub async fn list(ctx: &Ctx<'_>, filter: &ExternalAccountFilter, page: PageSpec) -> Result<ListedPage> {
    let mut filters: Vec<Filter> = [
        listing::eq("counterparty_id", filter.counterparty_id.as_deref()),
        listing::contains("party_name", filter.party_name.as_deref()),
        listing::eq("external_id", filter.external_id.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    filters.extend(listing::metadata_filters(&filter.metadata));
    listing::stored_page(ctx, KIND, filters, page).await
}

/// What must agree before an external account changes or goes, beyond the account itself: the
/// payment orders still to be sent to it (SPEC B3), which live in a module that imports this one
/// (`payment_order::receiving`), so they are asked through this trait.
#[async_trait::async_trait]
pub trait AccountUses: Send + Sync {
    /// Ok if `account` may become `changed` (`None`: be deleted); else the refusal.
    async fn allow(&self, ctx: &Ctx<'_>, account: &ExternalAccount, changed: Option<&ExternalAccount>) -> Result<()>;
}

pub async fn update(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &ExternalAccountPatch, uses: &dyn AccountUses) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("external account"))?;
        let mut account = parse(&stored)?;
        let before = account.clone();
        account.apply(patch, Stamp { live_mode: ctx.scope.live_mode, now: ctx.now })?;
        if super::unchanged(&before, &account, |a| &mut a.updated_at) {
            return Ok(stored.doc);
        }
        uses.allow(ctx, &before, Some(&account)).await?;
        let mut batch = WriteBatch::new();
        if let Some(cp) = &account.counterparty_id {
            batch.push(Write::Require {
                kind: kinds::COUNTERPARTY,
                scope: ctx.scope.clone(),
                id: cp.clone(),
                parameter: "counterparty_id".into(),
            });
        }
        let json = account.to_json()?;
        batch.push(Write::Replace { record: account.record(ctx.scope, json.clone()), expected_version: stored.version });
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

pub async fn delete(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, uses: &dyn AccountUses) -> Result<()> {
    let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("external account"))?;
    uses.allow(ctx, &parse(&stored)?, None).await?;
    let mut batch = WriteBatch::new();
    batch.push(Write::Delete { kind: KIND, scope: ctx.scope.clone(), id: id.to_owned() });
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "deleted", id, &stored.doc, ctx.now)?));
    commit.commit(batch, "").await
}
