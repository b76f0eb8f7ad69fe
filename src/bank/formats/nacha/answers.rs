//! NACHA return and notification-of-change files (SPEC B5, B7): the reader that turns a bank's
//! answer file into `domain::bank_answer` values, and the writer the sandbox bank answers with.
//!
//! Reading: the file is first checked whole by [`super::parse()`] (record layouts, addenda
//! counts, every control total, blocking), so one bad record refuses the file. Then every entry
//! must carry exactly one addenda 99 (a return: [`AchReturn`]) or 98 (a notification of change:
//! [`AchCorrection`]) whose trace number is the entry's; an entry without one means the file is
//! not an answer file (perhaps a payment file dropped in the wrong folder) and refuses it.
//!
//! Writing ([`AnswerWriter`]): a return or notification of change goes back the way the entry
//! came, so each answer entry repeats the original entry and the batch header repeats the
//! original batch's company, SEC code and description (a notification of change batch is `COR`),
//! as NACHA sets out for returns:
//! - the transaction code is the return code of the original ([`TransactionCode::answer_of`]:
//!   21 for 22, 26 for 27, 31 for 32, 36 for 37);
//! - the receiving DFI is the original ODFI (the first 8 digits of the original trace number,
//!   with its check digit), the amount the original amount (zero for a notification of change);
//! - the batch's ODFI and the trace number are the returning bank's (the original RDFI);
//! - the addenda (99 or 98) carries the original trace number, the original RDFI and the code
//!   (with the date of death for R14/R15, or the corrected data);
//! - batch and file controls, blocking and padding as for any NACHA file.
//!
//! Answers are written in the order given; consecutive answers of one original batch (and
//! kind) share a batch, and a new batch opens whenever that changes.

use std::io::Write;

use time::Date;

use super::codes::{SecCode, ServiceClass, TraceNumber, TransactionCode};
use super::field::NachaError;
use super::parse::{ParsedFile, parse};
use super::records::{
    Addenda, BatchControl, BatchHeader, EntryDetail, FileControl, FileHeader, NotificationAddenda, ReturnAddenda, Totals,
};
use super::writer::{BLOCKING_FACTOR, FileSummary};
use crate::bank::formats::answer_error::AnswerError;
use crate::domain::bank_answer::{AchCorrection, AchReturn, Answer, AnswerFile, AnswerFormat};
use crate::domain::bank_id::AbaRoutingNumber;

const FORMAT: Option<AnswerFormat> = Some(AnswerFormat::NachaReturns);

/// Reads a NACHA return / notification-of-change file.
pub fn read(bytes: &[u8]) -> Result<AnswerFile, AnswerError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = 1 + bytes[..e.valid_up_to()].iter().filter(|b| **b == b'\n').count();
        AnswerError::new(FORMAT, format!("line {line}"), "a NACHA file is printable ASCII")
    })?;
    let file = parse(&framed(text)).map_err(|e| nacha_error(&e))?;
    answers_of(&file).map(|answers| AnswerFile { format: AnswerFormat::NachaReturns, answers })
}

/// A record's length.
const RECORD_LEN: usize = 94;

/// The bank's file in the framing the parser reads (94-character lines, blocked by 10), from
/// the framings banks' systems send: records with no line breaks (NACHA's own fixed-length
/// records), trailing spaces trimmed or added, blank lines or a DOS end-of-file byte (0x1A) at
/// the end, and no blocking. What a record holds is not touched: a record that is not 94
/// characters once its trailing spaces are set right still refuses the file.
fn framed(text: &str) -> String {
    let text = text.trim_end_matches(['\u{1a}', '\r', '\n']);
    let unbroken;
    let records: Vec<&str> = if !text.contains('\n') && text.len() > RECORD_LEN && text.is_ascii() {
        // The last record may have lost its trailing spaces (the file control's are reserved).
        unbroken = format!("{text:<width$}", width = text.len().div_ceil(RECORD_LEN) * RECORD_LEN);
        (0..unbroken.len()).step_by(RECORD_LEN).map(|at| &unbroken[at..at + RECORD_LEN]).collect()
    } else {
        let lines = text.split('\n').map(|line| line.strip_suffix('\r').unwrap_or(line));
        let mut lines: Vec<&str> = lines.collect();
        while lines.last().is_some_and(|line| line.trim().is_empty()) {
            lines.pop();
        }
        lines
    };
    let mut lines: Vec<String> = records
        .iter()
        .map(|record| {
            let kept = record.trim_end_matches(' ');
            if kept.len() <= RECORD_LEN && record.len() != RECORD_LEN { format!("{kept:<RECORD_LEN$}") } else { (*record).to_owned() }
        })
        .collect();
    while !(lines.len() as u64).is_multiple_of(BLOCKING_FACTOR) {
        lines.push("9".repeat(RECORD_LEN));
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

fn nacha_error(err: &NachaError) -> AnswerError {
    match err {
        NachaError::Line { line, source } => AnswerError::new(FORMAT, format!("line {line}"), source.to_string()),
        other => AnswerError::new(FORMAT, "file", other.to_string()),
    }
}

fn answers_of(file: &ParsedFile) -> Result<Vec<Answer>, AnswerError> {
    let mut answers = Vec::new();
    let mut line = 1;
    for batch in &file.batches {
        line += 1;
        for entry in &batch.entries {
            line += 1;
            let answer = answer_of(&entry.detail, &entry.addenda).map_err(|why| AnswerError::new(FORMAT, format!("line {line}"), why))?;
            answers.push(answer);
            line += entry.addenda.len();
        }
        line += 1;
    }
    Ok(answers)
}

fn answer_of(detail: &EntryDetail, addenda: &[Addenda]) -> Result<Answer, String> {
    let not_an_answer =
        || format!("entry {} carries no return (addenda 99) or notification of change (addenda 98): not an answer file", detail.trace);
    match addenda {
        [Addenda::Return(a)] => {
            same_trace(detail, &a.trace)?;
            Ok(Answer::Return(AchReturn {
                original_trace_number: a.original_trace.to_string(),
                code: a.return_reason_code.clone(),
                amount: i64::try_from(detail.amount_cents).map_err(|_| "amount out of range".to_owned())?,
                addenda_information: (!a.addenda_information.is_empty()).then(|| a.addenda_information.clone()),
                date_of_death: a.date_of_death.map(|d| d.to_string()),
            }))
        }
        [Addenda::Notification(a)] => {
            same_trace(detail, &a.trace)?;
            Ok(Answer::Correction(AchCorrection {
                original_trace_number: a.original_trace.to_string(),
                code: a.change_code.clone(),
                corrected_data: a.corrected_data.trim().to_owned(),
            }))
        }
        _ => Err(not_an_answer()),
    }
}

fn same_trace(detail: &EntryDetail, addenda_trace: &TraceNumber) -> Result<(), String> {
    if *addenda_trace != detail.trace {
        return Err(format!("the addenda's trace number {addenda_trace} is not its entry's {}", detail.trace));
    }
    Ok(())
}

// ---- the writer (SPEC B7) ----

/// An entry as its originator sent it and the answering bank received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginalEntry {
    pub sec: SecCode,
    pub company_name: String,
    pub company_id: String,
    pub entry_description: String,
    /// The original code (22, 27, 32, 37, or a prenote's).
    pub transaction_code: TransactionCode,
    /// The original RDFI: the bank that answers.
    pub rdfi: AbaRoutingNumber,
    pub account_number: String,
    pub amount_cents: u64,
    pub identification: String,
    pub receiver_name: String,
    /// The original trace number (its first 8 digits are the ODFI the answer goes back to).
    pub trace: TraceNumber,
}

/// What the bank says of the entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerKind {
    /// Returned (addenda 99): `R01` to `R85`; the date of death for R14/R15; free text (44).
    Return { code: String, date_of_death: Option<Date>, information: String },
    /// A notification of change (addenda 98): `C01` to `C13` and the corrected data (29).
    Change { code: String, corrected_data: String },
}

/// One entry of an answer file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryAnswer {
    pub original: OriginalEntry,
    pub kind: AnswerKind,
}

/// What makes an answer batch: the original batch's company, SEC code (COR for changes),
/// description, and the answering bank.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BatchKey {
    sec: SecCode,
    company_name: String,
    company_id: String,
    entry_description: String,
    odfi: String,
}

impl BatchKey {
    fn of(answer: &EntryAnswer) -> Self {
        let o = &answer.original;
        let sec = if matches!(answer.kind, AnswerKind::Change { .. }) { SecCode::Cor } else { o.sec };
        BatchKey {
            sec,
            company_name: o.company_name.clone(),
            company_id: o.company_id.clone(),
            entry_description: o.entry_description.clone(),
            odfi: o.rdfi.institution().to_owned(),
        }
    }
}

/// Streams a return / notification-of-change file: [`AnswerWriter::new`], [`AnswerWriter::push`]
/// per answer, [`AnswerWriter::finish`].
pub struct AnswerWriter<W: Write> {
    out: W,
    effective_entry_date: Date,
    lines: u64,
    batch_count: u32,
    last_trace: u32,
    totals: Totals,
    open: Option<(BatchKey, BatchHeader, Totals)>,
}

impl<W: Write> AnswerWriter<W> {
    /// Starts a file with `header`; every batch settles on `effective_entry_date`.
    pub fn new(out: W, header: &FileHeader, effective_entry_date: Date) -> Result<Self, NachaError> {
        let mut writer =
            AnswerWriter { out, effective_entry_date, lines: 0, batch_count: 0, last_trace: 0, totals: Totals::default(), open: None };
        writer.write_lines(&[header.to_line()?])?;
        Ok(writer)
    }

    /// Writes one answer entry and its addenda; returns the answer entry's own trace number.
    pub fn push(&mut self, answer: &EntryAnswer) -> Result<TraceNumber, NachaError> {
        let key = BatchKey::of(answer);
        let opening = self.open.as_ref().is_none_or(|(open, _, _)| *open != key);
        let header = opening.then(|| self.batch_header(&key)).transpose()?;
        let trace = TraceNumber::new(&key.odfi, self.last_trace + 1)
            .ok_or_else(|| NachaError::structure("more than 9,999,999 entries in one file"))?;
        let (detail, addenda) = records(answer, trace)?;
        let mut lines = header.as_ref().map(BatchHeader::to_line).transpose()?.into_iter().collect::<Vec<_>>();
        lines.push(detail.to_answer_line(key.sec)?);
        lines.push(addenda.to_line()?);
        if let Some(header) = header {
            self.close_batch()?;
            self.open = Some((key, header, Totals::default()));
        }
        self.write_lines(&lines)?;
        self.last_trace = trace.sequence();
        if let Some((_, _, totals)) = self.open.as_mut() {
            totals.add_entry(&detail, 1);
        }
        Ok(trace)
    }

    /// Closes the last batch, writes the file control and pads the last block with nines.
    pub fn finish(mut self) -> Result<(W, FileSummary), NachaError> {
        self.close_batch()?;
        let block_count = (self.lines + 1).div_ceil(BLOCKING_FACTOR);
        let control = FileControl { batch_count: u64::from(self.batch_count), block_count, totals: self.totals };
        let mut lines = vec![control.to_line()?];
        let padding = block_count * BLOCKING_FACTOR - self.lines - 1;
        lines.extend((0..padding).map(|_| super::records::padding_line()));
        self.write_lines(&lines)?;
        self.out.flush()?;
        Ok((self.out, FileSummary { control, lines: self.lines }))
    }

    fn batch_header(&self, key: &BatchKey) -> Result<BatchHeader, NachaError> {
        let batch_number = self.batch_count + u32::from(self.open.is_some()) + 1;
        if batch_number > 9_999_999 {
            return Err(NachaError::structure("too many batches"));
        }
        Ok(BatchHeader {
            service_class: ServiceClass::Mixed,
            company_name: key.company_name.clone(),
            company_discretionary_data: String::new(),
            company_id: key.company_id.clone(),
            sec: key.sec,
            entry_description: key.entry_description.clone(),
            descriptive_date: String::new(),
            effective_entry_date: self.effective_entry_date,
            settlement_date: String::new(),
            odfi: key.odfi.clone(),
            batch_number,
        })
    }

    fn close_batch(&mut self) -> Result<(), NachaError> {
        let Some((_, h, totals)) = self.open.take() else { return Ok(()) };
        let control = BatchControl {
            service_class: h.service_class,
            totals,
            company_id: h.company_id.clone(),
            odfi: h.odfi.clone(),
            batch_number: h.batch_number,
        };
        self.write_lines(&[control.to_line()?])?;
        self.totals.add(&totals);
        self.batch_count += 1;
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

/// The answer entry and its addenda.
fn records(answer: &EntryAnswer, trace: TraceNumber) -> Result<(EntryDetail, Addenda), NachaError> {
    let o = &answer.original;
    let original_odfi = routing_of(&o.trace.odfi())?;
    let (amount_cents, addenda) = match &answer.kind {
        AnswerKind::Return { code, date_of_death, information } => (
            o.amount_cents,
            Addenda::Return(ReturnAddenda {
                return_reason_code: code.clone(),
                original_trace: o.trace,
                date_of_death: *date_of_death,
                original_rdfi: o.rdfi.institution().to_owned(),
                addenda_information: information.clone(),
                trace,
            }),
        ),
        AnswerKind::Change { code, corrected_data } => (
            0,
            Addenda::Notification(NotificationAddenda {
                change_code: code.clone(),
                original_trace: o.trace,
                original_rdfi: o.rdfi.institution().to_owned(),
                corrected_data: corrected_data.clone(),
                trace,
            }),
        ),
    };
    let detail = EntryDetail {
        transaction_code: o.transaction_code.answer_of(),
        rdfi: original_odfi,
        account_number: o.account_number.clone(),
        amount_cents,
        identification: o.identification.clone(),
        receiver_name: o.receiver_name.clone(),
        discretionary_data: String::new(),
        addenda_count: 1,
        trace,
    };
    Ok((detail, addenda))
}

/// The routing number of an 8-digit DFI identification: the ABA check digit appended.
pub fn routing_of(institution: &str) -> Result<AbaRoutingNumber, NachaError> {
    let digits: Vec<u32> = institution.chars().filter_map(|c| c.to_digit(10)).collect();
    if digits.len() != 8 || institution.len() != 8 {
        return Err(NachaError::structure(format!("{institution:?} is not an 8-digit DFI identification")));
    }
    let weighted: u32 = digits.iter().zip([3, 7, 1, 3, 7, 1, 3, 7]).map(|(d, w)| d * w).sum();
    let check = (10 - weighted % 10) % 10;
    AbaRoutingNumber::parse("routing_number", &format!("{institution}{check}"))
        .map_err(|_| NachaError::structure(format!("{institution} has no valid routing number")))
}

#[cfg(test)]
pub(crate) mod tests {
    use time::macros::date;

    use super::super::codes::{AccountType, EntryDirection};
    use super::super::testing::{aba, header};
    use super::*;

    pub(crate) fn original(sequence: u32, direction: EntryDirection, cents: u64) -> OriginalEntry {
        OriginalEntry {
            sec: SecCode::Ppd,
            company_name: "ACME CORP".into(),
            company_id: "1234567890".into(),
            entry_description: "PAYROLL".into(),
            transaction_code: TransactionCode::live(AccountType::Checking, direction),
            rdfi: aba("121141822"),
            account_number: "10012".into(),
            amount_cents: cents,
            identification: "ORDER1".into(),
            receiver_name: "JANE DOE".into(),
            trace: TraceNumber::new("02100002", sequence).unwrap(),
        }
    }

    pub(crate) fn returned(sequence: u32, code: &str) -> EntryAnswer {
        EntryAnswer {
            original: original(sequence, EntryDirection::Credit, 12_500),
            kind: AnswerKind::Return { code: code.into(), date_of_death: None, information: String::new() },
        }
    }

    pub(crate) fn write(answers: &[EntryAnswer]) -> String {
        let mut writer = AnswerWriter::new(Vec::new(), &header(), date!(2026 - 07 - 06)).unwrap();
        for answer in answers {
            writer.push(answer).unwrap();
        }
        String::from_utf8(writer.finish().unwrap().0).unwrap()
    }

    /// A return, a death return with its date and a notification of change.
    pub(crate) fn sample() -> String {
        let dead = EntryAnswer {
            original: original(2, EntryDirection::Debit, 700),
            kind: AnswerKind::Return { code: "R15".into(), date_of_death: Some(date!(2026 - 05 - 01)), information: "DECEASED".into() },
        };
        let change = EntryAnswer {
            original: original(3, EntryDirection::Credit, 300),
            kind: AnswerKind::Change { code: "C01".into(), corrected_data: "99887766".into() },
        };
        write(&[returned(1, "R01"), dead, change])
    }

    #[test]
    fn b7_return_entries_carry_return_codes_the_original_odfi_and_addenda_99() {
        let text = sample();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len() % 10, 0);
        assert_eq!(&lines[1][50..53], "PPD", "the original batch's SEC code");
        assert_eq!(&lines[1][79..87], "12114182", "the batch ODFI is the returning bank");
        assert_eq!(&lines[2][1..12], "21021000021", "code 21 for a credit, to the original ODFI with its check digit");
        assert_eq!(&lines[2][29..39], "0000012500");
        assert_eq!(&lines[3][..18], "799R01021000020000", "addenda 99, code, original trace");
        assert_eq!(&lines[3][79..94], &lines[2][79..94], "the addenda carries its entry's trace");
        assert_eq!(&lines[4][1..3], "26", "code 26 for a debit");
        assert_eq!(&lines[5][21..27], "260501", "date of death");
        assert_eq!(&lines[7][50..53], "COR", "a notification of change opens a COR batch");
        assert_eq!((&lines[8][1..3], &lines[8][29..39]), ("21", "0000000000"), "zero amount");
    }

    /// The framings banks' systems send read as the blocked file does; a record that is not a
    /// record still refuses the file.
    #[test]
    fn b5_nacha_answers_read_whatever_the_framing() {
        let blocked = sample();
        let expected = read(blocked.as_bytes()).unwrap();
        let lines: Vec<&str> = blocked.lines().collect();
        let unpadded: Vec<&str> = lines.iter().copied().filter(|l| *l != "9".repeat(RECORD_LEN)).collect();
        let variants = [
            ("a blank line after", format!("{blocked}\n")),
            ("a DOS end-of-file byte", format!("{blocked}\u{1a}")),
            ("no line breaks", lines.concat()),
            ("no line breaks, unblocked and the last record trimmed", unpadded.concat().trim_end().to_owned()),
            ("blank lines after", format!("{blocked}\n  \n\n")),
            ("CRLF", lines.join("\r\n")),
            ("unblocked", unpadded.join("\n")),
            ("trailing spaces trimmed", lines.iter().map(|l| l.trim_end()).collect::<Vec<_>>().join("\n")),
            ("a space added", lines.iter().map(|l| format!("{l} ")).collect::<Vec<_>>().join("\n")),
        ];
        for (what, text) in variants {
            assert_eq!(read(text.as_bytes()).map(|f| f.answers), Ok(expected.answers.clone()), "{what}");
        }
        let long = blocked.replacen('\n', "X\n", 1);
        assert!(read(long.as_bytes()).is_err(), "a 95-character record is not a record");
    }

    #[test]
    fn b5_nacha_returns_and_changes_read_back() {
        let file = read(sample().as_bytes()).unwrap();
        assert_eq!(file.format, AnswerFormat::NachaReturns);
        assert_eq!(
            file.answers,
            [
                Answer::Return(AchReturn {
                    original_trace_number: "021000020000001".into(),
                    code: "R01".into(),
                    amount: 12_500,
                    addenda_information: None,
                    date_of_death: None
                }),
                Answer::Return(AchReturn {
                    original_trace_number: "021000020000002".into(),
                    code: "R15".into(),
                    amount: 700,
                    addenda_information: Some("DECEASED".into()),
                    date_of_death: Some("2026-05-01".into())
                }),
                Answer::Correction(AchCorrection {
                    original_trace_number: "021000020000003".into(),
                    code: "C01".into(),
                    corrected_data: "99887766".into()
                }),
            ]
        );
    }

    #[test]
    fn b5_a_payment_file_or_one_bad_record_refuses_the_whole_file() {
        let payment = crate::bank::formats::nacha::NachaFile::group(
            header(),
            [(
                super::super::testing::spec(SecCode::Ppd, date!(2026 - 07 - 03)),
                super::super::testing::entry(EntryDirection::Credit, "121141822", 100, &[]),
            )],
        )
        .to_text()
        .unwrap();
        let err = read(payment.as_bytes()).unwrap_err();
        assert_eq!(err.at, "line 3");
        assert!(err.message.contains("not an answer file"), "{err}");
        let text = sample();
        let bad_code = text.replacen("799R15", "799X15", 1);
        assert_eq!(read(bad_code.as_bytes()).unwrap_err().at, "line 6");
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines[3].replace_range(79..94, "121141820000009");
        let err = read((lines.join("\n") + "\n").as_bytes()).unwrap_err();
        assert!(err.message.contains("is not its entry's"), "{err}");
        assert!(read(b"101\xff").is_err());
    }

    #[test]
    fn routing_numbers_get_their_check_digit() {
        assert_eq!(routing_of("02100002").unwrap().as_str(), "021000021");
        assert_eq!(routing_of("12114182").unwrap().as_str(), "121141822");
        assert!(routing_of("1211418").is_err() && routing_of("1211418x").is_err());
    }
}
