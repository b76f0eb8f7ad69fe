//! Fixtures for the NACHA unit tests: a file header, batch specs and entries.

use time::Date;
use time::macros::datetime;

use super::codes::{AccountType, EntryDirection, FileIdModifier, SecCode, ServiceClass, TransactionCode};
use super::records::FileHeader;
use super::writer::{BatchSpec, EntryInput};
use crate::domain::bank_id::AbaRoutingNumber;

pub fn aba(text: &str) -> AbaRoutingNumber {
    AbaRoutingNumber::parse("routing_number", text).unwrap()
}

pub fn header() -> FileHeader {
    FileHeader {
        immediate_destination: aba("021000021"),
        immediate_origin: "1234567890".into(),
        created: datetime!(2026-07-02 09:30),
        file_id_modifier: FileIdModifier::nth(0).unwrap(),
        immediate_destination_name: "Acme Bank".into(),
        immediate_origin_name: "Acme Corp".into(),
        reference_code: String::new(),
    }
}

pub fn spec(sec: SecCode, effective_entry_date: Date) -> BatchSpec {
    BatchSpec {
        service_class: ServiceClass::Mixed,
        company_name: "Acme Corp".into(),
        company_discretionary_data: String::new(),
        company_id: "1234567890".into(),
        sec,
        entry_description: "PAYROLL".into(),
        descriptive_date: String::new(),
        effective_entry_date,
        same_day: false,
    }
}

pub fn entry(direction: EntryDirection, routing: &str, cents: u64, addenda: &[&str]) -> EntryInput {
    EntryInput {
        transaction_code: TransactionCode::live(AccountType::Checking, direction),
        rdfi: aba(routing),
        account_number: "123456789".into(),
        amount_cents: cents,
        identification: "ORDER1".into(),
        receiver_name: "Jane Doe".into(),
        discretionary_data: String::new(),
        addenda: addenda.iter().map(|s| s.to_string()).collect(),
    }
}
