//! The `pain.001.001.09` writer: a Customer Credit Transfer Initiation streamed straight to any
//! `std::io::Write`, one transaction at a time, so a file of 100,000 orders is never in memory.
//!
//! The format puts each count and control sum (`NbOfTxs`, `CtrlSum`) in a header BEFORE the
//! transactions it counts, both for the whole message (`GrpHdr`) and for each payment group
//! (`PmtInf`). The caller therefore declares them up front, computed in a first pass over a
//! replayable source (for a cut-off: an aggregate query grouped like the file, then the
//! ordered rows), and [`Pain001Writer`] checks as it goes that what it wrote adds up to what was
//! declared: a mismatch fails [`Pain001Writer::next_group`] or [`Pain001Writer::finish`], and
//! the caller discards the file (it is written to a temporary name and only renamed once
//! `finish` succeeds). [`write_replayable`] does both passes over a closure that replays the
//! source, holding only one [`Totals`] per group.
//!
//! One file carries one rail (SPEC B2: one file per rail per cut-off); each group and each
//! transfer is checked by `rules` before a byte of it is written, with an error naming the
//! field (and the order), so a refused file never holds half a transaction.

use std::collections::HashSet;
use std::io::Write;

use time::OffsetDateTime;
use time::macros::format_description;

use super::rules;
use super::text;
use super::xml::XmlWriter;
use super::{Account, Agent, ChargeBearer, Counterpart, CreditTransfer, Party, PaymentGroup, Rail, end_to_end_id};
use crate::domain::money::{Amount, Currency};
use crate::error::{Error, Result};

const NAMESPACE: &str = "urn:iso:std:iso:20022:tech:xsd:pain.001.001.09";
/// The XSD's `DecimalNumber` (the type of `CtrlSum`) holds at most 18 digits.
const CONTROL_SUM_DIGITS_MAX: usize = 18;
/// Control sums are kept in units of 10^-5, the finest an ISO 20022 amount is written in.
const SUM_SCALE: u32 = 5;

/// What the group header says about the whole file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageHeader {
    /// `MsgId`: unique per file and bank, up to 35 characters (for example the file's id).
    pub message_id: String,
    /// `CreDtTm`, written in UTC.
    pub created_at: OffsetDateTime,
    /// `InitgPty/Nm`: the connection's `[iso20022] initiating_party_name`.
    pub initiating_party_name: String,
    /// The file's rail; every group in it must be of this rail.
    pub rail: Rail,
}

/// A count of transactions and their control sum: the sum of their amounts, each in its own
/// currency's units, as ISO 20022 defines `CtrlSum`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    count: u64,
    /// The sum in units of 10^-[`SUM_SCALE`].
    sum: u128,
    /// Decimals written: the largest exponent of the currencies added.
    decimals: u8,
}

impl Totals {
    /// Counts one transaction of `amount` in `currency`; refused if the sum no longer fits the
    /// XSD's 18 digits or the currency has more decimals than an amount may.
    pub fn add(&mut self, amount: Amount, currency: Currency) -> Result<()> {
        let exponent = u32::from(currency.exponent());
        if exponent > SUM_SCALE {
            return Err(Error::invalid("currency", format!("{currency} has more decimals than an ISO 20022 amount holds")));
        }
        let units = u128::try_from(amount.minor_units()).unwrap_or_default() * 10u128.pow(SUM_SCALE - exponent);
        let next = Totals { count: self.count + 1, sum: self.sum + units, decimals: self.decimals.max(currency.exponent()) };
        let digits = next.control_sum().bytes().filter(u8::is_ascii_digit).count();
        if digits > CONTROL_SUM_DIGITS_MAX {
            return Err(Error::invalid("amount", "the file's control sum would exceed the 18 digits ISO 20022 allows: split the file"));
        }
        *self = next;
        Ok(())
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// `CtrlSum` as written: `125.00`, with as many decimals as the widest currency added.
    pub fn control_sum(&self) -> String {
        let scale = 10u128.pow(SUM_SCALE);
        let whole = self.sum / scale;
        if self.decimals == 0 {
            return whole.to_string();
        }
        let fraction = (self.sum % scale) / 10u128.pow(SUM_SCALE - u32::from(self.decimals));
        format!("{whole}.{fraction:0width$}", width = usize::from(self.decimals))
    }
}

/// A `PmtInf` being written: what its header declared and what followed so far.
struct OpenGroup {
    id: String,
    rail: Rail,
    declared: Totals,
    written: Totals,
}

/// Streams one pain.001 message: [`Pain001Writer::begin`], then for each group
/// [`Pain001Writer::next_group`] followed by its transfers ([`Pain001Writer::add`]), then
/// [`Pain001Writer::finish`].
pub struct Pain001Writer<W: Write> {
    xml: XmlWriter<W>,
    rail: Rail,
    declared: Totals,
    written: Totals,
    group: Option<OpenGroup>,
}

impl<W: Write> Pain001Writer<W> {
    /// Writes the document start and the group header with the declared `totals`.
    pub fn begin(out: W, header: &MessageHeader, totals: Totals) -> Result<Self> {
        let charset = header.rail.charset();
        text::check_id("message_id", &header.message_id, charset)?;
        text::check("initiating_party_name", &header.initiating_party_name, header.rail.name_max(), charset)?;
        if totals.count == 0 {
            return Err(Error::internal("a pain.001 file needs at least one transaction"));
        }
        let mut xml = XmlWriter::new(out).map_err(io_error)?;
        write_header(&mut xml, header, &totals).map_err(io_error)?;
        Ok(Pain001Writer { xml, rail: header.rail, declared: totals, written: Totals::default(), group: None })
    }

    /// Closes the open group (checking its totals) and opens `group` with its declared `totals`.
    pub fn next_group(&mut self, group: &PaymentGroup, totals: Totals) -> Result<()> {
        if group.rail != self.rail {
            return Err(Error::internal(format!("payment group {} is {:?} in a {:?} file", group.id, group.rail, self.rail)));
        }
        rules::check_group(group).map_err(|err| in_group(err, &group.id))?;
        if totals.count == 0 {
            return Err(Error::internal(format!("payment group {} declares no transaction", group.id)));
        }
        self.close_group()?;
        write_group_start(&mut self.xml, group, &totals).map_err(io_error)?;
        self.group = Some(OpenGroup { id: group.id.clone(), rail: group.rail, declared: totals, written: Totals::default() });
        Ok(())
    }

    /// Writes one transfer into the open group.
    pub fn add(&mut self, transfer: &CreditTransfer) -> Result<()> {
        let Some(group) = self.group.as_mut() else {
            return Err(Error::internal("a transfer was added before any payment group"));
        };
        let in_this_order = |err| in_order(err, transfer);
        rules::check_transfer(group.rail, transfer).map_err(in_this_order)?;
        let end_to_end = end_to_end_id(&transfer.order_id)?;
        group.written.add(transfer.amount, transfer.currency).map_err(in_this_order)?;
        self.written.add(transfer.amount, transfer.currency).map_err(in_this_order)?;
        write_transfer(&mut self.xml, group.rail, transfer, &end_to_end).map_err(io_error)
    }

    /// Closes the document once everything written matches what was declared, and hands back
    /// the destination (flushed).
    pub fn finish(mut self) -> Result<W> {
        self.close_group()?;
        check_totals("the file", &self.declared, &self.written)?;
        self.xml.close("CstmrCdtTrfInitn").map_err(io_error)?;
        self.xml.close("Document").map_err(io_error)?;
        self.xml.finish().map_err(io_error)
    }

    fn close_group(&mut self) -> Result<()> {
        let Some(group) = self.group.take() else { return Ok(()) };
        check_totals(&format!("payment group {}", group.id), &group.declared, &group.written)?;
        self.xml.close("PmtInf").map_err(io_error)
    }
}

/// One element of a replayable source: a group starts, or a transfer of the current group.
#[derive(Debug, Clone)]
pub enum Item {
    Group(PaymentGroup),
    Transfer(CreditTransfer),
}

/// Writes a whole file from `source`, a closure that yields the same items each time it is
/// called (a query run twice, a file read twice): the first pass computes the totals the
/// headers need, the second writes. Only one [`Totals`] per group is held. Returns the
/// destination and the file's totals.
pub fn write_replayable<W, I, F>(out: W, header: &MessageHeader, source: F) -> Result<(W, Totals)>
where
    W: Write,
    I: IntoIterator<Item = Result<Item>>,
    F: Fn() -> I,
{
    let (groups, totals) = first_pass(source())?;
    let mut writer = Pain001Writer::begin(out, header, totals)?;
    let mut declared = groups.into_iter();
    for item in source() {
        match item? {
            Item::Group(group) => match declared.next() {
                Some((id, group_totals)) if id == group.id => writer.next_group(&group, group_totals)?,
                _ => return Err(Error::internal("the source replayed different payment groups on its second pass")),
            },
            Item::Transfer(transfer) => writer.add(&transfer)?,
        }
    }
    Ok((writer.finish()?, totals))
}

fn first_pass(items: impl IntoIterator<Item = Result<Item>>) -> Result<(Vec<(String, Totals)>, Totals)> {
    let mut groups: Vec<(String, Totals)> = Vec::new();
    let mut ids = HashSet::new();
    let mut totals = Totals::default();
    for item in items {
        match item? {
            Item::Group(group) if !ids.insert(group.id.clone()) => {
                return Err(Error::internal(format!("payment group id {} appears twice in one file", group.id)));
            }
            Item::Group(group) => groups.push((group.id, Totals::default())),
            Item::Transfer(transfer) => {
                let Some((_, group_totals)) = groups.last_mut() else {
                    return Err(Error::internal("a transfer came before any payment group"));
                };
                group_totals.add(transfer.amount, transfer.currency).map_err(|err| in_order(err, &transfer))?;
                totals.add(transfer.amount, transfer.currency).map_err(|err| in_order(err, &transfer))?;
            }
        }
    }
    Ok((groups, totals))
}

fn check_totals(what: &str, declared: &Totals, written: &Totals) -> Result<()> {
    if declared == written {
        return Ok(());
    }
    Err(Error::internal(format!(
        "{what} declared {} transactions totalling {} but carried {} totalling {}: discard it",
        declared.count,
        declared.control_sum(),
        written.count,
        written.control_sum()
    )))
}

fn io_error(err: std::io::Error) -> Error {
    Error::internal(format!("writing a pain.001 file: {err}"))
}

/// The refusal `err`, saying which order it is about (the field stays the order's field).
fn in_order(err: Error, transfer: &CreditTransfer) -> Error {
    match err {
        Error::Invalid { code, parameter, message } => {
            Error::Invalid { code, parameter, message: format!("payment order {}: {message}", transfer.order_id) }
        }
        other => other,
    }
}

fn in_group(err: Error, id: &str) -> Error {
    match err {
        Error::Invalid { code, parameter, message } => {
            Error::Invalid { code, parameter, message: format!("payment group {id}: {message}") }
        }
        other => other,
    }
}

type Io = std::io::Result<()>;

fn write_header<W: Write>(xml: &mut XmlWriter<W>, header: &MessageHeader, totals: &Totals) -> Io {
    let created = header.created_at.to_offset(time::UtcOffset::UTC);
    let created = created.format(format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z")).map_err(std::io::Error::other)?;
    xml.open_with("Document", &[("xmlns", NAMESPACE)])?;
    xml.open("CstmrCdtTrfInitn")?;
    xml.open("GrpHdr")?;
    xml.leaf("MsgId", &header.message_id)?;
    xml.leaf("CreDtTm", &created)?;
    xml.leaf("NbOfTxs", &totals.count.to_string())?;
    xml.leaf("CtrlSum", &totals.control_sum())?;
    xml.open("InitgPty")?;
    xml.leaf("Nm", &header.initiating_party_name)?;
    xml.close("InitgPty")?;
    xml.close("GrpHdr")
}

fn write_group_start<W: Write>(xml: &mut XmlWriter<W>, group: &PaymentGroup, totals: &Totals) -> Io {
    xml.open("PmtInf")?;
    xml.leaf("PmtInfId", &group.id)?;
    xml.leaf("PmtMtd", "TRF")?;
    xml.leaf("NbOfTxs", &totals.count.to_string())?;
    xml.leaf("CtrlSum", &totals.control_sum())?;
    write_payment_type(xml, group)?;
    xml.open("ReqdExctnDt")?;
    xml.leaf("Dt", &group.execution_date.to_string())?;
    xml.close("ReqdExctnDt")?;
    write_party(xml, "Dbtr", &group.debtor.party)?;
    write_account(xml, "DbtrAcct", &group.debtor.account)?;
    write_agent(xml, "DbtrAgt", &group.debtor.agent)?;
    if group.rail == Rail::Sepa {
        xml.leaf("ChrgBr", ChargeBearer::FollowingServiceLevel.code())?;
    }
    Ok(())
}

fn write_payment_type<W: Write>(xml: &mut XmlWriter<W>, group: &PaymentGroup) -> Io {
    xml.open("PmtTpInf")?;
    xml.open("SvcLvl")?;
    xml.leaf("Cd", group.rail.service_level())?;
    xml.close("SvcLvl")?;
    if let Some(instrument) = group.rail.local_instrument() {
        xml.open("LclInstrm")?;
        xml.leaf("Prtry", instrument)?;
        xml.close("LclInstrm")?;
    }
    if let Some(purpose) = &group.category_purpose {
        xml.open("CtgyPurp")?;
        xml.leaf("Cd", purpose)?;
        xml.close("CtgyPurp")?;
    }
    xml.close("PmtTpInf")
}

fn write_transfer<W: Write>(xml: &mut XmlWriter<W>, rail: Rail, transfer: &CreditTransfer, end_to_end: &str) -> Io {
    xml.open("CdtTrfTxInf")?;
    xml.open("PmtId")?;
    xml.leaf("InstrId", end_to_end)?;
    xml.leaf("EndToEndId", end_to_end)?;
    xml.close("PmtId")?;
    xml.open("Amt")?;
    xml.leaf_with("InstdAmt", &[("Ccy", transfer.currency.code())], &transfer.amount.to_decimal(transfer.currency))?;
    xml.close("Amt")?;
    // SEPA states its charge bearer once, on the group (SLEV).
    if let (Some(bearer), false) = (transfer.charge_bearer, rail == Rail::Sepa) {
        xml.leaf("ChrgBr", bearer.code())?;
    }
    write_creditor(xml, &transfer.creditor)?;
    if let Some(remittance) = &transfer.remittance_information {
        xml.open("RmtInf")?;
        xml.leaf("Ustrd", remittance)?;
        xml.close("RmtInf")?;
    }
    xml.close("CdtTrfTxInf")
}

fn write_creditor<W: Write>(xml: &mut XmlWriter<W>, creditor: &Counterpart) -> Io {
    write_agent(xml, "CdtrAgt", &creditor.agent)?;
    write_party(xml, "Cdtr", &creditor.party)?;
    write_account(xml, "CdtrAcct", &creditor.account)
}

fn write_party<W: Write>(xml: &mut XmlWriter<W>, tag: &str, party: &Party) -> Io {
    xml.open(tag)?;
    xml.leaf("Nm", &party.name)?;
    if let Some(address) = party.address.as_ref().filter(|a| **a != Default::default()) {
        xml.open("PstlAdr")?;
        // The XSD's order: PstCd, TwnNm, CtrySubDvsn, Ctry, then the free lines.
        let fields = [
            ("PstCd", &address.postal_code),
            ("TwnNm", &address.locality),
            ("CtrySubDvsn", &address.region),
            ("Ctry", &address.country),
            ("AdrLine", &address.line1),
            ("AdrLine", &address.line2),
        ];
        for (name, value) in fields {
            if let Some(value) = value {
                xml.leaf(name, value)?;
            }
        }
        xml.close("PstlAdr")?;
    }
    xml.close(tag)
}

fn write_account<W: Write>(xml: &mut XmlWriter<W>, tag: &str, account: &Account) -> Io {
    xml.open(tag)?;
    xml.open("Id")?;
    match account {
        Account::Iban(iban) => xml.leaf("IBAN", iban.as_str())?,
        Account::Other(number) => {
            xml.open("Othr")?;
            xml.leaf("Id", number)?;
            xml.close("Othr")?;
        }
    }
    xml.close("Id")?;
    xml.close(tag)
}

fn write_agent<W: Write>(xml: &mut XmlWriter<W>, tag: &str, agent: &Agent) -> Io {
    xml.open(tag)?;
    xml.open("FinInstnId")?;
    if let Some(bic) = agent.bic() {
        xml.leaf("BICFI", bic.as_str())?;
    }
    if let Some(aba) = agent.aba() {
        xml.open("ClrSysMmbId")?;
        xml.open("ClrSysId")?;
        xml.leaf("Cd", "USABA")?;
        xml.close("ClrSysId")?;
        xml.leaf("MmbId", aba.as_str())?;
        xml.close("ClrSysMmbId")?;
    }
    xml.close("FinInstnId")?;
    xml.close(tag)
}

#[cfg(test)]
mod tests {
    use time::macros::{date, datetime};

    use super::*;
    use crate::domain::bank_id::{Bic, Iban};
    use crate::domain::id::Id;

    fn money(minor: i64, code: &str) -> (Amount, Currency) {
        (Amount::parse("amount", minor).unwrap(), Currency::parse("currency", code).unwrap())
    }

    fn header(rail: Rail) -> MessageHeader {
        MessageHeader {
            message_id: "MSG-1".into(),
            created_at: datetime!(2025-03-04 15:30:00 UTC),
            initiating_party_name: "ACME CORP".into(),
            rail,
        }
    }

    fn group(id: &str) -> PaymentGroup {
        let debtor = Counterpart {
            party: Party { name: "ACME CORP".into(), address: None },
            account: Account::Iban(Iban::parse("iban", "DE89370400440532013000").unwrap()),
            agent: Agent::Bic(Bic::parse("bic", "COBADEFFXXX").unwrap()),
        };
        PaymentGroup { id: id.into(), rail: Rail::Sepa, execution_date: date!(2025 - 03 - 05), debtor, category_purpose: None }
    }

    fn transfer(order: &str, minor: i64, name: &str) -> CreditTransfer {
        let (amount, currency) = money(minor, "EUR");
        let creditor = Counterpart {
            party: Party { name: name.into(), address: None },
            account: Account::Iban(Iban::parse("iban", "FR1420041010050500013M02606").unwrap()),
            agent: Agent::Bic(Bic::parse("bic", "PSSTFRPPPAR").unwrap()),
        };
        CreditTransfer {
            order_id: Id::stored(order),
            amount,
            currency,
            creditor,
            remittance_information: Some("Invoice 42".into()),
            charge_bearer: None,
        }
    }

    const ORDER_1: &str = "01920dfa-7854-7011-a1ff-441cc96a09e9";
    const ORDER_2: &str = "01920dfa-7854-7011-a1ff-441cc96a09ea";

    fn totals(items: &[(i64, &str)]) -> Totals {
        let mut totals = Totals::default();
        for (minor, code) in items {
            let (amount, currency) = money(*minor, code);
            totals.add(amount, currency).unwrap();
        }
        totals
    }

    #[test]
    fn b3_control_sums_are_written_with_the_widest_exponent() {
        assert_eq!(totals(&[(12_500, "EUR"), (5, "EUR")]).control_sum(), "125.05");
        assert_eq!(totals(&[(500, "JPY")]).control_sum(), "500");
        assert_eq!(totals(&[(500, "JPY"), (1, "USD"), (1, "BHD")]).control_sum(), "500.011");
        assert_eq!(totals(&[(1, "EUR"), (2, "EUR")]).count(), 2);
    }

    #[test]
    fn b3_a_control_sum_past_18_digits_is_refused() {
        let mut sum = Totals::default();
        let (amount, eur) = money(crate::domain::money::AMOUNT_MAX, "EUR");
        let mut refused = None;
        for _ in 0..200 {
            if let Err(err) = sum.add(amount, eur) {
                refused = Some(err);
                break;
            }
        }
        assert!(matches!(refused, Some(Error::Invalid { .. })), "16-digit amounts reach 18 digits within 200 adds");
        assert!(sum.control_sum().len() <= 19, "{}", sum.control_sum());
    }

    #[test]
    fn b3_writes_headers_groups_and_escaped_text() {
        let declared = totals(&[(12_500, "EUR"), (99, "EUR")]);
        let mut writer = Pain001Writer::begin(Vec::new(), &header(Rail::Sepa), declared).unwrap();
        writer.next_group(&group("G1"), declared).unwrap();
        writer.add(&transfer(ORDER_1, 12_500, "O'Brien + Sons")).unwrap();
        writer.add(&transfer(ORDER_2, 99, "Dupont")).unwrap();
        let xml = String::from_utf8(writer.finish().unwrap()).unwrap();
        for expected in [
            "<CreDtTm>2025-03-04T15:30:00Z</CreDtTm>",
            "<NbOfTxs>2</NbOfTxs>\n      <CtrlSum>125.99</CtrlSum>",
            "<Cd>SEPA</Cd>",
            "<Dt>2025-03-05</Dt>",
            "<ChrgBr>SLEV</ChrgBr>",
            "<EndToEndId>01920dfa78547011a1ff441cc96a09e9</EndToEndId>",
            r#"<InstdAmt Ccy="EUR">125.00</InstdAmt>"#,
            r#"<InstdAmt Ccy="EUR">0.99</InstdAmt>"#,
            "<Nm>O&apos;Brien + Sons</Nm>",
        ] {
            assert!(xml.contains(expected), "{expected} missing from\n{xml}");
        }
        assert!(xml.trim_end().ends_with("</Document>"));
    }

    #[test]
    fn b3_totals_that_do_not_match_what_was_written_fail_the_file() {
        let declared = totals(&[(100, "EUR")]);
        let mut writer = Pain001Writer::begin(Vec::new(), &header(Rail::Sepa), declared).unwrap();
        writer.next_group(&group("G1"), declared).unwrap();
        writer.add(&transfer(ORDER_1, 101, "Dupont")).unwrap();
        let Err(Error::Internal(why)) = writer.finish() else { panic!("a wrong control sum must fail") };
        assert!(why.contains("declared 1 transactions totalling 1.00 but carried 1 totalling 1.01"), "{why}");
    }

    #[test]
    fn b3_a_transfer_the_rail_cannot_carry_names_the_field_and_the_order() {
        let declared = totals(&[(100, "EUR")]);
        let mut writer = Pain001Writer::begin(Vec::new(), &header(Rail::Sepa), declared).unwrap();
        assert!(writer.add(&transfer(ORDER_1, 100, "Dupont")).is_err(), "no group yet");
        writer.next_group(&group("G1"), declared).unwrap();
        let Err(Error::Invalid { parameter, message, .. }) = writer.add(&transfer(ORDER_1, 100, "Café Dupont")) else {
            panic!("é is outside the SEPA set")
        };
        assert_eq!(parameter, "receiving_account.party_name");
        assert!(message.starts_with(&format!("payment order {ORDER_1}: ")), "{message}");
        let mut wire = group("G2");
        wire.rail = Rail::Wire;
        assert!(writer.next_group(&wire, declared).is_err(), "one rail per file");
    }

    #[test]
    fn b3_replayable_sources_are_written_in_two_passes() {
        let items = || {
            vec![
                Ok(Item::Group(group("G1"))),
                Ok(Item::Transfer(transfer(ORDER_1, 100, "A"))),
                Ok(Item::Group(group("G2"))),
                Ok(Item::Transfer(transfer(ORDER_2, 250, "B"))),
            ]
        };
        let (out, totals) = write_replayable(Vec::new(), &header(Rail::Sepa), items).unwrap();
        assert_eq!((totals.count(), totals.control_sum()), (2, "3.50".to_owned()));
        let xml = String::from_utf8(out).unwrap();
        assert_eq!(xml.matches("<PmtInf>").count(), 2);
        assert!(
            xml.contains("<PmtInfId>G2</PmtInfId>\n      <PmtMtd>TRF</PmtMtd>\n      <NbOfTxs>1</NbOfTxs>\n      <CtrlSum>2.50</CtrlSum>")
        );
        let twice = || vec![Ok(Item::Group(group("G1"))), Ok(Item::Transfer(transfer(ORDER_1, 1, "A"))), Ok(Item::Group(group("G1")))];
        assert!(write_replayable(Vec::new(), &header(Rail::Sepa), twice).is_err(), "group ids are unique");
    }
}
