//! Ledger account categories (SPEC G1, G3, G5): named groups of one ledger's accounts of one
//! currency, nested into a graph without cycles. A category's balances are the sums of every
//! account in its tree (its own accounts and those of every category nested in it at any depth,
//! each account once however many ways it is reached), as of any effective time, signed by the
//! category's own normal balance.
//!
//! Memberships are documents of their own, never served: an account's membership has the
//! category as parent and the account as a term; a nesting has the outer category as parent and
//! the inner one as a term. A tree is read downwards with `children` (one read per level), and
//! the categories that hold an account are found upwards by terms.
//!
//! Races: adding an account or a category requires (`Write::Require`) that both still exist at
//! commit. Deleting a category deletes its memberships and nestings in the same batch, after the
//! category itself (on PostgreSQL a racing addition holds the category's row until it commits,
//! and the deletion's later statements then see what it added). Every change to the nesting
//! graph (nest, unnest, delete) takes the ledger's guard (`ledgers::guard`), so a cycle check is
//! never judged against a graph a racing nesting has changed since.

use std::collections::BTreeSet;

use futures_util::future::try_join_all;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::super::api_key::Scope;
use super::super::common::new_id;
use super::super::enums::Direction;
use super::super::listing::{self, ListedPage, PageSpec};
use super::super::time::Timestamp;
use super::super::validate::{self, Metadata, TEXT_LEN_MAX};
use super::super::{Commit, Ctx, event, require, retry_on_conflict};
use super::{BalanceQuery, BalancesDoc, LedgerCurrency, balances, external_id_key, retry_if_vanished};
use crate::base::ledger::Totals;
use crate::error::{Error, Result};
use crate::store::{Filter, ObjectRecord, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = super::super::kinds::LEDGER_ACCOUNT_CATEGORY;
const ACCOUNT_KIND: &str = super::super::kinds::LEDGER_ACCOUNT;
const MEMBER_KIND: &str = super::super::kinds::LEDGER_ACCOUNT_CATEGORY_MEMBER;
const NESTING_KIND: &str = super::super::kinds::LEDGER_ACCOUNT_CATEGORY_NESTING;

/// Most accounts a category's tree may hold for a list to be filtered by it: each is a bound
/// parameter of the list's query.
pub const FILTER_ACCOUNTS_MAX: usize = 10_000;
/// Ids per store read of many (SQLite binds each as a parameter).
const IDS_PER_READ: usize = 500;
/// Rows per page when a whole set of documents is read.
const ROWS_PER_READ: usize = 1_000;

/// A category as stored: what the client set. Its balances are summed over its tree each time
/// it is served.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CategoryRecord {
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
    pub external_id: Option<String>,
    pub metadata: Metadata,
}

/// MT's `ledger_account_category`, as served.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = ledger_account_category)]
pub struct LedgerAccountCategory<'a> {
    id: &'a str,
    object: &'static str,
    live_mode: bool,
    created_at: Timestamp,
    updated_at: Timestamp,
    discarded_at: Option<Timestamp>,
    name: &'a str,
    description: Option<&'a str>,
    #[schema(schema_with = super::super::schema::metadata)]
    metadata: &'a Metadata,
    ledger_id: &'a str,
    #[schema(schema_with = super::super::schema::direction)]
    normal_balance: Direction,
    external_id: Option<&'a str>,
    balances: BalancesDoc,
}

/// MT's `ledger_account_category_create_request`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_account_category_create_request)]
pub struct CategoryInput {
    #[schema(value_type = String, required = true)]
    pub name: Option<String>,
    pub description: Option<String>,
    #[schema(schema_with = super::super::schema::metadata_or_null)]
    pub metadata: Option<Metadata>,
    #[schema(schema_with = super::ledger_currency, required = true)]
    pub currency: Option<String>,
    /// Required for a currency outside ISO 4217; for an ISO one, absent or its own exponent.
    #[schema(schema_with = super::currency_exponent_or_null)]
    pub currency_exponent: Option<i64>,
    #[schema(value_type = String, required = true, format = "uuid")]
    pub ledger_id: Option<String>,
    #[schema(schema_with = super::super::schema::direction, required = true)]
    pub normal_balance: Option<String>,
    /// The categories the new one is nested in.
    #[serde(default)]
    pub ledger_account_category_ids: Vec<String>,
    pub external_id: Option<String>,
}

/// A PATCH of a ledger account category (the fields it shares with its kin).
pub type CategoryPatch = super::NamedPatch;

/// The fields of a ledger account's document that decide whether a category may hold it (read
/// here as a view, since the accounts module imports this one).
#[derive(Debug, Deserialize)]
struct AccountView {
    ledger_id: String,
    currency: String,
    currency_exponent: u8,
}

/// An account's membership of a category (kind `ledger_account_category_member`).
#[derive(Debug, Serialize, Deserialize)]
struct Member {
    ledger_account_category_id: String,
    ledger_account_id: String,
    created_at: Timestamp,
}

/// A category nested in another (kind `ledger_account_category_nesting`).
#[derive(Debug, Serialize, Deserialize)]
struct Nesting {
    ledger_account_category_id: String,
    sub_category_id: String,
    created_at: Timestamp,
}

impl CategoryRecord {
    fn credit_normal(&self) -> bool {
        self.normal_balance == Direction::Credit
    }

    fn currency(&self) -> LedgerCurrency {
        LedgerCurrency { code: self.currency.clone(), exponent: self.currency_exponent }
    }

    fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = listing::metadata_terms(&self.metadata).collect();
        terms.push(Term::new("ledger_id", &self.ledger_id));
        terms.push(Term::new("name", &self.name));
        terms.push(Term::new("currency", &self.currency));
        terms.extend(self.external_id.as_ref().map(|id| Term::new("external_id", id)));
        terms
    }

    fn record(&self, scope: &Scope) -> Result<ObjectRecord> {
        let doc = serde_json::to_string(self).map_err(|e| Error::internal(format!("ledger account category: {e}")))?;
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

    /// The category as served, with `totals` (its tree's sums) as its balances.
    fn served(&self, totals: &Totals, discarded_at: Option<Timestamp>) -> Result<String> {
        let served = LedgerAccountCategory {
            id: &self.id,
            object: KIND,
            live_mode: self.live_mode,
            created_at: self.created_at,
            updated_at: self.updated_at,
            discarded_at,
            name: &self.name,
            description: self.description.as_deref(),
            metadata: &self.metadata,
            ledger_id: &self.ledger_id,
            normal_balance: self.normal_balance,
            external_id: self.external_id.as_deref(),
            balances: balances(totals, self.credit_normal(), &self.currency())?,
        };
        serde_json::to_string(&served).map_err(|e| Error::internal(format!("ledger account category: {e}")))
    }

    /// Ok if this category may hold something of `ledger_id` in `currency`: the same ledger and
    /// the same currency only. `param` names what the request asked to put in it (or nest it in).
    fn admits(&self, ledger_id: &str, currency: &LedgerCurrency, param: &str) -> Result<()> {
        if ledger_id != self.ledger_id {
            return Err(Error::invalid(param, format!("{param}: a category and what it holds must belong to the same ledger")));
        }
        if *currency != self.currency() {
            return Err(Error::invalid(
                param,
                format!("{param}: a category and what it holds must have the same currency ({} is not {})", currency.code, self.currency),
            ));
        }
        Ok(())
    }
}

pub fn parse(stored: &StoredObject) -> Result<CategoryRecord> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored ledger account category {}: {e}", stored.id)))
}

fn parse_link<T: DeserializeOwned>(stored: &StoredObject) -> Result<T> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored category link {}: {e}", stored.id)))
}

fn member_record(scope: &Scope, category_id: &str, account_id: &str, now: Timestamp) -> Result<ObjectRecord> {
    let member = Member { ledger_account_category_id: category_id.to_owned(), ledger_account_id: account_id.to_owned(), created_at: now };
    let doc = serde_json::to_string(&member).map_err(|e| Error::internal(format!("category member: {e}")))?;
    Ok(ObjectRecord {
        id: new_id(),
        kind: MEMBER_KIND,
        scope: scope.clone(),
        parent_id: Some(category_id.to_owned()),
        created_at: now,
        doc,
        terms: vec![Term::new("ledger_account_category_id", category_id), Term::new("ledger_account_id", account_id)],
    })
}

fn nesting_record(scope: &Scope, parent_id: &str, sub_id: &str, now: Timestamp) -> Result<ObjectRecord> {
    let nesting = Nesting { ledger_account_category_id: parent_id.to_owned(), sub_category_id: sub_id.to_owned(), created_at: now };
    let doc = serde_json::to_string(&nesting).map_err(|e| Error::internal(format!("category nesting: {e}")))?;
    Ok(ObjectRecord {
        id: new_id(),
        kind: NESTING_KIND,
        scope: scope.clone(),
        parent_id: Some(parent_id.to_owned()),
        created_at: now,
        doc,
        terms: vec![Term::new("ledger_account_category_id", parent_id), Term::new("sub_category_id", sub_id)],
    })
}

impl CategoryInput {
    fn build(&self, ctx: &Ctx<'_>) -> Result<CategoryRecord> {
        let currency = LedgerCurrency::parse(self.currency.as_deref().ok_or_else(|| Error::missing("currency"))?, self.currency_exponent)?;
        let normal_balance =
            Direction::parse("normal_balance", self.normal_balance.as_deref().ok_or_else(|| Error::missing("normal_balance"))?)?;
        Ok(CategoryRecord {
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
            external_id: validate::opt_text("external_id", self.external_id.as_deref(), TEXT_LEN_MAX)?,
            metadata: validate::metadata("metadata", self.metadata.as_ref())?,
        })
    }
}

/// Each id of `ids` once, with the position it was first given at (for the parameter's name).
fn distinct(ids: &[String]) -> impl Iterator<Item = (usize, &String)> {
    let mut seen = BTreeSet::new();
    ids.iter().enumerate().filter(move |(_, id)| seen.insert(id.as_str()))
}

/// A new ledger account, as its categories see it.
pub struct NewAccount<'a> {
    pub id: &'a str,
    pub ledger_id: &'a str,
    pub currency: LedgerCurrency,
}

/// Stages, in a batch creating `account`, its memberships of `category_ids` (the account's
/// `ledger_account_category_ids`): each category must exist at commit, in the account's ledger
/// and currency.
pub async fn stage_memberships(ctx: &Ctx<'_>, batch: &mut WriteBatch, account: &NewAccount<'_>, category_ids: &[String]) -> Result<()> {
    for (at, id) in distinct(category_ids) {
        let param = format!("ledger_account_category_ids[{at}]");
        let category = parse(&require(ctx, batch, KIND, &validate::id(&param, id)?, &param).await?)?;
        category.admits(account.ledger_id, &account.currency, &param)?;
        batch.push(Write::Insert(member_record(ctx.scope, &category.id, account.id, ctx.now)?));
    }
    Ok(())
}

/// Stages, in a batch deleting the account `account_id`, the deletion of its memberships. A
/// membership removed by a racing request fails the batch with a 404, which
/// [`retry_if_vanished`] runs again.
pub async fn stage_account_removal(ctx: &Ctx<'_>, batch: &mut WriteBatch, account_id: &str) -> Result<()> {
    for member in all_of(ctx, MEMBER_KIND, vec![Filter::Eq { name: "ledger_account_id".into(), value: account_id.to_owned() }]).await? {
        batch.push(Write::Delete { kind: MEMBER_KIND, scope: ctx.scope.clone(), id: member.id });
    }
    Ok(())
}

/// Every document of `kind` in the caller's scope that `filters` select, page after page.
async fn all_of(ctx: &Ctx<'_>, kind: &'static str, filters: Vec<Filter>) -> Result<Vec<StoredObject>> {
    let mut out = Vec::new();
    let mut after_seq = None;
    loop {
        let page = listing::fetch(ctx, kind, filters.clone(), PageSpec { per_page: ROWS_PER_READ, after_seq }).await?;
        out.extend(page.items);
        match page.next_seq {
            Some(seq) => after_seq = Some(seq),
            None => return Ok(out),
        }
    }
}

/// The documents of `kind` whose parent is one of `parents`, read a slice of parents at a time.
async fn children(ctx: &Ctx<'_>, kind: &'static str, parents: &[String]) -> Result<Vec<StoredObject>> {
    let mut out = Vec::new();
    for chunk in parents.chunks(IDS_PER_READ) {
        out.extend(ctx.store.children(kind, ctx.scope, chunk).await?);
    }
    Ok(out)
}

/// The memberships of `account_id` in the category `category_id` (one, unless racing requests
/// added it twice).
async fn members_of(ctx: &Ctx<'_>, category_id: &str, account_id: &str) -> Result<Vec<StoredObject>> {
    let filters = vec![
        Filter::Eq { name: "ledger_account_category_id".into(), value: category_id.to_owned() },
        Filter::Eq { name: "ledger_account_id".into(), value: account_id.to_owned() },
    ];
    all_of(ctx, MEMBER_KIND, filters).await
}

/// The nestings of `sub_id` in `parent_id`.
async fn nestings_of(ctx: &Ctx<'_>, parent_id: &str, sub_id: &str) -> Result<Vec<StoredObject>> {
    let filters = vec![
        Filter::Eq { name: "ledger_account_category_id".into(), value: parent_id.to_owned() },
        Filter::Eq { name: "sub_category_id".into(), value: sub_id.to_owned() },
    ];
    all_of(ctx, NESTING_KIND, filters).await
}

/// A change a request is about to commit, seen by a [`walk`] as if committed: the event the
/// request writes carries the category as it will be served after it.
#[derive(Debug, Clone, Copy, Default)]
enum Change<'a> {
    #[default]
    None,
    AddAccount {
        category: &'a str,
        account: &'a str,
    },
    RemoveAccount {
        category: &'a str,
        account: &'a str,
    },
    Nest {
        parent: &'a str,
        sub: &'a str,
    },
    Unnest {
        parent: &'a str,
        sub: &'a str,
    },
}

/// A category's tree: itself and every category nested in it at any depth, and the accounts
/// of all of them, each once.
struct Tree {
    categories: BTreeSet<String>,
    accounts: BTreeSet<String>,
}

/// Reads the tree under `root`, level by level (the graph has no cycle, and a category reached
/// twice is walked once anyway).
async fn walk(ctx: &Ctx<'_>, root: &str, change: Change<'_>) -> Result<Tree> {
    let mut categories = BTreeSet::from([root.to_owned()]);
    let mut level = vec![root.to_owned()];
    while !level.is_empty() {
        let mut subs = Vec::new();
        for link in children(ctx, NESTING_KIND, &level).await? {
            let nesting: Nesting = parse_link(&link)?;
            if let Change::Unnest { parent, sub } = change
                && nesting.ledger_account_category_id == parent
                && nesting.sub_category_id == sub
            {
                continue;
            }
            subs.push(nesting.sub_category_id);
        }
        if let Change::Nest { parent, sub } = change
            && level.iter().any(|id| id == parent)
        {
            subs.push(sub.to_owned());
        }
        level = subs.into_iter().filter(|id| categories.insert(id.clone())).collect();
    }
    let all: Vec<String> = categories.iter().cloned().collect();
    let mut accounts = BTreeSet::new();
    for stored in children(ctx, MEMBER_KIND, &all).await? {
        let member: Member = parse_link(&stored)?;
        if let Change::RemoveAccount { category, account } = change
            && member.ledger_account_category_id == category
            && member.ledger_account_id == account
        {
            continue;
        }
        accounts.insert(member.ledger_account_id);
    }
    if let Change::AddAccount { category, account } = change
        && categories.contains(category)
    {
        accounts.insert(account.to_owned());
    }
    Ok(Tree { categories, accounts })
}

/// The sums of `accounts` over `query`: current ones from the store's running sums, as-of ones
/// from each account's own as-of sums (SPEC G5).
async fn totals_of(ctx: &Ctx<'_>, accounts: &BTreeSet<String>, query: &BalanceQuery) -> Result<Totals> {
    let ids: Vec<String> = accounts.iter().cloned().collect();
    let mut sum = Totals::default();
    if query.is_current() {
        for chunk in ids.chunks(IDS_PER_READ) {
            for (_, state) in ctx.store.ledger_accounts(chunk).await? {
                sum = sum.plus(state.totals).map_err(|_| too_large())?;
            }
        }
        return Ok(sum);
    }
    let window = query.window();
    for chunk in ids.chunks(IDS_PER_READ) {
        // Together, so that a store that answers concurrent reads in one statement does so.
        for totals in try_join_all(chunk.iter().map(|id| ctx.store.ledger_window(id, &window))).await? {
            sum = sum.plus(totals).map_err(|_| too_large())?;
        }
    }
    Ok(sum)
}

/// Each account's sums fit in `i64` (postings past it are refused), but a category's total of
/// several may not; it is refused by name rather than served wrong.
fn too_large() -> Error {
    Error::invalid("id", "the balances of this category's accounts add up past the largest amount Payrail serves (2^63 - 1)")
}

/// The category as served after `change`, with its balances over `query`.
async fn render_one(ctx: &Ctx<'_>, category: &CategoryRecord, query: &BalanceQuery, change: Change<'_>) -> Result<String> {
    let tree = walk(ctx, &category.id, change).await?;
    category.served(&totals_of(ctx, &tree.accounts, query).await?, None)
}

/// Renders stored categories with their balances over `query`.
pub async fn render(ctx: &Ctx<'_>, stored: &[StoredObject], query: &BalanceQuery) -> Result<Vec<String>> {
    let mut out = Vec::with_capacity(stored.len());
    for item in stored {
        out.push(render_one(ctx, &parse(item)?, query, Change::None).await?);
    }
    Ok(out)
}

pub async fn create(ctx: &Ctx<'_>, commit: &dyn Commit, input: &CategoryInput) -> Result<String> {
    let category = input.build(ctx)?;
    let mut batch = WriteBatch::new();
    require(ctx, &mut batch, super::ledgers::KIND, &category.ledger_id, "ledger_id").await?;
    super::take_external_id(&mut batch, KIND, &category.ledger_id, category.external_id.as_deref(), "ledger account category");
    // Nesting a new category cannot close a cycle (nothing is nested in it yet), and each
    // nesting's parent holds it as a child document, deleted with the parent: no guard needed.
    for (at, parent_id) in distinct(&input.ledger_account_category_ids) {
        let param = format!("ledger_account_category_ids[{at}]");
        let parent = parse(&require(ctx, &mut batch, KIND, &validate::id(&param, parent_id)?, &param).await?)?;
        parent.admits(&category.ledger_id, &category.currency(), &param)?;
        batch.push(Write::Insert(nesting_record(ctx.scope, &parent.id, &category.id, ctx.now)?));
    }
    let json = category.served(&Totals::default(), None)?;
    batch.push(Write::Insert(category.record(ctx.scope)?));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &category.id, &json, ctx.now)?));
    commit.commit(batch, &json).await?;
    Ok(json)
}

async fn load(ctx: &Ctx<'_>, id: &str) -> Result<(CategoryRecord, i64)> {
    let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger account category"))?;
    Ok((parse(&stored)?, stored.version))
}

pub async fn get(ctx: &Ctx<'_>, id: &str, query: &BalanceQuery) -> Result<String> {
    let (category, _) = load(ctx, id).await?;
    render_one(ctx, &category, query, Change::None).await
}

#[derive(Debug, Default)]
pub struct CategoryFilter {
    pub ids: Vec<String>,
    pub names: Vec<String>,
    pub ledger_id: Option<String>,
    pub currency: Option<String>,
    pub external_id: Option<String>,
    /// Categories nested directly in this one.
    pub parent_ledger_account_category_id: Option<String>,
    /// Categories that hold this account, directly or through categories nested in them.
    pub ledger_account_id: Option<String>,
    pub metadata: Vec<(String, String)>,
}

pub async fn list(ctx: &Ctx<'_>, filter: &CategoryFilter, query: &BalanceQuery, page: PageSpec) -> Result<ListedPage> {
    let mut filters: Vec<Filter> = [
        listing::any_id(&filter.ids),
        listing::any_of("name", &filter.names),
        listing::eq("ledger_id", filter.ledger_id.as_deref()),
        listing::eq("currency", filter.currency.as_deref()),
        listing::eq("external_id", filter.external_id.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    filters.extend(listing::metadata_filters(&filter.metadata));
    if let Some(parent) = &filter.parent_ledger_account_category_id {
        let links =
            all_of(ctx, NESTING_KIND, vec![Filter::Eq { name: "ledger_account_category_id".into(), value: parent.clone() }]).await?;
        let subs = links.iter().map(|l| parse_link::<Nesting>(l).map(|n| n.sub_category_id)).collect::<Result<Vec<_>>>()?;
        filters.push(Filter::IdIn(subs));
    }
    if let Some(account) = &filter.ledger_account_id {
        filters.push(Filter::IdIn(holding(ctx, account).await?.into_iter().collect()));
    }
    let found = listing::fetch(ctx, KIND, filters, page).await?;
    let docs = render(ctx, &found.items, query).await?;
    Ok(ListedPage { json: listing::json_array(docs.iter().map(String::as_str)), next_seq: found.next_seq })
}

/// The categories that hold `account_id`, directly or through categories nested in them.
async fn holding(ctx: &Ctx<'_>, account_id: &str) -> Result<BTreeSet<String>> {
    let direct = all_of(ctx, MEMBER_KIND, vec![Filter::Eq { name: "ledger_account_id".into(), value: account_id.to_owned() }]).await?;
    let mut found = BTreeSet::new();
    for stored in &direct {
        found.insert(parse_link::<Member>(stored)?.ledger_account_category_id);
    }
    let mut level: Vec<String> = found.iter().cloned().collect();
    while !level.is_empty() {
        let mut next = Vec::new();
        for chunk in level.chunks(IDS_PER_READ) {
            let filter = Filter::AnyOf { name: "sub_category_id".into(), values: chunk.to_vec() };
            for stored in all_of(ctx, NESTING_KIND, vec![filter]).await? {
                let parent = parse_link::<Nesting>(&stored)?.ledger_account_category_id;
                if found.insert(parent.clone()) {
                    next.push(parent);
                }
            }
        }
        level = next;
    }
    Ok(found)
}

/// The filter a list of ledger accounts, transactions or entries takes from its
/// `ledger_account_category_id` (`param`): items of the accounts in the category's tree, by
/// their id (`term` None) or by the term `term`. A category the caller cannot see holds nothing.
pub async fn accounts_filter(ctx: &Ctx<'_>, category_id: &str, param: &str, term: Option<&str>) -> Result<Filter> {
    let accounts: Vec<String> = match ctx.store.get(KIND, ctx.scope, category_id).await? {
        Some(_) => walk(ctx, category_id, Change::None).await?.accounts.into_iter().collect(),
        None => Vec::new(),
    };
    if accounts.len() > FILTER_ACCOUNTS_MAX {
        return Err(Error::invalid(
            param,
            format!("the category holds more than {FILTER_ACCOUNTS_MAX} ledger accounts, too many to filter this list by"),
        ));
    }
    Ok(match term {
        _ if accounts.is_empty() => Filter::IdIn(Vec::new()),
        None => Filter::IdIn(accounts),
        Some(term) => Filter::AnyOf { name: term.to_owned(), values: accounts },
    })
}

pub async fn update(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &CategoryPatch) -> Result<String> {
    retry_on_conflict(|| async {
        let (mut category, version) = load(ctx, id).await?;
        let before = category.clone();
        let mut batch = WriteBatch::new();
        let ledger_id = category.ledger_id.clone();
        let named = super::Named {
            name: &mut category.name,
            description: &mut category.description,
            metadata: &mut category.metadata,
            external_id: &mut category.external_id,
        };
        named.apply(patch, &mut batch, KIND, &ledger_id, "ledger account category")?;
        if crate::domain::unchanged(&before, &category, |c| &mut c.updated_at) {
            // Nothing changes: no event, and the category as it is (SPEC E4).
            return render_one(ctx, &category, &BalanceQuery::default(), Change::None).await;
        }
        category.updated_at = ctx.now;
        let json = render_one(ctx, &category, &BalanceQuery::default(), Change::None).await?;
        batch.push(Write::Replace { record: category.record(ctx.scope)?, expected_version: version });
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

/// Deletes a category with its memberships and nestings (MT answers 200 with the category,
/// `discarded_at` set); the accounts and the categories nested in it stay.
pub async fn delete(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str) -> Result<String> {
    retry_on_conflict(|| async { retry_if_vanished(|| delete_once(ctx, commit, id)).await }).await
}

async fn delete_once(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str) -> Result<String> {
    let (category, _) = load(ctx, id).await?;
    let mut batch = WriteBatch::new();
    super::ledgers::guard(ctx, &mut batch, &category.ledger_id).await?;
    let tree = walk(ctx, id, Change::None).await?;
    let json = category.served(&totals_of(ctx, &tree.accounts, &BalanceQuery::default()).await?, Some(ctx.now))?;
    let scope = ctx.scope.clone();
    // The category first: on PostgreSQL this waits for a racing addition to it, which the
    // deletions of its children below then see.
    batch.push(Write::Delete { kind: KIND, scope: scope.clone(), id: id.to_owned() });
    batch.push(Write::DeleteChildren { kind: NESTING_KIND, scope: scope.clone(), parent_id: id.to_owned() });
    batch.push(Write::DeleteChildren { kind: MEMBER_KIND, scope: scope.clone(), parent_id: id.to_owned() });
    for link in all_of(ctx, NESTING_KIND, vec![Filter::Eq { name: "sub_category_id".into(), value: id.to_owned() }]).await? {
        batch.push(Write::Delete { kind: NESTING_KIND, scope: scope.clone(), id: link.id });
    }
    if let Some(old) = &category.external_id {
        batch.push(Write::ReleaseUnique { key: external_id_key(KIND, &category.ledger_id, old) });
    }
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "deleted", id, &json, ctx.now)?));
    commit.commit(batch, &json).await?;
    Ok(json)
}

/// Puts the account `account_id` in the category `id` (`PUT .../ledger_accounts/{id}`; MT
/// answers 200 without a body). Putting it there again changes nothing.
pub async fn add_account(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, account_id: &str) -> Result<()> {
    let (category, _) = load(ctx, id).await?;
    let stored = ctx.store.get(ACCOUNT_KIND, ctx.scope, account_id).await?.ok_or_else(|| Error::not_found("ledger account"))?;
    let account: AccountView =
        serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored ledger account {account_id}: {e}")))?;
    let currency = LedgerCurrency { code: account.currency, exponent: account.currency_exponent };
    category.admits(&account.ledger_id, &currency, "ledger_account_id")?;
    let mut batch = WriteBatch::new();
    if members_of(ctx, id, account_id).await?.is_empty() {
        let scope = ctx.scope.clone();
        batch.push(Write::Require { kind: KIND, scope: scope.clone(), id: id.to_owned(), parameter: "id".into() });
        batch.push(Write::Require { kind: ACCOUNT_KIND, scope, id: account_id.to_owned(), parameter: "ledger_account_id".into() });
        batch.push(Write::Insert(member_record(ctx.scope, id, account_id, ctx.now)?));
        let json = render_one(ctx, &category, &BalanceQuery::default(), Change::AddAccount { category: id, account: account_id }).await?;
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
    }
    commit.commit(batch, "").await
}

/// Takes the account `account_id` out of the category `id` (404 if it is not in it).
pub async fn remove_account(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, account_id: &str) -> Result<()> {
    retry_if_vanished(|| async {
        let (category, _) = load(ctx, id).await?;
        let members = members_of(ctx, id, account_id).await?;
        if members.is_empty() {
            return Err(Error::NotFound { message: "the ledger account is not in this ledger account category".into() });
        }
        let mut batch = WriteBatch::new();
        for member in members {
            batch.push(Write::Delete { kind: MEMBER_KIND, scope: ctx.scope.clone(), id: member.id });
        }
        let change = Change::RemoveAccount { category: id, account: account_id };
        let json = render_one(ctx, &category, &BalanceQuery::default(), change).await?;
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, "").await
    })
    .await
}

/// Nests the category `sub_id` in `id` (`PUT .../ledger_account_categories/{sub_category_id}`):
/// same ledger and currency only, and never into its own tree (a cycle is 422). Nesting it
/// there again changes nothing.
pub async fn nest(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, sub_id: &str) -> Result<()> {
    retry_on_conflict(|| async {
        let (parent, _) = load(ctx, id).await?;
        let (sub, _) = load(ctx, sub_id).await?;
        parent.admits(&sub.ledger_id, &sub.currency(), "sub_category_id")?;
        let mut batch = WriteBatch::new();
        if !nestings_of(ctx, id, sub_id).await?.is_empty() {
            return commit.commit(batch, "").await;
        }
        // The guard first: what the walk reads is then what the commit is judged against.
        super::ledgers::guard(ctx, &mut batch, &parent.ledger_id).await?;
        if walk(ctx, sub_id, Change::None).await?.categories.contains(id) {
            return Err(Error::invalid(
                "sub_category_id",
                "the category is, or holds, the category it would be nested in: nesting it would make a cycle",
            ));
        }
        let scope = ctx.scope.clone();
        batch.push(Write::Require { kind: KIND, scope: scope.clone(), id: id.to_owned(), parameter: "id".into() });
        batch.push(Write::Require { kind: KIND, scope, id: sub_id.to_owned(), parameter: "sub_category_id".into() });
        batch.push(Write::Insert(nesting_record(ctx.scope, id, sub_id, ctx.now)?));
        let json = render_one(ctx, &parent, &BalanceQuery::default(), Change::Nest { parent: id, sub: sub_id }).await?;
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, "").await
    })
    .await
}

/// Takes the category `sub_id` out of `id` (404 if it is not nested there).
pub async fn unnest(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, sub_id: &str) -> Result<()> {
    retry_on_conflict(|| async {
        let (parent, _) = load(ctx, id).await?;
        let mut batch = WriteBatch::new();
        super::ledgers::guard(ctx, &mut batch, &parent.ledger_id).await?;
        let links = nestings_of(ctx, id, sub_id).await?;
        if links.is_empty() {
            return Err(Error::NotFound { message: "the category is not nested in this ledger account category".into() });
        }
        for link in links {
            batch.push(Write::Delete { kind: NESTING_KIND, scope: ctx.scope.clone(), id: link.id });
        }
        let json = render_one(ctx, &parent, &BalanceQuery::default(), Change::Unnest { parent: id, sub: sub_id }).await?;
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, "").await
    })
    .await
}
