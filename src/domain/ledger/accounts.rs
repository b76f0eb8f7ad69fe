//! Ledger accounts: create, get, list, update, delete; balances current or as of an effective
//! time or version, read from the store's sums (SPEC G3, G5), never from the document.

use futures_util::future::{try_join, try_join_all};
use serde::{Deserialize, Serialize};

use super::super::api_key::Scope;
use super::super::common::new_id;
use super::super::enums::{self, Direction};
use super::super::listing::{self, ListedPage, PageSpec};
use super::super::time::Timestamp;
use super::super::validate::{self, Metadata, TEXT_LEN_MAX};
use super::super::{Commit, Ctx, event, require, retry_on_conflict};
use super::categories::NewAccount;
use super::{BalanceQuery, LedgerCurrency, WindowedBalancesDoc, balances, external_id_key};
use crate::base::ledger::Totals;
use crate::error::{Error, Result};
use crate::store::ledger::{AccountGuard, AccountState};
use crate::store::{Filter, ObjectRecord, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = super::super::kinds::LEDGER_ACCOUNT;

/// A ledger account as stored: what the client set. Its balances and `lock_version` are the
/// store's and are added when it is served ([`LedgerAccount`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AccountRecord {
    pub id: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub name: String,
    pub description: Option<String>,
    pub normal_balance: Direction,
    pub currency: String,
    pub currency_exponent: u8,
    pub ledger_id: String,
    pub ledgerable_id: Option<String>,
    pub ledgerable_type: Option<String>,
    pub external_id: Option<String>,
    pub metadata: Metadata,
}

/// MT's `ledger_account`, as served.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = ledger_account)]
pub struct LedgerAccount<'a> {
    pub id: &'a str,
    pub object: &'static str,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub discarded_at: Option<Timestamp>,
    pub name: &'a str,
    pub description: Option<&'a str>,
    #[schema(schema_with = super::super::schema::direction)]
    pub normal_balance: Direction,
    pub balances: WindowedBalancesDoc,
    pub lock_version: i64,
    pub ledger_id: &'a str,
    pub ledgerable_id: Option<&'a str>,
    pub external_id: Option<&'a str>,
    #[schema(schema_with = super::super::schema::ledger_account_ledgerable_type_or_null)]
    pub ledgerable_type: Option<&'a str>,
    #[schema(schema_with = super::super::schema::metadata)]
    pub metadata: &'a Metadata,
}

/// MT's `ledger_account_create_request`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_account_create_request)]
pub struct AccountInput {
    #[schema(value_type = String, required = true)]
    pub name: Option<String>,
    pub description: Option<String>,
    #[schema(schema_with = super::super::schema::direction, required = true)]
    pub normal_balance: Option<String>,
    #[schema(value_type = String, required = true, format = "uuid")]
    pub ledger_id: Option<String>,
    #[schema(schema_with = super::ledger_currency, required = true)]
    pub currency: Option<String>,
    /// Required for a currency outside ISO 4217; for an ISO one, absent or its own exponent.
    #[schema(schema_with = super::currency_exponent_or_null)]
    pub currency_exponent: Option<i64>,
    /// The categories the new account is put in.
    #[serde(default)]
    pub ledger_account_category_ids: Vec<String>,
    /// Given with `ledgerable_type`.
    #[schema(format = "uuid")]
    pub ledgerable_id: Option<String>,
    /// Given with `ledgerable_id`.
    #[schema(schema_with = super::super::schema::ledger_account_ledgerable_type_or_null)]
    pub ledgerable_type: Option<String>,
    #[schema(schema_with = super::super::schema::metadata_or_null)]
    pub metadata: Option<Metadata>,
    pub external_id: Option<String>,
}

/// A PATCH of a ledger account (the fields it shares with its kin).
pub type AccountPatch = super::NamedPatch;

impl AccountRecord {
    pub fn credit_normal(&self) -> bool {
        self.normal_balance == Direction::Credit
    }

    pub fn currency(&self) -> LedgerCurrency {
        LedgerCurrency { code: self.currency.clone(), exponent: self.currency_exponent }
    }

    fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = listing::metadata_terms(&self.metadata).collect();
        terms.push(Term::new("ledger_id", &self.ledger_id));
        terms.push(Term::new("name", &self.name));
        terms.push(Term::new("currency", &self.currency));
        terms.push(Term::new("normal_balance", self.normal_balance.as_str()));
        terms.extend(self.external_id.as_ref().map(|id| Term::new("external_id", id)));
        terms
    }

    fn record(&self, scope: &Scope) -> Result<ObjectRecord> {
        let doc = serde_json::to_string(self).map_err(|e| Error::internal(format!("ledger account: {e}")))?;
        Ok(ObjectRecord {
            id: self.id.clone(),
            kind: KIND,
            scope: scope.clone(),
            parent_id: None,
            created_at: self.created_at,
            doc,
            terms: self.terms(),
        })
    }

    /// The account as served, with `totals` as its balances over `query`'s window.
    pub fn served(&self, totals: &Totals, lock_version: i64, query: &BalanceQuery) -> Result<String> {
        let b = balances(totals, self.credit_normal(), &self.currency())?;
        let (lower, upper) = query.bounds();
        let served = LedgerAccount {
            id: &self.id,
            object: KIND,
            live_mode: self.live_mode,
            created_at: self.created_at,
            updated_at: self.updated_at,
            discarded_at: None,
            name: &self.name,
            description: self.description.as_deref(),
            normal_balance: self.normal_balance,
            balances: WindowedBalancesDoc {
                effective_at_lower_bound: lower,
                effective_at_upper_bound: upper,
                pending_balance: b.pending_balance,
                posted_balance: b.posted_balance,
                available_balance: b.available_balance,
            },
            lock_version,
            ledger_id: &self.ledger_id,
            ledgerable_id: self.ledgerable_id.as_deref(),
            external_id: self.external_id.as_deref(),
            ledgerable_type: self.ledgerable_type.as_deref(),
            metadata: &self.metadata,
        };
        serde_json::to_string(&served).map_err(|e| Error::internal(format!("ledger account: {e}")))
    }
}

pub fn parse(stored: &StoredObject) -> Result<AccountRecord> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored ledger account {}: {e}", stored.id)))
}

impl AccountInput {
    fn build(&self, ctx: &Ctx<'_>) -> Result<AccountRecord> {
        let currency = LedgerCurrency::parse(self.currency.as_deref().ok_or_else(|| Error::missing("currency"))?, self.currency_exponent)?;
        let normal_balance =
            Direction::parse("normal_balance", self.normal_balance.as_deref().ok_or_else(|| Error::missing("normal_balance"))?)?;
        let ledgerable_type = self
            .ledgerable_type
            .as_deref()
            .map(|t| validate::one_of("ledgerable_type", t, enums::LEDGER_ACCOUNT_LEDGERABLE_TYPES))
            .transpose()?;
        let ledgerable_id = self.ledgerable_id.as_deref().map(|id| validate::id("ledgerable_id", id)).transpose()?;
        if ledgerable_id.is_some() != ledgerable_type.is_some() {
            let missing = if ledgerable_id.is_some() { "ledgerable_type" } else { "ledgerable_id" };
            return Err(Error::invalid(missing, "ledgerable_id and ledgerable_type go together"));
        }
        Ok(AccountRecord {
            id: new_id(),
            live_mode: ctx.scope.live_mode,
            created_at: ctx.now,
            updated_at: ctx.now,
            name: validate::text("name", self.name.as_deref().ok_or_else(|| Error::missing("name"))?, TEXT_LEN_MAX)?,
            description: validate::opt_text("description", self.description.as_deref(), TEXT_LEN_MAX)?,
            normal_balance,
            currency: currency.code,
            currency_exponent: currency.exponent,
            ledger_id: validate::id("ledger_id", self.ledger_id.as_deref().ok_or_else(|| Error::missing("ledger_id"))?)?,
            ledgerable_id,
            ledgerable_type,
            external_id: validate::opt_text("external_id", self.external_id.as_deref(), TEXT_LEN_MAX)?,
            metadata: validate::metadata("metadata", self.metadata.as_ref())?,
        })
    }
}

pub async fn create(ctx: &Ctx<'_>, commit: &dyn Commit, input: &AccountInput) -> Result<String> {
    let account = input.build(ctx)?;
    let mut batch = WriteBatch::new();
    require(ctx, &mut batch, super::super::kinds::LEDGER, &account.ledger_id, "ledger_id").await?;
    super::require_ledgerable(ctx, &mut batch, account.ledgerable_type.as_deref(), account.ledgerable_id.as_deref()).await?;
    super::take_external_id(&mut batch, KIND, &account.ledger_id, account.external_id.as_deref(), "ledger account");
    let new_account = NewAccount { id: &account.id, ledger_id: &account.ledger_id, currency: account.currency() };
    super::categories::stage_memberships(ctx, &mut batch, &new_account, &input.ledger_account_category_ids).await?;
    let json = account.served(&Totals::default(), 0, &BalanceQuery::default())?;
    batch.push(Write::Insert(account.record(ctx.scope)?));
    batch.push(Write::LedgerOpen { account_id: account.id.clone(), credit_normal: account.credit_normal() });
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &account.id, &json, ctx.now)?));
    commit.commit(batch, &json).await?;
    Ok(json)
}

/// Renders stored accounts with their balances over `query`.
pub async fn render(ctx: &Ctx<'_>, stored: &[StoredObject], query: &BalanceQuery) -> Result<Vec<String>> {
    let records = stored.iter().map(parse).collect::<Result<Vec<_>>>()?;
    let ids: Vec<String> = records.iter().map(|r| r.id.clone()).collect();
    let (states, windowed) = try_join(ctx.store.ledger_accounts(&ids), windows_of(ctx, &ids, query)).await?;
    let mut out = Vec::with_capacity(records.len());
    for (index, record) in records.iter().enumerate() {
        let state = states
            .iter()
            .find(|(id, _)| *id == record.id)
            .map(|(_, s)| *s)
            .ok_or_else(|| Error::internal("a ledger account without sums"))?;
        let totals = windowed.get(index).copied().unwrap_or(state.totals);
        out.push(record.served(&totals, state.lock_version, query)?);
    }
    Ok(out)
}

/// Each account's sums over the query's window, none when it asks for current balances. The
/// reads go out together, so a store that answers concurrent reads in one statement (PostgreSQL)
/// answers a page of accounts in one round trip.
async fn windows_of(ctx: &Ctx<'_>, ids: &[String], query: &BalanceQuery) -> Result<Vec<Totals>> {
    if query.is_current() {
        return Ok(Vec::new());
    }
    let window = query.window();
    try_join_all(ids.iter().map(|id| ctx.store.ledger_window(id, &window))).await
}

pub async fn get(ctx: &Ctx<'_>, id: &str, query: &BalanceQuery) -> Result<String> {
    let stored = listing::by_id_or_external_id(ctx, KIND, id, "ledger account", |_| Ok(true)).await?;
    Ok(render(ctx, std::slice::from_ref(&stored), query).await?.remove(0))
}

/// The accounts of the caller's scope among `ids`, with their current state: what a posting
/// checks its entries against before the store checks them again at commit.
pub async fn load(ctx: &Ctx<'_>, ids: &[String]) -> Result<Vec<(AccountRecord, AccountState)>> {
    let (states, records) = try_join(ctx.store.ledger_accounts(ids), records(ctx, ids)).await?;
    records
        .into_iter()
        .map(|record| {
            let state = states.iter().find(|(i, _)| *i == record.id).map(|(_, s)| *s);
            Ok((record, state.ok_or_else(|| Error::internal("a ledger account without sums"))?))
        })
        .collect()
}

/// The accounts of the caller's scope among `ids`, in their order, without their sums: what a
/// posting names (the store checks its entries against the sums at commit). The reads go out
/// together, so a store that answers concurrent reads in one statement (PostgreSQL) does so.
pub async fn records(ctx: &Ctx<'_>, ids: &[String]) -> Result<Vec<AccountRecord>> {
    let stored = try_join_all(ids.iter().map(|id| ctx.store.get(KIND, ctx.scope, id))).await?;
    stored.iter().flatten().map(parse).collect()
}

#[derive(Debug, Default)]
pub struct AccountFilter {
    pub ids: Vec<String>,
    pub names: Vec<String>,
    pub ledger_id: Option<String>,
    pub external_id: Option<String>,
    pub currency: Option<String>,
    pub normal_balance: Option<String>,
    pub metadata: Vec<(String, String)>,
    pub created_from: Option<Timestamp>,
    pub created_to: Option<Timestamp>,
    /// Accounts in this category's tree.
    pub ledger_account_category_id: Option<String>,
}

pub async fn list(ctx: &Ctx<'_>, filter: &AccountFilter, query: &BalanceQuery, page: PageSpec) -> Result<ListedPage> {
    if let Some(normal) = &filter.normal_balance {
        Direction::parse("normal_balance", normal)?;
    }
    let mut filters: Vec<Filter> = [
        listing::any_id(&filter.ids),
        listing::any_of("name", &filter.names),
        listing::eq("ledger_id", filter.ledger_id.as_deref()),
        listing::eq("external_id", filter.external_id.as_deref()),
        listing::eq("currency", filter.currency.as_deref()),
        listing::eq("normal_balance", filter.normal_balance.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    filters.extend(listing::metadata_filters(&filter.metadata));
    filters.extend(filter.created_from.map(Filter::CreatedFrom));
    filters.extend(filter.created_to.map(Filter::CreatedTo));
    if let Some(category) = &filter.ledger_account_category_id {
        filters.push(super::categories::accounts_filter(ctx, category, "ledger_account_category_id", None).await?);
    }
    let found = listing::fetch(ctx, KIND, filters, page).await?;
    let docs = render(ctx, &found.items, query).await?;
    Ok(ListedPage { json: listing::json_array(docs.iter().map(String::as_str)), next_seq: found.next_seq })
}

pub async fn update(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &AccountPatch) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger account"))?;
        let mut account = parse(&stored)?;
        let before = account.clone();
        let mut batch = WriteBatch::new();
        let ledger_id = account.ledger_id.clone();
        let named = super::Named {
            name: &mut account.name,
            description: &mut account.description,
            metadata: &mut account.metadata,
            external_id: &mut account.external_id,
        };
        named.apply(patch, &mut batch, KIND, &ledger_id, "ledger account")?;
        if crate::domain::unchanged(&before, &account, |a| &mut a.updated_at) {
            return render_one(ctx, &account).await; // nothing changes: no event (SPEC E4)
        }
        account.updated_at = ctx.now;
        let json = render_one(ctx, &account).await?;
        batch.push(Write::Replace { record: account.record(ctx.scope)?, expected_version: stored.version });
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

async fn render_one(ctx: &Ctx<'_>, account: &AccountRecord) -> Result<String> {
    let states = ctx.store.ledger_accounts(std::slice::from_ref(&account.id)).await?;
    let (_, state) = states.first().ok_or_else(|| Error::internal("a ledger account without sums"))?;
    account.served(&state.totals, state.lock_version, &BalanceQuery::default())
}

/// Deletes an account no entry was ever written to (MT answers 200 with the account), and its
/// memberships of categories. The store checks again at commit that it is still at version 0,
/// so a racing posting either lands first (and the delete is refused) or finds the account gone.
pub async fn delete(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str) -> Result<String> {
    super::retry_if_vanished(|| delete_once(ctx, commit, id)).await
}

async fn delete_once(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str) -> Result<String> {
    let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger account"))?;
    let account = parse(&stored)?;
    let states = ctx.store.ledger_accounts(std::slice::from_ref(&account.id)).await?;
    let (_, state) = states.first().ok_or_else(|| Error::internal("a ledger account without sums"))?;
    if state.lock_version > 0 {
        return Err(Error::invalid("id", "entries were written to this ledger account; it cannot be deleted"));
    }
    let mut served: serde_json::Value = serde_json::from_str(&account.served(&state.totals, 0, &BalanceQuery::default())?)
        .map_err(|e| Error::internal(format!("ledger account: {e}")))?;
    served["discarded_at"] = serde_json::json!(ctx.now);
    let json = served.to_string();
    let mut batch = WriteBatch::new();
    // The document first, then the sums: the order every posting locks them in (its accounts'
    // documents, then their sums), so the two can only queue, never deadlock.
    batch.push(Write::Delete { kind: KIND, scope: ctx.scope.clone(), id: id.to_owned() });
    let guard = AccountGuard { account_id: account.id.clone(), lock_version: Some((0, "id".into())), conditions: vec![] };
    batch.push(Write::LedgerPost { lines: vec![], guards: vec![guard] });
    if let Some(old) = &account.external_id {
        batch.push(Write::ReleaseUnique { key: external_id_key(KIND, &account.ledger_id, old) });
    }
    super::categories::stage_account_removal(ctx, &mut batch, id).await?;
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "deleted", id, &json, ctx.now)?));
    commit.commit(batch, &json).await?;
    Ok(json)
}
