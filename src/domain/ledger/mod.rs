//! Ledgers (SPEC G): Modern Treasury's double-entry Ledgers API.
//!
//! Ledgers, their accounts, transactions and entries are documents like every resource; what
//! must change atomically with them (each account's running sums and version, the uniqueness
//! of an `external_id`) is kept by the store beside them and moved in the same commit by
//! `Write::LedgerPost` and `Write::LedgerSettle`, whose checks (`base::ledger`) the store runs on
//! the values it holds at that moment. So a balance condition or a `lock_version` is judged
//! against the truth, not against a read that a racing writer has since made stale (G4, G6).
//!
//! Balances are never stored in documents: an account's document holds what the client set,
//! and its balances and `lock_version` are read from the store's sums each time it is served.

pub mod accounts;
pub mod categories;
pub mod entries;
pub mod ledgers;
pub mod monitors;
pub mod settlements;
pub mod statements;
pub mod transactions;

use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};

use super::listing::time_bound;
use super::money::Currency;
use super::time::Timestamp;
use super::validate::{self, Metadata, MetadataPatch, TEXT_LEN_MAX};
use crate::base::ledger::{BalanceKind, Totals, Window};
use crate::error::{Error, Result};
use crate::store::{Write, WriteBatch};

/// Digits after the decimal point a ledger currency may have at most.
pub const CURRENCY_EXPONENT_MAX: u8 = 18;
/// Length of a currency code outside ISO 4217 (a token, points...) at most.
pub const CURRENCY_CODE_LEN_MAX: usize = 16;

/// A ledger account's currency: an ISO 4217 code with its own exponent, or any code (a token,
/// loyalty points) with the exponent the client gives, as Modern Treasury allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerCurrency {
    pub code: String,
    pub exponent: u8,
}

impl LedgerCurrency {
    pub fn parse(code: &str, exponent: Option<i64>) -> Result<Self> {
        let exponent = exponent
            .map(|e| {
                u8::try_from(e)
                    .ok()
                    .filter(|e| *e <= CURRENCY_EXPONENT_MAX)
                    .ok_or_else(|| Error::invalid("currency_exponent", format!("currency_exponent must be 0 to {CURRENCY_EXPONENT_MAX}")))
            })
            .transpose()?;
        if let Ok(iso) = Currency::parse("currency", code) {
            if exponent.is_some_and(|e| e != iso.exponent()) {
                return Err(Error::invalid(
                    "currency_exponent",
                    format!(
                        "{} has {} digits after the point; currency_exponent must be {} or absent",
                        iso.code(),
                        iso.exponent(),
                        iso.exponent()
                    ),
                ));
            }
            return Ok(LedgerCurrency { code: iso.code().to_owned(), exponent: iso.exponent() });
        }
        let capitals = code.to_ascii_uppercase();
        if capitals != code && Currency::parse("currency", &capitals).is_ok() {
            // `usd` would be a custom currency of its own that never balances against USD.
            return Err(Error::invalid("currency", format!("ISO 4217 codes are written in capitals: {capitals}, not {code}")));
        }
        let well_formed = !code.is_empty() && code.len() <= CURRENCY_CODE_LEN_MAX && code.bytes().all(|b| b.is_ascii_alphanumeric());
        if !well_formed {
            return Err(Error::invalid("currency", format!("currency must be a code of 1 to {CURRENCY_CODE_LEN_MAX} letters and digits")));
        }
        let exponent = exponent.ok_or_else(|| {
            Error::invalid("currency_exponent", format!("{code} is not an ISO 4217 currency: currency_exponent is required"))
        })?;
        Ok(LedgerCurrency { code: code.to_owned(), exponent })
    }
}

/// A ledger currency ([`LedgerCurrency`]): an ISO 4217 code, or any code of letters and
/// digits (a token, points) given with its `currency_exponent`.
pub fn ledger_currency() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(CURRENCY_CODE_LEN_MAX))
        .pattern(Some("^[A-Za-z0-9]+$"))
        .build()
}

/// Digits after a ledger currency's decimal point ([`LedgerCurrency`]), or `null`.
pub fn currency_exponent_or_null() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .minimum(Some(0))
        .maximum(Some(CURRENCY_EXPONENT_MAX))
        .build()
}

/// One balance as served: MT's `ledger_balance`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[schema(as = ledger_balance)]
pub struct BalanceDoc {
    pub credits: i64,
    pub credits_string: String,
    pub debits: i64,
    pub debits_string: String,
    pub amount: i64,
    pub amount_string: String,
    pub currency: String,
    pub currency_exponent: u8,
}

/// MT's `ledger_balances`: the three balances.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[schema(as = ledger_balances)]
pub struct BalancesDoc {
    pub pending_balance: BalanceDoc,
    pub posted_balance: BalanceDoc,
    pub available_balance: BalanceDoc,
}

/// MT's `ledger_balances_with_effective_at`: the balances and the window they cover.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[schema(as = ledger_balances_with_effective_at)]
pub struct WindowedBalancesDoc {
    pub effective_at_lower_bound: Option<Timestamp>,
    pub effective_at_upper_bound: Option<Timestamp>,
    pub pending_balance: BalanceDoc,
    pub posted_balance: BalanceDoc,
    pub available_balance: BalanceDoc,
}

/// Renders `totals` as the three balances of an account of `currency`.
pub fn balances(totals: &Totals, credit_normal: bool, currency: &LedgerCurrency) -> Result<BalancesDoc> {
    let one = |kind| -> Result<BalanceDoc> {
        let b = totals.balance(kind, credit_normal)?;
        Ok(BalanceDoc {
            credits: b.credits,
            credits_string: b.credits.to_string(),
            debits: b.debits,
            debits_string: b.debits.to_string(),
            amount: b.amount,
            amount_string: b.amount.to_string(),
            currency: currency.code.clone(),
            currency_exponent: currency.exponent,
        })
    };
    Ok(BalancesDoc {
        pending_balance: one(BalanceKind::Pending)?,
        posted_balance: one(BalanceKind::Posted)?,
        available_balance: one(BalanceKind::Available)?,
    })
}

/// Which balances a read asks for (`balances[...]` query parameters, SPEC G5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BalanceQuery {
    /// Inclusive lower bound of effective time.
    pub lower: Option<Timestamp>,
    /// Upper bound of effective time, inclusive (`effective_at`, `as_of_date`) or exclusive
    /// (`effective_at_upper_bound`).
    pub upper: Option<(Timestamp, bool)>,
    pub as_of_lock_version: Option<i64>,
}

impl BalanceQuery {
    /// The `balances[...]` parameters [`parse`](Self::parse) reads.
    pub const PARAMETERS: &[&str] = &[
        "balances[effective_at]",
        "balances[as_of_date]",
        "balances[effective_at_lower_bound]",
        "balances[effective_at_upper_bound]",
        "balances[as_of_lock_version]",
    ];

    /// Refuses a `balances[...]` parameter that is none of [`PARAMETERS`](Self::PARAMETERS)
    /// (`balances[as_of_dat]`): ignoring it would answer current balances that look like the
    /// ones asked for.
    pub fn refuse_unknown<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<()> {
        let unknown = names.into_iter().find(|n| (*n == "balances" || n.starts_with("balances[")) && !Self::PARAMETERS.contains(n));
        match unknown {
            Some(name) => {
                Err(Error::invalid(name, format!("{name} is not a balances parameter; Payrail reads {}", Self::PARAMETERS.join(", "))))
            }
            None => Ok(()),
        }
    }

    /// Reads `balances[effective_at]`, `balances[as_of_date]` (the end of that UTC day),
    /// `balances[effective_at_lower_bound]` (inclusive), `balances[effective_at_upper_bound]`
    /// (exclusive) and `balances[as_of_lock_version]`. `get` looks a query parameter up.
    pub fn parse<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Result<Self> {
        let at = |name: &str, upper: bool| time_bound(name, get(name), upper);
        let effective_at = at("balances[effective_at]", true)?;
        let as_of_date = match get("balances[as_of_date]") {
            Some(date) => Some(parse_date("balances[as_of_date]", date)?.plus_secs(86_400).plus_micros(-1)),
            None => None,
        };
        let lower = at("balances[effective_at_lower_bound]", false)?;
        let upper_exclusive = at("balances[effective_at_upper_bound]", false)?;
        if effective_at.is_some() && as_of_date.is_some() {
            return Err(Error::invalid("balances[as_of_date]", "give balances[effective_at] or balances[as_of_date], not both"));
        }
        let inclusive = effective_at.or(as_of_date);
        let upper = match (inclusive, upper_exclusive) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "balances[effective_at_upper_bound]",
                    "give balances[effective_at] or balances[as_of_date], or balances[effective_at_upper_bound], not both",
                ));
            }
            (Some(at), None) => Some((at, true)),
            (None, Some(at)) => Some((at, false)),
            (None, None) => None,
        };
        let as_of_lock_version = match get("balances[as_of_lock_version]") {
            Some(v) => Some(v.parse::<i64>().ok().filter(|v| *v >= 0).ok_or_else(|| {
                Error::invalid("balances[as_of_lock_version]", "balances[as_of_lock_version] must be a whole number, 0 or more")
            })?),
            None => None,
        };
        Ok(BalanceQuery { lower, upper, as_of_lock_version })
    }

    pub fn is_current(&self) -> bool {
        *self == BalanceQuery::default()
    }

    pub fn window(&self) -> Window {
        Window {
            from_micros: self.lower.map(Timestamp::as_micros),
            to_micros: self.upper.map(|(at, _)| at.as_micros()),
            through_inclusive: self.upper.is_some_and(|(_, inclusive)| inclusive),
            upto_version: self.as_of_lock_version,
            through_entry: None,
        }
    }

    /// The bounds the reply names: the upper one as MT's exclusive bound.
    pub fn bounds(&self) -> (Option<Timestamp>, Option<Timestamp>) {
        let upper = self.upper.map(|(at, inclusive)| if inclusive { at.plus_micros(1) } else { at });
        (self.lower, upper)
    }
}

/// A `YYYY-MM-DD` date as its first instant (UTC).
pub fn parse_date(param: &str, text: &str) -> Result<Timestamp> {
    let well_formed = text.len() == 10 && text.as_bytes()[4] == b'-' && text.as_bytes()[7] == b'-';
    well_formed
        .then(|| Timestamp::parse_rfc3339(&format!("{text}T00:00:00Z")))
        .flatten()
        .ok_or_else(|| Error::invalid(param, format!("{param} must be a date (YYYY-MM-DD)")))
}

/// The day an `effective_date[...]` bound names: a date, or the date a date-time is written on
/// (MT's document types the transactions' filter as a date-time, so an SDK may send one:
/// `2026-11-29T00:00:00-05:00` is the 29th).
fn filter_day(param: &str, text: &str) -> Result<Timestamp> {
    match parse_date(param, text) {
        Ok(day) => Ok(day),
        Err(refused) => match text.get(..10) {
            Some(day) if effective_at(param, text).is_ok() => parse_date(param, day),
            _ => Err(refused),
        },
    }
}

/// The UTC date of an instant, `YYYY-MM-DD`.
pub fn date_of(at: Timestamp) -> String {
    at.to_string()[..10].to_owned()
}

/// Effective times Payrail keeps: years 1 to 9999, so their text sorts as the instants do
/// (served, and in the terms of rows written before storage layout level 3).
pub fn effective_at(param: &str, text: &str) -> Result<Timestamp> {
    // A date-time without an offset is read as UTC, as the list filters and `balances[...]` read
    // it (`datetime.utcnow()` in Python sends one).
    let at =
        Timestamp::parse_rfc3339_or_utc(text).ok_or_else(|| Error::invalid(param, format!("{param} must be an RFC 3339 date-time")))?;
    let first = Timestamp::parse_rfc3339("0001-01-01T00:00:00Z").expect("a valid instant");
    let last = Timestamp::parse_rfc3339("9999-12-31T23:59:59.999999Z").expect("a valid instant");
    if at < first || at > last {
        return Err(Error::invalid(param, format!("{param} must lie between the years 1 and 9999")));
    }
    Ok(at)
}

/// How many times a change that deletes documents by id is run again when one of them vanished
/// under it (a racing request removed it first): the re-read then sees the truth.
const VANISHED_ATTEMPTS_MAX: u32 = 3;

/// Runs `attempt` again, at most a few times, when it failed with a 404: a document it meant to
/// delete was deleted by a racing request between its read and its commit.
pub async fn retry_if_vanished<T, F, Fut>(mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        match attempt().await {
            Err(Error::NotFound { .. }) if tries < VANISHED_ATTEMPTS_MAX => continue,
            other => return other,
        }
    }
}

/// A PATCH of the fields ledger accounts and ledger account categories share (MT's
/// `ledger_account_update_request`; the categories' is published from the same fields, see
/// `api::ledger_account_categories`).
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(
    as = ledger_account_update_request,
    description = "Fields to change; metadata merges (a key given null or an empty string is removed)."
)]
pub struct NamedPatch {
    pub name: Option<String>,
    #[serde(default, deserialize_with = "super::common::nullable")]
    pub description: Option<Option<String>>,
    #[schema(schema_with = super::schema::metadata_patch_or_null)]
    pub metadata: Option<MetadataPatch>,
    #[serde(default, deserialize_with = "super::common::nullable")]
    pub external_id: Option<Option<String>>,
}

/// Those fields of one account or category, as a PATCH changes them.
pub struct Named<'a> {
    pub name: &'a mut String,
    pub description: &'a mut Option<String>,
    pub metadata: &'a mut Metadata,
    pub external_id: &'a mut Option<String>,
}

impl Named<'_> {
    /// Applies `patch`; if the `external_id` changed, stages the move of its unique key among
    /// the ledger's `kind`s (`noun` names them in the refusal).
    pub fn apply(self, patch: &NamedPatch, batch: &mut WriteBatch, kind: &str, ledger_id: &str, noun: &str) -> Result<()> {
        if let Some(name) = &patch.name {
            *self.name = validate::text("name", name, TEXT_LEN_MAX)?;
        }
        if let Some(description) = &patch.description {
            *self.description = validate::opt_text("description", description.as_deref(), TEXT_LEN_MAX)?;
        }
        if let Some(metadata) = &patch.metadata {
            *self.metadata = validate::merge_metadata("metadata", self.metadata, metadata)?;
        }
        if let Some(external_id) = &patch.external_id {
            let new = validate::opt_text("external_id", external_id.as_deref(), TEXT_LEN_MAX)?;
            if new != *self.external_id {
                if let Some(old) = self.external_id.as_deref() {
                    batch.push(Write::ReleaseUnique { key: external_id_key(kind, ledger_id, old) });
                }
                take_external_id(batch, kind, ledger_id, new.as_deref(), noun);
                *self.external_id = new;
            }
        }
        Ok(())
    }
}

/// The effective-time window of a list (`effective_at[gte]=...`, `effective_date[lt]=...`, and
/// a bare `effective_at=`/`effective_date=` for equality): each bound given narrows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EffectiveRange {
    /// At or after, at or before (both inclusive).
    pub from: Option<Timestamp>,
    pub to: Option<Timestamp>,
}

impl EffectiveRange {
    fn narrow(&mut self, from: Option<Timestamp>, to: Option<Timestamp>) {
        self.from = self.from.max(from);
        self.to = match (self.to, to) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// The effective-time window a list's parameters ask for (see [`EffectiveRange`]).
pub fn effective_range<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Result<EffectiveRange> {
    let mut range = EffectiveRange::default();
    for field in ["effective_at", "effective_date"] {
        for op in ["", "[eq]", "[gt]", "[gte]", "[lt]", "[lte]"] {
            let name = format!("{field}{op}");
            let Some(text) = get(&name) else { continue };
            let (first, last) = if field == "effective_date" {
                let start = filter_day(&name, text)?;
                (start, start.plus_secs(86_400).plus_micros(-1))
            } else {
                let at = effective_at(&name, text)?;
                (at, at)
            };
            match op {
                "" | "[eq]" => range.narrow(Some(first), Some(last)),
                "[gt]" => range.narrow(Some(last.plus_micros(1)), None),
                "[gte]" => range.narrow(Some(first), None),
                "[lt]" => range.narrow(None, Some(first.plus_micros(-1))),
                _ => range.narrow(None, Some(last)),
            }
        }
    }
    Ok(range)
}

/// Stages the taking of `external_id`'s unique key among the ledger's `kind`s, if there is one.
pub fn take_external_id(batch: &mut WriteBatch, kind: &str, ledger_id: &str, external_id: Option<&str>, noun: &str) {
    if let Some(external_id) = external_id {
        batch.push(Write::Unique {
            key: external_id_key(kind, ledger_id, external_id),
            parameter: "external_id".into(),
            message: format!("external_id is already taken by another {noun} of this ledger"),
        });
    }
}

/// The unique-key namespace of a ledger's `external_id`s of `kind`.
pub fn external_id_key(kind: &str, ledger_id: &str, external_id: &str) -> String {
    format!("{kind}.external_id:{ledger_id}:{external_id}")
}

/// Stages that `ledgerable_id` names an existing object of `ledgerable_type` in the caller's
/// tenant, as every other id in a request body must (SPEC E2, A3): an id that names nothing, or
/// another tenant's object, is a 422 naming `ledgerable_id`. Types Payrail keeps no objects of
/// (`reversal`, `virtual_account`) are refused the same way.
pub(crate) async fn require_ledgerable(
    ctx: &super::Ctx<'_>,
    batch: &mut WriteBatch,
    ledgerable_type: Option<&str>,
    ledgerable_id: Option<&str>,
) -> Result<()> {
    use super::kinds;
    let (Some(kind), Some(id)) = (ledgerable_type, ledgerable_id) else { return Ok(()) };
    let stored_kind = match kind {
        "payment_order" => kinds::PAYMENT_ORDER,
        "expected_payment" => kinds::EXPECTED_PAYMENT,
        "incoming_payment_detail" => kinds::INCOMING_PAYMENT_DETAIL,
        "return" => kinds::RETURN,
        "counterparty" => kinds::COUNTERPARTY,
        "external_account" => kinds::EXTERNAL_ACCOUNT,
        "internal_account" => kinds::INTERNAL_ACCOUNT,
        other => {
            return Err(Error::invalid(
                "ledgerable_id",
                format!("ledgerable_id does not name an existing {}: Payrail keeps none", other.replace('_', " ")),
            ));
        }
    };
    super::require(ctx, batch, stored_kind, id, "ledgerable_id").await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g1_each_effective_bound_narrows_the_window_and_dates_cover_their_whole_day() {
        let at = |text: &str| effective_at("t", text).unwrap();
        let params = [
            ("effective_at[gte]", "2026-03-01T00:00:00Z"),
            ("effective_at[gt]", "2026-03-05T00:00:00Z"),
            ("effective_date[lte]", "2026-03-20"),
            ("effective_at[lt]", "2026-03-25T00:00:00Z"),
        ];
        let range = effective_range(|name| params.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)).unwrap();
        assert_eq!(range.from, Some(at("2026-03-05T00:00:00Z").plus_micros(1)), "the later lower bound, exclusive");
        assert_eq!(range.to, Some(at("2026-03-21T00:00:00Z").plus_micros(-1)), "the earlier upper bound: the date's last instant");
        let day = effective_range(|name| (name == "effective_date").then_some("2026-03-20")).unwrap();
        assert_eq!((day.from, day.to), (Some(at("2026-03-20T00:00:00Z")), Some(at("2026-03-21T00:00:00Z").plus_micros(-1))));
        assert_eq!(effective_range(|_| None).unwrap(), EffectiveRange::default());
        assert!(effective_range(|name| (name == "effective_at[gt]").then_some("soon")).is_err());
    }

    #[test]
    fn currencies_iso_and_custom() {
        assert_eq!(LedgerCurrency::parse("USD", None).unwrap(), LedgerCurrency { code: "USD".into(), exponent: 2 });
        assert!(LedgerCurrency::parse("USD", Some(3)).is_err());
        assert_eq!(LedgerCurrency::parse("POINTS", Some(0)).unwrap().exponent, 0);
        assert!(LedgerCurrency::parse("POINTS", None).is_err());
        assert!(LedgerCurrency::parse("no way", Some(2)).is_err());
        assert!(LedgerCurrency::parse("XYZ", Some(19)).is_err());
        // Found by the ledger2 audit: `usd` was a custom currency apart from USD.
        for code in ["usd", "Usd", "eur"] {
            assert!(LedgerCurrency::parse(code, Some(2)).unwrap_err().to_string().contains("capitals"), "{code}");
        }
        assert_eq!(LedgerCurrency::parse("pts", Some(0)).unwrap().code, "pts", "a custom code keeps its spelling");
    }

    #[test]
    fn g5_balance_queries() {
        let q = BalanceQuery::parse(|name| (name == "balances[as_of_date]").then_some("2026-01-31")).unwrap();
        let (at, inclusive) = q.upper.unwrap();
        assert!(inclusive);
        assert_eq!(at.to_string(), "2026-01-31T23:59:59.999999Z");
        assert_eq!(q.bounds().1.unwrap().to_string(), "2026-02-01T00:00:00.000000Z");
        let both = |name: &str| match name {
            "balances[effective_at]" => Some("2026-01-01T00:00:00Z"),
            "balances[effective_at_upper_bound]" => Some("2026-01-02T00:00:00Z"),
            _ => None,
        };
        assert!(BalanceQuery::parse(both).is_err());
        assert!(BalanceQuery::parse(|_| None).unwrap().is_current());
    }

    #[test]
    fn g5_effective_times_without_offset_are_utc() {
        assert_eq!(effective_at("e", "2026-03-10T12:00:00").unwrap(), effective_at("e", "2026-03-10T12:00:00Z").unwrap());
        assert_eq!(effective_at("e", "2026-03-10 12:00:00").unwrap(), effective_at("e", "2026-03-10T12:00:00+00:00").unwrap());
        assert!(effective_at("e", "yesterday").is_err());
    }
}
