//! What an ACH payment order must carry, checked when it is created (SPEC B3: an order its rail
//! cannot carry is refused with 422 naming the field, never discovered at cut-off), and the
//! entry it becomes at cut-off.
//!
//! [`validate_order_for_ach`] builds the very [`EntryInput`] the NACHA writer will take and runs
//! the record's own checks on it, so creation and cut-off cannot disagree. A NACHA field's
//! refusal is reported under the order field it came from:
//!
//! | NACHA field                            | order field (the 422's `parameter`)               |
//! |----------------------------------------|---------------------------------------------------|
//! | currency (USD only)                    | `currency`                                        |
//! | amount (at most 99,999,999.99)         | `amount`                                          |
//! | standard entry class code              | `subtype`                                         |
//! | transaction code (checking / savings)  | `receiving_account.account_type`                  |
//! | receiving DFI identification           | `receiving_account.routing_details.routing_number` |
//! | DFI account number                     | `receiving_account.account_details.account_number` |
//! | receiver / receiving company name      | `receiving_account.party_name`                    |
//! | payment related information (addenda) | `remittance_information`                          |
//!
//! Names longer than the field (22 characters, 16 in CTX) are shortened, as banks do; every
//! other field is refused rather than cut. Remittance information takes one 80-character addenda
//! in PPD, CCD and WEB, and up to 9,999 in CTX.

use super::formats::nacha::{AccountType, EntryDirection, EntryInput, FieldError, SecCode, TransactionCode};
use crate::domain::bank_id::AbaRoutingNumber;
use crate::domain::enums::Direction;
use crate::domain::money::{Amount, Currency};
use crate::error::{Error, Result};

/// The most a Same Day ACH entry may carry, in cents (NACHA's per-payment limit, $1,000,000.00).
pub const SAME_DAY_AMOUNT_MAX_CENTS: i64 = 100_000_000;

/// Characters of payment related information per 05 addenda record.
pub const ADDENDA_TEXT_LEN: usize = 80;

/// The parts of an ACH payment order (and its receiving account) a NACHA entry needs.
#[derive(Debug, Clone, Copy)]
pub struct AchOrder<'a> {
    /// `PPD`, `CCD`, `WEB` or `CTX`; when absent, CCD for a business party and PPD otherwise.
    pub subtype: Option<&'a str>,
    pub direction: Direction,
    pub amount: Amount,
    pub currency: Currency,
    pub routing_number: &'a str,
    pub account_number: &'a str,
    /// `checking` (the default, also for MT's `other`) or `savings`.
    pub account_type: Option<&'a str>,
    pub party_name: Option<&'a str>,
    /// `business` or `individual`.
    pub party_type: Option<&'a str>,
    pub remittance_information: Option<&'a str>,
    /// How refusals name the receiving account: `receiving_account` (given inline) or
    /// `receiving_account_id` (a stored one), as the client named it.
    pub receiving_field: &'a str,
}

/// The receiving account's numbers as a NACHA entry reads them from its `(type, number)`
/// details: the `aba` routing number, the first account number that is not an IBAN, and no
/// account type for MT's `other` (ACH reaches it as a checking account). Creation and cut-off
/// both read an account this way, so they cannot disagree.
pub fn entry_numbers<'a>(
    account_details: &'a [(String, String)],
    routing_details: &'a [(String, String)],
    account_type: Option<&'a str>,
) -> (&'a str, &'a str, Option<&'a str>) {
    let routing = routing_details.iter().find(|(kind, _)| kind == "aba").map_or("", |(_, n)| n.as_str());
    let account = account_details.iter().find(|(kind, _)| kind != "iban").map_or("", |(_, n)| n.as_str());
    (routing, account, account_type.filter(|t| *t != "other"))
}

/// An order as its NACHA entry: the batch's SEC code and the entry to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AchEntry {
    pub sec: SecCode,
    pub entry: EntryInput,
}

/// The entry `order` becomes, or a 422 naming the order field NACHA cannot carry.
pub fn validate_order_for_ach(order: &AchOrder<'_>) -> Result<AchEntry> {
    let field = order.receiving_field;
    let named = |err| to_order_error(err, field);
    let amount_cents = EntryInput::usd_cents(order.amount, order.currency).map_err(named)?;
    let sec = sec_code(order)?;
    let rdfi = AbaRoutingNumber::parse(&format!("{field}.routing_details.routing_number"), order.routing_number)?;
    let account = account_type(field, order.account_type)?;
    let direction = match order.direction {
        Direction::Credit => EntryDirection::Credit,
        Direction::Debit => EntryDirection::Debit,
    };
    let name = order.party_name.map(str::trim).filter(|n| !n.is_empty()).ok_or_else(|| Error::missing(format!("{field}.party_name")))?;
    let name_len = if sec == SecCode::Ctx { 16 } else { 22 };
    let entry = EntryInput {
        transaction_code: TransactionCode::live(account, direction),
        rdfi,
        account_number: order.account_number.to_owned(),
        amount_cents,
        identification: String::new(),
        receiver_name: name.chars().take(name_len).collect(),
        discretionary_data: if sec == SecCode::Web { "S".to_owned() } else { String::new() },
        addenda: addenda_texts(sec, order.remittance_information)?,
    };
    entry.check(sec).map_err(named)?;
    Ok(AchEntry { sec, entry })
}

fn sec_code(order: &AchOrder<'_>) -> Result<SecCode> {
    let refused = || Error::invalid("subtype", "ach payment orders take subtype PPD, CCD, WEB or CTX");
    match order.subtype {
        Some(text) => SecCode::parse(text).filter(|s| *s != SecCode::Cor).ok_or_else(refused),
        None if order.party_type == Some("business") => Ok(SecCode::Ccd),
        None => Ok(SecCode::Ppd),
    }
}

fn account_type(field: &str, text: Option<&str>) -> Result<AccountType> {
    match text {
        // MT's default account type is `other`; ACH carries it as a checking account, as banks do.
        None | Some("checking") | Some("other") => Ok(AccountType::Checking),
        Some("savings") => Ok(AccountType::Savings),
        Some(other) => {
            Err(Error::invalid(format!("{field}.account_type"), format!("ach reaches checking or savings accounts (got {other})")))
        }
    }
}

/// The remittance text cut into 80-character addenda: one at most, or 9,999 in CTX.
fn addenda_texts(sec: SecCode, text: Option<&str>) -> Result<Vec<String>> {
    let Some(text) = text.filter(|t| !t.is_empty()) else { return Ok(Vec::new()) };
    let chars: Vec<char> = text.chars().collect();
    let texts: Vec<String> = chars.chunks(ADDENDA_TEXT_LEN).map(|c| c.iter().collect()).collect();
    if texts.len() > sec.max_addenda() {
        let most = sec.max_addenda() * ADDENDA_TEXT_LEN;
        return Err(Error::invalid(
            "remittance_information",
            format!("{sec} entries carry at most {most} characters of remittance information"),
        ));
    }
    Ok(texts)
}

/// A NACHA field's refusal as a 422 naming the order field it came from (table above), the
/// receiving account's fields under `receiving_field`.
pub fn to_order_error(err: FieldError, receiving_field: &str) -> Error {
    let parameter = match err.field {
        "currency" => "currency".to_owned(),
        "amount" => "amount".to_owned(),
        "standard_entry_class_code" => "subtype".to_owned(),
        "transaction_code" => format!("{receiving_field}.account_type"),
        "receiving_dfi_identification" => format!("{receiving_field}.routing_details.routing_number"),
        "dfi_account_number" => format!("{receiving_field}.account_details.account_number"),
        "receiver_name" | "receiving_company_name" => format!("{receiving_field}.party_name"),
        "payment_related_information" | "addenda_record_indicator" | "number_of_addenda_records" => "remittance_information".to_owned(),
        other => return Error::internal(format!("a NACHA field with no order field: {other}: {}", err.reason)),
    };
    let message = format!("{parameter}: {}", err.reason);
    Error::invalid(parameter, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order() -> AchOrder<'static> {
        AchOrder {
            subtype: None,
            direction: Direction::Credit,
            amount: Amount::parse("amount", 12_500).unwrap(),
            currency: Currency::parse("currency", "USD").unwrap(),
            routing_number: "121141822",
            account_number: "123456789",
            account_type: None,
            party_name: Some("Jane Doe"),
            party_type: None,
            remittance_information: Some("Invoice 42"),
            receiving_field: "receiving_account",
        }
    }

    fn parameter(order: AchOrder<'_>) -> String {
        match validate_order_for_ach(&order).unwrap_err() {
            Error::Invalid { parameter, .. } => parameter,
            other => panic!("not a 422: {other:?}"),
        }
    }

    #[test]
    fn b3_an_order_becomes_its_entry() {
        let ach = validate_order_for_ach(&order()).unwrap();
        assert_eq!((ach.sec, ach.entry.transaction_code.code(), ach.entry.amount_cents), (SecCode::Ppd, 22, 12_500));
        assert_eq!(ach.entry.addenda, ["Invoice 42"]);
        let debit = AchOrder { direction: Direction::Debit, account_type: Some("savings"), party_type: Some("business"), ..order() };
        let ach = validate_order_for_ach(&debit).unwrap();
        assert_eq!((ach.sec, ach.entry.transaction_code.code()), (SecCode::Ccd, 37));
        let long = "x".repeat(200);
        let ctx = validate_order_for_ach(&AchOrder {
            subtype: Some("CTX"),
            remittance_information: Some(&long),
            party_name: Some("A very long company name"),
            ..order()
        })
        .unwrap();
        assert_eq!((ctx.entry.addenda.len(), ctx.entry.receiver_name.as_str()), (3, "A very long comp"));
        let web = validate_order_for_ach(&AchOrder { subtype: Some("WEB"), ..order() }).unwrap();
        assert_eq!(web.entry.discretionary_data, "S", "WEB payment type code: single");
    }

    #[test]
    fn b3_orders_nacha_cannot_carry_are_422s_naming_the_order_field() {
        let eur = Currency::parse("currency", "EUR").unwrap();
        assert_eq!(parameter(AchOrder { currency: eur, ..order() }), "currency");
        assert_eq!(parameter(AchOrder { routing_number: "121141823", ..order() }), "receiving_account.routing_details.routing_number");
        assert_eq!(parameter(AchOrder { account_number: "12 34", ..order() }), "receiving_account.account_details.account_number");
        assert_eq!(
            parameter(AchOrder { account_number: "123456789012345678", ..order() }),
            "receiving_account.account_details.account_number"
        );
        assert_eq!(parameter(AchOrder { account_type: Some("loan"), ..order() }), "receiving_account.account_type");
        assert_eq!(parameter(AchOrder { party_name: None, ..order() }), "receiving_account.party_name");
        assert_eq!(parameter(AchOrder { party_name: Some("Zoë Martín"), ..order() }), "receiving_account.party_name");
        assert_eq!(parameter(AchOrder { subtype: Some("IAT"), ..order() }), "subtype");
        assert_eq!(parameter(AchOrder { amount: Amount::parse("amount", 10_000_000_000).unwrap(), ..order() }), "amount");
        assert_eq!(parameter(AchOrder { remittance_information: Some(&"x".repeat(81)), ..order() }), "remittance_information");
        assert_eq!(parameter(AchOrder { remittance_information: Some("caf\u{e9}"), ..order() }), "remittance_information");
        // A stored account is named as the client named it.
        let stored = |o: AchOrder<'static>| parameter(AchOrder { receiving_field: "receiving_account_id", ..o });
        assert_eq!(stored(AchOrder { routing_number: "121141823", ..order() }), "receiving_account_id.routing_details.routing_number");
        assert_eq!(stored(AchOrder { party_name: None, ..order() }), "receiving_account_id.party_name");
        assert_eq!(stored(AchOrder { account_type: Some("loan"), ..order() }), "receiving_account_id.account_type");
    }
}
