//! Ledger account balance monitors (SPEC G1): create, get, list, update, delete, and the
//! judgement that reports a monitor's crossing ([`flip`]).
//!
//! A monitor is an alert condition on one account's balances (or its `lock_version`). Its
//! `current_ledger_account_balance_state` is judged from the account's current sums each time
//! it is served. Besides, the monitor keeps the state it last reported (`triggered`, as the
//! `created` event or a later one said): the `ledger_monitor` worker judges every monitor
//! against its account again and again, and when the condition's truth differs from what was
//! last reported, it commits, in one batch, the monitor with the new reported state (a replace
//! expecting the version it read) and a `triggered` (false to true) or `resolved` (true to
//! false) event, as Modern Treasury names them. Racing evaluators (several instances) cannot
//! both report one crossing: one replace wins, the other is refused and finds nothing to report
//! on its next look. A crossing is therefore never lost and never reported twice; what is
//! reported is the change between two looks, so a balance that crosses and crosses back
//! between them reports nothing (see the README).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::super::api_key::Scope;
use super::super::common::new_id;
use super::super::listing::{self, ListedPage, PageSpec};
use super::super::time::Timestamp;
use super::super::validate::{self, Metadata, MetadataPatch, TEXT_LEN_MAX};
use super::super::{Commit, Ctx, event, require, retry_on_conflict};
use super::{BalancesDoc, LedgerCurrency, accounts, balances};
use crate::base::ledger::{BalanceKind, Comparison, Totals};
use crate::error::{Error, Result};
use crate::store::ledger::AccountState;
use crate::store::{Filter, ObjectRecord, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = super::super::kinds::LEDGER_ACCOUNT_BALANCE_MONITOR;
/// The term every monitor carries, valued by its own id: how the evaluator walks them all.
pub const SCAN_TERM: &str = "balance_monitor_id";

/// What an alert condition compares, as Modern Treasury names it.
pub const FIELDS: &[&str] = &["available_balance_amount", "pending_balance_amount", "posted_balance_amount", "ledger_account_lock_version"];
/// How it compares, as Modern Treasury names it.
pub const OPERATORS: &[&str] = &["less_than", "less_than_or_equals", "equals", "greater_than_or_equals", "greater_than"];

/// MT's `alert_condition`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = alert_condition)]
pub struct AlertCondition {
    #[schema(schema_with = alert_condition_field)]
    pub field: String,
    #[schema(schema_with = alert_condition_operator)]
    pub operator: String,
    pub value: i64,
}

impl AlertCondition {
    fn comparison(&self) -> Result<Comparison> {
        Ok(match self.operator.as_str() {
            "less_than" => Comparison::Lt,
            "less_than_or_equals" => Comparison::Lte,
            "equals" => Comparison::Eq,
            "greater_than_or_equals" => Comparison::Gte,
            "greater_than" => Comparison::Gt,
            other => return Err(Error::internal(format!("a stored alert condition with operator {other}"))),
        })
    }

    /// Whether the condition holds of an account in `state`.
    pub fn holds(&self, state: &AccountState) -> Result<bool> {
        let kind = match self.field.as_str() {
            "available_balance_amount" => BalanceKind::Available,
            "pending_balance_amount" => BalanceKind::Pending,
            "posted_balance_amount" => BalanceKind::Posted,
            "ledger_account_lock_version" => return Ok(self.comparison()?.holds(state.lock_version, self.value)),
            other => return Err(Error::internal(format!("a stored alert condition on {other}"))),
        };
        Ok(self.comparison()?.holds(state.totals.balance(kind, state.credit_normal)?.amount, self.value))
    }
}

/// The fields an alert condition compares, for the OpenAPI document.
fn alert_condition_field() -> utoipa::openapi::schema::Object {
    super::super::schema::string_enum(FIELDS)
}

/// The comparisons of an alert condition, for the OpenAPI document.
fn alert_condition_operator() -> utoipa::openapi::schema::Object {
    super::super::schema::string_enum(OPERATORS)
}

/// What a monitor last reported: whether its condition held, at which account version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reported {
    pub triggered: bool,
    pub ledger_account_lock_version: i64,
}

/// A monitor as stored: what the client set, the account facts it renders with, and the state
/// it last reported. Served as [`Served`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MonitorRecord {
    pub id: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub ledger_account_id: String,
    pub description: Option<String>,
    pub alert_condition: AlertCondition,
    pub metadata: Metadata,
    pub currency: String,
    pub currency_exponent: u8,
    pub credit_normal: bool,
    pub reported: Reported,
}

/// MT's `current_ledger_account_balance_state`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = current_ledger_account_balance_state)]
pub struct BalanceState {
    balances: BalancesDoc,
    ledger_account_lock_version: i64,
    triggered: bool,
}

/// MT's `ledger_account_balance_monitor`, as served.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = ledger_account_balance_monitor)]
pub struct Served<'a> {
    id: &'a str,
    object: &'static str,
    live_mode: bool,
    created_at: Timestamp,
    updated_at: Timestamp,
    discarded_at: Option<Timestamp>,
    ledger_account_id: &'a str,
    description: Option<&'a str>,
    alert_condition: &'a AlertCondition,
    current_ledger_account_balance_state: BalanceState,
    #[schema(schema_with = super::super::schema::metadata)]
    metadata: &'a Metadata,
}

/// MT's `alert_condition` in a create request.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = alert_condition_create_request)]
pub struct ConditionInput {
    #[schema(schema_with = alert_condition_field, required = true)]
    pub field: Option<String>,
    #[schema(schema_with = alert_condition_operator, required = true)]
    pub operator: Option<String>,
    #[schema(value_type = i64, required = true)]
    pub value: Option<Value>,
}

/// MT's `ledger_account_balance_monitor_create_request`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_account_balance_monitor_create_request)]
pub struct MonitorInput {
    #[schema(value_type = String, required = true, format = "uuid")]
    pub ledger_account_id: Option<String>,
    pub description: Option<String>,
    #[schema(required = true)]
    pub alert_condition: Option<ConditionInput>,
    #[schema(schema_with = super::super::schema::metadata_or_null)]
    pub metadata: Option<Metadata>,
}

/// MT's `ledger_account_balance_monitor_update_request`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = ledger_account_balance_monitor_update_request)]
pub struct MonitorPatch {
    #[serde(default, deserialize_with = "super::super::common::nullable")]
    pub description: Option<Option<String>>,
    #[schema(schema_with = super::super::schema::metadata_patch_or_null)]
    pub metadata: Option<MetadataPatch>,
    /// Not in MT's update request: refused rather than ignored, so a client never believes it
    /// changed the alert.
    #[serde(default)]
    #[schema(ignore)]
    pub alert_condition: Option<serde_json::Value>,
}

impl ConditionInput {
    fn check(&self) -> Result<AlertCondition> {
        let field = self.field.as_deref().ok_or_else(|| Error::missing("alert_condition.field"))?;
        let field = validate::one_of("alert_condition.field", field, FIELDS)?;
        let operator = self.operator.as_deref().ok_or_else(|| Error::missing("alert_condition.operator"))?;
        let operator = validate::one_of("alert_condition.operator", operator, OPERATORS)?;
        let value = self.value.as_ref().filter(|v| !v.is_null()).ok_or_else(|| Error::missing("alert_condition.value"))?;
        let value =
            value.as_i64().ok_or_else(|| Error::invalid("alert_condition.value", "alert_condition.value must be a whole number"))?;
        Ok(AlertCondition { field, operator, value })
    }
}

impl MonitorRecord {
    fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = listing::metadata_terms(&self.metadata).collect();
        terms.push(Term::new("ledger_account_id", &self.ledger_account_id));
        terms.push(Term::new(SCAN_TERM, &self.id));
        terms
    }

    fn record(&self, scope: &Scope) -> Result<ObjectRecord> {
        let doc = serde_json::to_string(self).map_err(|e| Error::internal(format!("ledger account balance monitor: {e}")))?;
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

    /// The monitor as served, judged against its account in `state` (zero sums when the
    /// account is gone).
    fn served(&self, state: Option<&AccountState>, discarded_at: Option<Timestamp>) -> Result<String> {
        let state =
            state.copied().unwrap_or(AccountState { credit_normal: self.credit_normal, totals: Totals::default(), lock_version: 0 });
        let currency = LedgerCurrency { code: self.currency.clone(), exponent: self.currency_exponent };
        let served = Served {
            id: &self.id,
            object: KIND,
            live_mode: self.live_mode,
            created_at: self.created_at,
            updated_at: self.updated_at,
            discarded_at,
            ledger_account_id: &self.ledger_account_id,
            description: self.description.as_deref(),
            alert_condition: &self.alert_condition,
            current_ledger_account_balance_state: BalanceState {
                balances: balances(&state.totals, state.credit_normal, &currency)?,
                ledger_account_lock_version: state.lock_version,
                triggered: self.alert_condition.holds(&state)?,
            },
            metadata: &self.metadata,
        };
        serde_json::to_string(&served).map_err(|e| Error::internal(format!("ledger account balance monitor: {e}")))
    }
}

pub fn parse(stored: &StoredObject) -> Result<MonitorRecord> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored ledger account balance monitor {}: {e}", stored.id)))
}

async fn state_of(ctx: &Ctx<'_>, account_id: &str) -> Result<Option<AccountState>> {
    Ok(ctx.store.ledger_accounts(&[account_id.to_owned()]).await?.into_iter().next().map(|(_, state)| state))
}

/// `POST /ledger_account_balance_monitors`: judged at once; the `created` event reports that
/// first state, and every later crossing is reported against it.
pub async fn create(ctx: &Ctx<'_>, commit: &dyn Commit, input: &MonitorInput) -> Result<String> {
    let account_id =
        validate::id("ledger_account_id", input.ledger_account_id.as_deref().ok_or_else(|| Error::missing("ledger_account_id"))?)?;
    let condition = input.alert_condition.as_ref().ok_or_else(|| Error::missing("alert_condition"))?.check()?;
    let description = validate::opt_text("description", input.description.as_deref(), TEXT_LEN_MAX)?;
    let metadata = validate::metadata("metadata", input.metadata.as_ref())?;
    let mut batch = WriteBatch::new();
    let account = accounts::parse(&require(ctx, &mut batch, accounts::KIND, &account_id, "ledger_account_id").await?)?;
    let state = state_of(ctx, &account_id).await?.ok_or_else(|| Error::internal("a ledger account without sums"))?;
    let monitor = MonitorRecord {
        id: new_id(),
        live_mode: ctx.scope.live_mode,
        created_at: ctx.now,
        updated_at: ctx.now,
        ledger_account_id: account_id,
        description,
        reported: Reported { triggered: condition.holds(&state)?, ledger_account_lock_version: state.lock_version },
        alert_condition: condition,
        metadata,
        currency: account.currency.clone(),
        currency_exponent: account.currency_exponent,
        credit_normal: account.credit_normal(),
    };
    let json = monitor.served(Some(&state), None)?;
    batch.push(Write::Insert(monitor.record(ctx.scope)?));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &monitor.id, &json, ctx.now)?));
    commit.commit(batch, &json).await?;
    Ok(json)
}

/// Serves stored monitors, each judged against its account's current state.
async fn render(ctx: &Ctx<'_>, stored: &[StoredObject]) -> Result<Vec<String>> {
    let monitors = stored.iter().map(parse).collect::<Result<Vec<_>>>()?;
    let mut ids: Vec<String> = monitors.iter().map(|m| m.ledger_account_id.clone()).collect();
    ids.sort();
    ids.dedup();
    let states = ctx.store.ledger_accounts(&ids).await?;
    monitors.iter().map(|m| m.served(states.iter().find(|(id, _)| *id == m.ledger_account_id).map(|(_, s)| s), None)).collect()
}

pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger account balance monitor"))?;
    Ok(render(ctx, std::slice::from_ref(&stored)).await?.remove(0))
}

#[derive(Debug, Default)]
pub struct MonitorFilter {
    pub ids: Vec<String>,
    pub ledger_account_id: Option<String>,
    pub metadata: Vec<(String, String)>,
}

pub async fn list(ctx: &Ctx<'_>, filter: &MonitorFilter, page: PageSpec) -> Result<ListedPage> {
    let mut filters: Vec<Filter> = [listing::any_id(&filter.ids), listing::eq("ledger_account_id", filter.ledger_account_id.as_deref())]
        .into_iter()
        .flatten()
        .collect();
    filters.extend(listing::metadata_filters(&filter.metadata));
    let found = listing::fetch(ctx, KIND, filters, page).await?;
    let docs = render(ctx, &found.items).await?;
    Ok(ListedPage { json: listing::json_array(docs.iter().map(String::as_str)), next_seq: found.next_seq })
}

/// `PATCH`: description and metadata (the condition and account are fixed, as in MT).
pub async fn update(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &MonitorPatch) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger account balance monitor"))?;
        let mut monitor = parse(&stored)?;
        if patch.alert_condition.is_some() {
            return Err(Error::invalid(
                "alert_condition",
                "a monitor's alert_condition cannot be changed; create a new monitor (and delete this one)",
            ));
        }
        let before = monitor.clone();
        if let Some(description) = &patch.description {
            monitor.description = validate::opt_text("description", description.as_deref(), TEXT_LEN_MAX)?;
        }
        if let Some(metadata) = &patch.metadata {
            monitor.metadata = validate::merge_metadata("metadata", &monitor.metadata, metadata)?;
        }
        if crate::domain::unchanged(&before, &monitor, |m| &mut m.updated_at) {
            // Nothing changes: no event, and the monitor as it is (SPEC E4).
            return monitor.served(state_of(ctx, &monitor.ledger_account_id).await?.as_ref(), None);
        }
        monitor.updated_at = ctx.now;
        let json = monitor.served(state_of(ctx, &monitor.ledger_account_id).await?.as_ref(), None)?;
        let mut batch = WriteBatch::new();
        batch.push(Write::Replace { record: monitor.record(ctx.scope)?, expected_version: stored.version });
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

/// `DELETE`: 200 with the monitor, `discarded_at` set; it reports nothing more.
pub async fn delete(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str) -> Result<String> {
    let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("ledger account balance monitor"))?;
    let monitor = parse(&stored)?;
    let json = monitor.served(state_of(ctx, &monitor.ledger_account_id).await?.as_ref(), Some(ctx.now))?;
    let mut batch = WriteBatch::new();
    batch.push(Write::Delete { kind: KIND, scope: ctx.scope.clone(), id: id.to_owned() });
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "deleted", id, &json, ctx.now)?));
    commit.commit(batch, &json).await?;
    Ok(json)
}

/// The batch that reports a crossing of `stored` (a monitor of `scope`), if its condition
/// judges the account's current `state` otherwise than the monitor last reported: the monitor
/// with its new reported state, replaced only if still at the version read (so racing
/// evaluators report a crossing once), and a `triggered` or `resolved` event carrying the
/// monitor as judged. `None` when nothing crossed, or the account is gone.
pub fn flip(scope: &Scope, stored: &StoredObject, state: Option<&AccountState>, now: Timestamp) -> Result<Option<WriteBatch>> {
    let Some(state) = state else { return Ok(None) };
    let mut monitor = parse(stored)?;
    let triggered = monitor.alert_condition.holds(state)?;
    if triggered == monitor.reported.triggered {
        return Ok(None);
    }
    monitor.reported = Reported { triggered, ledger_account_lock_version: state.lock_version };
    let json = monitor.served(Some(state), None)?;
    let event_name = if triggered { "triggered" } else { "resolved" };
    let mut batch = WriteBatch::new();
    batch.push(Write::Replace { record: monitor.record(scope)?, expected_version: stored.version });
    batch.push(Write::Insert(event::record(scope, KIND, event_name, &monitor.id, &json, now)?));
    Ok(Some(batch))
}

/// The account each of `stored` monitors watches (to read their states in one call).
pub fn accounts_watched(stored: &[(Scope, StoredObject)]) -> Result<Vec<String>> {
    let mut ids = stored.iter().map(|(_, s)| parse(s).map(|m| m.ledger_account_id)).collect::<Result<Vec<_>>>()?;
    ids.sort();
    ids.dedup();
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(posted_credits: i64, pending_debits: i64, lock_version: i64) -> AccountState {
        AccountState { credit_normal: true, totals: Totals { posted_credits, pending_debits, ..Totals::default() }, lock_version }
    }

    fn condition(field: &str, operator: &str, value: i64) -> AlertCondition {
        AlertCondition { field: field.into(), operator: operator.into(), value }
    }

    #[test]
    fn g1_conditions_judge_signed_balances_and_the_version() {
        let s = state(100, 30, 2);
        assert!(condition("available_balance_amount", "equals", 70).holds(&s).unwrap());
        assert!(condition("posted_balance_amount", "greater_than", 99).holds(&s).unwrap());
        assert!(!condition("pending_balance_amount", "greater_than_or_equals", 71).holds(&s).unwrap());
        assert!(condition("pending_balance_amount", "less_than_or_equals", 70).holds(&s).unwrap());
        assert!(condition("ledger_account_lock_version", "less_than", 3).holds(&s).unwrap());
    }

    #[test]
    fn g1_bad_conditions_name_their_field() {
        let given = |field: &str, operator: &str, value: Value| ConditionInput {
            field: Some(field.into()),
            operator: Some(operator.into()),
            value: Some(value),
        };
        let param = |err: Error| match err {
            Error::Invalid { parameter, .. } => parameter,
            other => panic!("{other:?}"),
        };
        assert_eq!(param(given("balance", "equals", 1.into()).check().unwrap_err()), "alert_condition.field");
        assert_eq!(param(given("posted_balance_amount", "gt", 1.into()).check().unwrap_err()), "alert_condition.operator");
        assert_eq!(param(given("posted_balance_amount", "equals", "1".into()).check().unwrap_err()), "alert_condition.value");
        assert_eq!(param(ConditionInput::default().check().unwrap_err()), "alert_condition.field");
    }

    #[test]
    fn g1_a_flip_is_reported_once_with_its_event() {
        let scope = Scope { organization_id: "org".into(), live_mode: false };
        let monitor = MonitorRecord {
            id: "m".into(),
            live_mode: false,
            created_at: Timestamp::from_micros(0),
            updated_at: Timestamp::from_micros(0),
            ledger_account_id: "a".into(),
            description: None,
            alert_condition: condition("posted_balance_amount", "greater_than", 50),
            metadata: Metadata::new(),
            currency: "USD".into(),
            currency_exponent: 2,
            credit_normal: true,
            reported: Reported { triggered: false, ledger_account_lock_version: 0 },
        };
        let stored = StoredObject { id: "m".into(), parent_id: None, version: 3, doc: serde_json::to_string(&monitor).unwrap() };
        let now = Timestamp::from_micros(1);
        assert!(flip(&scope, &stored, Some(&state(10, 0, 1)), now).unwrap().is_none());
        assert!(flip(&scope, &stored, None, now).unwrap().is_none());
        let batch = flip(&scope, &stored, Some(&state(60, 0, 2)), now).unwrap().unwrap();
        let Write::Replace { record, expected_version: 3 } = &batch.writes[0] else { panic!("{:?}", batch.writes[0]) };
        assert!(parse(&StoredObject { id: "m".into(), parent_id: None, version: 4, doc: record.doc.clone() }).unwrap().reported.triggered);
        let Write::Insert(event) = &batch.writes[1] else { panic!("an event") };
        assert!(event.doc.contains(r#""event_name":"triggered""#), "{}", event.doc);
    }
}
