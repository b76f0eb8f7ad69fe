//! What a file carries of each order, frozen when the order is claimed ([`Item`]: the order's
//! and its receiving account's fields a rail needs), and how an item becomes the rail's entry.
//!
//! The conversion runs twice with the same inputs: at claim, to leave out (and log) an order
//! its rail cannot carry, and at write, to write it. So a claimed order is always writable, and
//! a file written again after a crash is the same file, whatever was edited meanwhile (an
//! external account's name, a connection's settings): it is written from these snapshots only.

use serde::{Deserialize, Serialize};

use crate::bank::ach::{AchOrder, SAME_DAY_AMOUNT_MAX_CENTS, entry_numbers, validate_order_for_ach};
use crate::bank::calendar::{self, effective_entry_date};
use crate::bank::formats::iso20022::rules::{self, AccountView, OrderView};
use crate::bank::formats::iso20022::{self as iso, ChargeBearer, Counterpart, CreditTransfer, PostalAddress};
use crate::bank::formats::nacha::field::alpha_text;
use crate::bank::formats::nacha::{BatchSpec, EntryInput, SecCode, ServiceClass};
use crate::base::time::Timestamp;
use crate::domain::bank_id::Bic;
use crate::domain::common::{AccountDetail, Address, RoutingDetail};
use crate::domain::enums::{Direction, PaymentType, Priority};
use crate::domain::external_account::ExternalAccount;
use crate::domain::id::Id;
use crate::domain::internal_account::InternalAccount;
use crate::domain::money::{Amount, Currency};
use crate::domain::payment_order::PaymentOrder;
use crate::error::{Error, Result};

/// A rail and its file format: NACHA for `ach`, pain.001 for the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rail {
    Ach,
    Iso(iso::Rail),
}

impl Rail {
    pub const ALL: [Rail; 4] = [Rail::Ach, Rail::Iso(iso::Rail::Wire), Rail::Iso(iso::Rail::Rtp), Rail::Iso(iso::Rail::Sepa)];

    pub fn as_str(self) -> &'static str {
        match self {
            Rail::Ach => "ach",
            Rail::Iso(iso::Rail::Wire) => "wire",
            Rail::Iso(iso::Rail::Rtp) => "rtp",
            Rail::Iso(iso::Rail::Sepa) => "sepa",
        }
    }

    pub fn parse(text: &str) -> Option<Rail> {
        Rail::ALL.into_iter().find(|r| r.as_str() == text)
    }

    /// The rail whose files carry orders of `payment_type`, if any does.
    pub fn for_type(payment_type: PaymentType) -> Option<Rail> {
        Rail::ALL.into_iter().find(|rail| rail.payment_type() == payment_type)
    }

    pub fn payment_type(self) -> PaymentType {
        match self {
            Rail::Ach => PaymentType::Ach,
            Rail::Iso(iso::Rail::Wire) => PaymentType::Wire,
            Rail::Iso(iso::Rail::Rtp) => PaymentType::Rtp,
            Rail::Iso(iso::Rail::Sepa) => PaymentType::Sepa,
        }
    }

    /// The file name's extension.
    pub fn extension(self) -> &'static str {
        match self {
            Rail::Ach => "ach",
            Rail::Iso(_) => "xml",
        }
    }
}

/// A postal address as frozen in an item.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressSnap {
    pub line1: Option<String>,
    pub line2: Option<String>,
    pub locality: Option<String>,
    pub region: Option<String>,
    pub postal_code: Option<String>,
    pub country: Option<String>,
}

impl AddressSnap {
    fn of(address: &Address) -> Self {
        AddressSnap {
            line1: address.line1.clone(),
            line2: address.line2.clone(),
            locality: address.locality.clone(),
            region: address.region.clone(),
            postal_code: address.postal_code.clone(),
            country: address.country.clone(),
        }
    }

    fn postal(&self) -> PostalAddress {
        PostalAddress {
            line1: self.line1.clone(),
            line2: self.line2.clone(),
            locality: self.locality.clone(),
            region: self.region.clone(),
            postal_code: self.postal_code.clone(),
            country: self.country.clone(),
        }
    }
}

/// An account (receiving, or the paying internal account) as frozen in a file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountSnap {
    pub party_name: Option<String>,
    pub party_type: Option<String>,
    pub account_type: Option<String>,
    pub party_address: Option<AddressSnap>,
    /// `(account_number_type, account_number)`, in the account's order.
    pub account_details: Numbers,
    /// `(routing_number_type, routing_number)`, in the account's order.
    pub routing_details: Numbers,
}

/// `(type, number)` pairs: an account's account or routing details as frozen.
pub type Numbers = Vec<(String, String)>;

fn details(accounts: &[AccountDetail], routings: &[RoutingDetail]) -> (Numbers, Numbers) {
    let accounts = accounts
        .iter()
        .filter(|a| a.discarded_at.is_none())
        .filter_map(|a| a.account_number.clone().map(|n| (a.account_number_type.clone(), n)))
        .collect();
    let routings =
        routings.iter().filter(|r| r.discarded_at.is_none()).map(|r| (r.routing_number_type.clone(), r.routing_number.clone())).collect();
    (accounts, routings)
}

impl AccountSnap {
    pub fn of_external(account: &ExternalAccount) -> Self {
        let (account_details, routing_details) = details(&account.account_details, &account.routing_details);
        AccountSnap {
            party_name: Some(account.party_name.clone()),
            party_type: account.party_type.clone(),
            account_type: Some(account.account_type.clone()),
            party_address: account.party_address.as_ref().map(AddressSnap::of),
            account_details,
            routing_details,
        }
    }

    pub fn of_internal(account: &InternalAccount) -> Self {
        let (account_details, routing_details) = details(&account.account_details, &account.routing_details);
        AccountSnap {
            party_name: Some(account.party_name.clone()),
            party_type: account.party_type.clone(),
            account_type: account.account_type.clone(),
            party_address: account.party_address.as_ref().map(AddressSnap::of),
            account_details,
            routing_details,
        }
    }

    pub(crate) fn view(&self) -> AccountView<'_> {
        AccountView {
            party_name: self.party_name.as_deref(),
            party_address: self.party_address.as_ref().map(AddressSnap::postal),
            account_details: self.account_details.iter().map(|(t, n)| (t.as_str(), n.as_str())).collect(),
            routing_details: self.routing_details.iter().map(|(t, n)| (t.as_str(), n.as_str())).collect(),
        }
    }
}

/// One order as its file carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub order_id: String,
    pub amount: i64,
    pub currency: String,
    pub direction: String,
    pub priority: String,
    pub subtype: Option<String>,
    pub statement_descriptor: Option<String>,
    pub remittance_information: Option<String>,
    pub charge_bearer: Option<String>,
    pub receiving: AccountSnap,
}

impl Item {
    pub fn of(order: &PaymentOrder, receiving: AccountSnap) -> Self {
        Item {
            order_id: order.id.to_string(),
            amount: order.amount.minor_units(),
            currency: order.currency.code().to_owned(),
            direction: order.direction.as_str().to_owned(),
            priority: order.priority.as_str().to_owned(),
            subtype: order.subtype.clone(),
            statement_descriptor: order.statement_descriptor.clone(),
            remittance_information: order.remittance_information.clone(),
            charge_bearer: order.charge_bearer.clone(),
            receiving,
        }
    }

    fn money(&self) -> Result<(Amount, Currency)> {
        Ok((Amount::parse("amount", self.amount)?, Currency::parse("currency", &self.currency)?))
    }

    pub fn is_credit(&self) -> bool {
        self.direction == Direction::Credit.as_str()
    }

    /// The amount in minor units (positive: every order's amount is).
    pub fn minor_units(&self) -> u64 {
        self.amount.unsigned_abs()
    }
}

/// What puts an ACH entry in its batch: SEC code, same-day flag and company entry description
/// (the connection fixes the rest of the batch header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AchKey {
    pub sec: SecCode,
    pub same_day: bool,
    pub description: String,
}

/// The company entry description when an order's `statement_descriptor` cannot be one.
const DEFAULT_DESCRIPTION: &str = "PAYMENT";

impl AchKey {
    /// As kept in the file record: `SEC/0|1/DESCRIPTION`.
    pub fn to_key(&self) -> String {
        format!("{}/{}/{}", self.sec.as_str(), u8::from(self.same_day), self.description)
    }

    pub fn parse(key: &str) -> Result<AchKey> {
        let bad = || Error::internal(format!("a stored ACH batch key is malformed: {key:?}"));
        let mut parts = key.splitn(3, '/');
        let sec = parts.next().and_then(SecCode::parse).ok_or_else(bad)?;
        let same_day = parts.next().ok_or_else(bad)? == "1";
        let description = parts.next().ok_or_else(bad)?.to_owned();
        Ok(AchKey { sec, same_day, description })
    }

    /// The batch header of this key in a file made at `created_at`, with the connection's
    /// company and the narrowest service class the batch's entries allow.
    pub fn spec(&self, ach: &crate::bank::connection::AchSettings, created_at: Timestamp, credits: bool, debits: bool) -> BatchSpec {
        let created = to_offset(created_at);
        let effective_entry_date =
            if self.same_day { calendar::to_eastern(created).date() } else { effective_entry_date(created, false).date };
        BatchSpec {
            service_class: ServiceClass::narrowest(credits, debits),
            company_name: ach.company_name.clone(),
            company_discretionary_data: String::new(),
            company_id: ach.company_id.clone(),
            sec: self.sec,
            entry_description: self.description.clone(),
            descriptive_date: String::new(),
            effective_entry_date,
            same_day: self.same_day,
        }
    }
}

/// An instant as `time`'s UTC date-time.
pub fn to_offset(at: Timestamp) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(at.as_micros()) * 1_000).unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

/// The company entry description of an order: its `statement_descriptor` when NACHA can carry
/// it (10 printable characters), `PAYMENT` otherwise.
fn description(descriptor: Option<&str>) -> String {
    descriptor
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .and_then(|d| alpha_text("batch_header", "company_entry_description", d, 10).ok())
        .unwrap_or_else(|| DEFAULT_DESCRIPTION.to_owned())
}

/// The ACH entry of `item` in a file made at `created_at`, and the batch it goes in; a 422
/// naming the field when NACHA cannot carry it.
pub fn ach_entry(item: &Item, created_at: Timestamp) -> Result<(AchKey, EntryInput)> {
    let (amount, currency) = item.money()?;
    let direction = Direction::parse("direction", &item.direction)?;
    let receiving = &item.receiving;
    let (routing_number, account_number, account_type) =
        entry_numbers(&receiving.account_details, &receiving.routing_details, receiving.account_type.as_deref());
    let order = AchOrder {
        subtype: item.subtype.as_deref(),
        direction,
        amount,
        currency,
        routing_number,
        account_number,
        account_type,
        party_name: receiving.party_name.as_deref(),
        party_type: receiving.party_type.as_deref(),
        remittance_information: item.remittance_information.as_deref(),
        receiving_field: "receiving_account_id",
    };
    let entry = validate_order_for_ach(&order)?;
    // An entry above Same Day ACH's limit goes next-day (creation refuses it; an order stored
    // before that check still gets sent).
    let same_day = item.priority == Priority::High.as_str()
        && i64::try_from(entry.entry.amount_cents).is_ok_and(|cents| cents <= SAME_DAY_AMOUNT_MAX_CENTS)
        && effective_entry_date(to_offset(created_at), true).same_day;
    let key = AchKey { sec: entry.sec, same_day, description: description(item.statement_descriptor.as_deref()) };
    Ok((key, entry.entry))
}

/// The credit transfer of `item` on `rail`; a 422 naming the field when the rail cannot carry it.
pub fn iso_transfer(rail: iso::Rail, item: &Item) -> Result<CreditTransfer> {
    if !item.is_credit() {
        return Err(Error::invalid("direction", "pain.001 carries credit transfers only: a debit cannot go by wire, rtp or sepa file"));
    }
    let (amount, currency) = item.money()?;
    let view = OrderView {
        rail,
        amount,
        currency,
        remittance_information: item.remittance_information.as_deref(),
        charge_bearer: item.charge_bearer.as_deref(),
        receiving: item.receiving.view(),
        receiving_field: "receiving_account_id",
    };
    let creditor = rules::check_order(&view)?;
    let charge_bearer = item.charge_bearer.as_deref().map(|b| ChargeBearer::from_order("charge_bearer", b)).transpose()?;
    Ok(CreditTransfer {
        order_id: Id::stored(item.order_id.clone()),
        amount,
        currency,
        creditor,
        remittance_information: item.remittance_information.clone(),
        charge_bearer,
    })
}

/// The paying side of an ISO group; its BIC may be the connection's `debtor_agent_bic`.
pub fn iso_debtor(rail: iso::Rail, debtor: &AccountSnap, connection_bic: Option<&str>) -> Result<Counterpart> {
    let bic = connection_bic.map(|b| Bic::parse("debtor_agent_bic", b)).transpose()?;
    rules::check_originating(rail, &debtor.view(), bic.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(priority: &str, descriptor: Option<&str>) -> Item {
        Item {
            order_id: "01920dfa-7854-7011-a1ff-441cc96a09e9".into(),
            amount: 12_500,
            currency: "USD".into(),
            direction: "credit".into(),
            priority: priority.into(),
            subtype: None,
            statement_descriptor: descriptor.map(str::to_owned),
            remittance_information: Some("Invoice 42".into()),
            charge_bearer: None,
            receiving: AccountSnap {
                party_name: Some("Jane Doe".into()),
                account_type: Some("other".into()),
                account_details: vec![("other".into(), "123456789".into())],
                routing_details: vec![("aba".into(), "121141822".into())],
                ..AccountSnap::default()
            },
        }
    }

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    #[test]
    fn b3_high_priority_goes_same_day_only_before_14_eastern() {
        // 13:59 EDT on a banking day (Thursday July 2nd 2026).
        let (key, entry) = ach_entry(&item("high", None), at("2026-07-02T17:59:00Z")).unwrap();
        assert_eq!((key.to_key().as_str(), entry.amount_cents), ("PPD/1/PAYMENT", 12_500));
        let (late, _) = ach_entry(&item("high", None), at("2026-07-02T18:00:00Z")).unwrap();
        assert!(!late.same_day, "14:00 Eastern is too late for same-day");
        let (normal, _) = ach_entry(&item("normal", None), at("2026-07-02T13:00:00Z")).unwrap();
        assert!(!normal.same_day);
        let ach = crate::bank::connection::AchSettings {
            immediate_destination: "021000021".into(),
            immediate_destination_name: "ACME BANK".into(),
            immediate_origin: "1234567890".into(),
            immediate_origin_name: "ACME CORP".into(),
            company_id: "1234567890".into(),
            company_name: "ACME CORP".into(),
        };
        let created = at("2026-07-02T17:59:00Z");
        assert_eq!(key.spec(&ach, created, true, false).effective_entry_date, time::macros::date!(2026 - 07 - 02));
        let spec = normal.spec(&ach, created, true, true);
        assert_eq!((spec.effective_entry_date, spec.service_class), (time::macros::date!(2026 - 07 - 03), ServiceClass::Mixed));
        assert_eq!(AchKey::parse(&key.to_key()).unwrap(), key);
    }

    #[test]
    fn b3_the_statement_descriptor_is_the_entry_description_when_nacha_can_carry_it() {
        let key = |d| ach_entry(&item("normal", d), at("2026-07-02T13:00:00Z")).unwrap().0.description;
        assert_eq!(key(Some("Payroll")), "PAYROLL");
        assert_eq!(key(Some("Zoë")), "PAYMENT", "not printable ASCII");
        assert_eq!(key(Some("   ")), "PAYMENT");
        assert_eq!(key(None), "PAYMENT");
        let with_slash = AchKey { sec: SecCode::Ccd, same_day: false, description: "A/B".into() };
        assert_eq!(AchKey::parse(&with_slash.to_key()).unwrap(), with_slash);
    }

    #[test]
    fn b3_iso_rails_carry_credits_only_and_refuse_naming_the_field() {
        let mut debit = item("normal", None);
        debit.direction = "debit".into();
        match iso_transfer(iso::Rail::Wire, &debit).unwrap_err() {
            Error::Invalid { parameter, .. } => assert_eq!(parameter, "direction"),
            other => panic!("{other:?}"),
        }
        let transfer = iso_transfer(iso::Rail::Wire, &item("normal", None)).unwrap();
        assert_eq!((transfer.amount.minor_units(), transfer.remittance_information.as_deref()), (12_500, Some("Invoice 42")));
        match iso_transfer(iso::Rail::Sepa, &item("normal", None)).unwrap_err() {
            Error::Invalid { parameter, .. } => assert_eq!(parameter, "currency"),
            other => panic!("{other:?}"),
        }
    }
}
