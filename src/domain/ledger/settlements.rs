//! Ledger account settlements (SPEC G1, G6): create, get, list, update (post or archive a
//! pending one), and the refusal of hand-picked entries.
//!
//! A settlement takes every posted entry of the settled account that no other settlement took
//! and that is effective before `effective_at_upper_bound`, and writes one ledger transaction
//! moving their net amount between the settled account and the contra account, so the settled
//! account's balance over those entries (and the settlement's own entry) is zero.
//!
//! Which entries it took is kept by the store, entry by entry, and marked in the commit that
//! writes the settlement ([`Write::LedgerClaim`]): the store marks the set the domain summed or
//! refuses the batch with a conflict (a racing settlement took some, or a pending entry posted
//! meanwhile), and the domain sums again. So two settlements of one account racing never take
//! the same entry, the amount is always the sum of what was taken, and an entry backdated into a
//! period already settled, or still pending when its period was settled, is taken by the next
//! settlement (as Modern Treasury documents). Archiving a pending settlement archives its
//! transaction and gives its entries back.

use serde::{Deserialize, Serialize};

use super::super::api_key::Scope;
use super::super::common::new_id;
use super::super::enums::{Direction, LedgerStatus};
use super::super::listing::{self, ListedPage, PageSpec};
use super::super::money::AMOUNT_MAX;
use super::super::time::Timestamp;
use super::super::validate::{self, Metadata, MetadataPatch, TEXT_LEN_MAX};
use super::super::{Commit, Ctx, event, retry_on_conflict};
use super::accounts::{self, AccountRecord};
use super::effective_at;
use super::transactions::{self, Follow, Internal};
use crate::error::{Error, Result};
use crate::store::ledger::{Claim, Claimed};
use crate::store::{Filter, ObjectRecord, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = super::super::kinds::LEDGER_ACCOUNT_SETTLEMENT;

/// MT's `ledger_account_settlement`, as stored and served. Payrail settles synchronously, so
/// the statuses it shows are `pending`, `posted` and `archived` (never `processing` or
/// `archiving`).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_account_settlement)]
pub struct Settlement {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub ledger_id: String,
    pub description: Option<String>,
    #[schema(schema_with = super::super::schema::ledger_status)]
    pub status: LedgerStatus,
    pub settled_ledger_account_id: String,
    pub contra_ledger_account_id: String,
    pub effective_at_upper_bound: Option<Timestamp>,
    pub ledger_transaction_id: Option<String>,
    pub amount: Option<i64>,
    #[schema(schema_with = super::super::schema::direction_or_null)]
    pub settlement_entry_direction: Option<Direction>,
    pub currency: String,
    pub currency_exponent: Option<u8>,
    #[schema(schema_with = super::super::schema::metadata)]
    pub metadata: Metadata,
}

/// MT's `ledger_account_settlement_create_request`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_account_settlement_create_request)]
pub struct SettlementInput {
    pub description: Option<String>,
    /// `pending` (the default) or `posted`; Payrail does not support `drafting`.
    #[schema(schema_with = settlement_create_status_or_null)]
    pub status: Option<String>,
    #[schema(value_type = String, required = true, format = "uuid")]
    pub settled_ledger_account_id: Option<String>,
    #[schema(value_type = String, required = true, format = "uuid")]
    pub contra_ledger_account_id: Option<String>,
    pub allow_either_direction: Option<bool>,
    /// Entries effective before it are settled (now when absent).
    #[schema(schema_with = super::super::schema::date_time_or_null)]
    pub effective_at_upper_bound: Option<String>,
    #[schema(schema_with = super::super::schema::metadata_or_null)]
    pub metadata: Option<Metadata>,
    pub skip_settlement_ledger_transaction: Option<bool>,
}

/// MT's `ledger_account_settlement_update_request`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_account_settlement_update_request)]
pub struct SettlementPatch {
    #[serde(default, deserialize_with = "super::super::common::nullable")]
    pub description: Option<Option<String>>,
    /// Posts or archives a pending settlement.
    #[schema(schema_with = settlement_update_status_or_null)]
    pub status: Option<String>,
    #[schema(schema_with = super::super::schema::metadata_patch_or_null)]
    pub metadata: Option<MetadataPatch>,
    /// Read only when a settlement is created: `true` here is refused.
    #[schema(ignore)]
    pub skip_settlement_ledger_transaction: Option<bool>,
}

/// MT's `ledger_account_settlement_entries_patch_request` / `_delete_request`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_account_settlement_entries_patch_request)]
pub struct SettlementEntriesInput {
    pub ledger_entry_ids: Option<Vec<String>>,
}

/// The statuses a settlement is created with.
fn settlement_create_status_or_null() -> utoipa::openapi::schema::Object {
    super::super::schema::nullable_string_enum(&["pending", "posted"])
}

/// The statuses a PATCH moves a pending settlement to.
fn settlement_update_status_or_null() -> utoipa::openapi::schema::Object {
    super::super::schema::nullable_string_enum(&["posted", "archived"])
}

impl Settlement {
    fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = listing::metadata_terms(&self.metadata).collect();
        terms.push(Term::new("ledger_id", &self.ledger_id));
        terms.push(Term::new("status", self.status.as_str()));
        terms.push(Term::new("settled_ledger_account_id", &self.settled_ledger_account_id));
        terms.push(Term::new("updated_at", self.updated_at.to_string()));
        terms.extend(self.ledger_transaction_id.as_ref().map(|id| Term::new("ledger_transaction_id", id)));
        terms.extend(self.settlement_entry_direction.map(|d| Term::new("settlement_entry_direction", d.as_str())));
        terms
    }

    fn record(&self, scope: &Scope, doc: String) -> ObjectRecord {
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
}

fn to_json(settlement: &Settlement) -> Result<String> {
    serde_json::to_string(settlement).map_err(|e| Error::internal(format!("ledger account settlement: {e}")))
}

pub fn parse(stored: &StoredObject) -> Result<Settlement> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored ledger account settlement {}: {e}", stored.id)))
}

/// A create request, checked on its own.
struct Request {
    settled_id: String,
    contra_id: String,
    upper_bound: Timestamp,
    status: LedgerStatus,
    either_direction: bool,
    skip_transaction: bool,
    description: Option<String>,
    metadata: Metadata,
}

impl SettlementInput {
    fn check(&self, now: Timestamp) -> Result<Request> {
        let status = match self.status.as_deref() {
            None | Some("pending") => LedgerStatus::Pending,
            Some("posted") => LedgerStatus::Posted,
            Some("drafting") => {
                return Err(Error::invalid(
                    "status",
                    "Payrail does not support drafting settlements (entries picked by hand); create it pending or posted",
                ));
            }
            Some(_) => return Err(Error::invalid("status", "status must be pending or posted (drafting is not supported)")),
        };
        let id = |param: &str, value: Option<&str>| validate::id(param, value.ok_or_else(|| Error::missing(param))?);
        let settled_id = id("settled_ledger_account_id", self.settled_ledger_account_id.as_deref())?;
        let contra_id = id("contra_ledger_account_id", self.contra_ledger_account_id.as_deref())?;
        if settled_id == contra_id {
            return Err(Error::invalid("contra_ledger_account_id", "the contra ledger account must differ from the settled one"));
        }
        let upper_bound = match self.effective_at_upper_bound.as_deref() {
            Some(text) => effective_at("effective_at_upper_bound", text)?,
            None => now,
        };
        Ok(Request {
            settled_id,
            contra_id,
            upper_bound,
            status,
            either_direction: self.allow_either_direction.unwrap_or(false),
            skip_transaction: self.skip_settlement_ledger_transaction.unwrap_or(false),
            description: validate::opt_text("description", self.description.as_deref(), TEXT_LEN_MAX)?,
            metadata: validate::metadata("metadata", self.metadata.as_ref())?,
        })
    }
}

/// Reads the settled and contra accounts and checks they can settle against each other.
async fn accounts_of(ctx: &Ctx<'_>, request: &Request) -> Result<(AccountRecord, AccountRecord, i64)> {
    let loaded = accounts::load(ctx, &[request.settled_id.clone(), request.contra_id.clone()]).await?;
    let find = |id: &str, param: &str| {
        loaded
            .iter()
            .find(|(record, _)| record.id == id)
            .cloned()
            .ok_or_else(|| Error::invalid(param, format!("{param} does not name an existing ledger account")))
    };
    let (settled, state) = find(&request.settled_id, "settled_ledger_account_id")?;
    let (contra, _) = find(&request.contra_id, "contra_ledger_account_id")?;
    if contra.ledger_id != settled.ledger_id {
        return Err(Error::invalid("contra_ledger_account_id", "the contra ledger account must belong to the settled account's ledger"));
    }
    if contra.currency != settled.currency || contra.currency_exponent != settled.currency_exponent {
        return Err(Error::invalid(
            "contra_ledger_account_id",
            format!("the contra ledger account's currency must be the settled account's ({})", settled.currency),
        ));
    }
    Ok((settled, contra, state.lock_version))
}

/// The settled account's balance over `sums`, signed by its normal balance.
fn balance_of(settled: &AccountRecord, sums: &Claimed) -> Result<i64> {
    let net = if settled.credit_normal() {
        i128::from(sums.credits) - i128::from(sums.debits)
    } else {
        i128::from(sums.debits) - i128::from(sums.credits)
    };
    i64::try_from(net)
        .map_err(|_| Error::invalid("settled_ledger_account_id", "the entries to settle sum past the largest amount Payrail keeps"))
}

/// `POST /ledger_account_settlements`.
pub async fn create(ctx: &Ctx<'_>, commit: &dyn Commit, input: &SettlementInput) -> Result<String> {
    let request = input.check(ctx.now)?;
    retry_on_conflict(|| async {
        let (settled, contra, version) = accounts_of(ctx, &request).await?;
        let sums = ctx.store.ledger_unsettled(&settled.id, request.upper_bound.as_micros(), version).await?;
        let balance = balance_of(&settled, &sums)?;
        if balance < 0 && !request.either_direction {
            return Err(Error::invalid(
                "allow_either_direction",
                format!(
                    "the entries to settle leave the settled account at {balance}, below zero; set allow_either_direction to settle it back up to zero"
                ),
            ));
        }
        let mut batch = WriteBatch::new();
        let (settlement, own_entry_ids) = stage(ctx, &mut batch, &request, (&settled, &contra), balance)?;
        let json = to_json(&settlement)?;
        batch.push(Write::LedgerClaim(Claim {
            account_id: settled.id.clone(),
            settlement_id: settlement.id.clone(),
            before_micros: request.upper_bound.as_micros(),
            upto_version: version,
            expected: sums,
            own_entry_ids,
        }));
        batch.push(Write::Insert(settlement.record(ctx.scope, json.clone())));
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &settlement.id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

/// Builds the settlement and stages its ledger transaction (none for a zero balance, or when
/// the client asked to skip it); the accounts are required to exist at commit either way.
/// Returns the settlement and the id of its own entry on the settled account, if it has one
/// (taken with the rest, so no later settlement counts it).
fn stage(
    ctx: &Ctx<'_>,
    batch: &mut WriteBatch,
    request: &Request,
    (settled, contra): (&AccountRecord, &AccountRecord),
    balance: i64,
) -> Result<(Settlement, Vec<String>)> {
    // The entry on the settled account that brings it back to zero: against its normal balance
    // for a positive balance, with it for a negative one.
    let settled_debit = settled.credit_normal() == (balance > 0);
    let mut settlement = Settlement {
        id: new_id(),
        object: KIND.into(),
        live_mode: ctx.scope.live_mode,
        created_at: ctx.now,
        updated_at: ctx.now,
        ledger_id: settled.ledger_id.clone(),
        description: request.description.clone(),
        status: request.status,
        settled_ledger_account_id: settled.id.clone(),
        contra_ledger_account_id: contra.id.clone(),
        effective_at_upper_bound: Some(request.upper_bound),
        ledger_transaction_id: None,
        amount: Some(balance.abs()),
        settlement_entry_direction: (balance != 0).then_some(if settled_debit { Direction::Debit } else { Direction::Credit }),
        currency: settled.currency.clone(),
        currency_exponent: Some(settled.currency_exponent),
        metadata: request.metadata.clone(),
    };
    if balance == 0 || request.skip_transaction {
        for (account, param) in [(settled, "settled_ledger_account_id"), (contra, "contra_ledger_account_id")] {
            batch.push(Write::Require { kind: accounts::KIND, scope: ctx.scope.clone(), id: account.id.clone(), parameter: param.into() });
        }
        return Ok((settlement, Vec::new()));
    }
    // The settling entries carry the whole balance: past what one entry may carry (G2), the
    // refusal names the account whose balance it is, not the entries' internal `amount`.
    if balance.unsigned_abs() > AMOUNT_MAX.unsigned_abs() {
        return Err(Error::invalid(
            "settled_ledger_account_id",
            format!(
                "the entries to settle sum to {}, past the largest amount one ledger entry carries ({AMOUNT_MAX}); settle an earlier effective_at_upper_bound first",
                balance.unsigned_abs()
            ),
        ));
    }
    let spec = Internal {
        status: request.status,
        description: request.description.as_deref(),
        // Just inside the settled window: the settled account's balance as of the bound
        // (exclusive) is what the settlement left, zero when every entry before it was posted.
        effective_at: request.upper_bound.plus_micros(-1),
        entries: vec![(settled, settled_debit, balance.abs()), (contra, !settled_debit, balance.abs())],
    };
    let (txn_id, entry_ids) = transactions::stage_internal(ctx, batch, spec)?;
    settlement.ledger_transaction_id = Some(txn_id);
    // The settled account's entry is the first the transaction was given.
    Ok((settlement, entry_ids.into_iter().take(1).collect()))
}

pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    listing::stored_doc(ctx, KIND, id, "ledger account settlement").await
}

#[derive(Debug, Default)]
pub struct SettlementFilter {
    pub ids: Vec<String>,
    pub ledger_id: Option<String>,
    pub settled_ledger_account_id: Option<String>,
    pub settlement_entry_direction: Option<String>,
    pub ledger_transaction_id: Option<String>,
    pub metadata: Vec<(String, String)>,
    pub created_from: Option<Timestamp>,
    pub created_to: Option<Timestamp>,
    pub updated_from: Option<Timestamp>,
    pub updated_to: Option<Timestamp>,
}

pub async fn list(ctx: &Ctx<'_>, filter: &SettlementFilter, page: PageSpec) -> Result<ListedPage> {
    if let Some(direction) = &filter.settlement_entry_direction {
        Direction::parse("settlement_entry_direction", direction)?;
    }
    let mut filters: Vec<Filter> = [
        listing::any_id(&filter.ids),
        listing::eq("ledger_id", filter.ledger_id.as_deref()),
        listing::eq("settled_ledger_account_id", filter.settled_ledger_account_id.as_deref()),
        listing::eq("settlement_entry_direction", filter.settlement_entry_direction.as_deref()),
        listing::eq("ledger_transaction_id", filter.ledger_transaction_id.as_deref()),
        filter.updated_from.map(|at| Filter::AtLeast { name: "updated_at".into(), value: at.to_string() }),
        filter.updated_to.map(|at| Filter::AtMost { name: "updated_at".into(), value: at.to_string() }),
    ]
    .into_iter()
    .flatten()
    .collect();
    filters.extend(listing::metadata_filters(&filter.metadata));
    filters.extend(filter.created_from.map(Filter::CreatedFrom));
    filters.extend(filter.created_to.map(Filter::CreatedTo));
    listing::stored_page(ctx, KIND, filters, page).await
}

impl SettlementPatch {
    /// Applies the patch; what the settlement's status change (if any) does to its transaction
    /// and entries, and the event the change writes.
    fn apply(&self, settlement: &mut Settlement) -> Result<(Option<LedgerStatus>, &'static str)> {
        if self.skip_settlement_ledger_transaction == Some(true) {
            return Err(Error::invalid(
                "skip_settlement_ledger_transaction",
                "skip_settlement_ledger_transaction is only read when a settlement is created",
            ));
        }
        let to = match self.status.as_deref() {
            None => None,
            Some("posted") => Some(LedgerStatus::Posted),
            Some("archived") => Some(LedgerStatus::Archived),
            Some(_) => return Err(Error::invalid("status", "status must be posted or archived")),
        }
        .filter(|to| *to != settlement.status);
        if to.is_some() && settlement.status != LedgerStatus::Pending {
            return Err(Error::invalid(
                "status",
                format!("the ledger account settlement is {}: only a pending one can be posted or archived", settlement.status),
            ));
        }
        if let Some(description) = &self.description {
            settlement.description = validate::opt_text("description", description.as_deref(), TEXT_LEN_MAX)?;
        }
        if let Some(metadata) = &self.metadata {
            settlement.metadata = validate::merge_metadata("metadata", &settlement.metadata, metadata)?;
        }
        let event_name = match to {
            Some(LedgerStatus::Posted) => "posted",
            Some(_) => "archived",
            None => "updated",
        };
        if let Some(to) = to {
            settlement.status = to;
        }
        Ok((to, event_name))
    }
}

/// `PATCH /ledger_account_settlements/{id}`: description, metadata, and posting or archiving a
/// pending settlement. Its transaction follows in the same commit; archiving gives its entries
/// back to be settled again.
pub async fn update(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &SettlementPatch) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger account settlement"))?;
        let mut settlement = parse(&stored)?;
        let before = settlement.clone();
        let (to, event_name) = patch.apply(&mut settlement)?;
        if to.is_none() && crate::domain::unchanged(&before, &settlement, |s| &mut s.updated_at) {
            return Ok(stored.doc); // nothing changes: no event (SPEC E4)
        }
        settlement.updated_at = ctx.now;
        let mut batch = WriteBatch::new();
        if let (Some(to), Some(txn_id)) = (to, &settlement.ledger_transaction_id) {
            let follow = if to == LedgerStatus::Posted { Follow::Post } else { Follow::Archive };
            transactions::follow_order(ctx, &mut batch, txn_id, follow, None).await?;
        }
        if to == Some(LedgerStatus::Archived) {
            batch.push(Write::LedgerUnclaim {
                account_id: settlement.settled_ledger_account_id.clone(),
                settlement_id: settlement.id.clone(),
            });
        }
        let json = to_json(&settlement)?;
        batch.push(Write::Replace { record: settlement.record(ctx.scope, json.clone()), expected_version: stored.version });
        batch.push(Write::Insert(event::record(ctx.scope, KIND, event_name, id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

/// `PATCH` and `DELETE /ledger_account_settlements/{id}/ledger_entries`: Modern Treasury adds and
/// removes entries by hand on drafting settlements only, which Payrail does not support; a
/// settlement takes its entries by `effective_at_upper_bound`. Always refused: the error is a 422
/// (a 404 for an unknown settlement), so a client never believes an entry moved.
pub async fn change_entries(ctx: &Ctx<'_>, id: &str, input: &SettlementEntriesInput) -> Error {
    let settlement = match ctx.store.get(KIND, ctx.scope, id).await {
        Ok(Some(stored)) => match parse(&stored) {
            Ok(settlement) => settlement,
            Err(err) => return err,
        },
        Ok(None) => return Error::not_found("ledger account settlement"),
        Err(err) => return err,
    };
    if input.ledger_entry_ids.is_none() {
        return Error::missing("ledger_entry_ids");
    }
    Error::invalid(
        "ledger_entry_ids",
        format!(
            "only a drafting settlement takes entries by hand, and Payrail does not support drafting; this one is {} and took its entries by effective_at_upper_bound",
            settlement.status
        ),
    )
}
