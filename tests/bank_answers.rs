//! SPEC B5 and B7: the banks' answer files, checked by tools nobody here wrote.
//!
//! - Every ISO 20022 file the sandbox bank's writers make (`pain.002.001.03` and `.12`,
//!   `camt.053.001.08`, `camt.054.001.08`) validates with `xmllint --schema` against the official
//!   XSDs in `compat/iso20022/xsd/` (from PyPI packages, see its README), and reads back through
//!   `payrail::bank::formats::read` to what was written.
//! - Hand-written samples in the shape banks send (`compat/iso20022/samples/`) validate against
//!   the same XSDs and read as expected.
//! - NACHA return and notification-of-change files from the writer are parsed by carta-ach
//!   (`compat/nacha/check.sh`, as in `tests/nacha_files.rs`) and by our reader: each return code
//!   class (R01 funds, R02/R03/R04 account, R10/R29 unauthorized, R14/R15 death with its date)
//!   reads right, and one bad record refuses the whole file.
//!
//! Needs `xmllint` and python3 (`.ci/run` installs them); without them these tests fail, never
//! skip. Store-independent: no server, no database.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use payrail::bank::formats::iso20022::camt::{CamtWriter, ReportHeader};
use payrail::bank::formats::iso20022::pain002::{Pain002Version, Pain002Writer, StatusReportHeader, TransactionStatus};
use payrail::bank::formats::nacha::answers::{AnswerKind, AnswerWriter, EntryAnswer, OriginalEntry};
use payrail::bank::formats::nacha::{
    AccountType, EntryDirection as AchDirection, FileHeader, FileIdModifier, SecCode, TraceNumber, TransactionCode,
};
use payrail::bank::formats::read;
use payrail::domain::bank_answer::{
    AccountRef, AchCorrection, AchReturn, Answer, AnswerFile, AnswerFormat, EntryDirection, Party, PaymentStatus, StatementBalance,
    StatementEntry, StatusOutcome,
};
use payrail::domain::bank_id::AbaRoutingNumber;
use payrail::domain::money::Currency;
use serde_json::{Value, json};
use time::macros::{date, datetime};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn save(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// `xmllint --noout --schema compat/iso20022/xsd/XSD FILE` must say the file validates.
fn assert_valid(xsd: &str, file: &Path) {
    let schema = format!("{ROOT}/compat/iso20022/xsd/{xsd}");
    let output = Command::new("xmllint").args(["--noout", "--schema", &schema]).arg(file).output().unwrap_or_else(|err| {
        panic!("xmllint is required to check bank files against the official XSD ({err}): apt-get install libxml2-utils")
    });
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    eprintln!("xmllint --schema {xsd} {}: {}", file.display(), said.trim());
    assert!(output.status.success() && said.contains("validates"), "{} fails {xsd}:\n{said}", file.display());
}

fn usd() -> Currency {
    Currency::parse("currency", "USD").unwrap()
}

fn account() -> AccountRef {
    AccountRef { iban: None, account_number: Some("123456789012".into()) }
}

fn entry(amount: i64, direction: EntryDirection) -> StatementEntry {
    StatementEntry {
        account: account(),
        amount,
        currency: usd(),
        direction,
        booking_date: "2026-07-02".into(),
        booking_time: None,
        value_date: None,
        end_to_end_id: None,
        ach_trace_number: None,
        bank_reference: None,
        description: String::new(),
        rail: None,
        reversal: false,
        return_code: None,
        counterparty: None,
    }
}

fn balance(balance_type: &str, amount: i64) -> StatementBalance {
    StatementBalance {
        account: account(),
        balance_type: balance_type.into(),
        amount,
        currency: usd(),
        as_of_date: "2026-07-02".into(),
        as_of_time: Some("23:00:00".into()),
    }
}

fn report_header(id: &str, account: AccountRef, currency: Currency) -> ReportHeader {
    ReportHeader { message_id: format!("MSG-{id}"), created_at: datetime!(2026-07-02 23:00 UTC), report_id: id.into(), account, currency }
}

/// The entries a sandbox statement carries: an ACH credit with its trace number, a wire debit
/// with the order's end-to-end id marked as a reversal (`RvslInd`, a returned wire) with its
/// ISO return reason, an ACH reversal with its NACHA code, an RTP credit with a description
/// that needs escaping. The ACH credit names its payer (`RltdPties/Dbtr`), the RTP credit only
/// the payer's account.
fn sandbox_entries() -> Vec<StatementEntry> {
    vec![
        StatementEntry {
            ach_trace_number: Some("021000020000001".into()),
            bank_reference: Some("SBX-1".into()),
            description: "ACH CREDIT ACME CORP".into(),
            rail: Some("ach".into()),
            reversal: false,
            return_code: None,
            counterparty: Some(Party {
                name: Some("Acme & Sons".into()),
                account: AccountRef { iban: None, account_number: Some("000123456789".into()) },
            }),
            ..entry(12_500, EntryDirection::Credit)
        },
        StatementEntry {
            end_to_end_id: Some("01920dfa78547011a1ff441cc96a09e9".into()),
            value_date: Some("2026-07-03".into()),
            rail: Some("wire".into()),
            reversal: true,
            return_code: Some("AC04".into()),
            ..entry(1_000_000, EntryDirection::Debit)
        },
        StatementEntry {
            ach_trace_number: Some("021000020000002".into()),
            rail: Some("ach".into()),
            reversal: true,
            return_code: Some("R01".into()),
            ..entry(4_200, EntryDirection::Debit)
        },
        StatementEntry {
            description: "Payment <Globex> & \"co\"".into(),
            rail: Some("rtp".into()),
            counterparty: Some(Party { name: None, account: AccountRef { iban: None, account_number: Some("987654321".into()) } }),
            ..entry(1, EntryDirection::Credit)
        },
    ]
}

#[test]
fn b7_camt053_writer_output_passes_the_official_xsd_and_reads_back() {
    let dir = dir();
    let entries = sandbox_entries();
    let balances = [balance("opening_ledger", 500_000), balance("closing_ledger", -487_499)];
    let mut writer = CamtWriter::statement(Vec::new(), &report_header("S1", account(), usd()), &balances).unwrap();
    for e in &entries {
        writer.entry(e).unwrap();
    }
    let bytes = writer.finish().unwrap();
    assert_valid("camt.053.001.08.xsd", &save(dir.path(), "statement.xml", &bytes));
    let mut expected: Vec<Answer> = balances.into_iter().map(Answer::Balance).collect();
    expected.extend(entries.into_iter().map(Answer::Entry));
    assert_eq!(read(&bytes).unwrap(), AnswerFile { format: AnswerFormat::Camt053, answers: expected });
}

#[test]
fn b7_camt054_writer_output_passes_the_official_xsd_and_reads_back() {
    let dir = dir();
    let eur = Currency::parse("currency", "EUR").unwrap();
    let iban = AccountRef { iban: Some("DE89370400440532013000".into()), account_number: None };
    let sepa = StatementEntry {
        account: iban.clone(),
        currency: eur,
        end_to_end_id: Some("E2E-1".into()),
        rail: Some("sepa".into()),
        reversal: false,
        return_code: None,
        counterparty: Some(Party {
            name: Some("Globex GmbH".into()),
            account: AccountRef { iban: Some("DE44500105175407324931".into()), account_number: None },
        }),
        ..entry(4_250, EntryDirection::Credit)
    };
    let mut writer = CamtWriter::notification(Vec::new(), &report_header("N1", iban, eur)).unwrap();
    writer.entry(&sepa).unwrap();
    let bytes = writer.finish().unwrap();
    assert_valid("camt.054.001.08.xsd", &save(dir.path(), "notification.xml", &bytes));
    assert_eq!(read(&bytes).unwrap(), AnswerFile { format: AnswerFormat::Camt054, answers: vec![Answer::Entry(sepa)] });
}

#[test]
fn b7_pain002_writer_output_passes_the_03_and_12_xsds_and_reads_back() {
    let dir = dir();
    for (version, xsd) in [(Pain002Version::V03, "pain.002.001.03.xsd"), (Pain002Version::V12, "pain.002.001.12.xsd")] {
        let header = StatusReportHeader {
            version,
            message_id: "SBX-STATUS-1".into(),
            created_at: datetime!(2026-07-02 16:05 UTC),
            original_message_id: "pf_0192a".into(),
            original_message_name: "pain.001.001.09".into(),
            group_status: Some("PART".into()),
        };
        let statuses = [
            ("G1", "01920dfa78547011a1ff441cc96a09e9", "RJCT", Some("AC04"), Some("Account closed & gone")),
            ("G1", "01920dfa78547011a1ff441cc96a09ea", "ACSC", None, None),
            ("G2", "01920dfa78547011a1ff441cc96a09eb", "ACSP", None, None),
        ];
        let mut writer = Pain002Writer::begin(Vec::new(), &header).unwrap();
        for (group, id, status, code, reason) in statuses {
            writer
                .add(&TransactionStatus {
                    original_payment_information_id: group.into(),
                    end_to_end_id: id.into(),
                    status: status.into(),
                    reason_code: code.map(Into::into),
                    reason: reason.map(Into::into),
                })
                .unwrap();
        }
        let bytes = writer.finish().unwrap();
        assert_valid(xsd, &save(dir.path(), xsd, &bytes));
        let outcome = |id: &str, outcome, code: Option<&str>, reason: Option<&str>| {
            Answer::Status(PaymentStatus {
                end_to_end_id: id.into(),
                outcome,
                reason_code: code.map(Into::into),
                reason: reason.map(Into::into),
            })
        };
        assert_eq!(
            read(&bytes).unwrap().answers,
            [
                outcome("01920dfa78547011a1ff441cc96a09e9", StatusOutcome::Rejected, Some("AC04"), Some("Account closed & gone")),
                outcome("01920dfa78547011a1ff441cc96a09ea", StatusOutcome::Settled, None, None),
                outcome("01920dfa78547011a1ff441cc96a09eb", StatusOutcome::Accepted, None, None),
            ]
        );
    }
}

#[test]
fn b5_bank_samples_pass_the_official_xsds_and_read() {
    let sample = |name: &str| PathBuf::from(format!("{ROOT}/compat/iso20022/samples/{name}"));
    for (name, xsd) in [
        ("camt.053.001.08-bank.xml", "camt.053.001.08.xsd"),
        ("camt.054.001.08-bank.xml", "camt.054.001.08.xsd"),
        ("pain.002.001.03-bank.xml", "pain.002.001.03.xsd"),
    ] {
        assert_valid(xsd, &sample(name));
    }
    let statement = read(&std::fs::read(sample("camt.053.001.08-bank.xml")).unwrap()).unwrap();
    let kinds: Vec<&str> = statement
        .answers
        .iter()
        .map(|a| match a {
            Answer::Balance(_) => "balance",
            Answer::Entry(_) => "entry",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["balance", "balance", "entry", "entry", "entry", "entry"], "the pending entry is skipped, the batch split in two");
    let notification = read(&std::fs::read(sample("camt.054.001.08-bank.xml")).unwrap()).unwrap();
    let [Answer::Entry(rtp)] = notification.answers.as_slice() else { panic!("{notification:?}") };
    assert_eq!(
        (rtp.amount, rtp.end_to_end_id.as_deref(), rtp.rail.as_deref(), rtp.description.as_str(), rtp.bank_reference.as_deref()),
        (250_000, Some("INV-2026-0042"), Some("rtp"), "Invoice 2026-0042", Some("RTP0702000017"))
    );
    let report = read(&std::fs::read(sample("pain.002.001.03-bank.xml")).unwrap()).unwrap();
    assert_eq!(report.answers.len(), 3);
}

#[test]
fn b5_camt053_of_50000_entries_streams_in_seconds() {
    let mut writer = CamtWriter::statement(Vec::new(), &report_header("BIG", account(), usd()), &[balance("opening_ledger", 0)]).unwrap();
    for i in 0..50_000u32 {
        let e = StatementEntry {
            end_to_end_id: Some(format!("{i:032x}")),
            ach_trace_number: Some(format!("02100002{:07}", i + 1)),
            description: format!("ENTRY {i}"),
            rail: Some("ach".into()),
            reversal: false,
            return_code: None,
            ..entry(100 + i64::from(i), if i % 2 == 0 { EntryDirection::Credit } else { EntryDirection::Debit })
        };
        writer.entry(&e).unwrap();
    }
    let bytes = writer.finish().unwrap();
    let started = Instant::now();
    let file = read(&bytes).unwrap();
    let took = started.elapsed();
    eprintln!("camt.053 of 50,000 entries ({} MB) read in {took:?}", bytes.len() / 1_000_000);
    assert_eq!(file.answers.len(), 50_001);
    assert!(took.as_secs_f64() < 10.0, "{took:?} (a debug build; release is several times faster)");
}

// ---- NACHA returns and notifications of change ----

fn aba(text: &str) -> AbaRoutingNumber {
    AbaRoutingNumber::parse("routing_number", text).unwrap()
}

/// The sandbox bank's return file header: from the bank (121141822) back to the originator's
/// bank (021000021).
fn return_header() -> FileHeader {
    FileHeader {
        immediate_destination: aba("021000021"),
        immediate_origin: "121141822".into(),
        created: datetime!(2026-07-06 08:15),
        file_id_modifier: FileIdModifier::nth(0).unwrap(),
        immediate_destination_name: "Acme Bank".into(),
        immediate_origin_name: "Sandbox Bank".into(),
        reference_code: "RETURNS".into(),
    }
}

fn original(sequence: u32, direction: AchDirection, account: AccountType, cents: u64) -> OriginalEntry {
    OriginalEntry {
        sec: SecCode::Ppd,
        company_name: "ACME CORP".into(),
        company_id: "1234567890".into(),
        entry_description: "PAYROLL".into(),
        transaction_code: TransactionCode::live(account, direction),
        rdfi: aba("121141822"),
        account_number: format!("100{sequence:02}"),
        amount_cents: cents,
        identification: format!("ORDER{sequence}"),
        receiver_name: "JANE DOE".into(),
        trace: TraceNumber::new("02100002", sequence).unwrap(),
    }
}

/// One return of each code class, and two notifications of change.
fn answers() -> Vec<EntryAnswer> {
    let ret = |seq, code: &str, direction, account, death: Option<time::Date>| EntryAnswer {
        original: original(seq, direction, account, 1_000 * u64::from(seq)),
        kind: AnswerKind::Return { code: code.into(), date_of_death: death, information: format!("RETURN {code}") },
    };
    use AccountType::{Checking, Savings};
    use AchDirection::{Credit, Debit};
    vec![
        ret(1, "R01", Debit, Checking, None),
        ret(2, "R02", Credit, Checking, None),
        ret(3, "R03", Credit, Savings, None),
        ret(4, "R04", Debit, Savings, None),
        ret(5, "R10", Debit, Checking, None),
        ret(6, "R29", Debit, Checking, None),
        ret(7, "R14", Credit, Checking, Some(date!(2026 - 05 - 01))),
        ret(8, "R15", Credit, Savings, Some(date!(2026 - 04 - 30))),
        EntryAnswer {
            original: original(9, Credit, Checking, 900),
            kind: AnswerKind::Change { code: "C01".into(), corrected_data: "99887766".into() },
        },
        EntryAnswer {
            original: original(10, Credit, Checking, 1_000),
            kind: AnswerKind::Change { code: "C05".into(), corrected_data: "32".into() },
        },
    ]
}

fn write_returns(answers: &[EntryAnswer]) -> (Vec<u8>, Vec<TraceNumber>) {
    let mut writer = AnswerWriter::new(Vec::new(), &return_header(), date!(2026 - 07 - 06)).unwrap();
    let traces = answers.iter().map(|a| writer.push(a).unwrap()).collect();
    (writer.finish().unwrap().0, traces)
}

/// carta-ach's view of `path` (compat/nacha/check.sh).
fn carta(path: &Path) -> Value {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let output = Command::new(format!("{ROOT}/compat/nacha/check.sh")).arg(path).env("CARGO_TARGET_DIR", target).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "compat/nacha/check.sh failed ({}):\n{stderr}", output.status);
    let mut all: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    all.remove(0)
}

#[test]
fn b7_nacha_return_files_are_what_carta_ach_reads_and_add_up() {
    let dir = dir();
    let answers = answers();
    let (bytes, traces) = write_returns(&answers);
    let seen = carta(&save(dir.path(), "returns.ach", &bytes));
    assert_eq!(seen["carta_rejects"], json!([]), "fields carta-ach's validators refuse");
    assert_eq!(seen["line_lengths"], json!([94]));
    assert_eq!(seen["line_count"].as_u64().unwrap() % 10, 0, "blocked to 10");
    assert_eq!(seen["file_control"], seen["computed"], "file control against carta's entries");
    let batches = seen["batches"].as_array().unwrap();
    assert_eq!(batches.iter().map(|b| b["sec"].as_str().unwrap()).collect::<Vec<_>>(), ["PPD", "COR"]);
    for batch in batches {
        assert_eq!(batch["control"], batch["computed"], "batch control against carta's entries");
        assert_eq!(batch["odfi"], "12114182", "the returning bank");
        assert_eq!(batch["company_name"], "ACME CORP");
    }
    let entries: Vec<&Value> = batches.iter().flat_map(|b| b["entries"].as_array().unwrap()).collect();
    assert_eq!(entries.len(), answers.len());
    for ((answer, trace), seen) in answers.iter().zip(&traces).zip(entries) {
        let o = &answer.original;
        let (code, amount) = match &answer.kind {
            AnswerKind::Return { code, .. } => (code, o.amount_cents),
            AnswerKind::Change { code, .. } => (code, 0),
        };
        let want_code = match o.transaction_code.code() {
            22 => "21",
            27 => "26",
            32 => "31",
            37 => "36",
            other => panic!("{other}"),
        };
        assert_eq!(seen["transaction_code"], want_code, "{code}");
        assert_eq!(seen["routing_number"], "021000021", "{code}: back to the original ODFI");
        assert_eq!(seen["amount"], amount, "{code}");
        assert_eq!(seen["account_number"], o.account_number.as_str());
        assert_eq!(seen["trace_number"], trace.to_string());
        let addenda = &seen["addenda"][0];
        let text = addenda["text"].as_str().unwrap();
        let kind = if code.starts_with('R') { "99" } else { "98" };
        assert_eq!(addenda["type"], kind);
        assert!(text.starts_with(&format!("{code}{}", o.trace)), "{code}: {text}");
    }
}

#[test]
fn b5_return_code_classes_r01_r02_r03_r04_r10_r29_r14_r15_read_right() {
    let (bytes, _) = write_returns(&answers());
    let file = read(&bytes).unwrap();
    assert_eq!(file.format, AnswerFormat::NachaReturns);
    let ret = |seq: u32, code: &str, death: Option<&str>| {
        Answer::Return(AchReturn {
            original_trace_number: format!("02100002{seq:07}"),
            code: code.into(),
            amount: 1_000 * i64::from(seq),
            addenda_information: Some(format!("RETURN {code}")),
            date_of_death: death.map(Into::into),
        })
    };
    let change = |seq: u32, code: &str, data: &str| {
        Answer::Correction(AchCorrection {
            original_trace_number: format!("02100002{seq:07}"),
            code: code.into(),
            corrected_data: data.into(),
        })
    };
    assert_eq!(
        file.answers,
        [
            ret(1, "R01", None),
            ret(2, "R02", None),
            ret(3, "R03", None),
            ret(4, "R04", None),
            ret(5, "R10", None),
            ret(6, "R29", None),
            ret(7, "R14", Some("2026-05-01")),
            ret(8, "R15", Some("2026-04-30")),
            change(9, "C01", "99887766"),
            change(10, "C05", "32"),
        ]
    );
}

#[test]
fn b5_a_partial_file_one_bad_record_refuses_the_whole_file() {
    let (bytes, _) = write_returns(&answers());
    let text = String::from_utf8(bytes).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    // The third return's amount (line 7: header, batch header, two entries with addenda).
    lines[6].replace_range(29..39, "0000003001");
    let err = read((lines.join("\n") + "\n").as_bytes()).unwrap_err();
    assert!(err.to_string().starts_with("nacha_returns: line "), "{err}");
    assert!(err.message.contains("batch 1 control says"), "{err}");
    // A return code that is not one: the record is refused, and with it the file.
    let bad = text.replacen("799R10", "799RXX", 1);
    let err = read(bad.as_bytes()).unwrap_err();
    assert!(err.message.contains("return_reason_code"), "{err}");
    // One bad amount in a statement of three entries refuses the statement.
    let mut writer = CamtWriter::statement(Vec::new(), &report_header("S", account(), usd()), &[balance("opening_ledger", 0)]).unwrap();
    for e in sandbox_entries() {
        writer.entry(&e).unwrap();
    }
    let statement = String::from_utf8(writer.finish().unwrap()).unwrap().replacen(">0.01<", ">0.011<", 1);
    let err = read(statement.as_bytes()).unwrap_err();
    assert!(err.at.starts_with("Document/BkToCstmrStmt/Stmt/Ntry/Amt (line "), "{err}");
}

#[test]
fn b5_nacha_file_of_10000_returns_reads_in_seconds() {
    let codes = ["R01", "R02", "R03", "R04", "R10", "R29"];
    let many: Vec<EntryAnswer> = (1..=10_000u32)
        .map(|seq| EntryAnswer {
            original: original(seq, AchDirection::Debit, AccountType::Checking, u64::from(seq)),
            kind: AnswerKind::Return { code: codes[seq as usize % codes.len()].into(), date_of_death: None, information: String::new() },
        })
        .collect();
    let (bytes, _) = write_returns(&many);
    let started = Instant::now();
    let file = read(&bytes).unwrap();
    let took = started.elapsed();
    eprintln!("NACHA file of 10,000 returns ({} KB) read in {took:?}", bytes.len() / 1000);
    assert_eq!(file.answers.len(), 10_000);
    assert!(matches!(&file.answers[9_999], Answer::Return(r) if r.original_trace_number == "021000020010000" && r.amount == 10_000));
    assert!(took.as_secs_f64() < 10.0, "{took:?}");
}
