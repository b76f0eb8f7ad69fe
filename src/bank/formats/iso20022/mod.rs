//! ISO 20022 files for the `wire`, `rtp` and `sepa` rails (SPEC B3): `pain.001.001.09`
//! (Customer Credit Transfer Initiation), written by [`pain001`], checked against the official
//! XSD kept in `compat/iso20022/xsd/` by `tests/iso20022_files.rs`. The banks' answers (SPEC B5,
//! B7): [`pain002`] status reports and [`camt`] statements and notifications, read with the
//! streaming [`read`] helper on quick-xml and written with the same [`xml`] writer; their XSDs
//! are checked by `tests/bank_answers.rs`.
//!
//! The inputs are typed: amounts ([`Amount`], in minor units) with their [`Currency`] (written
//! with its exponent), IBANs and BICs ([`Iban`], [`Bic`]), ABA routing numbers and the order's
//! [`Id`]. Free text (names, addresses, remittance information) is checked against the rail's
//! character set and the XSD's lengths (`text`) and refused with an error naming the field,
//! never altered. [`rules`] says at creation whether a rail can carry an order, with the same
//! checks the writer makes, so an order that was accepted is never refused at cut-off.
//!
//! Matching: each transaction's `EndToEndId` (and `InstrId`) is [`end_to_end_id`] of its
//! payment order: the order's UUID as 32 lower-case hex digits. Banks return it unchanged in
//! `pain.002` status reports (`OrgnlEndToEndId`) and `camt.053`/`camt.054` statements
//! (`NtryDtls/TxDtls/Refs/EndToEndId`), which is how the inbound half finds the order (SPEC B5).

pub mod camt;
pub mod pain001;
pub mod pain002;
pub mod read;
pub mod return_reasons;
pub mod rules;
pub mod text;
pub mod xml;

use time::Date;

use crate::domain::bank_id::{AbaRoutingNumber, Bic, Iban};
use crate::domain::id::Id;
use crate::domain::money::{Amount, Currency};
use crate::error::{Error, Result};
use text::Charset;

pub use pain001::{Item, MessageHeader, Pain001Writer, Totals, write_replayable};

/// The rails carried as pain.001 files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rail {
    Wire,
    Rtp,
    Sepa,
}

impl Rail {
    pub fn charset(self) -> Charset {
        match self {
            Rail::Sepa => Charset::SepaLatin,
            Rail::Wire | Rail::Rtp => Charset::Xml,
        }
    }

    /// The longest party name: the EPC limits SEPA names to 70 characters, the XSD to 140.
    pub fn name_max(self) -> usize {
        match self {
            Rail::Sepa => 70,
            Rail::Wire | Rail::Rtp => 140,
        }
    }

    /// `PmtTpInf/SvcLvl/Cd` (ISO's external service level codes): `SEPA`; `URGP` (urgent,
    /// cleared through a real-time gross settlement system: Fedwire) for wires; `URNS` (urgent,
    /// net settlement) for RTP, whose instant rail the local instrument names.
    pub fn service_level(self) -> &'static str {
        match self {
            Rail::Sepa => "SEPA",
            Rail::Wire => "URGP",
            Rail::Rtp => "URNS",
        }
    }

    /// `PmtTpInf/LclInstrm/Prtry`, when the service level alone does not name the rail.
    pub fn local_instrument(self) -> Option<&'static str> {
        match self {
            Rail::Rtp => Some("RTP"),
            Rail::Sepa | Rail::Wire => None,
        }
    }
}

/// A postal address as Modern Treasury's party addresses hold it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PostalAddress {
    pub line1: Option<String>,
    pub line2: Option<String>,
    /// Town (`TwnNm`).
    pub locality: Option<String>,
    /// State or province (`CtrySubDvsn`).
    pub region: Option<String>,
    pub postal_code: Option<String>,
    /// ISO 3166 alpha-2 (`Ctry`).
    pub country: Option<String>,
}

/// A debtor or creditor: the name and, where known, the address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Party {
    pub name: String,
    pub address: Option<PostalAddress>,
}

/// An account: an IBAN, or another account number (US accounts, `Othr/Id`, up to 34 characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Account {
    Iban(Iban),
    Other(String),
}

/// A bank (`FinInstnId`): by BIC, by ABA routing number (`ClrSysMmbId`, clearing system
/// `USABA`), or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agent {
    Bic(Bic),
    Aba(AbaRoutingNumber),
    BicAndAba(Bic, AbaRoutingNumber),
}

impl Agent {
    pub fn bic(&self) -> Option<&Bic> {
        match self {
            Agent::Bic(bic) | Agent::BicAndAba(bic, _) => Some(bic),
            Agent::Aba(_) => None,
        }
    }

    pub fn aba(&self) -> Option<&AbaRoutingNumber> {
        match self {
            Agent::Aba(aba) | Agent::BicAndAba(_, aba) => Some(aba),
            Agent::Bic(_) => None,
        }
    }
}

/// One side of a transfer as a rail carries it: who, which account, at which bank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counterpart {
    pub party: Party,
    pub account: Account,
    pub agent: Agent,
}

/// Who pays the charges (`ChrgBr`), from the order's `charge_bearer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChargeBearer {
    /// `sender`: the debtor pays all charges.
    Debtor,
    /// `receiver`: the creditor pays all charges.
    Creditor,
    /// `shared`: each pays its own bank.
    Shared,
    /// SEPA's service level rule (each pays its own bank, as the scheme sets): SEPA files only.
    FollowingServiceLevel,
}

impl ChargeBearer {
    /// The order's `charge_bearer` (`sender`, `receiver`, `shared`), or a 422 naming `field`.
    pub fn from_order(field: &str, value: &str) -> Result<Self> {
        match value {
            "sender" => Ok(ChargeBearer::Debtor),
            "receiver" => Ok(ChargeBearer::Creditor),
            "shared" => Ok(ChargeBearer::Shared),
            _ => Err(Error::invalid(field, format!("{field} must be one of sender, receiver or shared"))),
        }
    }

    pub fn code(self) -> &'static str {
        match self {
            ChargeBearer::Debtor => "DEBT",
            ChargeBearer::Creditor => "CRED",
            ChargeBearer::Shared => "SHAR",
            ChargeBearer::FollowingServiceLevel => "SLEV",
        }
    }
}

/// One `PmtInf` block: the transfers of one debtor account, execution date, rail and category
/// purpose. The caller groups orders by exactly these (sorting its query by them) and gives each
/// group an id unique within the file (for example the file's sequence and the group's index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentGroup {
    /// `PmtInfId`: up to 35 characters.
    pub id: String,
    pub rail: Rail,
    /// `ReqdExctnDt/Dt`.
    pub execution_date: Date,
    pub debtor: Counterpart,
    /// `CtgyPurp/Cd`: an ISO external category purpose code such as `SUPP` or `SALA`.
    pub category_purpose: Option<String>,
}

/// One `CdtTrfTxInf`: one payment order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditTransfer {
    pub order_id: Id,
    pub amount: Amount,
    pub currency: Currency,
    pub creditor: Counterpart,
    /// `RmtInf/Ustrd`: up to 140 characters.
    pub remittance_information: Option<String>,
    /// Written per transaction for wires and RTP; SEPA files always carry `SLEV` on the group.
    pub charge_bearer: Option<ChargeBearer>,
}

/// The `EndToEndId` (and `InstrId`) of the order `id`: its UUID as 32 lower-case hex digits,
/// however the id was spelled, so the same order always gets the same id (SPEC B5 matches
/// status reports and statements on it).
pub fn end_to_end_id(id: &Id) -> Result<String> {
    let uuid = uuid::Uuid::parse_str(id.as_str()).map_err(|_| Error::invalid("id", format!("payment order id {id} is not a UUID")))?;
    Ok(uuid.simple().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b5_end_to_end_id_is_the_order_uuid_without_dashes_whatever_its_spelling() {
        let lower = Id::stored("01920dfa-7854-7011-a1ff-441cc96a09e9");
        let upper = Id::stored("01920DFA-7854-7011-A1FF-441CC96A09E9");
        assert_eq!(end_to_end_id(&lower).unwrap(), "01920dfa78547011a1ff441cc96a09e9");
        assert_eq!(end_to_end_id(&upper).unwrap(), end_to_end_id(&lower).unwrap());
        assert!(end_to_end_id(&Id::stored("not-a-uuid")).is_err());
    }

    #[test]
    fn charge_bearers_map_to_iso_codes() {
        let code = |v| ChargeBearer::from_order("charge_bearer", v).unwrap().code();
        assert_eq!((code("sender"), code("receiver"), code("shared")), ("DEBT", "CRED", "SHAR"));
        assert!(ChargeBearer::from_order("charge_bearer", "nobody").is_err());
    }
}
