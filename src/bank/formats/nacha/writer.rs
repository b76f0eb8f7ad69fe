//! The streaming NACHA writer: records go to any `std::io::Write` as entries come, so a file of
//! 100,000 orders never sits in memory whole.
//!
//! The controls need totals, so the writer keeps counters (entry and addenda count, entry hash,
//! debit and credit totals) while it writes each batch's entries and writes the batch control
//! when the batch ends, the file control and the 9-filled padding at [`NachaWriter::finish`].
//!
//! **The caller groups entries by batch first**: entries are pushed with their [`BatchSpec`]
//! (company, SEC code, effective date, same-day flag, ...), a new spec closes the open batch and
//! opens the next, and a spec whose batch was already closed is refused, because it would split
//! one batch in two. A cut-off reads its orders `ORDER BY` the batch key to get this for free.
//! An entry refused for a bad field writes nothing (its lines are rendered before any is
//! written), so the caller can leave that order out and carry on. Wrap the sink in a
//! `BufWriter`: the writer writes one line at a time.

use std::collections::HashSet;
use std::io::Write;

use time::Date;

use super::codes::{SecCode, ServiceClass, TraceNumber, TransactionCode};
use super::field::{FieldError, NachaError};
use super::records::{Addenda, BatchControl, BatchHeader, EntryDetail, FileControl, FileHeader, PaymentAddenda, Totals, padding_line};
use crate::domain::bank_id::AbaRoutingNumber;
use crate::domain::money::{Amount, Currency};

/// Records per block: NACHA's blocking factor.
pub const BLOCKING_FACTOR: u64 = 10;

/// What makes a batch: one per company, SEC code, effective entry date and same-day flag (and
/// the other batch header fields, which a connection fixes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BatchSpec {
    pub service_class: ServiceClass,
    pub company_name: String,
    pub company_discretionary_data: String,
    pub company_id: String,
    pub sec: SecCode,
    pub entry_description: String,
    pub descriptive_date: String,
    pub effective_entry_date: Date,
    /// Same-day ACH: the effective entry date must be the file's creation date.
    pub same_day: bool,
}

/// One entry to write; the writer gives it its trace number and addenda records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInput {
    pub transaction_code: TransactionCode,
    pub rdfi: AbaRoutingNumber,
    pub account_number: String,
    pub amount_cents: u64,
    pub identification: String,
    pub receiver_name: String,
    pub discretionary_data: String,
    /// Payment related information, one 05 addenda record (80 characters) each.
    pub addenda: Vec<String>,
}

impl EntryInput {
    /// An order's amount as the cents an entry carries: USD only (ACH moves dollars), and at
    /// most 10 digits (99,999,999.99), the entry's amount field.
    pub fn usd_cents(amount: Amount, currency: Currency) -> Result<u64, FieldError> {
        if currency.code() != "USD" {
            return Err(FieldError::new("entry_detail", "currency", format!("ACH moves USD only (got {currency})")));
        }
        let cents = amount.minor_units().unsigned_abs();
        if cents > MAX_ENTRY_CENTS {
            return Err(FieldError::new("entry_detail", "amount", "at most 99,999,999.99 per ACH entry"));
        }
        Ok(cents)
    }

    /// The entry record with `trace`, and its 05 addenda records numbered from 1.
    pub fn records(&self, trace: TraceNumber) -> Result<(EntryDetail, Vec<Addenda>), FieldError> {
        let addenda_count = u16::try_from(self.addenda.len())
            .map_err(|_| FieldError::new("entry_detail", "number_of_addenda_records", "at most 9,999 addenda"))?;
        let detail = EntryDetail {
            transaction_code: self.transaction_code,
            rdfi: self.rdfi,
            account_number: self.account_number.clone(),
            amount_cents: self.amount_cents,
            identification: self.identification.clone(),
            receiver_name: self.receiver_name.clone(),
            discretionary_data: self.discretionary_data.clone(),
            addenda_count,
            trace,
        };
        let addenda = self.addenda.iter().enumerate().map(|(i, text)| {
            // At most 9,999 (checked by the entry record), so the sequence fits.
            let sequence = (i + 1) as u16;
            Addenda::Payment(PaymentAddenda { payment_related_information: text.clone(), sequence, entry_sequence: trace.sequence() })
        });
        Ok((detail, addenda.collect()))
    }

    /// Renders the entry and its addenda onto `lines`, checking every field; returns the entry
    /// record (for the totals).
    pub fn render(&self, sec: SecCode, trace: TraceNumber, lines: &mut Vec<String>) -> Result<EntryDetail, FieldError> {
        let (detail, addenda) = self.records(trace)?;
        lines.push(detail.to_line(sec)?);
        for record in &addenda {
            lines.push(record.to_line()?);
        }
        Ok(detail)
    }

    /// Checks the entry as a batch of `sec` would write it (with a placeholder trace number):
    /// what payment order creation calls, so creation and cut-off apply the same rules.
    pub fn check(&self, sec: SecCode) -> Result<(), FieldError> {
        let placeholder = TraceNumber::new("00000000", 1).expect("a valid trace number");
        self.render(sec, placeholder, &mut Vec::new()).map(|_| ())
    }
}

/// The largest amount one entry carries: its 10-digit field, in cents.
pub const MAX_ENTRY_CENTS: u64 = 9_999_999_999;

/// What a finished file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSummary {
    pub control: FileControl,
    /// Lines written, padding included (a multiple of 10).
    pub lines: u64,
}

struct OpenBatch {
    header: BatchHeader,
    spec: BatchSpec,
    totals: Totals,
}

/// Writes one NACHA file; see the module header for the order entries must come in.
pub struct NachaWriter<W: Write> {
    out: W,
    odfi: String,
    file_date: Date,
    lines: u64,
    batch_count: u64,
    last_trace: u32,
    totals: Totals,
    open: Option<OpenBatch>,
    closed: HashSet<BatchSpec>,
}

impl<W: Write> NachaWriter<W> {
    /// Starts a file with `header`. The ODFI of every batch and trace number is the first
    /// 8 digits of its immediate destination (SPEC B3).
    pub fn new(out: W, header: &FileHeader) -> Result<Self, NachaError> {
        let line = header.to_line()?;
        let odfi = header.immediate_destination.institution().to_owned();
        let mut writer = NachaWriter {
            out,
            odfi,
            file_date: header.created.date(),
            lines: 0,
            batch_count: 0,
            last_trace: 0,
            totals: Totals::default(),
            open: None,
            closed: HashSet::new(),
        };
        writer.write_lines(&[line])?;
        Ok(writer)
    }

    /// Numbers the file's entries from `first` (1 by default): a sender that keeps trace numbers
    /// unique beyond one file starts each file where the last one ended. Call before any entry.
    pub fn first_trace(mut self, first: u32) -> Self {
        debug_assert!(self.open.is_none() && self.closed.is_empty(), "first_trace after an entry");
        self.last_trace = first.saturating_sub(1);
        self
    }

    /// Writes `entry` in the batch of `spec` (opening it, and closing the one before, if it is
    /// not the open one) and returns its trace number.
    pub fn push(&mut self, spec: &BatchSpec, entry: EntryInput) -> Result<TraceNumber, NachaError> {
        self.check_spec(spec, &entry)?;
        let opening = self.open.as_ref().is_none_or(|open| open.spec != *spec);
        let trace = TraceNumber::new(&self.odfi, self.last_trace + 1)
            .ok_or_else(|| NachaError::structure("more than 9,999,999 entries in one file"))?;
        let header = opening.then(|| self.batch_header(spec)).transpose()?;
        let mut lines = header.as_ref().map(BatchHeader::to_line).transpose()?.into_iter().collect::<Vec<_>>();
        let detail = entry.render(spec.sec, trace, &mut lines)?;
        if let Some(header) = header {
            self.close_batch()?;
            self.open = Some(OpenBatch { header, spec: spec.clone(), totals: Totals::default() });
        }
        self.write_lines(&lines)?;
        self.last_trace = trace.sequence();
        if let Some(open) = self.open.as_mut() {
            open.totals.add_entry(&detail, entry.addenda.len() as u64);
        }
        Ok(trace)
    }

    /// Closes the last batch, writes the file control and pads the last block with nines.
    pub fn finish(mut self) -> Result<(W, FileSummary), NachaError> {
        self.close_batch()?;
        // Header, batches and control, rounded up to whole blocks.
        let block_count = (self.lines + 1).div_ceil(BLOCKING_FACTOR);
        let control = FileControl { batch_count: self.batch_count, block_count, totals: self.totals };
        let mut lines = vec![control.to_line()?];
        let padding = block_count * BLOCKING_FACTOR - self.lines - 1;
        lines.extend((0..padding).map(|_| padding_line()));
        self.write_lines(&lines)?;
        self.out.flush()?;
        Ok((self.out, FileSummary { control, lines: self.lines }))
    }

    fn check_spec(&self, spec: &BatchSpec, entry: &EntryInput) -> Result<(), NachaError> {
        if self.closed.contains(spec) {
            return Err(NachaError::structure(
                "entries of one batch must come together: this batch was already closed (group entries by batch before writing)",
            ));
        }
        if spec.sec == SecCode::Cor {
            return Err(NachaError::structure("COR (notification of change) batches are only read, never originated"));
        }
        if spec.same_day && spec.effective_entry_date != self.file_date {
            return Err(NachaError::structure("a same-day batch's effective entry date is the file's creation date"));
        }
        if !spec.service_class.admits(entry.transaction_code.direction()) {
            return Err(NachaError::structure(format!(
                "service class {} does not admit this entry's direction",
                spec.service_class.code()
            )));
        }
        Ok(())
    }

    fn batch_header(&self, spec: &BatchSpec) -> Result<BatchHeader, NachaError> {
        let batch_number = u32::try_from(self.batch_count + u64::from(self.open.is_some()) + 1)
            .ok()
            .filter(|n| *n <= 9_999_999)
            .ok_or_else(|| NachaError::structure("too many batches"))?;
        Ok(BatchHeader {
            service_class: spec.service_class,
            company_name: spec.company_name.clone(),
            company_discretionary_data: spec.company_discretionary_data.clone(),
            company_id: spec.company_id.clone(),
            sec: spec.sec,
            entry_description: spec.entry_description.clone(),
            descriptive_date: spec.descriptive_date.clone(),
            effective_entry_date: spec.effective_entry_date,
            settlement_date: String::new(),
            odfi: self.odfi.clone(),
            batch_number,
        })
    }

    fn close_batch(&mut self) -> Result<(), NachaError> {
        let Some(open) = self.open.take() else { return Ok(()) };
        let h = &open.header;
        let control = BatchControl {
            service_class: h.service_class,
            totals: open.totals,
            company_id: h.company_id.clone(),
            odfi: h.odfi.clone(),
            batch_number: h.batch_number,
        };
        self.write_lines(&[control.to_line()?])?;
        self.totals.add(&open.totals);
        self.batch_count += 1;
        self.closed.insert(open.spec);
        Ok(())
    }

    fn write_lines(&mut self, lines: &[String]) -> Result<(), NachaError> {
        for line in lines {
            self.out.write_all(line.as_bytes())?;
            self.out.write_all(b"\n")?;
        }
        self.lines += lines.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use time::macros::date;

    use super::super::codes::EntryDirection::{Credit, Debit};
    use super::super::parse::parse;
    use super::super::records::ENTRY_HASH_MODULUS;
    use super::super::testing::{entry, header, spec};
    use super::*;

    fn write(entries: &[(BatchSpec, EntryInput)]) -> Result<(String, FileSummary), NachaError> {
        let mut writer = NachaWriter::new(Vec::new(), &header())?;
        for (spec, entry) in entries {
            writer.push(spec, entry.clone())?;
        }
        let (bytes, summary) = writer.finish()?;
        Ok((String::from_utf8(bytes).unwrap(), summary))
    }

    #[test]
    fn b3_every_line_is_94_characters_blocked_to_10_with_nines() {
        let ppd = spec(SecCode::Ppd, date!(2026 - 07 - 03));
        let (text, summary) =
            write(&[(ppd.clone(), entry(Credit, "121141822", 12_500, &[])), (ppd, entry(Debit, "021000021", 2_000, &["INV 1"]))]).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!((lines.len(), summary.lines, summary.control.block_count), (10, 10, 1));
        assert!(lines.iter().all(|l| l.len() == 94));
        assert_eq!(lines[..7].iter().map(|l| &l[..1]).collect::<String>(), "1566789");
        assert!(lines[7..].iter().all(|l| *l == "9".repeat(94)), "three padding records");
        let totals = summary.control.totals;
        assert_eq!(
            (totals.entry_addenda_count, totals.entry_hash, totals.credit_cents, totals.debit_cents),
            (3, 12_114_182 + 2_100_002, 12_500, 2_000)
        );
    }

    #[test]
    fn b3_exactly_ten_records_need_no_padding_and_eleven_need_nineteen() {
        let ppd = spec(SecCode::Ppd, date!(2026 - 07 - 03));
        // header + batch header + n entries + batch control + file control = n + 4.
        let six: Vec<_> = (0..6).map(|_| (ppd.clone(), entry(Credit, "121141822", 100, &[]))).collect();
        let (text, summary) = write(&six).unwrap();
        assert_eq!((text.lines().count(), summary.control.block_count), (10, 1));
        assert!(!text.contains(&"9".repeat(94)), "no padding record");
        let seven: Vec<_> = (0..7).map(|_| (ppd.clone(), entry(Credit, "121141822", 100, &[]))).collect();
        let (text, summary) = write(&seven).unwrap();
        assert_eq!((text.lines().count(), summary.control.block_count), (20, 2));
        assert_eq!(text.lines().filter(|l| *l == "9".repeat(94)).count(), 9);
    }

    #[test]
    fn b3_a_file_may_number_its_entries_from_where_the_last_one_ended() {
        let a = spec(SecCode::Ppd, date!(2026 - 07 - 03));
        let mut writer = NachaWriter::new(Vec::new(), &header()).unwrap().first_trace(9_999_998);
        let traces: Vec<String> = (0..2).map(|_| writer.push(&a, entry(Credit, "121141822", 100, &[])).unwrap().to_string()).collect();
        assert_eq!(traces, ["021000029999998", "021000029999999"]);
        let third = writer.push(&a, entry(Credit, "121141822", 100, &[]));
        assert!(third.is_err(), "no eighth digit: the file is refused rather than wrapping within itself");
    }

    #[test]
    fn b3_trace_numbers_are_the_odfi_and_a_sequence_and_batches_are_numbered() {
        let (a, b) = (spec(SecCode::Ppd, date!(2026 - 07 - 03)), spec(SecCode::Ccd, date!(2026 - 07 - 03)));
        let mut writer = NachaWriter::new(Vec::new(), &header()).unwrap();
        let traces: Vec<String> =
            [&a, &a, &b].iter().map(|s| writer.push(s, entry(Credit, "121141822", 100, &[])).unwrap().to_string()).collect();
        assert_eq!(traces, ["021000020000001", "021000020000002", "021000020000003"], "ODFI = first 8 digits of immediate_destination");
        let (bytes, _) = writer.finish().unwrap();
        let file = parse(std::str::from_utf8(&bytes).unwrap()).unwrap();
        assert_eq!(
            file.batches.iter().map(|b| (b.header.batch_number, b.header.odfi.as_str())).collect::<Vec<_>>(),
            [(1, "02100002"), (2, "02100002")]
        );
    }

    #[test]
    fn b3_batches_must_come_grouped() {
        let (a, b) = (spec(SecCode::Ppd, date!(2026 - 07 - 03)), spec(SecCode::Ppd, date!(2026 - 07 - 06)));
        let err = write(&[
            (a.clone(), entry(Credit, "121141822", 1, &[])),
            (b, entry(Credit, "121141822", 1, &[])),
            (a, entry(Credit, "121141822", 1, &[])),
        ])
        .unwrap_err();
        assert!(err.to_string().contains("group entries by batch"), "{err}");
    }

    #[test]
    fn b3_a_refused_entry_writes_nothing_and_the_file_stays_whole() {
        let ppd = spec(SecCode::Ppd, date!(2026 - 07 - 03));
        let mut writer = NachaWriter::new(Vec::new(), &header()).unwrap();
        writer.push(&ppd, entry(Credit, "121141822", 100, &[])).unwrap();
        let mut bad = entry(Credit, "121141822", 100, &[]);
        bad.account_number = "12 34".into();
        let err = writer.push(&ppd, bad).unwrap_err();
        assert_eq!(err.field().unwrap().field, "dfi_account_number");
        let other = spec(SecCode::Ccd, date!(2026 - 07 - 03));
        let err = writer.push(&other, entry(Credit, "121141822", 10_000_000_000, &[])).unwrap_err();
        assert_eq!(err.field().unwrap().field, "amount", "more than 10 digits of cents");
        let (bytes, summary) = writer.finish().unwrap();
        let file = parse(std::str::from_utf8(&bytes).unwrap()).unwrap();
        assert_eq!((file.batches.len(), summary.control.totals.entry_addenda_count), (1, 1), "no empty batch was opened");
    }

    #[test]
    fn b3_same_day_batches_settle_on_the_file_date_and_service_classes_hold() {
        let mut same_day = spec(SecCode::Ppd, date!(2026 - 07 - 03));
        same_day.same_day = true;
        assert!(write(&[(same_day.clone(), entry(Credit, "121141822", 1, &[]))]).is_err(), "the file is made on July 2nd");
        same_day.effective_entry_date = date!(2026 - 07 - 02);
        assert!(write(&[(same_day, entry(Credit, "121141822", 1, &[]))]).is_ok());
        let mut credits = spec(SecCode::Ppd, date!(2026 - 07 - 03));
        credits.service_class = ServiceClass::CreditsOnly;
        assert!(write(&[(credits, entry(Debit, "121141822", 1, &[]))]).is_err());
    }

    #[test]
    fn b3_ctx_carries_many_addenda_and_writes_their_count() {
        let ctx = spec(SecCode::Ctx, date!(2026 - 07 - 03));
        let texts: Vec<String> = (1..=12).map(|i| format!("RMR*IV*INV-{i:04}*PO*125.00")).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let (text, summary) = write(&[(ctx, entry(Credit, "121141822", 150_000, &refs))]).unwrap();
        let entry_line = text.lines().nth(2).unwrap();
        assert_eq!(&entry_line[54..58], "0012", "number of addenda records, positions 55-58");
        assert_eq!(&entry_line[78..79], "1");
        assert_eq!(summary.control.totals.entry_addenda_count, 13);
        let file = parse(&text).unwrap();
        assert_eq!(file.batches[0].entries[0].addenda.len(), 12);
        let too_many = spec(SecCode::Ppd, date!(2026 - 07 - 03));
        assert!(write(&[(too_many, entry(Credit, "121141822", 1, &["A", "B"]))]).is_err(), "PPD takes one addenda");
    }

    /// Counts bytes and keeps none: the writer must not need the file back.
    struct Counting(u64);

    impl Write for Counting {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn b3_a_hundred_thousand_entries_stream_to_any_writer() {
        let ppd = spec(SecCode::Ppd, date!(2026 - 07 - 03));
        let mut writer = NachaWriter::new(Counting(0), &header()).unwrap();
        for i in 0..100_000u64 {
            writer.push(&ppd, entry(if i % 2 == 0 { Credit } else { Debit }, "121141822", 1 + i, &["INV"])).unwrap();
        }
        let (sink, summary) = writer.finish().unwrap();
        // 1 + 1 + 200,000 + 1 + 1 records, rounded up to 200,010; 95 bytes a line with its LF.
        assert_eq!((summary.lines, sink.0), (200_010, 200_010 * 95));
        assert_eq!(summary.control.totals.entry_hash, 100_000 * 12_114_182 % ENTRY_HASH_MODULUS);
    }

    #[test]
    fn b3_amounts_are_usd_cents_of_at_most_ten_digits() {
        let usd = Currency::parse("currency", "USD").unwrap();
        let amount = |n| Amount::parse("amount", n).unwrap();
        assert_eq!(EntryInput::usd_cents(amount(12_500), usd), Ok(12_500));
        assert_eq!(EntryInput::usd_cents(amount(9_999_999_999), usd), Ok(9_999_999_999));
        assert_eq!(EntryInput::usd_cents(amount(10_000_000_000), usd).unwrap_err().field, "amount");
        let cad = Currency::parse("currency", "CAD").unwrap();
        assert_eq!(EntryInput::usd_cents(amount(1), cad).unwrap_err().field, "currency");
    }
}
