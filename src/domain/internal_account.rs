//! Internal accounts: the organization's own accounts, the originating side of payments.
//!
//! An internal account belongs to a bank connection (SPEC B1, `domain::connection`): one an
//! operator registered, named by `connection_id` (required in live mode), or in sandbox mode the
//! organization's built-in sandbox connection (its id is derived from the tenant, so it is
//! stable). Each new internal account gets a generated account number and Payrail's sandbox
//! routing number, so payments can be built against it end to end.
//!
//! The account's `currency` is a [`Currency`] (payments and ledgers need its exponent) and its
//! capabilities' direction and payment type are enums; each serialises as it always did.

use rand::Rng;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::api_key::Scope;
use super::common::{
    AccountDetail, AccountDetailInput, Address, AddressInput, PARTY_TYPES, RoutingDetail, RoutingDetailInput, Stamp, account_detail,
    new_id, nullable, routing_detail,
};
use super::connection::Connection;
use super::enums::{Direction, PaymentType};
use super::listing::{self, ListedPage, PageSpec};
use super::money::Currency;
use super::time::Timestamp;
use super::validate::{self, Metadata, MetadataPatch, TEXT_LEN_MAX};
use super::{Commit, Ctx, counterparty, enums, event, retry_on_conflict, schema};
use crate::error::{Error, Result};
use crate::store::{Filter, ObjectRecord, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = super::kinds::INTERNAL_ACCOUNT;
pub use super::enums::{INTERNAL_ACCOUNT_CLIENT_STATUSES as CLIENT_STATUSES, INTERNAL_ACCOUNT_STATUSES as STATUSES};
/// Routing number of Payrail's simulated bank: ABA-valid, in a Federal Reserve district range.
pub const SANDBOX_ROUTING_NUMBER: &str = "110000000";
pub use super::connection::SANDBOX_BANK_NAME;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = account_capability)]
pub struct AccountCapability {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    #[schema(schema_with = schema::direction)]
    pub direction: Direction,
    #[schema(schema_with = schema::payment_type)]
    pub payment_type: PaymentType,
    pub identifier: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub discarded_at: Option<Timestamp>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = internal_account)]
pub struct InternalAccount {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub name: Option<String>,
    #[schema(schema_with = schema::account_type_or_null)]
    pub account_type: Option<String>,
    pub party_name: String,
    #[schema(schema_with = schema::party_type_or_null)]
    pub party_type: Option<String>,
    pub party_address: Option<Address>,
    #[schema(schema_with = schema::currency)]
    pub currency: Currency,
    pub account_details: Vec<AccountDetail>,
    pub routing_details: Vec<RoutingDetail>,
    pub account_capabilities: Vec<AccountCapability>,
    pub connection: Connection,
    pub counterparty_id: Option<String>,
    pub parent_account_id: Option<String>,
    pub ledger_account_id: Option<String>,
    pub contra_ledger_account_id: Option<String>,
    pub legal_entity_id: Option<String>,
    pub debitable: Option<bool>,
    pub external_id: Option<String>,
    #[schema(schema_with = schema::metadata)]
    pub metadata: Metadata,
    #[schema(schema_with = schema::internal_account_status_or_null)]
    pub status: Option<String>,
    pub vendor_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[schema(as = account_capability_request)]
pub struct CapabilityInput {
    #[schema(schema_with = schema::direction)]
    pub direction: String,
    #[schema(schema_with = schema::payment_type)]
    pub payment_type: String,
    pub identifier: Option<String>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[schema(as = internal_account_create_request)]
pub struct InternalAccountInput {
    #[schema(value_type = String, required = true)]
    pub name: Option<String>,
    #[schema(schema_with = schema::currency, required = true)]
    pub currency: Option<String>,
    #[schema(schema_with = schema::account_type_or_null)]
    pub account_type: Option<String>,
    pub party_name: Option<String>,
    #[schema(schema_with = schema::party_type_or_null)]
    pub party_type: Option<String>,
    pub party_address: Option<AddressInput>,
    #[serde(default)]
    pub account_capabilities: Vec<CapabilityInput>,
    #[schema(format = "uuid")]
    pub connection_id: Option<String>,
    #[schema(format = "uuid")]
    pub counterparty_id: Option<String>,
    #[schema(format = "uuid")]
    pub parent_account_id: Option<String>,
    /// Not supported (422); not in the published schema.
    #[schema(ignore)]
    pub legal_entity_id: Option<String>,
    pub debitable: Option<bool>,
    pub external_id: Option<String>,
    #[schema(schema_with = schema::metadata_or_null)]
    pub metadata: Option<Metadata>,
    /// Live mode only, a Payrail addition to MT's request: the bank's own numbers for the
    /// account, which the files sent for it name (a pain.001 debtor) and the statements received
    /// for it match. Without them a live account gets placeholder numbers, as a sandbox one
    /// gets the sandbox bank's.
    #[serde(default)]
    pub account_details: Vec<AccountDetailInput>,
    /// Live mode only, as `account_details`: the bank's routing numbers for the account.
    #[serde(default)]
    pub routing_details: Vec<RoutingDetailInput>,
}

#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[schema(as = internal_account_update_request)]
pub struct InternalAccountPatch {
    pub name: Option<String>,
    #[schema(schema_with = schema::metadata_patch_or_null)]
    pub metadata: Option<MetadataPatch>,
    #[serde(default, deserialize_with = "nullable")]
    pub external_id: Option<Option<String>>,
    #[schema(format = "uuid")]
    pub counterparty_id: Option<String>,
    #[schema(format = "uuid")]
    pub parent_account_id: Option<String>,
    pub party_address: Option<AddressInput>,
    /// Clients may only ask for `pending_closure`.
    #[schema(schema_with = schema::internal_account_client_status_or_null)]
    pub status: Option<String>,
    /// Not supported (422); not in the published schema.
    #[schema(ignore)]
    pub ledger_account_id: Option<String>,
    #[schema(ignore)]
    pub contra_ledger_account_id: Option<String>,
}

impl CapabilityInput {
    fn build(&self, param: &str, stamp: Stamp) -> Result<AccountCapability> {
        Ok(AccountCapability {
            id: new_id(),
            object: "account_capability".into(),
            live_mode: stamp.live_mode,
            direction: Direction::parse(&format!("{param}.direction"), &self.direction)?,
            payment_type: PaymentType::parse(&format!("{param}.payment_type"), &self.payment_type)?,
            identifier: validate::opt_text(&format!("{param}.identifier"), self.identifier.as_deref(), TEXT_LEN_MAX)?,
            created_at: stamp.now,
            updated_at: stamp.now,
            discarded_at: None,
        })
    }
}

/// The numbers Payrail gives a new account: an account number, and for a EUR account (which
/// SEPA files must name by IBAN, SPEC B3) an IBAN at the sandbox bank's code.
fn account_details(number: String, currency: Currency, stamp: Stamp) -> Vec<super::common::AccountDetail> {
    let iban = (currency.code() == "EUR").then(|| super::bank_id::Iban::german(SANDBOX_BANK_CODE, &number[number.len() - 10..]));
    let mut details = vec![account_detail(number, "other".into(), stamp)];
    details.extend(iban.map(|iban| account_detail(iban.as_str().to_owned(), "iban".into(), stamp)));
    details
}

/// The bank code (German BLZ) of the IBANs Payrail gives EUR accounts.
pub const SANDBOX_BANK_CODE: &str = "11000000";

impl InternalAccountInput {
    fn build(&self, connection: Connection, stamp: Stamp) -> Result<InternalAccount> {
        if self.legal_entity_id.is_some() {
            return Err(Error::invalid("legal_entity_id", "legal entities are not supported by Payrail"));
        }
        let name = validate::text("name", self.name.as_deref().ok_or_else(|| Error::missing("name"))?, TEXT_LEN_MAX)?;
        let currency = Currency::parse("currency", self.currency.as_deref().ok_or_else(|| Error::missing("currency"))?)?;
        let (account_details, routing_details) = self.bank_numbers(currency, stamp)?;
        Ok(InternalAccount {
            id: new_id(),
            object: KIND.into(),
            live_mode: stamp.live_mode,
            party_name: match &self.party_name {
                Some(p) => validate::text("party_name", p, TEXT_LEN_MAX)?,
                None => name.clone(),
            },
            name: Some(name),
            account_type: self.account_type.as_deref().map(|t| validate::one_of("account_type", t, enums::ACCOUNT_TYPES)).transpose()?,
            party_type: self.party_type.as_deref().map(|t| validate::one_of("party_type", t, PARTY_TYPES)).transpose()?,
            party_address: self.party_address.as_ref().map(|a| a.build("party_address", stamp)).transpose()?,
            currency,
            account_details,
            routing_details,
            account_capabilities: super::common::build_all("account_capabilities", &self.account_capabilities, |c, at| c.build(at, stamp))?,
            connection,
            counterparty_id: self.counterparty_id.as_deref().map(|id| validate::id("counterparty_id", id)).transpose()?,
            parent_account_id: self.parent_account_id.as_deref().map(|id| validate::id("parent_account_id", id)).transpose()?,
            ledger_account_id: None,
            contra_ledger_account_id: None,
            legal_entity_id: None,
            debitable: self.debitable,
            external_id: validate::opt_text("external_id", self.external_id.as_deref(), TEXT_LEN_MAX)?,
            metadata: validate::metadata("metadata", self.metadata.as_ref())?,
            status: Some("active".into()),
            vendor_id: None,
            created_at: stamp.now,
            updated_at: stamp.now,
        })
    }
}

impl InternalAccountInput {
    /// The account's numbers: those given (live mode), else Payrail's: a random account number
    /// (and an IBAN for EUR) at the sandbox bank's routing number.
    fn bank_numbers(&self, currency: Currency, stamp: Stamp) -> Result<(Vec<AccountDetail>, Vec<RoutingDetail>)> {
        let given = !self.account_details.is_empty() || !self.routing_details.is_empty();
        if given && !stamp.live_mode {
            let param = if self.account_details.is_empty() { "routing_details" } else { "account_details" };
            return Err(Error::invalid(param, format!("{param} are given in live mode only: a sandbox account gets the sandbox bank's")));
        }
        let accounts = match self.account_details.is_empty() {
            true => {
                let number: String = (0..12).map(|_| char::from(b'0' + rand::rng().random_range(0..10u8))).collect();
                account_details(number, currency, stamp)
            }
            false => super::common::build_all("account_details", &self.account_details, |d, at| d.build(at, stamp))?,
        };
        let routings = match self.routing_details.is_empty() {
            true => vec![routing_detail(SANDBOX_ROUTING_NUMBER.into(), "aba".into(), None, SANDBOX_BANK_NAME.into(), stamp)],
            false => super::common::build_all("routing_details", &self.routing_details, |d, at| d.build(at, stamp))?,
        };
        Ok((accounts, routings))
    }
}

impl InternalAccount {
    fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = listing::metadata_terms(&self.metadata).collect();
        terms.push(Term::new("currency", self.currency.code()));
        terms.push(Term::new("connection_id", &self.connection.id));
        terms.extend(self.status.as_ref().map(|s| Term::new("status", s)));
        terms.extend(self.counterparty_id.as_ref().map(|id| Term::new("counterparty_id", id)));
        terms.extend(self.external_id.as_ref().map(|id| Term::new("external_id", id)));
        for capability in &self.account_capabilities {
            terms.push(Term::new("payment_type", capability.payment_type.as_str()));
            terms.push(Term::new("payment_direction", capability.direction.as_str()));
            terms.push(Term::new("capability", format!("{}:{}", capability.direction, capability.payment_type)));
        }
        terms
    }

    fn record(&self, scope: &Scope, json: String) -> ObjectRecord {
        ObjectRecord {
            id: self.id.clone(),
            kind: KIND,
            scope: scope.clone(),
            parent_id: None,
            created_at: self.created_at,
            doc: json,
            terms: self.terms(),
        }
    }

    fn apply(&mut self, patch: &InternalAccountPatch, stamp: Stamp) -> Result<()> {
        if patch.ledger_account_id.is_some() || patch.contra_ledger_account_id.is_some() {
            let param = if patch.ledger_account_id.is_some() { "ledger_account_id" } else { "contra_ledger_account_id" };
            return Err(Error::invalid(
                param,
                format!(
                    "Payrail does not link ledger accounts to internal accounts yet ({param}); its ledgers are served under /api/ledgers"
                ),
            ));
        }
        if let Some(name) = &patch.name {
            self.name = Some(validate::text("name", name, TEXT_LEN_MAX)?);
        }
        if let Some(metadata) = &patch.metadata {
            self.metadata = validate::merge_metadata("metadata", &self.metadata, metadata)?;
        }
        if let Some(external_id) = &patch.external_id {
            self.external_id = validate::opt_text("external_id", external_id.as_deref(), TEXT_LEN_MAX)?;
        }
        if let Some(id) = &patch.counterparty_id {
            self.counterparty_id = Some(validate::id("counterparty_id", id)?);
        }
        if let Some(id) = &patch.parent_account_id {
            if *id == self.id {
                return Err(Error::invalid("parent_account_id", "an account cannot be its own parent"));
            }
            self.parent_account_id = Some(validate::id("parent_account_id", id)?);
        }
        if let Some(address) = &patch.party_address {
            self.party_address = Some(address.build("party_address", stamp)?);
        }
        if let Some(status) = &patch.status {
            // Clients may only ask for closure; the bank moves the account on from there.
            self.status = Some(validate::one_of("status", status, CLIENT_STATUSES)?);
        }
        self.updated_at = stamp.now;
        Ok(())
    }

    /// Preconditions that the accounts this one refers to still exist when it commits.
    fn stage_references(&self, scope: &Scope, batch: &mut WriteBatch) {
        if let Some(id) = &self.counterparty_id {
            batch.push(Write::Require {
                kind: counterparty::KIND,
                scope: scope.clone(),
                id: id.clone(),
                parameter: "counterparty_id".into(),
            });
        }
        if let Some(id) = &self.parent_account_id {
            batch.push(Write::Require { kind: KIND, scope: scope.clone(), id: id.clone(), parameter: "parent_account_id".into() });
        }
    }
}

fn to_json(account: &InternalAccount) -> Result<String> {
    serde_json::to_string(account).map_err(|e| Error::internal(format!("internal account: {e}")))
}

/// The internal accounts of `scope` on connection `connection_id`, oldest last, at most `max`.
pub async fn of_connection(
    store: &dyn crate::store::Store,
    scope: &Scope,
    connection_id: &str,
    max: usize,
) -> Result<Vec<InternalAccount>> {
    let mut out = Vec::new();
    let mut after_seq = None;
    loop {
        let filters = vec![Filter::Eq { name: "connection_id".into(), value: connection_id.into() }];
        let query = crate::store::ListQuery { kind: KIND, scope: scope.clone(), filters, after_seq, limit: 500 };
        let page = store.list(&query).await?;
        for stored in &page.items {
            out.push(parse(stored)?);
        }
        match page.next_seq {
            Some(seq) if out.len() < max => after_seq = Some(seq),
            _ => return Ok(out),
        }
    }
}

pub fn parse(stored: &StoredObject) -> Result<InternalAccount> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored internal account {}: {e}", stored.id)))
}

pub async fn create(ctx: &Ctx<'_>, commit: &dyn Commit, input: &InternalAccountInput) -> Result<String> {
    let mut batch = WriteBatch::new();
    let connection = super::connection::for_account(ctx, &mut batch, input.connection_id.as_deref()).await?;
    let account = input.build(connection, Stamp { live_mode: ctx.scope.live_mode, now: ctx.now })?;
    account.stage_references(ctx.scope, &mut batch);
    let json = to_json(&account)?;
    batch.push(Write::Insert(account.record(ctx.scope, json.clone())));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &account.id, &json, ctx.now)?));
    commit.commit(batch, &json).await?;
    Ok(json)
}

pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    listing::stored_doc(ctx, KIND, id, "internal account").await
}

#[derive(Debug, Default)]
pub struct InternalAccountFilter {
    pub counterparty_id: Option<String>,
    pub currency: Option<String>,
    pub external_id: Option<String>,
    pub status: Option<String>,
    pub payment_type: Option<String>,
    pub payment_direction: Option<String>,
    pub metadata: Vec<(String, String)>,
}

pub async fn list(ctx: &Ctx<'_>, filter: &InternalAccountFilter, page: PageSpec) -> Result<ListedPage> {
    if let Some(status) = &filter.status {
        validate::one_of("status", status, STATUSES)?;
    }
    if let Some(payment_type) = &filter.payment_type {
        PaymentType::parse("payment_type", payment_type)?;
    }
    if let Some(currency) = &filter.currency {
        Currency::parse("currency", currency)?;
    }
    let direction = filter.payment_direction.as_deref().map(|d| Direction::parse("payment_direction", d)).transpose()?;
    let capability = match (direction, &filter.payment_type) {
        (Some(direction), Some(payment_type)) => listing::eq("capability", Some(&format!("{direction}:{payment_type}"))),
        (Some(direction), None) => listing::eq("payment_direction", Some(direction.as_str())),
        (None, Some(payment_type)) => listing::eq("payment_type", Some(payment_type)),
        (None, None) => None,
    };
    let mut filters: Vec<Filter> = [
        listing::eq("counterparty_id", filter.counterparty_id.as_deref()),
        listing::eq("currency", filter.currency.as_deref()),
        listing::eq("external_id", filter.external_id.as_deref()),
        listing::eq("status", filter.status.as_deref()),
        capability,
    ]
    .into_iter()
    .flatten()
    .collect();
    filters.extend(listing::metadata_filters(&filter.metadata));
    listing::stored_page(ctx, KIND, filters, page).await
}

/// Parent links [`refuse_cycle`] follows at most (a deeper tree is refused too).
const PARENT_DEPTH_MAX: usize = 64;

/// Refuses a `parent_account_id` under which `account` would be its own ancestor (A's parent B,
/// whose parent is A): such a tree has no root.
async fn refuse_cycle(ctx: &Ctx<'_>, account: &InternalAccount) -> Result<()> {
    let mut next = account.parent_account_id.clone();
    let mut chain = vec![account.id.to_string()];
    while let Some(id) = next {
        chain.push(id.clone());
        if id == account.id.as_str() {
            let chain = chain.join(" -> ");
            return Err(Error::invalid("parent_account_id", format!("parent_account_id would make the accounts a cycle: {chain}")));
        }
        if chain.len() > PARENT_DEPTH_MAX {
            return Err(Error::invalid("parent_account_id", format!("parent accounts nest at most {PARENT_DEPTH_MAX} deep")));
        }
        next = match ctx.store.get(KIND, ctx.scope, &id).await? {
            Some(stored) => parse(&stored)?.parent_account_id,
            None => None,
        };
    }
    Ok(())
}

pub async fn update(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &InternalAccountPatch) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("internal account"))?;
        let mut account = parse(&stored)?;
        let before = account.clone();
        account.apply(patch, Stamp { live_mode: ctx.scope.live_mode, now: ctx.now })?;
        if super::unchanged(&before, &account, |a| &mut a.updated_at) {
            return Ok(stored.doc);
        }
        if account.parent_account_id != before.parent_account_id {
            refuse_cycle(ctx, &account).await?;
        }
        let mut batch = WriteBatch::new();
        account.stage_references(ctx.scope, &mut batch);
        let json = to_json(&account)?;
        batch.push(Write::Replace { record: account.record(ctx.scope, json.clone()), expected_version: stored.version });
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}
