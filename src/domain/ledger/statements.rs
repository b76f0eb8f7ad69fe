//! Ledger account statements (SPEC G1, G5): an account's balances at the two ends of an
//! effective-time window, fixed when the statement is made. Both are summed from the account's
//! entries written up to its version at that moment (`ledger_account_lock_version`), so a
//! statement is one consistent picture even while entries are being written; the entries it
//! covers are listed with `GET /api/ledger_entries?ledger_account_statement_id=...`.

use futures_util::future::try_join;
use serde::{Deserialize, Serialize};

use super::super::api_key::Scope;
use super::super::common::new_id;
use super::super::enums::Direction;
use super::super::listing;
use super::super::time::Timestamp;
use super::super::validate::{self, Metadata, TEXT_LEN_MAX};
use super::super::{Commit, Ctx, event, require};
use super::{BalancesDoc, balances, effective_at};
use crate::base::ledger::Window;
use crate::error::{Error, Result};
use crate::store::ledger::{STATUS_PENDING, STATUS_POSTED};
use crate::store::{Filter, ObjectRecord, PostingFilter, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = super::super::kinds::LEDGER_ACCOUNT_STATEMENT;

/// MT's `ledger_account_statement`, as stored and served.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_account_statement)]
pub struct LedgerAccountStatement {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub ledger_id: String,
    pub description: Option<String>,
    pub ledger_account_id: String,
    pub ledger_account_lock_version: i64,
    #[schema(schema_with = super::super::schema::direction)]
    pub ledger_account_normal_balance: Direction,
    /// Inclusive.
    pub effective_at_lower_bound: Timestamp,
    /// Exclusive.
    pub effective_at_upper_bound: Timestamp,
    pub starting_balance: BalancesDoc,
    pub ending_balance: BalancesDoc,
    #[schema(schema_with = super::super::schema::metadata)]
    pub metadata: Metadata,
}

/// MT's `ledger_account_statement_create_request`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_account_statement_create_request)]
pub struct StatementInput {
    pub description: Option<String>,
    #[schema(value_type = String, required = true, format = "uuid")]
    pub ledger_account_id: Option<String>,
    /// Inclusive.
    #[schema(value_type = String, required = true, format = DateTime)]
    pub effective_at_lower_bound: Option<String>,
    /// Exclusive; not before the lower bound.
    #[schema(value_type = String, required = true, format = DateTime)]
    pub effective_at_upper_bound: Option<String>,
    #[schema(schema_with = super::super::schema::metadata_or_null)]
    pub metadata: Option<Metadata>,
}

impl LedgerAccountStatement {
    fn record(&self, scope: &Scope, doc: String) -> ObjectRecord {
        let mut terms: Vec<Term> = listing::metadata_terms(&self.metadata).collect();
        terms.push(Term::new("ledger_account_id", &self.ledger_account_id));
        terms.push(Term::new("ledger_id", &self.ledger_id));
        ObjectRecord { id: self.id.clone(), kind: KIND, scope: scope.clone(), parent_id: None, created_at: self.created_at, doc, terms }
    }
}

fn to_json(statement: &LedgerAccountStatement) -> Result<String> {
    serde_json::to_string(statement).map_err(|e| Error::internal(format!("ledger account statement: {e}")))
}

fn parse(stored: &StoredObject) -> Result<LedgerAccountStatement> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored ledger account statement {}: {e}", stored.id)))
}

/// The window's bounds, checked: RFC 3339, lower at or before upper.
fn bounds(input: &StatementInput) -> Result<(Timestamp, Timestamp)> {
    let bound = |name: &str, text: Option<&str>| effective_at(name, text.ok_or_else(|| Error::missing(name))?);
    let lower = bound("effective_at_lower_bound", input.effective_at_lower_bound.as_deref())?;
    let upper = bound("effective_at_upper_bound", input.effective_at_upper_bound.as_deref())?;
    if upper < lower {
        return Err(Error::invalid("effective_at_upper_bound", "effective_at_upper_bound must not be before effective_at_lower_bound"));
    }
    Ok((lower, upper))
}

pub async fn create(ctx: &Ctx<'_>, commit: &dyn Commit, input: &StatementInput) -> Result<String> {
    let account_id =
        validate::id("ledger_account_id", input.ledger_account_id.as_deref().ok_or_else(|| Error::missing("ledger_account_id"))?)?;
    let (lower, upper) = bounds(input)?;
    let description = validate::opt_text("description", input.description.as_deref(), TEXT_LEN_MAX)?;
    let metadata = validate::metadata("metadata", input.metadata.as_ref())?;
    let mut batch = WriteBatch::new();
    let account = super::accounts::parse(&require(ctx, &mut batch, super::accounts::KIND, &account_id, "ledger_account_id").await?)?;
    let states = ctx.store.ledger_accounts(std::slice::from_ref(&account_id)).await?;
    let (_, state) = states.first().ok_or_else(|| Error::internal("a ledger account without sums"))?;
    // Both ends as of the version read: entries written after it are not in this statement.
    let before = |at: Timestamp| Window { to_micros: Some(at.as_micros()), upto_version: Some(state.lock_version), ..Window::default() };
    let (lower_window, upper_window) = (before(lower), before(upper));
    let (starting, ending) =
        try_join(ctx.store.ledger_window(&account_id, &lower_window), ctx.store.ledger_window(&account_id, &upper_window)).await?;
    let statement = LedgerAccountStatement {
        id: new_id(),
        object: KIND.into(),
        live_mode: ctx.scope.live_mode,
        created_at: ctx.now,
        updated_at: ctx.now,
        ledger_id: account.ledger_id.clone(),
        description,
        ledger_account_id: account_id,
        ledger_account_lock_version: state.lock_version,
        ledger_account_normal_balance: account.normal_balance,
        effective_at_lower_bound: lower,
        effective_at_upper_bound: upper,
        starting_balance: balances(&starting, account.credit_normal(), &account.currency())?,
        ending_balance: balances(&ending, account.credit_normal(), &account.currency())?,
        metadata,
    };
    let json = to_json(&statement)?;
    batch.push(Write::Insert(statement.record(ctx.scope, json.clone())));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &statement.id, &json, ctx.now)?));
    commit.commit(batch, &json).await?;
    Ok(json)
}

pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    listing::stored_doc(ctx, KIND, id, "ledger account statement").await
}

/// The filters a list of ledger entries takes from `ledger_account_statement_id`: the entries
/// of the statement's account effective within its window (lower bound inclusive, upper
/// exclusive) that its balances were made from (written up to its `ledger_account_lock_version`;
/// later ones, even backdated into the window, are not the statement's), less the archived
/// ones, which count in no balance. (An entry pending when the statement was made and archived
/// since is left out too: the store keeps no time of archiving to tell it apart.) A statement
/// the caller cannot see covers no entry.
pub async fn entry_filters(ctx: &Ctx<'_>, id: &str) -> Result<Vec<Filter>> {
    let Some(stored) = ctx.store.get(KIND, ctx.scope, id).await? else {
        return Ok(vec![Filter::IdIn(Vec::new())]);
    };
    let statement = parse(&stored)?;
    let window = PostingFilter {
        account_id: Some(statement.ledger_account_id.clone()),
        effective_from: Some(statement.effective_at_lower_bound.as_micros()),
        effective_to: Some(statement.effective_at_upper_bound.as_micros() - 1),
        version_max: Some(statement.ledger_account_lock_version),
        statuses: Some(vec![STATUS_PENDING, STATUS_POSTED]),
        ..PostingFilter::default()
    };
    Ok(vec![
        Filter::Eq { name: "ledger_account_id".into(), value: statement.ledger_account_id },
        Filter::Posting { filter: window, of_parent: false },
    ])
}
