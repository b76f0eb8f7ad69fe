//! The six NACHA record types, each with its fields, `to_line` (checks every field and writes
//! exactly 94 characters) and `parse` (reads one line back, checking the same rules).
//!
//! Type 1 file header, 5 batch header, 6 entry detail, 7 addenda (05 payment related
//! information, 98 notification of change, 99 return), 8 batch control, 9 file control. Field
//! positions are NACHA's; the field names in errors are NACHA's names in snake_case.

use time::{Date, Month, PrimitiveDateTime, Time};

use super::codes::{FileIdModifier, SecCode, ServiceClass, TraceNumber, TransactionCode};
use super::field::{FieldError, LineReader, LineWriter};
use crate::domain::bank_id::AbaRoutingNumber;

/// The file header (record type 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    /// The bank the file goes to; written as a space and its nine digits.
    pub immediate_destination: AbaRoutingNumber,
    /// Ten characters as the bank assigned them (often `1` and a tax id), or nine digits,
    /// written with a leading space like a routing number.
    pub immediate_origin: String,
    /// When the file was made (the caller's local time; Payrail uses Eastern).
    pub created: PrimitiveDateTime,
    pub file_id_modifier: FileIdModifier,
    pub immediate_destination_name: String,
    pub immediate_origin_name: String,
    pub reference_code: String,
}

const FILE_HEADER: &str = "file_header";

impl FileHeader {
    pub fn to_line(&self) -> Result<String, FieldError> {
        let origin = immediate_origin(&self.immediate_origin)?;
        let mut w = LineWriter::new(FILE_HEADER, '1');
        w.exact("priority_code", "01", 2)?;
        w.exact("immediate_destination", &format!(" {}", self.immediate_destination), 10)?;
        w.exact("immediate_origin", &origin, 10)?;
        w.exact("file_creation_date", &yymmdd(self.created.date()), 6)?;
        w.exact("file_creation_time", &format!("{:02}{:02}", self.created.hour(), self.created.minute()), 4)?;
        w.exact("file_id_modifier", &self.file_id_modifier.as_char().to_string(), 1)?;
        w.exact("record_size", "094", 3)?.exact("blocking_factor", "10", 2)?.exact("format_code", "1", 1)?;
        w.alpha("immediate_destination_name", &self.immediate_destination_name, 23)?;
        w.alpha("immediate_origin_name", &self.immediate_origin_name, 23)?;
        w.alpha("reference_code", &self.reference_code, 8)?.finish()
    }

    pub fn parse(line: &str) -> Result<Self, FieldError> {
        let mut r = LineReader::new(FILE_HEADER, '1', line)?;
        expect(&mut r, "priority_code", "01")?;
        let destination = r.raw(10);
        let immediate_destination = AbaRoutingNumber::parse("immediate_destination", destination.trim_start())
            .map_err(|_| r.error("immediate_destination", format!("not a routing number: {destination:?}")))?;
        // A routing-number origin is read without its leading space, so it writes back the same.
        let immediate_origin = r.raw(10).trim_start().to_owned();
        let date = read_date(&mut r, "file_creation_date")?;
        let time = read_hhmm(&mut r, "file_creation_time")?;
        let modifier = r.raw(1).chars().next().unwrap_or(' ');
        let file_id_modifier = FileIdModifier::from_char(modifier).ok_or_else(|| r.error("file_id_modifier", "must be A-Z or 0-9"))?;
        expect(&mut r, "record_size", "094")?;
        expect(&mut r, "blocking_factor", "10")?;
        expect(&mut r, "format_code", "1")?;
        let (immediate_destination_name, immediate_origin_name, reference_code) = (r.alpha(23), r.alpha(23), r.alpha(8));
        let created = PrimitiveDateTime::new(date, time);
        Ok(FileHeader {
            immediate_destination,
            immediate_origin,
            created,
            file_id_modifier,
            immediate_destination_name,
            immediate_origin_name,
            reference_code,
        })
    }
}

/// The immediate origin as its 10 characters: nine digits get the routing number's leading
/// space; otherwise exactly 10 letters or digits.
fn immediate_origin(value: &str) -> Result<String, FieldError> {
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    match value.len() {
        9 if digits(value) => Ok(format!(" {value}")),
        10 if value.bytes().all(|b| b.is_ascii_alphanumeric()) => Ok(value.to_ascii_uppercase()),
        _ => Err(FieldError::new(FILE_HEADER, "immediate_origin", "must be 10 letters or digits, or a 9-digit routing number")),
    }
}

/// The batch header (record type 5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchHeader {
    pub service_class: ServiceClass,
    pub company_name: String,
    pub company_discretionary_data: String,
    pub company_id: String,
    pub sec: SecCode,
    pub entry_description: String,
    /// Free text the receiver sees; `SDHHMM` asks for a same-day settlement window.
    pub descriptive_date: String,
    pub effective_entry_date: Date,
    /// Three digits the ACH operator fills in; blank when we originate.
    pub settlement_date: String,
    /// The ODFI: the first 8 digits of `immediate_destination` (SPEC B3).
    pub odfi: String,
    pub batch_number: u32,
}

const BATCH_HEADER: &str = "batch_header";

impl BatchHeader {
    pub fn to_line(&self) -> Result<String, FieldError> {
        required(BATCH_HEADER, "company_name", &self.company_name)?;
        required(BATCH_HEADER, "company_id", &self.company_id)?;
        required(BATCH_HEADER, "company_entry_description", &self.entry_description)?;
        let mut w = LineWriter::new(BATCH_HEADER, '5');
        w.numeric("service_class_code", self.service_class.code(), 3)?;
        w.alpha("company_name", &self.company_name, 16)?;
        w.alpha("company_discretionary_data", &self.company_discretionary_data, 20)?;
        w.alpha("company_id", &self.company_id, 10)?;
        w.exact("standard_entry_class_code", self.sec.as_str(), 3)?;
        w.alpha("company_entry_description", &self.entry_description, 10)?;
        w.alpha("company_descriptive_date", &self.descriptive_date, 6)?;
        w.exact("effective_entry_date", &yymmdd(self.effective_entry_date), 6)?;
        w.alpha("settlement_date", &self.settlement_date, 3)?;
        w.exact("originator_status_code", "1", 1)?;
        w.exact("odfi_identification", &odfi(BATCH_HEADER, &self.odfi)?, 8)?;
        w.numeric("batch_number", u64::from(self.batch_number), 7)?.finish()
    }

    pub fn parse(line: &str) -> Result<Self, FieldError> {
        let mut r = LineReader::new(BATCH_HEADER, '5', line)?;
        let service_class = read_service_class(&mut r)?;
        let (company_name, company_discretionary_data, company_id) = (r.alpha(16), r.alpha(20), r.alpha(10));
        let sec = SecCode::parse(r.raw(3)).ok_or_else(|| r.error("standard_entry_class_code", "not a SEC code Payrail reads"))?;
        let (entry_description, descriptive_date) = (r.alpha(10), r.alpha(6));
        let effective_entry_date = read_date(&mut r, "effective_entry_date")?;
        let settlement_date = r.alpha(3);
        r.raw(1);
        let odfi = odfi(BATCH_HEADER, r.raw(8))?;
        let batch_number = r.numeric("batch_number", 7)? as u32;
        Ok(BatchHeader {
            service_class,
            company_name,
            company_discretionary_data,
            company_id,
            sec,
            entry_description,
            descriptive_date,
            effective_entry_date,
            settlement_date,
            odfi,
            batch_number,
        })
    }
}

/// An entry detail (record type 6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryDetail {
    pub transaction_code: TransactionCode,
    /// The receiving bank: its first 8 digits and check digit.
    pub rdfi: AbaRoutingNumber,
    pub account_number: String,
    /// In cents; zero only for prenotes.
    pub amount_cents: u64,
    /// The individual or company identification number (15 characters).
    pub identification: String,
    /// The receiver's name: 22 characters, or 16 in CTX (receiving company name).
    pub receiver_name: String,
    /// Two characters for the ODFI (WEB: the payment type code `S` or `R`).
    pub discretionary_data: String,
    /// How many addenda follow: 0 or 1, or up to 9,999 in CTX, where it is also written in
    /// positions 55-58.
    pub addenda_count: u16,
    pub trace: TraceNumber,
}

const ENTRY_DETAIL: &str = "entry_detail";

impl EntryDetail {
    /// The record in the layout of a batch of `sec`.
    pub fn to_line(&self, sec: SecCode) -> Result<String, FieldError> {
        self.check(sec)?;
        self.render(sec)
    }

    /// The record of a return or notification-of-change entry (a bank's answer, which the
    /// sandbox bank writes): a return code (21, 26, 31, 36) and the original entry's fields.
    pub fn to_answer_line(&self, sec: SecCode) -> Result<String, FieldError> {
        if !self.transaction_code.is_return_or_noc() {
            return Err(FieldError::new(ENTRY_DETAIL, "transaction_code", "an answer entry carries a return code: 21, 26, 31 or 36"));
        }
        check_account(&self.account_number)?;
        required(ENTRY_DETAIL, "receiver_name", &self.receiver_name)?;
        self.render(sec)
    }

    fn render(&self, sec: SecCode) -> Result<String, FieldError> {
        let mut w = LineWriter::new(ENTRY_DETAIL, '6');
        w.numeric("transaction_code", u64::from(self.transaction_code.code()), 2)?;
        w.exact("receiving_dfi_identification", self.rdfi.as_str(), 9)?;
        w.alpha("dfi_account_number", &self.account_number, 17)?;
        w.numeric("amount", self.amount_cents, 10)?;
        w.alpha("identification_number", &self.identification, 15)?;
        if sec == SecCode::Ctx {
            w.numeric("number_of_addenda_records", u64::from(self.addenda_count), 4)?;
            w.alpha("receiving_company_name", &self.receiver_name, 16)?.blank(2);
        } else {
            w.alpha("receiver_name", &self.receiver_name, 22)?;
        }
        w.alpha("discretionary_data", &self.discretionary_data, 2)?;
        w.numeric("addenda_record_indicator", u64::from(self.addenda_count > 0), 1)?;
        w.exact("trace_number", &self.trace.to_string(), 15)?.finish()
    }

    /// The rules NACHA sets beyond field shapes.
    fn check(&self, sec: SecCode) -> Result<(), FieldError> {
        let err = |field, reason: &str| Err(FieldError::new(ENTRY_DETAIL, field, reason));
        check_account(&self.account_number)?;
        if self.transaction_code.is_return_or_noc() {
            return err("transaction_code", "return and notification codes are only read, never originated");
        }
        if self.transaction_code.is_prenote() != (self.amount_cents == 0) {
            return err("amount", "a prenote has amount zero and a live entry more than zero");
        }
        required(ENTRY_DETAIL, "receiver_name", &self.receiver_name)?;
        if usize::from(self.addenda_count) > sec.max_addenda() {
            return Err(FieldError::new(
                ENTRY_DETAIL,
                "addenda_record_indicator",
                format!("{sec} entries carry at most {} addenda", sec.max_addenda()),
            ));
        }
        Ok(())
    }

    /// Reads an entry of a batch of `sec` (CTX has its own layout of positions 55-76).
    pub fn parse(line: &str, sec: SecCode) -> Result<Self, FieldError> {
        let mut r = LineReader::new(ENTRY_DETAIL, '6', line)?;
        let code = r.numeric("transaction_code", 2)? as u8;
        let transaction_code =
            TransactionCode::from_code(code).ok_or_else(|| r.error("transaction_code", format!("{code} is not a demand account code")))?;
        let routing = r.raw(9);
        let rdfi = AbaRoutingNumber::parse("rdfi", routing)
            .map_err(|_| r.error("receiving_dfi_identification", format!("not a routing number: {routing:?}")))?;
        let account_number = r.alpha(17);
        let amount_cents = r.numeric("amount", 10)?;
        let identification = r.alpha(15);
        let (ctx_count, receiver_name) = if sec == SecCode::Ctx {
            let count = r.numeric("number_of_addenda_records", 4)? as u16;
            let name = r.alpha(16);
            r.raw(2);
            (Some(count), name)
        } else {
            (None, r.alpha(22))
        };
        let discretionary_data = r.alpha(2);
        let indicator = r.numeric("addenda_record_indicator", 1)?;
        if indicator > 1 {
            return Err(r.error("addenda_record_indicator", "must be 0 or 1"));
        }
        let trace = TraceNumber::parse(r.raw(15)).ok_or_else(|| r.error("trace_number", "must be 15 digits"))?;
        let addenda_count = ctx_count.unwrap_or(indicator as u16);
        Ok(EntryDetail {
            transaction_code,
            rdfi,
            account_number,
            amount_cents,
            identification,
            receiver_name,
            discretionary_data,
            addenda_count,
            trace,
        })
    }
}

fn check_account(account: &str) -> Result<(), FieldError> {
    if account.is_empty() || !account.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(FieldError::new(ENTRY_DETAIL, "dfi_account_number", "must be 1 to 17 letters, digits or hyphens"));
    }
    Ok(())
}

/// An addenda record (type 7) of one of the three kinds Payrail writes or reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addenda {
    Payment(PaymentAddenda),
    Notification(NotificationAddenda),
    Return(ReturnAddenda),
}

const ADDENDA: &str = "addenda";

impl Addenda {
    pub fn to_line(&self) -> Result<String, FieldError> {
        match self {
            Addenda::Payment(a) => a.to_line(),
            Addenda::Notification(a) => a.to_line(),
            Addenda::Return(a) => a.to_line(),
        }
    }

    pub fn parse(line: &str) -> Result<Self, FieldError> {
        let mut r = LineReader::new(ADDENDA, '7', line)?;
        match r.raw(2) {
            "05" => PaymentAddenda::parse(line).map(Addenda::Payment),
            "98" => NotificationAddenda::parse(line).map(Addenda::Notification),
            "99" => ReturnAddenda::parse(line).map(Addenda::Return),
            other => Err(r.error("addenda_type_code", format!("{other:?} is not 05, 98 or 99"))),
        }
    }
}

/// Addenda type 05: 80 characters of payment related information (remittance).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentAddenda {
    pub payment_related_information: String,
    /// 1 for the entry's first addenda, then 2, 3, ...
    pub sequence: u16,
    /// The last 7 digits of the entry's trace number.
    pub entry_sequence: u32,
}

impl PaymentAddenda {
    pub fn to_line(&self) -> Result<String, FieldError> {
        let mut w = LineWriter::new(ADDENDA, '7');
        w.exact("addenda_type_code", "05", 2)?;
        w.alpha("payment_related_information", &self.payment_related_information, 80)?;
        w.numeric("addenda_sequence_number", u64::from(self.sequence), 4)?;
        w.numeric("entry_detail_sequence_number", u64::from(self.entry_sequence), 7)?.finish()
    }

    pub fn parse(line: &str) -> Result<Self, FieldError> {
        let mut r = LineReader::new(ADDENDA, '7', line)?;
        expect(&mut r, "addenda_type_code", "05")?;
        let payment_related_information = r.alpha(80);
        let sequence = r.numeric("addenda_sequence_number", 4)? as u16;
        let entry_sequence = r.numeric("entry_detail_sequence_number", 7)? as u32;
        Ok(PaymentAddenda { payment_related_information, sequence, entry_sequence })
    }
}

/// Addenda type 98: a notification of change (the bank's correction of account data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationAddenda {
    /// `C01` (account number) to `C13`.
    pub change_code: String,
    pub original_trace: TraceNumber,
    pub original_rdfi: String,
    pub corrected_data: String,
    pub trace: TraceNumber,
}

impl NotificationAddenda {
    pub fn to_line(&self) -> Result<String, FieldError> {
        let mut w = LineWriter::new(ADDENDA, '7');
        w.exact("addenda_type_code", "98", 2)?;
        w.exact("change_code", &reason_code(&self.change_code, 'C')?, 3)?;
        w.exact("original_entry_trace_number", &self.original_trace.to_string(), 15)?.blank(6);
        w.exact("original_rdfi_identification", &odfi(ADDENDA, &self.original_rdfi)?, 8)?;
        w.alpha("corrected_data", &self.corrected_data, 29)?.blank(15);
        w.exact("trace_number", &self.trace.to_string(), 15)?.finish()
    }

    pub fn parse(line: &str) -> Result<Self, FieldError> {
        let mut r = LineReader::new(ADDENDA, '7', line)?;
        expect(&mut r, "addenda_type_code", "98")?;
        let change_code = reason_code(r.raw(3), 'C')?;
        let original_trace = read_trace(&mut r, "original_entry_trace_number")?;
        r.raw(6);
        let original_rdfi = odfi(ADDENDA, r.raw(8))?;
        let corrected_data = r.alpha(29);
        r.raw(15);
        let trace = read_trace(&mut r, "trace_number")?;
        Ok(NotificationAddenda { change_code, original_trace, original_rdfi, corrected_data, trace })
    }
}

/// Addenda type 99: a return, with the bank's reason code (`R01` insufficient funds...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnAddenda {
    pub return_reason_code: String,
    pub original_trace: TraceNumber,
    /// Only for R14/R15 (deceased); blank otherwise.
    pub date_of_death: Option<Date>,
    pub original_rdfi: String,
    pub addenda_information: String,
    pub trace: TraceNumber,
}

impl ReturnAddenda {
    pub fn to_line(&self) -> Result<String, FieldError> {
        let mut w = LineWriter::new(ADDENDA, '7');
        w.exact("addenda_type_code", "99", 2)?;
        w.exact("return_reason_code", &reason_code(&self.return_reason_code, 'R')?, 3)?;
        w.exact("original_entry_trace_number", &self.original_trace.to_string(), 15)?;
        match self.date_of_death {
            Some(date) => w.exact("date_of_death", &yymmdd(date), 6)?,
            None => w.blank(6),
        };
        w.exact("original_rdfi_identification", &odfi(ADDENDA, &self.original_rdfi)?, 8)?;
        w.alpha("addenda_information", &self.addenda_information, 44)?;
        w.exact("trace_number", &self.trace.to_string(), 15)?.finish()
    }

    pub fn parse(line: &str) -> Result<Self, FieldError> {
        let mut r = LineReader::new(ADDENDA, '7', line)?;
        expect(&mut r, "addenda_type_code", "99")?;
        let return_reason_code = reason_code(r.raw(3), 'R')?;
        let original_trace = read_trace(&mut r, "original_entry_trace_number")?;
        // Only a death (R14, R15) gives a date here; the dishonored and contested layouts
        // (R61 to R77) hold other dates in these places.
        let date_of_death = if line[21..27].trim().is_empty() || !matches!(return_reason_code.as_str(), "R14" | "R15") {
            r.raw(6);
            None
        } else {
            Some(read_date(&mut r, "date_of_death")?)
        };
        let original_rdfi = odfi(ADDENDA, r.raw(8))?;
        let addenda_information = r.alpha(44);
        let trace = read_trace(&mut r, "trace_number")?;
        Ok(ReturnAddenda { return_reason_code, original_trace, date_of_death, original_rdfi, addenda_information, trace })
    }
}

/// What a batch or file control adds up: entry and addenda records, the entry hash (sum of the
/// RDFIs' 8-digit identifications, kept to its last 10 digits) and the debit and credit totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub entry_addenda_count: u64,
    pub entry_hash: u64,
    pub debit_cents: u64,
    pub credit_cents: u64,
}

pub const ENTRY_HASH_MODULUS: u64 = 10_000_000_000;

impl Totals {
    /// Counts `entry` and its `addenda` records.
    pub fn add_entry(&mut self, entry: &EntryDetail, addenda: u64) {
        self.entry_addenda_count += 1 + addenda;
        let rdfi: u64 = entry.rdfi.institution().parse().unwrap_or(0);
        self.entry_hash = (self.entry_hash + rdfi) % ENTRY_HASH_MODULUS;
        match entry.transaction_code.direction() {
            super::codes::EntryDirection::Credit => self.credit_cents += entry.amount_cents,
            super::codes::EntryDirection::Debit => self.debit_cents += entry.amount_cents,
        }
    }

    /// Adds a batch's totals into a file's.
    pub fn add(&mut self, other: &Totals) {
        self.entry_addenda_count += other.entry_addenda_count;
        self.entry_hash = (self.entry_hash + other.entry_hash) % ENTRY_HASH_MODULUS;
        self.debit_cents += other.debit_cents;
        self.credit_cents += other.credit_cents;
    }
}

/// The batch control (record type 8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchControl {
    pub service_class: ServiceClass,
    pub totals: Totals,
    pub company_id: String,
    pub odfi: String,
    pub batch_number: u32,
}

const BATCH_CONTROL: &str = "batch_control";

impl BatchControl {
    pub fn to_line(&self) -> Result<String, FieldError> {
        let mut w = LineWriter::new(BATCH_CONTROL, '8');
        w.numeric("service_class_code", self.service_class.code(), 3)?;
        w.numeric("entry_addenda_count", self.totals.entry_addenda_count, 6)?;
        w.numeric("entry_hash", self.totals.entry_hash, 10)?;
        w.numeric("total_debit_amount", self.totals.debit_cents, 12)?;
        w.numeric("total_credit_amount", self.totals.credit_cents, 12)?;
        w.alpha("company_id", &self.company_id, 10)?.blank(19).blank(6);
        w.exact("odfi_identification", &odfi(BATCH_CONTROL, &self.odfi)?, 8)?;
        w.numeric("batch_number", u64::from(self.batch_number), 7)?.finish()
    }

    pub fn parse(line: &str) -> Result<Self, FieldError> {
        let mut r = LineReader::new(BATCH_CONTROL, '8', line)?;
        let service_class = read_service_class(&mut r)?;
        let totals = read_totals(&mut r, 6)?;
        let company_id = r.alpha(10);
        r.raw(25);
        let odfi = odfi(BATCH_CONTROL, r.raw(8))?;
        let batch_number = r.numeric("batch_number", 7)? as u32;
        Ok(BatchControl { service_class, totals, company_id, odfi, batch_number })
    }
}

/// The file control (record type 9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileControl {
    pub batch_count: u64,
    /// Blocks of 10 records, padding included.
    pub block_count: u64,
    pub totals: Totals,
}

const FILE_CONTROL: &str = "file_control";

impl FileControl {
    pub fn to_line(&self) -> Result<String, FieldError> {
        let mut w = LineWriter::new(FILE_CONTROL, '9');
        w.numeric("batch_count", self.batch_count, 6)?;
        w.numeric("block_count", self.block_count, 6)?;
        w.numeric("entry_addenda_count", self.totals.entry_addenda_count, 8)?;
        w.numeric("entry_hash", self.totals.entry_hash, 10)?;
        w.numeric("total_debit_amount", self.totals.debit_cents, 12)?;
        w.numeric("total_credit_amount", self.totals.credit_cents, 12)?.blank(39).finish()
    }

    pub fn parse(line: &str) -> Result<Self, FieldError> {
        let mut r = LineReader::new(FILE_CONTROL, '9', line)?;
        let batch_count = r.numeric("batch_count", 6)?;
        let block_count = r.numeric("block_count", 6)?;
        let totals = read_totals(&mut r, 8)?;
        Ok(FileControl { batch_count, block_count, totals })
    }
}

/// The padding record that fills the last block: 94 nines.
pub fn padding_line() -> String {
    "9".repeat(super::field::RECORD_LEN)
}

fn read_totals(r: &mut LineReader<'_>, count_width: usize) -> Result<Totals, FieldError> {
    Ok(Totals {
        entry_addenda_count: r.numeric("entry_addenda_count", count_width)?,
        entry_hash: r.numeric("entry_hash", 10)?,
        debit_cents: r.numeric("total_debit_amount", 12)?,
        credit_cents: r.numeric("total_credit_amount", 12)?,
    })
}

fn read_service_class(r: &mut LineReader<'_>) -> Result<ServiceClass, FieldError> {
    let code = r.numeric("service_class_code", 3)?;
    ServiceClass::from_code(code).ok_or_else(|| r.error("service_class_code", format!("{code} is not 200, 220 or 225")))
}

fn read_trace(r: &mut LineReader<'_>, field: &'static str) -> Result<TraceNumber, FieldError> {
    TraceNumber::parse(r.raw(15)).ok_or_else(|| r.error(field, "must be 15 digits"))
}

fn expect(r: &mut LineReader<'_>, field: &'static str, want: &str) -> Result<(), FieldError> {
    let got = r.raw(want.len());
    if got == want { Ok(()) } else { Err(r.error(field, format!("must be {want:?} (got {got:?})"))) }
}

fn required(record: &'static str, field: &'static str, value: &str) -> Result<(), FieldError> {
    if value.trim().is_empty() { Err(FieldError::new(record, field, "is required")) } else { Ok(()) }
}

/// An 8-digit DFI identification (ODFI, or the original RDFI of a return).
fn odfi(record: &'static str, value: &str) -> Result<String, FieldError> {
    if value.len() == 8 && value.bytes().all(|b| b.is_ascii_digit()) {
        Ok(value.to_owned())
    } else {
        Err(FieldError::new(record, "odfi_identification", format!("must be 8 digits (got {value:?})")))
    }
}

/// A return (`R01`) or change (`C01`) code: the letter and two digits.
fn reason_code(value: &str, letter: char) -> Result<String, FieldError> {
    let b = value.as_bytes();
    let field = if letter == 'R' { "return_reason_code" } else { "change_code" };
    if b.len() == 3 && b[0] == letter as u8 && b[1..].iter().all(u8::is_ascii_digit) {
        Ok(value.to_owned())
    } else {
        Err(FieldError::new(ADDENDA, field, format!("must be {letter} and two digits (got {value:?})")))
    }
}

pub fn yymmdd(date: Date) -> String {
    format!("{:02}{:02}{:02}", date.year().rem_euclid(100), u8::from(date.month()), date.day())
}

/// A YYMMDD date; NACHA years are this century.
fn read_date(r: &mut LineReader<'_>, field: &'static str) -> Result<Date, FieldError> {
    let text = r.raw(6);
    let bad = || r.error(field, format!("must be a YYMMDD date (got {text:?})"));
    let n = |range: std::ops::Range<usize>| {
        text.get(range).filter(|s| s.bytes().all(|b| b.is_ascii_digit())).and_then(|s| s.parse::<u8>().ok())
    };
    let (year, month, day) = (n(0..2).ok_or_else(bad)?, n(2..4).ok_or_else(bad)?, n(4..6).ok_or_else(bad)?);
    let month = Month::try_from(month).map_err(|_| bad())?;
    Date::from_calendar_date(2000 + i32::from(year), month, day).map_err(|_| bad())
}

fn read_hhmm(r: &mut LineReader<'_>, field: &'static str) -> Result<Time, FieldError> {
    let text = r.raw(4);
    let bad = || r.error(field, format!("must be HHMM (got {text:?})"));
    let hour = text.get(0..2).and_then(|s| s.parse::<u8>().ok()).ok_or_else(bad)?;
    let minute = text.get(2..4).and_then(|s| s.parse::<u8>().ok()).ok_or_else(bad)?;
    Time::from_hms(hour, minute, 0).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use time::macros::date;

    use super::super::codes::{AccountType, EntryDirection};
    use super::super::testing::{aba, header};
    use super::*;

    fn detail() -> EntryDetail {
        EntryDetail {
            transaction_code: TransactionCode::live(AccountType::Savings, EntryDirection::Debit),
            rdfi: aba("121141822"),
            account_number: "987-654".into(),
            amount_cents: 12_345,
            identification: "ord 1".into(),
            receiver_name: "Jane Doe".into(),
            discretionary_data: String::new(),
            addenda_count: 1,
            trace: TraceNumber::new("02100002", 7).unwrap(),
        }
    }

    #[test]
    fn file_header_has_the_leading_space_rules_and_reads_back() {
        let line = header().to_line().unwrap();
        assert_eq!(&line[..3], "101", "record type 1, priority code 01");
        assert_eq!(&line[3..13], " 021000021", "immediate destination: a space and 9 digits");
        assert_eq!(&line[13..23], "1234567890");
        assert_eq!(&line[23..39], "2607020930A09410");
        assert_eq!(&line[40..63], "ACME BANK              ", "upper case, space-filled");
        assert_eq!(
            FileHeader::parse(&line).unwrap(),
            FileHeader { immediate_destination_name: "ACME BANK".into(), immediate_origin_name: "ACME CORP".into(), ..header() }
        );
        let nine = FileHeader { immediate_origin: "121141822".into(), ..header() };
        assert_eq!(&nine.to_line().unwrap()[13..23], " 121141822", "a routing number origin gets the leading space");
        assert_eq!(FileHeader::parse(&nine.to_line().unwrap()).unwrap().to_line(), nine.to_line(), "reads back and writes the same");
        let bad = FileHeader { immediate_origin: "12345".into(), ..header() };
        assert_eq!(bad.to_line().unwrap_err().field, "immediate_origin");
    }

    #[test]
    fn entry_detail_layouts_for_ppd_and_ctx() {
        let line = detail().to_line(SecCode::Ppd).unwrap();
        assert_eq!(line, format!("637121141822{:<17}0000012345{:<15}{:<22}  1021000020000007", "987-654", "ORD 1", "JANE DOE"));
        assert_eq!(
            EntryDetail::parse(&line, SecCode::Ppd).unwrap(),
            EntryDetail { identification: "ORD 1".into(), receiver_name: "JANE DOE".into(), ..detail() }
        );
        let ctx = EntryDetail { addenda_count: 3, ..detail() }.to_line(SecCode::Ctx).unwrap();
        assert_eq!(&ctx[54..76], "0003JANE DOE          ");
        assert_eq!(EntryDetail::parse(&ctx, SecCode::Ctx).unwrap().addenda_count, 3);
    }

    #[test]
    fn entry_detail_refuses_what_nacha_forbids_naming_the_field() {
        let field = |d: EntryDetail, sec| d.to_line(sec).unwrap_err().field;
        assert_eq!(field(EntryDetail { account_number: String::new(), ..detail() }, SecCode::Ppd), "dfi_account_number");
        assert_eq!(field(EntryDetail { account_number: "1234567890123456789".into(), ..detail() }, SecCode::Ppd), "dfi_account_number");
        assert_eq!(field(EntryDetail { receiver_name: "Zoë".into(), ..detail() }, SecCode::Ppd), "receiver_name");
        assert_eq!(
            field(EntryDetail { receiver_name: "A name of more than twenty-two".into(), ..detail() }, SecCode::Ppd),
            "receiver_name"
        );
        assert_eq!(field(EntryDetail { receiver_name: "Seventeen chars!!".into(), ..detail() }, SecCode::Ctx), "receiving_company_name");
        assert_eq!(field(EntryDetail { amount_cents: 0, ..detail() }, SecCode::Ppd), "amount");
        let prenote = EntryDetail {
            transaction_code: TransactionCode::prenote(AccountType::Checking, EntryDirection::Credit),
            amount_cents: 0,
            ..detail()
        };
        assert!(prenote.to_line(SecCode::Ppd).is_ok(), "prenotes carry zero");
        assert_eq!(
            field(EntryDetail { transaction_code: TransactionCode::from_code(21).unwrap(), ..detail() }, SecCode::Ppd),
            "transaction_code"
        );
        assert_eq!(field(EntryDetail { addenda_count: 2, ..detail() }, SecCode::Web), "addenda_record_indicator");
    }

    #[test]
    fn batch_records_write_and_read_back() {
        let h = BatchHeader {
            service_class: ServiceClass::DebitsOnly,
            company_name: "ACME CORP".into(),
            company_discretionary_data: String::new(),
            company_id: "1234567890".into(),
            sec: SecCode::Web,
            entry_description: "SUBSCRIBE".into(),
            descriptive_date: "SD1300".into(),
            effective_entry_date: date!(2027 - 12 - 31),
            settlement_date: String::new(),
            odfi: "02100002".into(),
            batch_number: 12,
        };
        let line = h.to_line().unwrap();
        assert_eq!(&line[..4], "5225");
        assert_eq!(&line[50..53], "WEB");
        assert_eq!(&line[63..75], "SD1300271231");
        assert_eq!(&line[78..94], "1021000020000012");
        assert_eq!(BatchHeader::parse(&line).unwrap(), h);
        assert_eq!(BatchHeader { company_name: String::new(), ..h.clone() }.to_line().unwrap_err().field, "company_name");
        assert_eq!(BatchHeader { odfi: "0210000".into(), ..h }.to_line().unwrap_err().field, "odfi_identification");
        let totals = Totals { entry_addenda_count: 3, entry_hash: 14_214_184, debit_cents: 500, credit_cents: 12_500 };
        let c = BatchControl {
            service_class: ServiceClass::Mixed,
            totals,
            company_id: "1234567890".into(),
            odfi: "02100002".into(),
            batch_number: 1,
        };
        let line = c.to_line().unwrap();
        assert_eq!(&line[..44], "82000000030014214184000000000500000000012500");
        assert_eq!(BatchControl::parse(&line).unwrap(), c);
        let f = FileControl { batch_count: 1, block_count: 1, totals };
        assert_eq!(FileControl::parse(&f.to_line().unwrap()).unwrap(), f);
    }

    #[test]
    fn return_and_notification_addenda_read_back() {
        let trace = TraceNumber::new("12114182", 55).unwrap();
        let original = TraceNumber::new("02100002", 7).unwrap();
        let ret = ReturnAddenda {
            return_reason_code: "R01".into(),
            original_trace: original,
            date_of_death: None,
            original_rdfi: "12114182".into(),
            addenda_information: "INSUFFICIENT FUNDS".into(),
            trace,
        };
        let line = ret.to_line().unwrap();
        assert_eq!(&line[..18], "799R01021000020000");
        assert_eq!(Addenda::parse(&line).unwrap(), Addenda::Return(ret.clone()));
        let dead = ReturnAddenda { return_reason_code: "R15".into(), date_of_death: Some(date!(2026 - 05 - 01)), ..ret.clone() };
        assert_eq!(Addenda::parse(&dead.to_line().unwrap()).unwrap(), Addenda::Return(dead));
        assert_eq!(ReturnAddenda { return_reason_code: "X01".into(), ..ret }.to_line().unwrap_err().field, "return_reason_code");
        let noc = NotificationAddenda {
            change_code: "C01".into(),
            original_trace: original,
            original_rdfi: "12114182".into(),
            corrected_data: "99887766".into(),
            trace,
        };
        assert_eq!(Addenda::parse(&noc.to_line().unwrap()).unwrap(), Addenda::Notification(noc));
        let other = format!("702{}", " ".repeat(91));
        assert_eq!(Addenda::parse(&other).unwrap_err().field, "addenda_type_code");
    }
}
