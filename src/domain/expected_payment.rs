//! Expected payments (issue 21, SPEC B5, B7): money an organization expects to move through one
//! of its internal accounts, in Modern Treasury's `expected_payment` shape. When the bank books a
//! transaction that fits one (same account, direction and currency, amount and date within the
//! bounds, the type when one was given, and the counterparty when both name one), [`reconcile`]
//! links them with a transaction line item and the expected payment becomes `reconciled`, all in
//! the batch that books the transaction.
//!
//! **Counterparty**: a transaction names its counterparty's account when the bank's statement
//! did (`RltdPties`). An expected payment with a `counterparty_id` then matches only if that
//! account (IBAN or account number) is one of the counterparty's external accounts; a
//! transaction that names no account is not refused on it (the bank did not say), but a
//! candidate whose counterparty is confirmed wins over one that is not.
//!
//! `DELETE` archives: the expected payment stays readable with status `archived`, as MT answers
//! a delete with the expected payment. Only unreconciled ones can be changed or archived.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::api_key::Scope;
use super::common::new_id;
use super::enums::{Direction, PaymentType};
use super::listing::{self, ListedPage, PageSpec};
use super::money::{AMOUNT_MAX, Currency};
use super::payment_order::ops::date;
use super::time::Timestamp;
use super::transaction::{self, Settles, Transaction};
use super::validate::{self, Metadata, MetadataPatch, TEXT_LEN_MAX};
use super::{Commit, Ctx, event, external_account, internal_account, kinds, require, retry_on_conflict};
use crate::error::{Error, Result};
use crate::store::{Filter, ListQuery, ObjectRecord, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = kinds::EXPECTED_PAYMENT;
/// MT's expected payment statuses.
pub use super::enums::EXPECTED_PAYMENT_STATUSES as STATUSES;
/// Unreconciled expected payments of one account, direction and currency that [`reconcile`]
/// looks at, at most (the oldest among them wins).
pub const CANDIDATES_MAX: usize = 1_000;
const CANDIDATES_PAGE: usize = 100;

/// The term the sandbox bank finds the expected payments it books by (unreconciled sandbox
/// ones, in every tenant; SPEC B7).
pub const SANDBOX_WAITING_TERM: &str = "sandbox_waiting_since";

/// MT's `expected_payment`, as stored and served.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = expected_payment)]
pub struct ExpectedPayment {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub external_id: Option<String>,
    pub amount_upper_bound: i64,
    pub amount_lower_bound: i64,
    #[schema(schema_with = super::schema::direction)]
    pub direction: Direction,
    pub internal_account_id: String,
    #[serde(rename = "type")]
    #[schema(schema_with = super::schema::payment_type_or_null)]
    pub payment_type: Option<PaymentType>,
    #[schema(schema_with = super::schema::currency)]
    pub currency: Currency,
    #[schema(schema_with = super::schema::date_or_null)]
    pub date_upper_bound: Option<String>,
    #[schema(schema_with = super::schema::date_or_null)]
    pub date_lower_bound: Option<String>,
    pub description: Option<String>,
    pub statement_descriptor: Option<String>,
    #[schema(schema_with = super::schema::metadata)]
    pub metadata: Metadata,
    pub counterparty_id: Option<String>,
    pub remittance_information: Option<String>,
    #[schema(schema_with = super::schema::object_or_null)]
    pub reconciliation_groups: Option<Value>,
    #[schema(schema_with = super::schema::object_or_null)]
    pub reconciliation_filters: Option<Value>,
    #[schema(schema_with = super::schema::array_or_null)]
    pub reconciliation_rule_variables: Option<Value>,
    pub amount_reconciled: Option<i64>,
    #[schema(schema_with = super::schema::direction_or_null)]
    pub amount_reconciled_direction: Option<Direction>,
    pub amount_unreconciled: Option<i64>,
    #[schema(schema_with = super::schema::direction_or_null)]
    pub amount_unreconciled_direction: Option<Direction>,
    pub transaction_id: Option<String>,
    pub transaction_line_item_id: Option<String>,
    #[schema(schema_with = super::schema::expected_payment_status)]
    pub status: String,
    #[schema(schema_with = super::schema::reconciliation_method_or_null)]
    pub reconciliation_method: Option<String>,
    pub ledger_transaction_id: Option<String>,
}

/// The create request, as sent (MT's `expected_payment_create_request`); also what a PATCH is
/// merged into and checked as.
#[derive(Debug, Clone, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[schema(as = expected_payment_create_request)]
pub struct ExpectedPaymentInput {
    pub external_id: Option<String>,
    #[schema(value_type = i64, required = true, minimum = 0, maximum = 9_007_199_254_740_991.0)]
    pub amount_upper_bound: Option<i64>,
    #[schema(value_type = i64, required = true, minimum = 0, maximum = 9_007_199_254_740_991.0)]
    pub amount_lower_bound: Option<i64>,
    #[schema(schema_with = super::schema::direction, required = true)]
    pub direction: Option<String>,
    #[schema(value_type = String, required = true, format = "uuid")]
    pub internal_account_id: Option<String>,
    #[serde(rename = "type")]
    #[schema(schema_with = super::schema::payment_type_or_null)]
    pub payment_type: Option<String>,
    #[schema(schema_with = super::schema::currency_or_null)]
    pub currency: Option<String>,
    #[schema(schema_with = super::schema::date_or_null)]
    pub date_upper_bound: Option<String>,
    #[schema(schema_with = super::schema::date_or_null)]
    pub date_lower_bound: Option<String>,
    pub description: Option<String>,
    pub statement_descriptor: Option<String>,
    #[schema(schema_with = super::schema::metadata_or_null)]
    pub metadata: Option<Metadata>,
    #[schema(format = "uuid")]
    pub counterparty_id: Option<String>,
    pub remittance_information: Option<String>,
    #[schema(schema_with = super::schema::object_or_null)]
    pub reconciliation_groups: Option<Value>,
    #[schema(schema_with = super::schema::object_or_null)]
    pub reconciliation_filters: Option<Value>,
    #[schema(schema_with = super::schema::array_or_null)]
    pub reconciliation_rule_variables: Option<Value>,
    /// Not supported (422).
    #[serde(skip_serializing)]
    #[schema(ignore)]
    pub line_items: Option<Value>,
    #[serde(skip_serializing)]
    #[schema(ignore)]
    pub ledger_transaction: Option<Value>,
    #[serde(skip_serializing)]
    #[schema(ignore)]
    pub ledger_transaction_id: Option<String>,
}

fn unsupported(present: bool, param: &str) -> Result<()> {
    if present { Err(Error::invalid(param, format!("{param} is not supported by Payrail on expected payments"))) } else { Ok(()) }
}

fn bound(param: &str, value: Option<i64>) -> Result<i64> {
    let value = value.ok_or_else(|| Error::missing(param))?;
    if !(0..=AMOUNT_MAX).contains(&value) {
        return Err(Error::invalid(param, format!("{param} must be between 0 and {AMOUNT_MAX}")));
    }
    Ok(value)
}

fn object_or_null(param: &str, value: &Option<Value>, array: bool) -> Result<Option<Value>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Object(_)) if !array => Ok(Some(v.clone())),
        Some(v @ Value::Array(_)) if array => Ok(Some(v.clone())),
        Some(_) => Err(Error::invalid(param, format!("{param} must be {}", if array { "an array" } else { "an object" }))),
    }
}

/// MT's `reconciliation_rule_variable`: every key it has, each of its type, and no other.
/// Stored as given with the keys not given as `null` (`currency` as the payment's), as MT
/// serves them; Payrail keeps them, it does not reconcile by them.
fn rule_variables(given: Option<&Value>, currency: Currency) -> Result<Option<Value>> {
    let items = match given {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(Error::invalid("reconciliation_rule_variables", "reconciliation_rule_variables must be an array")),
    };
    let checked = items.iter().enumerate().map(|(i, item)| rule_variable(&format!("reconciliation_rule_variables[{i}]"), item, currency));
    Ok(Some(Value::Array(checked.collect::<Result<_>>()?)))
}

fn rule_variable(param: &str, item: &Value, currency: Currency) -> Result<Value> {
    let Value::Object(given) = item else { return Err(Error::invalid(param, format!("{param} must be an object"))) };
    let field = |key: &str| format!("{param}.{key}");
    let mut out = serde_json::Map::new();
    for (key, value) in given {
        let checked = match (key.as_str(), value) {
            ("amount_upper_bound" | "amount_lower_bound", Value::Number(n)) if n.is_i64() => value.clone(),
            ("direction", Value::String(d)) => Value::String(Direction::parse(&field(key), d)?.as_str().to_owned()),
            ("internal_account_id", Value::String(_)) => value.clone(),
            ("type", Value::Null) | ("date_upper_bound" | "date_lower_bound" | "counterparty_id" | "custom_identifiers", Value::Null) => {
                Value::Null
            }
            ("type", Value::String(t)) => Value::String(PaymentType::parse(&field(key), t)?.as_str().to_owned()),
            ("currency", Value::String(c)) => Value::String(Currency::parse(&field(key), c)?.code().to_owned()),
            ("date_upper_bound" | "date_lower_bound", Value::String(d)) => Value::String(date(&field(key), d)?),
            ("counterparty_id", Value::String(_)) => value.clone(),
            ("custom_identifiers", Value::Object(map)) if map.values().all(Value::is_string) => value.clone(),
            (
                "amount_upper_bound"
                | "amount_lower_bound"
                | "direction"
                | "internal_account_id"
                | "type"
                | "currency"
                | "date_upper_bound"
                | "date_lower_bound"
                | "counterparty_id"
                | "custom_identifiers",
                _,
            ) => return Err(Error::invalid(field(key), format!("{} is not of its type", field(key)))),
            _ => return Err(Error::invalid(field(key), format!("{} is not a field of a reconciliation rule variable", field(key)))),
        };
        out.insert(key.clone(), checked);
    }
    for required in ["amount_upper_bound", "amount_lower_bound", "direction", "internal_account_id"] {
        if !out.contains_key(required) {
            return Err(Error::missing(field(required)));
        }
    }
    out.entry("currency").or_insert_with(|| Value::String(currency.code().to_owned()));
    for optional in ["type", "date_upper_bound", "date_lower_bound", "counterparty_id", "custom_identifiers"] {
        out.entry(optional).or_insert(Value::Null);
    }
    Ok(Value::Object(out))
}

/// MT's newer form gives the match terms in a reconciliation rule variable instead of at the top
/// level: the terms the top level lacks are taken from it. Payrail matches an expected payment
/// on one set of terms, so with several variables the top level must give them.
fn with_rule_terms(input: &ExpectedPaymentInput) -> Result<std::borrow::Cow<'_, ExpectedPaymentInput>> {
    use std::borrow::Cow;
    let complete = input.amount_upper_bound.is_some()
        && input.amount_lower_bound.is_some()
        && input.direction.is_some()
        && input.internal_account_id.is_some();
    let Some(Value::Array(variables)) = input.reconciliation_rule_variables.as_ref().filter(|_| !complete) else {
        return Ok(Cow::Borrowed(input));
    };
    let variable = match variables.as_slice() {
        [Value::Object(variable)] => variable,
        [_, _, ..] => {
            return Err(Error::invalid(
                "reconciliation_rule_variables",
                "Payrail matches an expected payment on one set of terms: with several reconciliation_rule_variables, \
                 give amount_lower_bound, amount_upper_bound, direction and internal_account_id as well",
            ));
        }
        _ => return Ok(Cow::Borrowed(input)),
    };
    let text = |key: &str| variable.get(key).and_then(Value::as_str).map(str::to_owned);
    let amount = |key: &str| variable.get(key).and_then(Value::as_i64);
    let mut out = input.clone();
    out.amount_upper_bound = out.amount_upper_bound.or_else(|| amount("amount_upper_bound"));
    out.amount_lower_bound = out.amount_lower_bound.or_else(|| amount("amount_lower_bound"));
    out.direction = out.direction.or_else(|| text("direction"));
    out.internal_account_id = out.internal_account_id.or_else(|| text("internal_account_id"));
    out.payment_type = out.payment_type.or_else(|| text("type"));
    out.currency = out.currency.or_else(|| text("currency"));
    out.date_upper_bound = out.date_upper_bound.or_else(|| text("date_upper_bound"));
    out.date_lower_bound = out.date_lower_bound.or_else(|| text("date_lower_bound"));
    out.counterparty_id = out.counterparty_id.or_else(|| text("counterparty_id"));
    Ok(Cow::Owned(out))
}

/// Checked bounds: amounts and dates, each lower at or below its upper.
fn bounds(input: &ExpectedPaymentInput) -> Result<(i64, i64, Option<String>, Option<String>)> {
    let upper = bound("amount_upper_bound", input.amount_upper_bound)?;
    let lower = bound("amount_lower_bound", input.amount_lower_bound)?;
    if lower > upper {
        return Err(Error::invalid("amount_upper_bound", "amount_upper_bound must not be below amount_lower_bound"));
    }
    let date_upper = input.date_upper_bound.as_deref().map(|d| date("date_upper_bound", d)).transpose()?;
    let date_lower = input.date_lower_bound.as_deref().map(|d| date("date_lower_bound", d)).transpose()?;
    if let (Some(l), Some(u)) = (&date_lower, &date_upper)
        && l > u
    {
        return Err(Error::invalid("date_upper_bound", "date_upper_bound must not be before date_lower_bound"));
    }
    Ok((lower, upper, date_lower, date_upper))
}

/// Builds the document from `input` (checked, the ids it names read and required in `batch`).
/// `id` and `created_at` are the existing ones on an update.
async fn build(
    ctx: &Ctx<'_>,
    batch: &mut WriteBatch,
    input: &ExpectedPaymentInput,
    id: String,
    created_at: Timestamp,
) -> Result<ExpectedPayment> {
    unsupported(input.line_items.as_ref().is_some_and(|v| !v.is_null()), "line_items")?;
    unsupported(input.ledger_transaction.as_ref().is_some_and(|v| !v.is_null()), "ledger_transaction")?;
    unsupported(input.ledger_transaction_id.is_some(), "ledger_transaction_id")?;
    let (lower, upper, date_lower, date_upper) = bounds(input)?;
    let direction = Direction::parse("direction", input.direction.as_deref().ok_or_else(|| Error::missing("direction"))?)?;
    let payment_type = input.payment_type.as_deref().map(|t| PaymentType::parse("type", t)).transpose()?;
    let text = |param: &str, value: &Option<String>| validate::opt_text(param, value.as_deref(), TEXT_LEN_MAX);
    let (description, descriptor) = (text("description", &input.description)?, text("statement_descriptor", &input.statement_descriptor)?);
    let (remittance, external_id) =
        (text("remittance_information", &input.remittance_information)?, text("external_id", &input.external_id)?);
    let metadata = validate::metadata("metadata", input.metadata.as_ref())?;
    let groups = object_or_null("reconciliation_groups", &input.reconciliation_groups, false)?;
    let filters = object_or_null("reconciliation_filters", &input.reconciliation_filters, false)?;
    let account_id = input.internal_account_id.as_deref().ok_or_else(|| Error::missing("internal_account_id"))?;
    let account = internal_account::parse(&require(ctx, batch, kinds::INTERNAL_ACCOUNT, account_id, "internal_account_id").await?)?;
    if let Some(counterparty_id) = &input.counterparty_id {
        require(ctx, batch, kinds::COUNTERPARTY, counterparty_id, "counterparty_id").await?;
    }
    let currency = validate::account_currency(
        input.currency.as_deref(),
        account.currency,
        "the internal account's",
        "an expected payment is matched only to that account's transactions, which are in its currency",
    )?;
    let variables = rule_variables(input.reconciliation_rule_variables.as_ref(), currency)?;
    let expected = ExpectedPayment {
        id,
        object: KIND.into(),
        live_mode: ctx.scope.live_mode,
        created_at,
        updated_at: ctx.now,
        external_id,
        amount_upper_bound: upper,
        amount_lower_bound: lower,
        direction,
        internal_account_id: account.id,
        payment_type,
        currency,
        date_upper_bound: date_upper,
        date_lower_bound: date_lower,
        description,
        statement_descriptor: descriptor,
        metadata,
        counterparty_id: input.counterparty_id.clone(),
        remittance_information: remittance,
        reconciliation_groups: groups,
        reconciliation_filters: filters,
        reconciliation_rule_variables: variables,
        amount_reconciled: Some(0),
        amount_reconciled_direction: Some(direction),
        amount_unreconciled: Some(upper),
        amount_unreconciled_direction: Some(direction),
        transaction_id: None,
        transaction_line_item_id: None,
        status: "unreconciled".into(),
        reconciliation_method: None,
        ledger_transaction_id: None,
    };
    variables_agree(&expected)?;
    Ok(expected)
}

/// Payrail reconciles by an expected payment's own terms, so a rule variable that says other
/// terms would report a match the payment never makes: each term a variable gives (not null)
/// must be the payment's.
fn variables_agree(expected: &ExpectedPayment) -> Result<()> {
    let Some(Value::Array(items)) = &expected.reconciliation_rule_variables else { return Ok(()) };
    let own = [
        ("amount_lower_bound", Value::from(expected.amount_lower_bound)),
        ("amount_upper_bound", Value::from(expected.amount_upper_bound)),
        ("direction", Value::from(expected.direction.as_str())),
        ("internal_account_id", Value::from(expected.internal_account_id.as_str())),
        ("currency", Value::from(expected.currency.code())),
        ("type", expected.payment_type.map_or(Value::Null, |t| Value::from(t.as_str()))),
        ("date_lower_bound", expected.date_lower_bound.clone().map_or(Value::Null, Value::from)),
        ("date_upper_bound", expected.date_upper_bound.clone().map_or(Value::Null, Value::from)),
        ("counterparty_id", expected.counterparty_id.clone().map_or(Value::Null, Value::from)),
    ];
    for (i, item) in items.iter().enumerate() {
        for (key, value) in &own {
            match item.get(*key) {
                Some(given) if !given.is_null() && given != value => {
                    let param = format!("reconciliation_rule_variables[{i}].{key}");
                    return Err(Error::invalid(
                        &param,
                        format!(
                            "{param} is {given} but the expected payment's {key} is {value}: Payrail reconciles by the expected payment's own terms, so its rule variables must agree with them"
                        ),
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

impl ExpectedPayment {
    fn terms(&self) -> Vec<Term> {
        let mut terms: Vec<Term> = listing::metadata_terms(&self.metadata).collect();
        terms.push(Term::new("internal_account_id", &self.internal_account_id));
        terms.push(Term::new("direction", self.direction.as_str()));
        terms.push(Term::new("currency", self.currency.code()));
        terms.push(Term::new("status", &self.status));
        terms.extend(self.payment_type.map(|t| Term::new("type", t.as_str())));
        terms.extend(self.counterparty_id.as_ref().map(|id| Term::new("counterparty_id", id)));
        terms.extend(self.external_id.as_ref().map(|id| Term::new("external_id", id)));
        if !self.live_mode && self.status == "unreconciled" {
            // The sandbox bank books it a step after its last change, as it carries orders.
            terms.push(Term::new(SANDBOX_WAITING_TERM, self.updated_at.to_string()));
        }
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

    /// What a client sent to make it as it is now (the base a PATCH is merged into).
    fn as_input(&self) -> ExpectedPaymentInput {
        ExpectedPaymentInput {
            external_id: self.external_id.clone(),
            amount_upper_bound: Some(self.amount_upper_bound),
            amount_lower_bound: Some(self.amount_lower_bound),
            direction: Some(self.direction.as_str().into()),
            internal_account_id: Some(self.internal_account_id.clone()),
            payment_type: self.payment_type.map(|t| t.as_str().into()),
            currency: Some(self.currency.code().into()),
            date_upper_bound: self.date_upper_bound.clone(),
            date_lower_bound: self.date_lower_bound.clone(),
            description: self.description.clone(),
            statement_descriptor: self.statement_descriptor.clone(),
            metadata: Some(self.metadata.clone()),
            counterparty_id: self.counterparty_id.clone(),
            remittance_information: self.remittance_information.clone(),
            reconciliation_groups: self.reconciliation_groups.clone(),
            reconciliation_filters: self.reconciliation_filters.clone(),
            reconciliation_rule_variables: self.reconciliation_rule_variables.clone(),
            ..ExpectedPaymentInput::default()
        }
    }
}

/// Whether `transaction` is what `expected` expects (SPEC B5, issue 21): an unreconciled
/// expected payment of the same internal account, direction and currency, the amount within
/// its bounds (inclusive), the booking date within its date bounds (inclusive, each optional),
/// and the same type when the expected payment names one.
pub fn matches(expected: &ExpectedPayment, transaction: &Transaction) -> bool {
    let date_ok = |bound: &Option<String>, ok: fn(&str, &str) -> bool| bound.as_deref().is_none_or(|b| ok(&transaction.as_of_date, b));
    expected.status == "unreconciled"
        && expected.internal_account_id == transaction.internal_account_id
        && expected.direction == transaction.direction
        && expected.currency == transaction.currency
        && (expected.amount_lower_bound..=expected.amount_upper_bound).contains(&transaction.amount)
        && date_ok(&expected.date_lower_bound, |day, b| day >= b)
        && date_ok(&expected.date_upper_bound, |day, b| day <= b)
        && expected.payment_type.is_none_or(|t| t.as_str() == transaction.transaction_type)
}

/// The account numbers and IBANs of counterparties' external accounts (spaces removed, upper
/// case), by counterparty id.
pub type CounterpartyAccounts = HashMap<String, HashSet<String>>;

/// How a transaction's counterparty fits an expected payment's; `None` from [`counterparty_fit`]
/// when it does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fit {
    /// The transaction names an account of the counterparty the expected payment names.
    Confirmed,
    /// One of them names no counterparty: nothing to check.
    Unchecked,
}

/// Whether the accounts a transaction names its counterparty with (`named`, normalised as
/// [`normalise_account`] does) fit `expected`'s counterparty.
pub fn counterparty_fit(expected: &ExpectedPayment, named: &[String], accounts: &CounterpartyAccounts) -> Option<Fit> {
    let Some(counterparty) = expected.counterparty_id.as_deref().filter(|_| !named.is_empty()) else { return Some(Fit::Unchecked) };
    let known = accounts.get(counterparty)?;
    named.iter().any(|n| known.contains(n)).then_some(Fit::Confirmed)
}

/// An account number or IBAN as compared: without spaces, upper case.
pub fn normalise_account(number: &str) -> String {
    number.chars().filter(|c| !c.is_whitespace()).flat_map(char::to_uppercase).collect()
}

/// Of the expected payments `transaction` matches, one whose counterparty it confirms first,
/// then the one created first (ties: the smaller id).
pub fn best_match<'a>(
    candidates: impl IntoIterator<Item = &'a ExpectedPayment>,
    transaction: &Transaction,
    accounts: &CounterpartyAccounts,
) -> Option<&'a ExpectedPayment> {
    let named: Vec<String> = transaction::counterparty_accounts(transaction).iter().map(|n| normalise_account(n)).collect();
    candidates
        .into_iter()
        .filter(|e| matches(e, transaction))
        .filter_map(|e| counterparty_fit(e, &named, accounts).map(|fit| (fit, e)))
        .min_by(|(fa, a), (fb, b)| (fa, a.created_at, &a.id).cmp(&(fb, b.created_at, &b.id)))
        .map(|(_, e)| e)
}

fn to_json(expected: &ExpectedPayment) -> Result<String> {
    serde_json::to_string(expected).map_err(|e| Error::internal(format!("expected payment: {e}")))
}

fn parse(stored: &StoredObject) -> Result<ExpectedPayment> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored expected payment {}: {e}", stored.id)))
}

/// Unreconciled expected payments of one account, direction and currency, with their stored
/// versions (at most [`CANDIDATES_MAX`]).
async fn candidates(ctx: &Ctx<'_>, key: &PoolKey) -> Result<Vec<(ExpectedPayment, i64)>> {
    let eq = |name: &str, value: &str| Filter::Eq { name: name.into(), value: value.into() };
    let filters = vec![
        eq("internal_account_id", &key.0),
        eq("status", "unreconciled"),
        eq("direction", key.1.as_str()),
        eq("currency", key.2.code()),
    ];
    let mut found = Vec::new();
    let mut after_seq = None;
    while found.len() < CANDIDATES_MAX {
        let query = ListQuery { kind: KIND, scope: ctx.scope.clone(), filters: filters.clone(), after_seq, limit: CANDIDATES_PAGE };
        let page = ctx.store.list(&query).await?;
        for stored in &page.items {
            found.push((parse(stored)?, stored.version));
        }
        match page.next_seq {
            Some(next) => after_seq = Some(next),
            None => break,
        }
    }
    Ok(found)
}

/// The expected payments a transaction can reconcile: same internal account, direction, currency.
type PoolKey = (String, Direction, Currency);

/// Reconciles the transactions of one batch (a bank file's): reads each pool of candidates once,
/// and never hands one expected payment to two transactions of the batch. Use one per batch.
#[derive(Debug, Default)]
pub struct Reconciler {
    pools: HashMap<PoolKey, Vec<(ExpectedPayment, i64)>>,
    /// The external accounts of the counterparties the pools' expected payments name.
    accounts: CounterpartyAccounts,
}

impl Reconciler {
    pub fn new() -> Self {
        Reconciler::default()
    }

    /// Reconciles `transaction` with the expected payment it matches, if any: stages a line item
    /// linking them (the transaction becomes `reconciled`), and the expected payment as
    /// `reconciled` with its transaction, line item and `reconciled` event. The expected payment
    /// must still be at the version read when the batch commits: a racing reconciliation or edit
    /// makes the batch fail with a conflict, to be retried.
    pub async fn reconcile(
        &mut self,
        ctx: &Ctx<'_>,
        batch: &mut WriteBatch,
        transaction: &mut Transaction,
    ) -> Result<Option<ExpectedPayment>> {
        let key: PoolKey = (transaction.internal_account_id.clone(), transaction.direction, transaction.currency);
        if !self.pools.contains_key(&key) {
            let found = candidates(ctx, &key).await?;
            self.load_accounts(ctx, found.iter().filter_map(|(e, _)| e.counterparty_id.as_deref())).await?;
            self.pools.insert(key.clone(), found);
        }
        let pool = self.pools.get_mut(&key).ok_or_else(|| Error::internal("a reconciliation pool just loaded"))?;
        let Some(best_id) = best_match(pool.iter().map(|(e, _)| e), transaction, &self.accounts).map(|e| e.id.clone()) else {
            return Ok(None);
        };
        let at = pool.iter().position(|(e, _)| e.id == best_id).ok_or_else(|| Error::internal("a match outside its pool"))?;
        let (best, version) = pool.swap_remove(at);
        stage_reconciled(ctx, batch, transaction, best, version).map(Some)
    }

    /// Reads the external accounts of each counterparty not read yet.
    async fn load_accounts(&mut self, ctx: &Ctx<'_>, counterparties: impl Iterator<Item = &str>) -> Result<()> {
        let wanted: HashSet<String> = counterparties.filter(|id| !self.accounts.contains_key(*id)).map(str::to_owned).collect();
        for id in wanted {
            let numbers = external_account::of_counterparty(ctx.store, ctx.scope, &id)
                .await?
                .iter()
                .flat_map(|account| account.account_details.iter().filter_map(|d| d.account_number.as_deref()))
                .map(normalise_account)
                .collect();
            self.accounts.insert(id, numbers);
        }
        Ok(())
    }
}

/// Stages `expected` (read at `version`) as reconciled by `transaction`, with their line item.
fn stage_reconciled(
    ctx: &Ctx<'_>,
    batch: &mut WriteBatch,
    transaction: &mut Transaction,
    mut expected: ExpectedPayment,
    version: i64,
) -> Result<ExpectedPayment> {
    let amount = transaction.amount;
    let item = transaction::stage_line_item(ctx, batch, transaction, Settles::ExpectedPayment(expected.id.clone()), amount)?;
    expected.status = "reconciled".into();
    expected.transaction_id = Some(transaction.id.clone());
    expected.transaction_line_item_id = Some(item.id);
    expected.amount_reconciled = Some(amount);
    expected.amount_unreconciled = Some(0);
    expected.reconciliation_method = Some("automatic".into());
    expected.updated_at = ctx.now;
    let json = to_json(&expected)?;
    batch.push(Write::Replace { record: expected.record(ctx.scope, json.clone()), expected_version: version });
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "reconciled", &expected.id, &json, ctx.now)?));
    Ok(expected)
}

/// Reconciles one transaction (see [`Reconciler::reconcile`]); a batch that books several
/// transactions uses one [`Reconciler`] for all of them instead.
pub async fn reconcile(ctx: &Ctx<'_>, batch: &mut WriteBatch, transaction: &mut Transaction) -> Result<Option<ExpectedPayment>> {
    Reconciler::new().reconcile(ctx, batch, transaction).await
}

pub async fn create(ctx: &Ctx<'_>, commit: &dyn Commit, input: &ExpectedPaymentInput) -> Result<String> {
    let mut batch = WriteBatch::new();
    let input = with_rule_terms(input)?;
    let expected = build(ctx, &mut batch, &input, new_id(), ctx.now).await?;
    let json = to_json(&expected)?;
    batch.push(Write::Insert(expected.record(ctx.scope, json.clone())));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &expected.id, &json, ctx.now)?));
    commit.commit(batch, &json).await?;
    Ok(json)
}

pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    listing::stored_doc(ctx, KIND, id, "expected payment").await
}

/// Filters of `GET /api/expected_payments`, parsed where the query is read.
#[derive(Debug, Default)]
pub struct ExpectedPaymentFilter {
    pub status: Option<String>,
    pub internal_account_id: Option<String>,
    pub external_id: Option<String>,
    pub direction: Option<Direction>,
    pub payment_type: Option<PaymentType>,
    pub counterparty_id: Option<String>,
    pub created_from: Option<Timestamp>,
    pub created_to: Option<Timestamp>,
    pub metadata: Vec<(String, String)>,
}

pub async fn list(ctx: &Ctx<'_>, filter: &ExpectedPaymentFilter, page: PageSpec) -> Result<ListedPage> {
    let status = filter.status.as_deref().map(|s| validate::one_of("status", s, STATUSES)).transpose()?;
    let mut filters: Vec<Filter> = [
        listing::eq("status", status.as_deref()),
        listing::eq("internal_account_id", filter.internal_account_id.as_deref()),
        listing::eq("external_id", filter.external_id.as_deref()),
        listing::eq("direction", filter.direction.map(Direction::as_str)),
        listing::eq("type", filter.payment_type.map(PaymentType::as_str)),
        listing::eq("counterparty_id", filter.counterparty_id.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    filters.extend(filter.created_from.map(Filter::CreatedFrom));
    filters.extend(filter.created_to.map(Filter::CreatedTo));
    filters.extend(listing::metadata_filters(&filter.metadata));
    listing::stored_page(ctx, KIND, filters, page).await
}

/// `patch` merged into what made `current`: fields given replace (null clears), metadata
/// merges as MT's does. A `status` other than the current one is refused: Payrail has no
/// partial reconciliation, the only move MT allows a client.
fn merged(current: &ExpectedPayment, patch: &Map<String, Value>) -> Result<ExpectedPaymentInput> {
    if let Some(status) = patch.get("status").filter(|s| !s.is_null())
        && status.as_str() != Some(current.status.as_str())
    {
        return Err(Error::invalid("status", "status cannot be set: Payrail has no partially reconciled expected payments"));
    }
    let mut base = serde_json::to_value(current.as_input()).map_err(|e| Error::internal(format!("expected payment input: {e}")))?;
    let fields = base.as_object_mut().ok_or_else(|| Error::internal("expected payment input is not an object"))?;
    for (key, value) in patch {
        match key.as_str() {
            "status" => {}
            "metadata" => {
                let changes: MetadataPatch = serde_json::from_value(value.clone())
                    .map_err(|_| Error::invalid("metadata", "metadata must be an object of strings"))?;
                let merged = validate::merge_metadata("metadata", &current.metadata, &changes)?;
                fields.insert(key.clone(), serde_json::to_value(merged).map_err(|e| Error::internal(format!("metadata: {e}")))?);
            }
            _ => {
                fields.insert(key.clone(), value.clone());
            }
        }
    }
    serde_path_to_error::deserialize(base).map_err(|e| {
        let field = e.path().to_string();
        Error::invalid(field.clone(), format!("{field}: {}", e.into_inner()))
    })
}

fn only_unreconciled(expected: &ExpectedPayment, what: &str) -> Result<()> {
    if expected.status == "unreconciled" {
        Ok(())
    } else {
        Err(Error::invalid("status", format!("only an unreconciled expected payment can be {what}; this one is {}", expected.status)))
    }
}

pub async fn update(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &Map<String, Value>) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("expected payment"))?;
        let current = parse(&stored)?;
        let input = merged(&current, patch)?;
        if patch.keys().all(|k| k == "status") {
            return Ok(stored.doc);
        }
        only_unreconciled(&current, "updated")?;
        let mut batch = WriteBatch::new();
        let updated = build(ctx, &mut batch, &input, current.id.clone(), current.created_at).await?;
        let json = to_json(&updated)?;
        batch.push(Write::Replace { record: updated.record(ctx.scope, json.clone()), expected_version: stored.version });
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

/// Archives an unreconciled expected payment (MT's DELETE answers 200 with it): it stays
/// readable, with status `archived`, and no transaction reconciles with it any more.
pub async fn delete(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str) -> Result<String> {
    retry_on_conflict(|| async {
        let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("expected payment"))?;
        let mut expected = parse(&stored)?;
        if expected.status == "archived" {
            // A retried delete whose first reply was lost (the SDKs retry one): what it asked for
            // is done, so it answers as the first did and changes nothing.
            return Ok(stored.doc);
        }
        only_unreconciled(&expected, "deleted")?;
        expected.status = "archived".into();
        expected.updated_at = ctx.now;
        let json = to_json(&expected)?;
        let mut batch = WriteBatch::new();
        batch.push(Write::Replace { record: expected.record(ctx.scope, json.clone()), expected_version: stored.version });
        batch.push(Write::Insert(event::record(ctx.scope, KIND, "archived", id, &json, ctx.now)?));
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(micros: i64) -> Timestamp {
        Timestamp::from_micros(1_700_000_000_000_000 + micros)
    }

    fn usd() -> Currency {
        Currency::parse("currency", "USD").unwrap()
    }

    fn expected(id: &str, created: i64, lower: i64, upper: i64) -> ExpectedPayment {
        ExpectedPayment {
            id: id.into(),
            object: KIND.into(),
            live_mode: false,
            created_at: at(created),
            updated_at: at(created),
            external_id: None,
            amount_upper_bound: upper,
            amount_lower_bound: lower,
            direction: Direction::Credit,
            internal_account_id: "ia".into(),
            payment_type: None,
            currency: usd(),
            date_upper_bound: None,
            date_lower_bound: None,
            description: None,
            statement_descriptor: None,
            metadata: Metadata::new(),
            counterparty_id: None,
            remittance_information: None,
            reconciliation_groups: None,
            reconciliation_filters: None,
            reconciliation_rule_variables: None,
            amount_reconciled: Some(0),
            amount_reconciled_direction: Some(Direction::Credit),
            amount_unreconciled: Some(upper),
            amount_unreconciled_direction: Some(Direction::Credit),
            transaction_id: None,
            transaction_line_item_id: None,
            status: "unreconciled".into(),
            reconciliation_method: None,
            ledger_transaction_id: None,
        }
    }

    fn booked(amount: i64, day: &str) -> Transaction {
        Transaction {
            id: "t".into(),
            object: "transaction".into(),
            live_mode: false,
            created_at: at(0),
            updated_at: at(0),
            discarded_at: None,
            amount,
            amount_string: amount.to_string(),
            currency: usd(),
            direction: Direction::Credit,
            vendor_description: None,
            vendor_code: None,
            vendor_code_type: None,
            vendor_id: None,
            as_of_date: day.into(),
            as_of_time: None,
            as_of_timezone: None,
            internal_account_id: "ia".into(),
            metadata: Metadata::new(),
            posted: true,
            vendor_customer_id: None,
            reconciled: false,
            transaction_type: "ach".into(),
            details: Default::default(),
            foreign_exchange_rate: None,
            custom_identifiers: Default::default(),
            version: None,
            staged: false,
        }
    }

    #[test]
    fn b5_amount_bounds_are_inclusive() {
        let e = expected("e", 0, 100, 200);
        assert!(matches(&e, &booked(100, "2026-01-05")));
        assert!(matches(&e, &booked(200, "2026-01-05")));
        assert!(!matches(&e, &booked(99, "2026-01-05")));
        assert!(!matches(&e, &booked(201, "2026-01-05")));
    }

    #[test]
    fn b5_date_bounds_are_inclusive_and_optional() {
        let mut e = expected("e", 0, 1, 1_000);
        e.date_lower_bound = Some("2026-01-05".into());
        assert!(!matches(&e, &booked(10, "2026-01-04")));
        assert!(matches(&e, &booked(10, "2026-01-05")));
        e.date_upper_bound = Some("2026-01-07".into());
        assert!(matches(&e, &booked(10, "2026-01-07")));
        assert!(!matches(&e, &booked(10, "2026-01-08")));
    }

    #[test]
    fn b5_account_direction_currency_type_and_status_must_agree() {
        let e = expected("e", 0, 1, 1_000);
        let t = booked(10, "2026-01-05");
        let mut other = t.clone();
        other.internal_account_id = "other".into();
        assert!(!matches(&e, &other));
        let mut debit = t.clone();
        debit.direction = Direction::Debit;
        assert!(!matches(&e, &debit));
        let mut eur = t.clone();
        eur.currency = Currency::parse("currency", "EUR").unwrap();
        assert!(!matches(&e, &eur));
        let mut wire_only = e.clone();
        wire_only.payment_type = Some(PaymentType::Wire);
        assert!(!matches(&wire_only, &t), "an ach transaction does not settle a wire expectation");
        wire_only.payment_type = Some(PaymentType::Ach);
        assert!(matches(&wire_only, &t));
        for status in ["reconciled", "archived", "partially_reconciled"] {
            let mut done = e.clone();
            done.status = status.into();
            assert!(!matches(&done, &t), "{status} never reconciles again");
        }
    }

    #[test]
    fn b5_the_earliest_created_match_wins() {
        let t = booked(150, "2026-01-05");
        let candidates = vec![expected("late", 30, 100, 200), expected("miss", 0, 1, 10), expected("early", 10, 150, 150)];
        let none = CounterpartyAccounts::new();
        assert_eq!(best_match(&candidates, &t, &none).map(|e| e.id.as_str()), Some("early"));
        let tied = vec![expected("b", 5, 1, 500), expected("a", 5, 1, 500)];
        assert_eq!(best_match(&tied, &t, &none).map(|e| e.id.as_str()), Some("a"));
        assert!(best_match(&[expected("x", 0, 1, 10)], &t, &none).is_none());
    }

    fn from_counterparty(e: &str, counterparty: Option<&str>, created: i64) -> ExpectedPayment {
        ExpectedPayment { counterparty_id: counterparty.map(str::to_owned), ..expected(e, created, 1, 500) }
    }

    fn paid_from(account: &str) -> Transaction {
        let mut t = booked(150, "2026-01-05");
        t.details = [(transaction::COUNTERPARTY_ACCOUNT_NUMBER.to_owned(), account.to_owned())].into();
        t
    }

    #[test]
    fn b5_a_named_counterparty_must_own_the_account_the_bank_names() {
        let accounts: CounterpartyAccounts =
            [("acme".to_owned(), HashSet::from(["DE89370400440532013000".to_owned(), "123456789".to_owned()]))].into();
        let acme = [from_counterparty("acme-ep", Some("acme"), 0)];
        let id = |found: Option<&ExpectedPayment>| found.map(|e| e.id.clone());
        assert_eq!(id(best_match(&acme, &paid_from("123456789"), &accounts)).as_deref(), Some("acme-ep"));
        assert_eq!(id(best_match(&acme, &paid_from("de89 3704 0044 0532 0130 00"), &accounts)).as_deref(), Some("acme-ep"));
        assert!(best_match(&acme, &paid_from("555"), &accounts).is_none(), "another payer's money is not Acme's");
        assert!(best_match(&acme, &paid_from("123456789"), &CounterpartyAccounts::new()).is_none(), "a counterparty without accounts");
        assert_eq!(
            id(best_match(&acme, &booked(150, "2026-01-05"), &accounts)).as_deref(),
            Some("acme-ep"),
            "a statement that names no payer is not refused on it"
        );
    }

    #[test]
    fn b5_a_confirmed_counterparty_wins_over_an_older_unchecked_match() {
        let accounts: CounterpartyAccounts = [("acme".to_owned(), HashSet::from(["123456789".to_owned()]))].into();
        let both = [from_counterparty("anyone", None, 0), from_counterparty("acme-ep", Some("acme"), 10)];
        assert_eq!(best_match(&both, &paid_from("123456789"), &accounts).map(|e| e.id.as_str()), Some("acme-ep"));
        assert_eq!(best_match(&both, &paid_from("555"), &accounts).map(|e| e.id.as_str()), Some("anyone"));
        assert_eq!(best_match(&both, &booked(150, "2026-01-05"), &accounts).map(|e| e.id.as_str()), Some("anyone"));
    }

    #[test]
    fn bounds_name_the_field_that_is_wrong() {
        let input = |lower, upper| ExpectedPaymentInput { amount_lower_bound: lower, amount_upper_bound: upper, ..Default::default() };
        let param = |e: Error| match e {
            Error::Invalid { parameter, .. } => parameter,
            other => panic!("{other:?}"),
        };
        assert_eq!(param(bounds(&input(Some(5), Some(4))).unwrap_err()), "amount_upper_bound");
        assert_eq!(param(bounds(&input(Some(5), None)).unwrap_err()), "amount_upper_bound");
        assert_eq!(param(bounds(&input(Some(-1), Some(4))).unwrap_err()), "amount_lower_bound");
        let dates = ExpectedPaymentInput {
            date_lower_bound: Some("2026-01-05".into()),
            date_upper_bound: Some("2026-01-04".into()),
            ..input(Some(1), Some(2))
        };
        assert_eq!(param(bounds(&dates).unwrap_err()), "date_upper_bound");
    }
}
