//! ISO 20022 bank files checked by tools nobody here wrote (SPEC B3): every `pain.001.001.09`
//! file Payrail writes for `sepa`, `wire` and `rtp` is validated with `xmllint --schema` against
//! the official XSD in `compat/iso20022/xsd/`, and read back with libxml2 (`xmllint --xpath`) to
//! check that each `NbOfTxs` and `CtrlSum` says what the transactions under it add up to.
//! Store-independent: no server, no database.
//!
//! Needs `xmllint` (Debian's `libxml2-utils`; `.ci/run` installs it). Without it these tests
//! fail, never skip.

use std::path::{Path, PathBuf};
use std::process::Command;

use payrail::bank::formats::iso20022::{
    Account, Agent, ChargeBearer, Counterpart, CreditTransfer, Item, MessageHeader, Pain001Writer, Party, PaymentGroup, PostalAddress,
    Rail, Totals, end_to_end_id, write_replayable,
};
use payrail::domain::bank_id::{AbaRoutingNumber, Bic, Iban};
use payrail::domain::id::Id;
use payrail::domain::money::{Amount, Currency};
use time::macros::{date, datetime};

const XSD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/compat/iso20022/xsd/pain.001.001.09.xsd");

// ---- xmllint: the independent checker ----

fn xmllint(args: &[&str], file: &Path) -> (bool, String) {
    let output = Command::new("xmllint").args(args).arg(file).output().unwrap_or_else(|err| {
        panic!("xmllint is required to check bank files against the official XSD ({err}): apt-get install libxml2-utils")
    });
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

/// `xmllint --noout --schema XSD FILE`: whether the file is valid, and what xmllint said.
fn schema_check(file: &Path, stream: bool) -> (bool, String) {
    let mut args = vec!["--noout", "--schema", XSD];
    if stream {
        args.insert(0, "--stream");
    }
    let (valid, said) = xmllint(&args, file);
    eprintln!("xmllint --noout --schema pain.001.001.09.xsd {}: {}", file.display(), said.trim());
    (valid, said)
}

fn assert_valid(file: &Path) {
    let (valid, said) = schema_check(file, false);
    assert!(valid && said.contains("validates"), "{} fails the official XSD:\n{said}", file.display());
}

/// The value of an XPath 1.0 expression, read by libxml2.
fn xpath(file: &Path, expression: &str) -> String {
    let (ok, text) = xmllint(&["--xpath", expression], file);
    assert!(ok, "xmllint --xpath {expression}: {text}");
    text.trim().to_owned()
}

/// An element path in the pain.001 namespace (`a/b` becomes `*[local-name()='a']/...`).
fn path(steps: &str) -> String {
    steps.split('/').map(|step| format!("*[local-name()='{step}']")).collect::<Vec<_>>().join("/")
}

/// A decimal as the XML writes it, in units of 10^-5 (the finest an ISO 20022 amount has).
fn units(decimal: &str) -> u128 {
    let (whole, fraction) = decimal.split_once('.').unwrap_or((decimal, ""));
    assert!(fraction.len() <= 5, "{decimal}");
    let fraction = format!("{fraction:0<5}");
    whole.parse::<u128>().unwrap() * 100_000 + fraction.parse::<u128>().unwrap()
}

/// Each `InstdAmt` under `scope` (an XPath), as xmllint prints the elements one per line.
fn amounts(file: &Path, scope: &str) -> Vec<u128> {
    let listed = xpath(file, &format!("{scope}//{}", path("InstdAmt")));
    listed.lines().map(|line| units(line.split('>').nth(1).unwrap().split('<').next().unwrap())).collect()
}

/// The declared (NbOfTxs, CtrlSum) of the group header and of each PmtInf, against what the
/// transactions under each add up to, all as libxml2 reads the file. Returns the header's.
fn control_totals_hold(file: &Path) -> Result<(u64, String), String> {
    let header = format!("/{}", path("Document/CstmrCdtTrfInitn/GrpHdr"));
    let groups: usize = xpath(file, &format!("count(/{})", path("Document/CstmrCdtTrfInitn/PmtInf"))).parse().unwrap();
    let mut scopes = vec![("GrpHdr".to_owned(), header, format!("/{}", path("Document/CstmrCdtTrfInitn")))];
    for i in 1..=groups {
        let group = format!("/{}[{i}]", path("Document/CstmrCdtTrfInitn/PmtInf"));
        scopes.push((format!("PmtInf[{i}]"), group.clone(), group));
    }
    for (name, declared_at, scope) in &scopes {
        let count: u64 = xpath(file, &format!("string({declared_at}/{})", path("NbOfTxs"))).parse().unwrap();
        let sum = xpath(file, &format!("string({declared_at}/{})", path("CtrlSum")));
        let carried = amounts(file, scope);
        let carried_sum: u128 = carried.iter().sum();
        if count != carried.len() as u64 || units(&sum) != carried_sum {
            return Err(format!("{name} declares {count} / {sum}, carries {} / {carried_sum} (10^-5 units)", carried.len()));
        }
    }
    let count = xpath(file, &format!("string({}/{})", scopes[0].1, path("NbOfTxs"))).parse().unwrap();
    Ok((count, xpath(file, &format!("string({}/{})", scopes[0].1, path("CtrlSum")))))
}

// ---- typed inputs ----

fn money(minor: i64, code: &str) -> (Amount, Currency) {
    (Amount::parse("amount", minor).unwrap(), Currency::parse("currency", code).unwrap())
}

fn bic(text: &str) -> Bic {
    Bic::parse("bic", text).unwrap()
}

fn aba(text: &str) -> AbaRoutingNumber {
    AbaRoutingNumber::parse("aba", text).unwrap()
}

fn iban(text: &str) -> Account {
    Account::Iban(Iban::parse("iban", text).unwrap())
}

fn address(line1: &str, town: &str, postal_code: &str, country: &str) -> Option<PostalAddress> {
    Some(PostalAddress {
        line1: Some(line1.into()),
        line2: None,
        locality: Some(town.into()),
        region: None,
        postal_code: Some(postal_code.into()),
        country: Some(country.into()),
    })
}

fn side(name: &str, address: Option<PostalAddress>, account: Account, agent: Agent) -> Counterpart {
    Counterpart { party: Party { name: name.into(), address }, account, agent }
}

fn sepa_debtor() -> Counterpart {
    side(
        "ACME Europe GmbH",
        address("Hauptstrasse 1", "Berlin", "10115", "DE"),
        iban("DE89370400440532013000"),
        Agent::Bic(bic("COBADEFFXXX")),
    )
}

fn us_debtor() -> Counterpart {
    let mut address = address("1 Main St", "New York", "10001", "US");
    address.as_mut().unwrap().region = Some("NY".into());
    side("ACME Corp", address, Account::Other("000123456789".into()), Agent::BicAndAba(bic("CHASUS33"), aba("021000021")))
}

fn group(id: &str, rail: Rail, execution_date: time::Date, debtor: Counterpart, category_purpose: Option<&str>) -> PaymentGroup {
    PaymentGroup { id: id.into(), rail, execution_date, debtor, category_purpose: category_purpose.map(str::to_owned) }
}

fn transfer(order: &Id, minor: i64, code: &str, creditor: Counterpart, remittance: Option<&str>) -> CreditTransfer {
    let (amount, currency) = money(minor, code);
    CreditTransfer {
        order_id: order.clone(),
        amount,
        currency,
        creditor,
        remittance_information: remittance.map(str::to_owned),
        charge_bearer: None,
    }
}

fn header(id: &str, rail: Rail) -> MessageHeader {
    MessageHeader { message_id: id.into(), created_at: datetime!(2025-03-04 15:30:00 UTC), initiating_party_name: "ACME CORP".into(), rail }
}

/// Writes `groups` (each with its transfers) in one pass, declaring totals computed first.
fn write(dir: &Path, name: &str, header: &MessageHeader, groups: &[(PaymentGroup, Vec<CreditTransfer>)]) -> PathBuf {
    let file_path = dir.join(name);
    let mut file_totals = Totals::default();
    let mut group_totals = Vec::new();
    for (_, transfers) in groups {
        let mut totals = Totals::default();
        for t in transfers {
            totals.add(t.amount, t.currency).unwrap();
            file_totals.add(t.amount, t.currency).unwrap();
        }
        group_totals.push(totals);
    }
    let file = std::fs::File::create(&file_path).unwrap();
    let mut writer = Pain001Writer::begin(file, header, file_totals).unwrap();
    for ((group, transfers), totals) in groups.iter().zip(group_totals) {
        writer.next_group(group, totals).unwrap();
        for t in transfers {
            writer.add(t).unwrap();
        }
    }
    writer.finish().unwrap();
    file_path
}

fn sepa_groups() -> Vec<(PaymentGroup, Vec<CreditTransfer>)> {
    let fr = || {
        side(
            "Jean Dupont",
            address("12 rue de la Paix", "Paris", "75002", "FR"),
            iban("FR1420041010050500013M02606"),
            Agent::Bic(bic("PSSTFRPPPAR")),
        )
    };
    let nl = || side("O'Neil + Partners B.V.", None, iban("NL91ABNA0417164300"), Agent::Bic(bic("ABNANL2A")));
    let first = group("PAY-1", Rail::Sepa, date!(2025 - 03 - 05), sepa_debtor(), Some("SUPP"));
    let second = group("PAY-2", Rail::Sepa, date!(2025 - 03 - 06), sepa_debtor(), None);
    vec![
        (
            first,
            vec![
                transfer(&Id::generate(), 12_500, "EUR", fr(), Some("Invoice 2025/001 (March)")),
                transfer(&Id::generate(), 1, "EUR", nl(), None),
                transfer(&Id::generate(), 99_999_999, "EUR", fr(), Some("Rent: flat 3, ref. A-17")),
            ],
        ),
        (second, vec![transfer(&Id::generate(), 4_210, "EUR", nl(), Some("Refund"))]),
    ]
}

// ---- the tests ----

#[test]
fn b3_sepa_batch_with_several_groups_passes_the_official_xsd() {
    let dir = tempfile::tempdir().unwrap();
    let groups = sepa_groups();
    let file = write(dir.path(), "sepa.xml", &header("SEPA-20250304-1", Rail::Sepa), &groups);
    assert_valid(&file);
    assert_eq!(control_totals_hold(&file).unwrap(), (4, "1000167.10".to_owned()));
    assert_eq!(xpath(&file, &format!("count(//{})", path("PmtInf"))), "2");
    let first_id = end_to_end_id(&groups[0].1[0].order_id).unwrap();
    assert_eq!(xpath(&file, &format!("string((//{})[1])", path("EndToEndId"))), first_id, "the end-to-end id is the order's");
    assert_eq!(first_id.len(), 32);
    assert_eq!(xpath(&file, &format!("string((//{})[1])", path("SvcLvl/Cd"))), "SEPA");
    assert_eq!(xpath(&file, &format!("count(//{}[.='SLEV'])", path("PmtInf/ChrgBr"))), "2");
    assert_eq!(xpath(&file, &format!("string((//{})[2])", path("Cdtr/Nm"))), "O'Neil + Partners B.V.", "read back as written");
}

#[test]
fn b3_wire_file_with_text_needing_escaping_passes_the_official_xsd() {
    let dir = tempfile::tempdir().unwrap();
    let awkward = r#"Smith & Sons <"Ltd"> 'Müller' €"#;
    let us = side(
        awkward,
        address("5 Elm & Oak Ave", "Chicago", "60601", "US"),
        Account::Other("987654321".into()),
        Agent::Aba(aba("121141822")),
    );
    let uk = side(
        "Britannia Ltd",
        address("1 High St", "London", "EC1A 1BB", "GB"),
        iban("GB82WEST12345698765432"),
        Agent::Bic(bic("NWBKGB2L")),
    );
    let mut shared = transfer(&Id::generate(), 25_000_000, "USD", us.clone(), Some("PO <42> & \"urgent\""));
    shared.charge_bearer = Some(ChargeBearer::Shared);
    let mut sender_pays = transfer(&Id::generate(), 1_000, "GBP", uk, None);
    sender_pays.charge_bearer = Some(ChargeBearer::Debtor);
    let groups = vec![
        (group("W-1", Rail::Wire, date!(2025 - 03 - 04), us_debtor(), None), vec![shared, transfer(&Id::generate(), 7, "USD", us, None)]),
        (group("W-2", Rail::Wire, date!(2025 - 03 - 04), us_debtor(), Some("SUPP")), vec![sender_pays]),
    ];
    let file = write(dir.path(), "wire.xml", &header("WIRE-20250304-1", Rail::Wire), &groups);
    assert_valid(&file);
    assert_eq!(control_totals_hold(&file).unwrap(), (3, "250010.07".to_owned()));
    assert_eq!(xpath(&file, &format!("string((//{})[1])", path("Cdtr/Nm"))), awkward, "escaped on write, identical on read");
    assert_eq!(xpath(&file, &format!("string((//{})[1])", path("RmtInf/Ustrd"))), "PO <42> & \"urgent\"");
    assert_eq!(xpath(&file, &format!("string((//{})[1])", path("ClrSysMmbId/ClrSysId/Cd"))), "USABA");
    assert_eq!(xpath(&file, &format!("string((//{})[1])", path("SvcLvl/Cd"))), "URGP");
    let raw = std::fs::read_to_string(&file).unwrap();
    assert!(raw.contains("Smith &amp; Sons &lt;&quot;Ltd&quot;&gt; &apos;Müller&apos; €"), "escaped in the file");
}

#[test]
fn b3_rtp_file_passes_the_official_xsd() {
    let dir = tempfile::tempdir().unwrap();
    let payee = side("Jane Doe", None, Account::Other("123456789".into()), Agent::Aba(aba("021000021")));
    let mut debtor = us_debtor();
    debtor.agent = Agent::Aba(aba("121141822"));
    let transfers = (1..=3).map(|i| transfer(&Id::generate(), i * 100_001, "USD", payee.clone(), Some("Payout"))).collect();
    let file = write(
        dir.path(),
        "rtp.xml",
        &header("RTP-20250304-1", Rail::Rtp),
        &[(group("R-1", Rail::Rtp, date!(2025 - 03 - 04), debtor, None), transfers)],
    );
    assert_valid(&file);
    assert_eq!(control_totals_hold(&file).unwrap(), (3, "6000.06".to_owned()));
    assert_eq!(xpath(&file, &format!("string(//{})", path("LclInstrm/Prtry"))), "RTP");
}

/// 100,000 transfers in 10 groups, streamed from a source replayed twice (first pass: totals;
/// second: the file), then validated by xmllint in streaming mode.
#[test]
fn b3_hundred_thousand_transfers_stream_in_two_passes_and_validate() {
    const TRANSFERS: u64 = 100_000;
    const PER_GROUP: u64 = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let creditor = side("Payee", None, Account::Other("123456789".into()), Agent::Aba(aba("021000021")));
    let source = || {
        let creditor = creditor.clone();
        (0..TRANSFERS).flat_map(move |i| {
            let start = (i % PER_GROUP == 0)
                .then(|| Ok(Item::Group(group(&format!("G-{}", i / PER_GROUP), Rail::Wire, date!(2025 - 03 - 04), us_debtor(), None))));
            // Deterministic ids: the source must replay identically.
            let id = Id::stored(format!("00000000-0000-4000-8000-{i:012}"));
            let amount = i64::try_from(i % 50_000 + 1).unwrap();
            start.into_iter().chain([Ok(Item::Transfer(transfer(&id, amount, "USD", creditor.clone(), None)))])
        })
    };
    let file_path = dir.path().join("big.xml");
    let file = std::io::BufWriter::new(std::fs::File::create(&file_path).unwrap());
    let (_, totals) = write_replayable(file, &header("WIRE-BIG-1", Rail::Wire), source).unwrap();
    // Sum of (i % 50000 + 1) cents over two runs of 0..50000: 2 * 50000 * 50001 / 2 cents.
    assert_eq!((totals.count(), totals.control_sum()), (TRANSFERS, "25000500.00".to_owned()));
    let (valid, said) = schema_check(&file_path, true);
    assert!(valid && said.contains("validates"), "{said}");
    // The header as written (read from the file's start: a DOM of the whole file is not needed).
    let start = std::io::BufReader::new(std::fs::File::open(&file_path).unwrap());
    let head: String = std::io::BufRead::lines(start).take(12).map(Result::unwrap).collect();
    assert!(head.contains("<NbOfTxs>100000</NbOfTxs>") && head.contains("<CtrlSum>25000500.00</CtrlSum>"), "{head}");
    // Streamed: the process never held the file (about 74 MB) or the orders whole.
    let size = std::fs::metadata(&file_path).unwrap().len();
    let peak_kb = peak_rss_kb();
    eprintln!("100,000 transfers: {size} bytes written, peak RSS of the test process {peak_kb} kB");
    assert!(size > 64 << 20 && peak_kb < 64 << 10, "peak RSS {peak_kb} kB for a {size}-byte file");
}

/// The process's peak resident set (`VmHWM`), in kB.
fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn b3_a_wrong_control_sum_is_caught_by_reading_the_file_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "sepa.xml", &header("SEPA-1", Rail::Sepa), &sepa_groups());
    let text = std::fs::read_to_string(&file).unwrap();
    let tampered = dir.path().join("tampered.xml");
    std::fs::write(&tampered, text.replacen("<CtrlSum>1000167.10</CtrlSum>", "<CtrlSum>1000167.11</CtrlSum>", 1)).unwrap();
    assert_valid(&tampered); // the XSD cannot see a wrong sum...
    let err = control_totals_hold(&tampered).unwrap_err(); // ...reading it back does.
    assert!(err.starts_with("GrpHdr declares 4 / 1000167.11"), "{err}");
    let dropped = dir.path().join("dropped.xml");
    let one_less = text.replacen("<NbOfTxs>4</NbOfTxs>", "<NbOfTxs>5</NbOfTxs>", 1);
    std::fs::write(&dropped, one_less).unwrap();
    assert!(control_totals_hold(&dropped).is_err());
}

#[test]
fn b3_a_bad_iban_or_bic_fails_the_xsd_or_never_gets_into_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "sepa.xml", &header("SEPA-1", Rail::Sepa), &sepa_groups());
    let text = std::fs::read_to_string(&file).unwrap();
    for (what, from, to) in [
        ("IBAN", "<IBAN>FR1420041010050500013M02606</IBAN>", "<IBAN>fr1420041010050500013M02606</IBAN>"),
        ("BIC", "<BICFI>PSSTFRPPPAR</BICFI>", "<BICFI>PSST-FR</BICFI>"),
        ("currency", r#"Ccy="EUR""#, r#"Ccy="eur""#),
    ] {
        let broken = dir.path().join(format!("bad-{what}.xml"));
        assert!(text.contains(from));
        std::fs::write(&broken, text.replacen(from, to, 1)).unwrap();
        let (valid, said) = schema_check(&broken, false);
        assert!(!valid && said.contains("fails to validate"), "a bad {what} must fail the XSD:\n{said}");
    }
    // The XSD checks an IBAN's shape only; its mod-97 checksum is refused before any file.
    assert!(Iban::parse("receiving_account.account_details", "FR1420041010050500013M02607").is_err());
}
