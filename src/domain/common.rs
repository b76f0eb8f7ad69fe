//! Parts shared by accounts and counterparties: addresses, account and routing details,
//! contact details; and the small helpers every resource module uses.
//!
//! Account and routing numbers are stored as the strings the client gave (the document's shape
//! is the wire format); those of an `iban`, `aba` or `swift` type were parsed into
//! [`Iban`], [`AbaRoutingNumber`] or [`Bic`] when given, and the accessors
//! ([`AccountDetail::iban`], [`RoutingDetail::aba`], [`RoutingDetail::bic`]) return them typed.

pub use super::enums::{CONTACT_TYPES, PARTY_TYPES};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use super::bank_id::{AbaRoutingNumber, Bic, Iban};
use super::enums::PaymentType;
use super::time::Timestamp;
use super::validate::{self, TEXT_LEN_MAX};
use super::{enums, schema};
use crate::error::Result;

/// A new resource id as text (see `id::new_id`).
pub use super::id::new_id;

/// Deserialises a field that may be absent (`None`), null (`Some(None)`) or set (`Some(Some)`),
/// so a PATCH can tell "leave it" from "clear it".
pub fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Who and when a nested object is made for.
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    pub live_mode: bool,
    pub now: Timestamp,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
#[schema(as = address)]
pub struct Address {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub line1: Option<String>,
    pub line2: Option<String>,
    pub locality: Option<String>,
    pub region: Option<String>,
    pub postal_code: Option<String>,
    pub country: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[schema(as = address_request)]
pub struct AddressInput {
    pub line1: Option<String>,
    pub line2: Option<String>,
    pub locality: Option<String>,
    pub region: Option<String>,
    pub postal_code: Option<String>,
    pub country: Option<String>,
}

impl AddressInput {
    pub fn build(&self, param: &str, stamp: Stamp) -> Result<Address> {
        let field = |name: &str, value: &Option<String>| validate::opt_text(&format!("{param}.{name}"), value.as_deref(), TEXT_LEN_MAX);
        Ok(Address {
            id: new_id(),
            object: "address".into(),
            live_mode: stamp.live_mode,
            line1: field("line1", &self.line1)?,
            line2: field("line2", &self.line2)?,
            locality: field("locality", &self.locality)?,
            region: field("region", &self.region)?,
            postal_code: field("postal_code", &self.postal_code)?,
            country: field("country", &self.country)?,
            created_at: stamp.now,
            updated_at: stamp.now,
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
#[schema(as = account_detail)]
pub struct AccountDetail {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub account_number: Option<String>,
    pub account_number_safe: String,
    #[schema(schema_with = schema::account_number_type)]
    pub account_number_type: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub discarded_at: Option<Timestamp>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[schema(as = account_detail_request)]
pub struct AccountDetailInput {
    pub account_number: String,
    #[schema(schema_with = schema::account_number_type_or_null)]
    pub account_number_type: Option<String>,
}

impl AccountDetailInput {
    pub fn build(&self, param: &str, stamp: Stamp) -> Result<AccountDetail> {
        let number_type = match &self.account_number_type {
            Some(t) => validate::one_of(&format!("{param}.account_number_type"), t, enums::ACCOUNT_NUMBER_TYPES)?,
            None => "other".to_owned(),
        };
        let number = validate::account_number(&format!("{param}.account_number"), &self.account_number, &number_type)?;
        Ok(account_detail(number, number_type, stamp))
    }
}

impl AccountDetail {
    /// The account number as an IBAN, when its type is `iban`.
    pub fn iban(&self) -> Option<Iban> {
        let number = self.account_number.as_deref().filter(|_| self.account_number_type == "iban")?;
        Iban::parse("account_number", number).ok()
    }
}

pub fn account_detail(number: String, number_type: String, stamp: Stamp) -> AccountDetail {
    let safe_start = number.len().saturating_sub(4);
    AccountDetail {
        id: new_id(),
        object: "account_detail".into(),
        live_mode: stamp.live_mode,
        account_number_safe: number[safe_start..].to_owned(),
        account_number: Some(number),
        account_number_type: number_type,
        created_at: stamp.now,
        updated_at: stamp.now,
        discarded_at: None,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
#[schema(as = routing_detail)]
pub struct RoutingDetail {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    #[schema(schema_with = schema::payment_type_or_null)]
    pub payment_type: Option<PaymentType>,
    pub routing_number: String,
    #[schema(schema_with = schema::routing_number_type)]
    pub routing_number_type: String,
    /// Payrail has no bank directory: the name is empty unless Payrail made the account.
    pub bank_name: String,
    pub bank_address: Option<Address>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub discarded_at: Option<Timestamp>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[schema(as = routing_detail_request)]
pub struct RoutingDetailInput {
    pub routing_number: String,
    #[schema(schema_with = schema::routing_number_type)]
    pub routing_number_type: String,
    #[schema(schema_with = schema::payment_type_or_null)]
    pub payment_type: Option<String>,
}

impl RoutingDetailInput {
    pub fn build(&self, param: &str, stamp: Stamp) -> Result<RoutingDetail> {
        let routing_type =
            validate::one_of(&format!("{param}.routing_number_type"), &self.routing_number_type, enums::ROUTING_NUMBER_TYPES)?;
        let number = validate::routing_number(&format!("{param}.routing_number"), &self.routing_number, &routing_type)?;
        let payment_type = self.payment_type.as_deref().map(|t| PaymentType::parse(&format!("{param}.payment_type"), t)).transpose()?;
        Ok(routing_detail(number, routing_type, payment_type, String::new(), stamp))
    }
}

impl RoutingDetail {
    /// The routing number as an ABA routing transit number, when its type is `aba`.
    pub fn aba(&self) -> Option<AbaRoutingNumber> {
        (self.routing_number_type == "aba").then(|| AbaRoutingNumber::parse("routing_number", &self.routing_number).ok())?
    }

    /// The routing number as a BIC, when its type is `swift`.
    pub fn bic(&self) -> Option<Bic> {
        (self.routing_number_type == "swift").then(|| Bic::parse("routing_number", &self.routing_number).ok())?
    }
}

pub fn routing_detail(
    number: String,
    routing_type: String,
    payment_type: Option<PaymentType>,
    bank_name: String,
    stamp: Stamp,
) -> RoutingDetail {
    RoutingDetail {
        id: new_id(),
        object: "routing_detail".into(),
        live_mode: stamp.live_mode,
        payment_type,
        routing_number: number,
        routing_number_type: routing_type,
        bank_name,
        bank_address: None,
        created_at: stamp.now,
        updated_at: stamp.now,
        discarded_at: None,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ToSchema)]
#[schema(as = contact_detail)]
pub struct ContactDetail {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub contact_identifier: String,
    #[schema(schema_with = schema::contact_identifier_type)]
    pub contact_identifier_type: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub discarded_at: Option<Timestamp>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[schema(as = contact_detail_request)]
pub struct ContactDetailInput {
    #[schema(value_type = String, required = true)]
    pub contact_identifier: Option<String>,
    #[schema(schema_with = schema::contact_identifier_type_or_null)]
    pub contact_identifier_type: Option<String>,
}

impl ContactDetailInput {
    pub fn build(&self, param: &str, stamp: Stamp) -> Result<ContactDetail> {
        let kind = match &self.contact_identifier_type {
            Some(t) => validate::one_of(&format!("{param}.contact_identifier_type"), t, CONTACT_TYPES)?,
            None => "email".to_owned(),
        };
        let id_param = format!("{param}.contact_identifier");
        let identifier = match &self.contact_identifier {
            Some(value) if kind == "email" => validate::email(&id_param, value)?,
            Some(value) => validate::text(&id_param, value, TEXT_LEN_MAX)?,
            None => return Err(crate::error::Error::missing(id_param)),
        };
        Ok(ContactDetail {
            id: new_id(),
            object: "contact_detail".into(),
            live_mode: stamp.live_mode,
            contact_identifier: identifier,
            contact_identifier_type: kind,
            created_at: stamp.now,
            updated_at: stamp.now,
            discarded_at: None,
        })
    }
}

/// Builds each item of a list, naming failures `param[i]`.
pub fn build_all<I, T>(param: &str, items: &[I], build: impl Fn(&I, &str) -> Result<T>) -> Result<Vec<T>> {
    items.iter().enumerate().map(|(i, item)| build(item, &format!("{param}[{i}]"))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp() -> Stamp {
        Stamp { live_mode: false, now: Timestamp::from_micros(1_700_000_000_000_000) }
    }

    #[test]
    fn bank_identifiers_come_back_typed_by_their_type() {
        let routing = |number: &str, kind: &str| routing_detail(number.into(), kind.into(), None, String::new(), stamp());
        let aba = routing(super::super::internal_account::SANDBOX_ROUTING_NUMBER, "aba");
        assert_eq!(aba.aba().map(|n| n.check_digit()), Some(0), "the sandbox routing number is an ABA number");
        assert!(aba.bic().is_none());
        let swift = routing("DEUTDEFF500", "swift");
        assert_eq!((swift.bic().map(|b| b.country().to_owned()), swift.aba()), (Some("DE".into()), None));
        assert!(routing("121141822", "ca_cpa").aba().is_none(), "only an aba detail is an ABA number");
        let iban = account_detail("DE89370400440532013000".into(), "iban".into(), stamp());
        assert_eq!(iban.iban().map(|i| i.country().to_owned()), Some("DE".into()));
        assert!(account_detail("DE89370400440532013000".into(), "other".into(), stamp()).iban().is_none());
    }
}
