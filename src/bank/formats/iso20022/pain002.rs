//! `pain.002` Customer Payment Status Reports (SPEC B5): the reader, for versions `.03`, `.10`
//! and `.12` (the root namespace decides; the elements read are the same in all three), and the
//! writer the sandbox bank answers with (B7), in `.03` or `.12`, the versions whose official
//! XSDs `tests/bank_answers.rs` validates against (no PyPI package ships `.10`'s).
//!
//! Reading: one [`PaymentStatus`] per `OrgnlPmtInfAndSts/TxInfAndSts`, in file order, with
//! `OrgnlEndToEndId`, `TxSts` folded to a [`StatusOutcome`] (`RJCT` rejected; `ACSC` and `ACCC`
//! settled; any other code accepted, nothing moves), and the first `StsRsnInf`'s `Rsn/Cd` (or
//! `Rsn/Prtry`) and `AddtlInf` lines joined by a space. A transaction without `TxSts` takes its
//! payment group's `PmtInfSts`, else the message's `GrpSts`; a transaction without
//! `OrgnlEndToEndId` cannot name its order and refuses the file.
//!
//! **Group-level rejection.** A report whose `GrpSts` or `PmtInfSts` is `RJCT` and that lists no
//! `TxInfAndSts` under it rejects orders it does not name. Payrail cannot tell which orders
//! those are from the file alone, so the reader refuses the file with an error naming the
//! original message (`OrgnlMsgId`) or payment group (`OrgnlPmtInfId`) and the reason code: the
//! inbound poller moves it aside and emits an event, and an operator fails the orders of that
//! file by hand. Guessing (failing every order of the original file) would be wrong for a
//! partial rejection, and an empty list would silently drop a rejection. A group-level status
//! that is not a rejection (an acknowledgement such as `ACTC` or `ACCP`) with no transactions
//! reads as an empty list: it moves nothing.

use std::io::Write;

use time::OffsetDateTime;
use time::macros::format_description;

use super::read::{Visitor, walk};
use super::xml::XmlWriter;
use crate::bank::formats::answer_error::AnswerError;
use crate::domain::bank_answer::{Answer, AnswerFile, AnswerFormat, PaymentStatus, StatusOutcome};
use crate::error::{Error, Result};

const ROOT: &str = "Document/CstmrPmtStsRpt";

/// Reads a `pain.002` report.
pub fn read(bytes: &[u8]) -> std::result::Result<AnswerFile, AnswerError> {
    let mut reader = Reader::default();
    walk(bytes, &mut reader).map_err(|e| AnswerError::xml(AnswerFormat::Pain002, e))?;
    if !reader.seen_root {
        return Err(AnswerError::new(Some(AnswerFormat::Pain002), ROOT, "the report has no CstmrPmtStsRpt"));
    }
    Ok(AnswerFile { format: AnswerFormat::Pain002, answers: reader.answers })
}

/// ISO 20022's payment statuses (ExternalPaymentTransactionStatus1Code) that say the payment is
/// received, accepted or under way: nothing moves yet.
const UNDER_WAY: &[&str] =
    &["ACCP", "ACSP", "ACTC", "ACWC", "ACWP", "ACFC", "ACCR", "ACIS", "ACPD", "PART", "PATC", "PDNG", "PRES", "RCVD", "BLCK", "CPUC"];

/// A transaction status code (in any case) folded to what it does to an order; `None` for a
/// code that is not one of ISO 20022's, which refuses the file rather than being read as an
/// acceptance. A cancellation (`CANC`) means the money will not move, as a rejection does.
pub fn outcome_of(code: &str) -> Option<StatusOutcome> {
    let code = code.trim().to_ascii_uppercase();
    match code.as_str() {
        "RJCT" | "CANC" => Some(StatusOutcome::Rejected),
        "ACSC" | "ACCC" => Some(StatusOutcome::Settled),
        c if UNDER_WAY.contains(&c) => Some(StatusOutcome::Accepted),
        _ => None,
    }
}

#[derive(Default)]
struct Reader {
    seen_root: bool,
    answers: Vec<Answer>,
    original_message_id: String,
    group_status: Option<String>,
    group_reason: Option<String>,
    group_has_transactions: bool,
    payment_group_id: String,
    payment_group_status: Option<String>,
    payment_group_reason: Option<String>,
    payment_group_transactions: usize,
    tx: Transaction,
}

#[derive(Default)]
struct Transaction {
    end_to_end_id: Option<String>,
    status: Option<String>,
    reason_code: Option<String>,
    reason: Vec<String>,
    /// Reasons are read from the first `StsRsnInf` only.
    reasons_seen: usize,
}

impl Visitor for Reader {
    fn open(&mut self, path: &str) -> std::result::Result<(), String> {
        let Some(rel) = path.strip_prefix(ROOT) else {
            return if path == "Document" { Ok(()) } else { Err("not a pain.002 report: the root must be Document/CstmrPmtStsRpt".into()) };
        };
        self.seen_root = true;
        match rel {
            "/OrgnlPmtInfAndSts" => {
                self.payment_group_id.clear();
                self.payment_group_status = None;
                self.payment_group_reason = None;
                self.payment_group_transactions = 0;
            }
            "/OrgnlPmtInfAndSts/TxInfAndSts" => self.tx = Transaction::default(),
            "/OrgnlPmtInfAndSts/TxInfAndSts/StsRsnInf" => self.tx.reasons_seen += 1,
            _ => {}
        }
        Ok(())
    }

    fn close(&mut self, path: &str, text: &str, _: Option<&str>) -> std::result::Result<(), String> {
        let Some(rel) = path.strip_prefix(ROOT) else { return Ok(()) };
        let value = || (!text.is_empty()).then(|| text.to_owned());
        let first_reason = self.tx.reasons_seen <= 1;
        match rel {
            "/OrgnlGrpInfAndSts/OrgnlMsgId" => self.original_message_id = text.to_owned(),
            "/OrgnlGrpInfAndSts/GrpSts" => self.group_status = value(),
            "/OrgnlGrpInfAndSts/StsRsnInf/Rsn/Cd" | "/OrgnlGrpInfAndSts/StsRsnInf/Rsn/Prtry" => {
                self.group_reason = self.group_reason.take().or_else(value)
            }
            "/OrgnlPmtInfAndSts/OrgnlPmtInfId" => self.payment_group_id = text.to_owned(),
            "/OrgnlPmtInfAndSts/PmtInfSts" => self.payment_group_status = value(),
            "/OrgnlPmtInfAndSts/StsRsnInf/Rsn/Cd" | "/OrgnlPmtInfAndSts/StsRsnInf/Rsn/Prtry" => {
                self.payment_group_reason = self.payment_group_reason.take().or_else(value)
            }
            "/OrgnlPmtInfAndSts/TxInfAndSts/OrgnlEndToEndId" => self.tx.end_to_end_id = value(),
            "/OrgnlPmtInfAndSts/TxInfAndSts/TxSts" => self.tx.status = value(),
            "/OrgnlPmtInfAndSts/TxInfAndSts/StsRsnInf/Rsn/Cd" | "/OrgnlPmtInfAndSts/TxInfAndSts/StsRsnInf/Rsn/Prtry" if first_reason => {
                self.tx.reason_code = value()
            }
            "/OrgnlPmtInfAndSts/TxInfAndSts/StsRsnInf/AddtlInf" if first_reason && !text.is_empty() => self.tx.reason.push(text.to_owned()),
            "/OrgnlPmtInfAndSts/TxInfAndSts" => self.close_transaction()?,
            "/OrgnlPmtInfAndSts" => self.close_payment_group()?,
            "" => self.close_report()?,
            _ => {}
        }
        Ok(())
    }
}

impl Reader {
    fn close_transaction(&mut self) -> std::result::Result<(), String> {
        let tx = std::mem::take(&mut self.tx);
        let end_to_end_id = tx.end_to_end_id.ok_or("a transaction status without OrgnlEndToEndId cannot name its payment order")?;
        let status = tx.status.or_else(|| self.payment_group_status.clone()).or_else(|| self.group_status.clone()).ok_or_else(|| {
            format!("transaction {end_to_end_id} has no TxSts, and neither its payment group nor the message gives a status")
        })?;
        let reason = (!tx.reason.is_empty()).then(|| tx.reason.join(" "));
        let outcome = outcome_of(&status)
            .ok_or_else(|| format!("transaction {end_to_end_id}: {status:?} is not an ISO 20022 payment status code"))?;
        let cancelled = status.trim().eq_ignore_ascii_case("CANC");
        let reason_code = if cancelled { tx.reason_code.or_else(|| Some("CANC".to_owned())) } else { tx.reason_code };
        let reason = if cancelled { reason.or_else(|| Some("cancelled by the bank".to_owned())) } else { reason };
        self.answers.push(Answer::Status(PaymentStatus { end_to_end_id, outcome, reason_code, reason }));
        self.payment_group_transactions += 1;
        self.group_has_transactions = true;
        Ok(())
    }

    fn close_payment_group(&mut self) -> std::result::Result<(), String> {
        if self.payment_group_status.as_deref() == Some("RJCT") && self.payment_group_transactions == 0 {
            return Err(format!(
                "payment group {} of message {} is rejected as a whole (reason {}) without naming its transactions: \
                 Payrail cannot tell which orders failed; fail them by hand",
                self.payment_group_id,
                self.original_message_id,
                self.payment_group_reason.as_deref().unwrap_or("not given")
            ));
        }
        Ok(())
    }

    fn close_report(&mut self) -> std::result::Result<(), String> {
        if self.group_status.as_deref() == Some("RJCT") && !self.group_has_transactions {
            return Err(format!(
                "message {} is rejected as a whole (reason {}) without naming its transactions: \
                 Payrail cannot tell which orders failed; fail them by hand",
                self.original_message_id,
                self.group_reason.as_deref().unwrap_or("not given")
            ));
        }
        Ok(())
    }
}

/// Which `pain.002` version to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pain002Version {
    V03,
    V12,
}

impl Pain002Version {
    /// The root namespace written (and the XSD the tests validate against).
    pub fn namespace(self) -> &'static str {
        match self {
            Pain002Version::V03 => "urn:iso:std:iso:20022:tech:xsd:pain.002.001.03",
            Pain002Version::V12 => "urn:iso:std:iso:20022:tech:xsd:pain.002.001.12",
        }
    }
}

/// The report's header: its own id and time, and the message it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusReportHeader {
    pub version: Pain002Version,
    /// `GrpHdr/MsgId`: up to 35 characters.
    pub message_id: String,
    pub created_at: OffsetDateTime,
    /// `OrgnlMsgId`: the `MsgId` of the `pain.001` answered.
    pub original_message_id: String,
    /// `OrgnlMsgNmId`, such as `pain.001.001.09`.
    pub original_message_name: String,
    /// `GrpSts`, such as `ACCP`, `PART` or `RJCT`, when the report states one.
    pub group_status: Option<String>,
}

/// One transaction's status, under its original payment group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionStatus {
    /// `OrgnlPmtInfId`: consecutive statuses of one group are written under one
    /// `OrgnlPmtInfAndSts`.
    pub original_payment_information_id: String,
    pub end_to_end_id: String,
    /// `TxSts`: `ACCP`, `ACSC`, `RJCT`, ... (the four-letter ISO code).
    pub status: String,
    /// `StsRsnInf/Rsn/Cd`, such as `AC04` (at most 4 characters).
    pub reason_code: Option<String>,
    /// `StsRsnInf/AddtlInf` (at most 105 characters).
    pub reason: Option<String>,
}

/// Streams a `pain.002`: [`Pain002Writer::begin`], [`Pain002Writer::add`] per transaction,
/// [`Pain002Writer::finish`].
pub struct Pain002Writer<W: Write> {
    xml: XmlWriter<W>,
    open_group: Option<String>,
}

impl<W: Write> Pain002Writer<W> {
    /// Writes the document start, the group header and the original group's information.
    pub fn begin(out: W, header: &StatusReportHeader) -> Result<Self> {
        for (field, value) in [("message_id", &header.message_id), ("original_message_id", &header.original_message_id)] {
            super::text::check_id(field, value, super::text::Charset::Xml)?;
        }
        let created = header.created_at.to_offset(time::UtcOffset::UTC);
        let created = created.format(format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z")).map_err(io_error_of)?;
        let mut xml = XmlWriter::new(out).map_err(io_error)?;
        (|| {
            xml.open_with("Document", &[("xmlns", header.version.namespace())])?;
            xml.open("CstmrPmtStsRpt")?;
            xml.open("GrpHdr")?;
            xml.leaf("MsgId", &header.message_id)?;
            xml.leaf("CreDtTm", &created)?;
            xml.close("GrpHdr")?;
            xml.open("OrgnlGrpInfAndSts")?;
            xml.leaf("OrgnlMsgId", &header.original_message_id)?;
            xml.leaf("OrgnlMsgNmId", &header.original_message_name)?;
            if let Some(status) = &header.group_status {
                xml.leaf("GrpSts", status)?;
            }
            xml.close("OrgnlGrpInfAndSts")
        })()
        .map_err(io_error)?;
        Ok(Pain002Writer { xml, open_group: None })
    }

    /// Writes one `TxInfAndSts`, opening its `OrgnlPmtInfAndSts` when the group changes.
    pub fn add(&mut self, status: &TransactionStatus) -> Result<()> {
        check_status(status)?;
        let xml = &mut self.xml;
        if self.open_group.as_deref() != Some(status.original_payment_information_id.as_str()) {
            if self.open_group.is_some() {
                xml.close("OrgnlPmtInfAndSts").map_err(io_error)?;
            }
            xml.open("OrgnlPmtInfAndSts").map_err(io_error)?;
            xml.leaf("OrgnlPmtInfId", &status.original_payment_information_id).map_err(io_error)?;
            self.open_group = Some(status.original_payment_information_id.clone());
        }
        write_transaction(xml, status).map_err(io_error)
    }

    /// Closes the document and hands back the destination, flushed.
    pub fn finish(mut self) -> Result<W> {
        if self.open_group.is_some() {
            self.xml.close("OrgnlPmtInfAndSts").map_err(io_error)?;
        }
        self.xml.close("CstmrPmtStsRpt").map_err(io_error)?;
        self.xml.close("Document").map_err(io_error)?;
        self.xml.finish().map_err(io_error)
    }
}

fn check_status(status: &TransactionStatus) -> Result<()> {
    use super::text::{Charset, check, check_id};
    check_id("original_payment_information_id", &status.original_payment_information_id, Charset::Xml)?;
    check_id("end_to_end_id", &status.end_to_end_id, Charset::Xml)?;
    if status.status.len() != 4 || !status.status.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(Error::invalid("status", format!("TxSts is a four-letter code (got {:?})", status.status)));
    }
    if let Some(code) = &status.reason_code {
        check("reason_code", code, 4, Charset::Xml)?;
    }
    if let Some(reason) = &status.reason {
        check("reason", reason, 105, Charset::Xml)?;
    }
    Ok(())
}

fn write_transaction<W: Write>(xml: &mut XmlWriter<W>, status: &TransactionStatus) -> std::io::Result<()> {
    xml.open("TxInfAndSts")?;
    xml.leaf("OrgnlEndToEndId", &status.end_to_end_id)?;
    xml.leaf("TxSts", &status.status)?;
    if status.reason_code.is_some() || status.reason.is_some() {
        xml.open("StsRsnInf")?;
        if let Some(code) = &status.reason_code {
            xml.open("Rsn")?;
            xml.leaf("Cd", code)?;
            xml.close("Rsn")?;
        }
        if let Some(reason) = &status.reason {
            xml.leaf("AddtlInf", reason)?;
        }
        xml.close("StsRsnInf")?;
    }
    xml.close("TxInfAndSts")
}

fn io_error(err: std::io::Error) -> Error {
    Error::internal(format!("writing a pain.002 file: {err}"))
}

fn io_error_of(err: impl std::fmt::Display) -> Error {
    Error::internal(format!("writing a pain.002 file: {err}"))
}

#[cfg(test)]
pub(crate) mod tests {
    use time::macros::datetime;

    use super::*;

    /// A `pain.002.001.03` as a bank sends it: one rejection with a reason, one acceptance, one
    /// settlement, and a second payment group.
    pub(crate) const SAMPLE_03: &str = include_str!("../../../../compat/iso20022/samples/pain.002.001.03-bank.xml");

    fn status(id: &str, outcome: StatusOutcome, code: Option<&str>, reason: Option<&str>) -> Answer {
        Answer::Status(PaymentStatus {
            end_to_end_id: id.into(),
            outcome,
            reason_code: code.map(Into::into),
            reason: reason.map(Into::into),
        })
    }

    #[test]
    fn b5_statuses_are_read_in_any_case_a_cancellation_fails_and_an_unknown_code_refuses_the_file() {
        assert_eq!(outcome_of("rjct"), Some(StatusOutcome::Rejected));
        assert_eq!(outcome_of("CANC"), Some(StatusOutcome::Rejected), "cancelled: the money will not move");
        assert_eq!(outcome_of(" acsc "), Some(StatusOutcome::Settled));
        assert_eq!(outcome_of("ACSP"), Some(StatusOutcome::Accepted));
        assert_eq!(outcome_of("DONE"), None);
        let (first, rest) = SAMPLE_03.split_once("<TxSts>").unwrap();
        let (_, rest) = rest.split_once("</TxSts>").unwrap();
        let odd = format!("{first}<TxSts>DONE</TxSts>{rest}");
        let err = read(odd.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("\"DONE\" is not an ISO 20022 payment status code"), "{err}");
        let cancelled = format!("{first}<TxSts>CANC</TxSts>{rest}");
        let Answer::Status(status) = &read(cancelled.as_bytes()).unwrap().answers[0] else { panic!("a status first") };
        assert_eq!(status.outcome, StatusOutcome::Rejected);
        assert!(status.reason_code.is_some(), "{status:?}");
    }

    #[test]
    fn b5_pain002_03_reads_each_transaction_status() {
        let file = read(SAMPLE_03.as_bytes()).unwrap();
        assert_eq!(file.format, AnswerFormat::Pain002);
        assert_eq!(
            file.answers,
            [
                status(
                    "01920dfa78547011a1ff441cc96a09e9",
                    StatusOutcome::Rejected,
                    Some("AC04"),
                    Some("Account closed at the beneficiary & bank")
                ),
                status("01920dfa78547011a1ff441cc96a09ea", StatusOutcome::Accepted, None, None),
                status("01920dfa78547011a1ff441cc96a09eb", StatusOutcome::Settled, None, None),
            ]
        );
    }

    #[test]
    fn b5_pain002_group_rejection_without_transactions_refuses_the_file() {
        let group = SAMPLE_03.replace("<GrpSts>PART</GrpSts>", "<GrpSts>RJCT</GrpSts><StsRsnInf><Rsn><Cd>FF01</Cd></Rsn></StsRsnInf>");
        let start = group.find("<OrgnlPmtInfAndSts>").unwrap();
        let end = group.rfind("</OrgnlPmtInfAndSts>").unwrap() + "</OrgnlPmtInfAndSts>".len();
        let whole = format!("{}{}", &group[..start], &group[end..]);
        let err = read(whole.as_bytes()).unwrap_err();
        assert!(err.message.contains("message pf_0192a is rejected as a whole (reason FF01)"), "{err}");
        assert!(err.at.starts_with("Document/CstmrPmtStsRpt"), "{err}");
        let acknowledged = whole.replace("<GrpSts>RJCT</GrpSts>", "<GrpSts>ACTC</GrpSts>");
        assert_eq!(read(acknowledged.as_bytes()).unwrap().answers, [], "an acknowledgement moves nothing");
        let empty_group = SAMPLE_03.replace(
            "<PmtInfSts>ACSC</PmtInfSts>\n      <TxInfAndSts>\n        <OrgnlEndToEndId>01920dfa78547011a1ff441cc96a09eb</OrgnlEndToEndId>\n      </TxInfAndSts>",
            "<PmtInfSts>RJCT</PmtInfSts>",
        );
        assert!(read(empty_group.as_bytes()).unwrap_err().message.contains("payment group G2 of message pf_0192a"));
    }

    #[test]
    fn b5_pain002_a_transaction_without_end_to_end_id_refuses_the_file() {
        let bad = SAMPLE_03.replace("<OrgnlEndToEndId>01920dfa78547011a1ff441cc96a09ea</OrgnlEndToEndId>", "");
        let err = read(bad.as_bytes()).unwrap_err();
        assert!(err.at.starts_with("Document/CstmrPmtStsRpt/OrgnlPmtInfAndSts/TxInfAndSts (line "), "{err}");
    }

    #[test]
    fn b7_pain002_writer_round_trips_through_the_reader() {
        for version in [Pain002Version::V03, Pain002Version::V12] {
            let header = StatusReportHeader {
                version,
                message_id: "SANDBOX-1".into(),
                created_at: datetime!(2026-07-02 16:05 UTC),
                original_message_id: "pf_1".into(),
                original_message_name: "pain.001.001.09".into(),
                group_status: Some("PART".into()),
            };
            let mut writer = Pain002Writer::begin(Vec::new(), &header).unwrap();
            let tx = |id: &str, status: &str, code: Option<&str>, reason: Option<&str>| TransactionStatus {
                original_payment_information_id: "G1".into(),
                end_to_end_id: id.into(),
                status: status.into(),
                reason_code: code.map(Into::into),
                reason: reason.map(Into::into),
            };
            writer.add(&tx("a1", "RJCT", Some("AC04"), Some("Closed <account>"))).unwrap();
            writer.add(&tx("a2", "ACSC", None, None)).unwrap();
            assert!(writer.add(&tx("a3", "rejected", None, None)).is_err());
            let bytes = writer.finish().unwrap();
            let file = read(&bytes).unwrap();
            assert_eq!(
                file.answers,
                [
                    status("a1", StatusOutcome::Rejected, Some("AC04"), Some("Closed <account>")),
                    status("a2", StatusOutcome::Settled, None, None)
                ]
            );
        }
    }
}
