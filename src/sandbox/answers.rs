//! The files the sandbox bank answers a sent file with (SPEC B7), each a pure function of the
//! sent file's name, its payments and its arrival time, so answering again after a crash writes
//! the very same bytes (and the inbound reader, which keys files by content, applies them once):
//!
//! - now: a `pain.002.001.12` rejecting the payments that fail, and a `camt.054` per paying
//!   account booking the ones that settle (those to be returned settle first);
//! - later (a step on): a NACHA return file for the ACH payments that come back (with their
//!   `RXX` codes) and a `camt.054` booking their money back (reversals with the same codes), and
//!   a `camt.054` booking a reversal for the others (returned without a code).

use time::OffsetDateTime;

use super::outcomes::{Fate, fate};
use super::payments::Payment;
use crate::bank::formats::iso20022::camt::{CamtWriter, ReportHeader};
use crate::bank::formats::iso20022::pain002::{Pain002Version, Pain002Writer, StatusReportHeader, TransactionStatus};
use crate::bank::formats::nacha::answers::{AnswerKind, AnswerWriter, EntryAnswer};
use crate::bank::formats::nacha::{FileHeader, FileIdModifier};
use crate::domain::bank_answer::{AccountRef, EntryDirection, Party, StatementEntry};
use crate::domain::money::Currency;

/// An answer file: its name in the inbound folder and its bytes.
pub type AnswerFile = (String, Vec<u8>);

/// What the bank answers a sent file with.
#[derive(Debug, Default)]
pub struct Answers {
    pub now: Vec<AnswerFile>,
    pub later: Vec<AnswerFile>,
}

/// The answers to the file `name` whose `payments` arrived at `arrived`.
pub fn answer(name: &str, payments: &[Payment], arrived: OffsetDateTime) -> Result<Answers, String> {
    let fated: Vec<(&Payment, Fate)> = payments.iter().map(|p| (p, fate(&p.receiving_account, p.amount, p.ach.is_some()))).collect();
    let stem = stem(name);
    let mut out = Answers::default();
    let failed: Vec<_> = fated.iter().filter(|(_, f)| matches!(f, Fate::Fails { .. })).collect();
    if !failed.is_empty() {
        out.now.push((format!("{stem}.status.xml"), status_report(&stem, &failed, arrived)?));
    }
    let settled: Vec<Booking<'_>> = fated.iter().filter(|(_, f)| !matches!(f, Fate::Fails { .. })).map(|(p, _)| (*p, None)).collect();
    out.now.extend(notifications(&format!("{stem}.booked"), &settled, arrived)?);
    let returned: Vec<(&Payment, Option<String>)> =
        fated.iter().filter_map(|(p, f)| if let Fate::Returned { code } = f { Some((*p, code.clone())) } else { None }).collect();
    let (ach, other): (Vec<_>, Vec<_>) = returned.into_iter().partition(|(p, _)| p.ach.is_some());
    if !ach.is_empty() {
        // The returned money, booked back as a bank's statement books it, with the return's
        // code: named to be read first, so this booking returns the order and settles its
        // return in one change, and the return file that follows finds it returned already.
        let booked_back: Vec<_> = ach.iter().map(|(p, code)| (*p, Some(Reversed { code: code.clone() }))).collect();
        out.later.extend(notifications(&format!("{stem}.returns.0-booked"), &booked_back, arrived)?);
        out.later.push((format!("{stem}.returns.ach"), nacha_returns(payments, &ach, arrived)?));
    }
    let reversed: Vec<_> = other.iter().map(|(p, _)| (*p, Some(Reversed { code: None }))).collect();
    out.later.extend(notifications(&format!("{stem}.returned"), &reversed, arrived)?);
    Ok(out)
}

/// The sent file's name as a name-safe stem of its answers' file names (whole: two sent files
/// never share answers).
fn stem(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' }).collect()
}

/// A short id of `text` for ISO message ids (at most 35 characters with their prefix): the
/// first 16 hex digits of its SHA-256.
fn short_id(text: &str) -> String {
    use sha2::Digest as _;
    crate::bank::cutoff::write::hex(&sha2::Sha256::digest(text.as_bytes())[..8])
}

fn status_report(stem: &str, failed: &[&(&Payment, Fate)], arrived: OffsetDateTime) -> Result<Vec<u8>, String> {
    let header = StatusReportHeader {
        version: Pain002Version::V12,
        message_id: format!("SBX-STS-{}", short_id(stem)),
        created_at: arrived,
        original_message_id: short_id(stem),
        original_message_name: "pain.001.001.09".into(),
        group_status: None,
    };
    let mut writer = Pain002Writer::begin(Vec::new(), &header).map_err(|e| e.to_string())?;
    for (payment, fate) in failed {
        let Fate::Fails { reason_code, reason } = fate else { continue };
        writer
            .add(&TransactionStatus {
                original_payment_information_id: payment.group_id.clone(),
                end_to_end_id: payment.reference(),
                status: "RJCT".into(),
                reason_code: Some((*reason_code).to_owned()),
                reason: Some((*reason).to_owned()),
            })
            .map_err(|e| e.to_string())?;
    }
    writer.finish().map_err(|e| e.to_string())
}

/// A payment's money coming back: booked as a reversal (`RvslInd`), with the return's code
/// when it has one (`RtrInf/Rsn`).
#[derive(Debug, Clone)]
struct Reversed {
    code: Option<String>,
}

/// A payment to book, and whether it is its money coming back.
type Booking<'a> = (&'a Payment, Option<Reversed>);

/// One `camt.054` per paying account and currency, booking `payments` on the day they arrived
/// (each as a reversal when it says so).
fn notifications(prefix: &str, payments: &[Booking<'_>], arrived: OffsetDateTime) -> Result<Vec<AnswerFile>, String> {
    let mut groups: Vec<((AccountRef, Currency), Vec<&Booking<'_>>)> = Vec::new();
    for booking in payments {
        let key = (booking.0.paying_account.clone(), booking.0.currency);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, list)) => list.push(booking),
            None => groups.push((key, vec![booking])),
        }
    }
    let day = arrived.date().to_string();
    let mut out = Vec::new();
    for (n, ((account, currency), list)) in groups.into_iter().enumerate() {
        let id = format!("SBX-{}-{n}", short_id(prefix));
        let header = ReportHeader { message_id: id.clone(), created_at: arrived, report_id: id, account: account.clone(), currency };
        let mut writer = CamtWriter::notification(Vec::new(), &header).map_err(|e| e.to_string())?;
        for (payment, reversed) in list {
            writer.entry(&booked(payment, &account, &day, reversed.as_ref())).map_err(|e| e.to_string())?;
        }
        out.push((format!("{prefix}.{n}.camt054.xml"), writer.finish().map_err(|e| e.to_string())?));
    }
    Ok(out)
}

fn booked(payment: &Payment, account: &AccountRef, day: &str, reversed: Option<&Reversed>) -> StatementEntry {
    let reversal = reversed.is_some();
    let direction = match (payment.direction, reversal) {
        (d, false) => d,
        (EntryDirection::Debit, true) => EntryDirection::Credit,
        (EntryDirection::Credit, true) => EntryDirection::Debit,
    };
    StatementEntry {
        account: account.clone(),
        amount: payment.amount,
        currency: payment.currency,
        direction,
        booking_date: day.to_owned(),
        booking_time: None,
        value_date: Some(day.to_owned()),
        end_to_end_id: payment.end_to_end_id.clone(),
        ach_trace_number: payment.ach.as_ref().map(|e| e.trace.to_string()),
        bank_reference: None,
        description: if reversal { "RETURNED PAYMENT".into() } else { "PAYRAIL SANDBOX BANK".into() },
        rail: Some(payment.rail.into()),
        reversal,
        return_code: reversed.and_then(|r| r.code.clone()),
        counterparty: None,
    }
}

/// A NACHA return file for the ACH payments that come back, settling the day they arrived.
fn nacha_returns(all: &[Payment], returned: &[(&Payment, Option<String>)], arrived: OffsetDateTime) -> Result<Vec<u8>, String> {
    let first = all.iter().find_map(|p| p.ach.as_ref()).ok_or("no ACH entry to return")?;
    let odfi = crate::bank::formats::nacha::answers::routing_of(&first.trace.odfi()).map_err(|e| e.to_string())?;
    let created =
        time::PrimitiveDateTime::new(arrived.date(), time::Time::from_hms(arrived.hour(), arrived.minute(), 0).map_err(|e| e.to_string())?);
    let header = FileHeader {
        immediate_destination: odfi,
        immediate_origin: odfi.to_string(),
        created,
        file_id_modifier: FileIdModifier::nth(0).ok_or("file id modifier")?,
        immediate_destination_name: "PAYRAIL".into(),
        immediate_origin_name: "PAYRAIL SANDBOX BANK".into(),
        reference_code: String::new(),
    };
    let mut writer = AnswerWriter::new(Vec::new(), &header, arrived.date()).map_err(|e| e.to_string())?;
    for (payment, code) in returned {
        let original = payment.ach.clone().ok_or("an ACH return without its entry")?;
        let code = code.clone().unwrap_or_else(|| "R01".into());
        let information = crate::bank::formats::nacha::return_reasons::return_reason(&code).unwrap_or("").chars().take(44).collect();
        writer
            .push(&EntryAnswer { original, kind: AnswerKind::Return { code, date_of_death: None, information } })
            .map_err(|e| e.to_string())?;
    }
    Ok(writer.finish().map_err(|e| e.to_string())?.0)
}

/// The `camt.054` booking the payment an expected payment waits for (see
/// `bank_side::book_expected`): named after the expected payment, so it is booked once. `payer`
/// is the other side (the debtor of a credit, the creditor of a debit) as the statement names it.
/// `None` when no payment can match it: its bounds allow no positive amount, and a bank books
/// no payment of nothing.
pub fn expected_booking(
    expected: &crate::domain::expected_payment::ExpectedPayment,
    account_number: String,
    payer: Option<Party>,
    today: &str,
) -> Result<Option<AnswerFile>, String> {
    let Some(amount) = booked_amount(expected.amount_lower_bound, expected.amount_upper_bound) else { return Ok(None) };
    let account = AccountRef { iban: None, account_number: Some(account_number) };
    let day = booked_day(expected.date_lower_bound.as_deref(), expected.date_upper_bound.as_deref(), today);
    let entry = StatementEntry {
        account: account.clone(),
        amount,
        currency: expected.currency,
        direction: match expected.direction {
            crate::domain::enums::Direction::Credit => EntryDirection::Credit,
            crate::domain::enums::Direction::Debit => EntryDirection::Debit,
        },
        booking_date: day.clone(),
        booking_time: None,
        value_date: Some(day),
        end_to_end_id: None,
        ach_trace_number: None,
        bank_reference: Some(format!("SBX-EP-{}", short_id(&expected.id))),
        description: expected
            .statement_descriptor
            .clone()
            .or_else(|| expected.description.clone())
            .unwrap_or_else(|| "PAYRAIL SANDBOX BANK".into()),
        rail: expected.payment_type.map(|t| t.as_str().to_owned()),
        reversal: false,
        return_code: None,
        counterparty: payer,
    };
    let id = format!("SBX-EP-{}", short_id(&expected.id));
    let created = OffsetDateTime::from_unix_timestamp(expected.created_at.as_micros() / 1_000_000).map_err(|e| e.to_string())?;
    let header = ReportHeader { message_id: id.clone(), created_at: created, report_id: id, account, currency: expected.currency };
    let mut writer = CamtWriter::notification(Vec::new(), &header).map_err(|e| e.to_string())?;
    writer.entry(&entry).map_err(|e| e.to_string())?;
    Ok(Some((format!("expected-{}.camt054.xml", expected.id), writer.finish().map_err(|e| e.to_string())?)))
}

/// The day the bank books the payment on: today, moved into the expected payment's date bounds
/// (`YYYY-MM-DD`, each optional), so that it reconciles. An upper bound of the client's today is
/// before the bank's today when their zones are on different days (New York's evening is UTC's
/// next morning).
fn booked_day(lower: Option<&str>, upper: Option<&str>, today: &str) -> String {
    let day = match upper {
        Some(upper) if upper < today => upper,
        _ => today,
    };
    match lower {
        Some(lower) if lower > day => lower.to_owned(),
        _ => day.to_owned(),
    }
}

/// The amount the bank books for bounds `lower..=upper`: the lower bound, or the upper one when
/// the lower is not positive; `None` when neither is.
fn booked_amount(lower: i64, upper: i64) -> Option<i64> {
    [lower, upper].into_iter().find(|amount| *amount > 0)
}

#[cfg(test)]
mod tests {
    use super::{booked_amount, booked_day};

    #[test]
    fn b7_the_bank_books_within_the_expected_dates() {
        let today = "2026-11-30";
        assert_eq!(booked_day(None, None, today), today);
        assert_eq!(booked_day(None, Some("2026-11-29"), today), "2026-11-29", "a New York client's today, at 01:00 UTC");
        assert_eq!(booked_day(Some("2026-12-02"), None, today), "2026-12-02");
        assert_eq!(booked_day(Some("2026-11-01"), Some("2026-12-31"), today), today);
        assert_eq!(booked_day(Some("2026-03-01"), Some("2026-03-31"), today), "2026-03-31");
    }

    #[test]
    fn the_bank_books_a_positive_amount_or_nothing() {
        assert_eq!(booked_amount(500, 900), Some(500));
        assert_eq!(booked_amount(0, 900), Some(900));
        assert_eq!(booked_amount(0, 0), None);
        assert_eq!(booked_amount(-5, 0), None);
    }
}
