//! SPEC B3: the NACHA files Payrail writes, read back by a parser nobody here wrote.
//!
//! Each test writes a file with `payrail::bank::formats::nacha` (the streaming writer, or
//! `NachaFile::group` for entries that arrive mixed) and runs `compat/nacha/check.sh`, which
//! parses it with carta-ach 0.4.5 from PyPI (in a venv at `$CARGO_TARGET_DIR/nacha-venv`, made
//! on first use) and prints, as JSON, the fields carta-ach sees, the totals recomputed in Python
//! from those fields, and any field carta-ach's own validators refuse. The test asserts carta
//! sees exactly what was written, and that every control record equals the recomputed totals.
//! A missing Python, a failed install or a parse error fails the test: nothing is skipped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use payrail::bank::calendar::effective_entry_date;
use payrail::bank::formats::nacha::{
    AccountType, BatchSpec, EntryDirection, EntryInput, FileHeader, FileIdModifier, FileSummary, NachaFile, NachaWriter, SecCode,
    ServiceClass, TraceNumber, TransactionCode, parse,
};
use payrail::domain::bank_id::AbaRoutingNumber;
use payrail::domain::money::{Amount, Currency};
use serde_json::{Value, json};
use time::macros::{date, datetime};
use time::{Date, PrimitiveDateTime};

use EntryDirection::{Credit, Debit};

/// One file as written: its batches with each entry and the trace number the writer gave it.
struct Written {
    path: PathBuf,
    header: FileHeader,
    batches: Vec<(BatchSpec, Vec<(EntryInput, TraceNumber)>)>,
    summary: FileSummary,
}

fn aba(text: &str) -> AbaRoutingNumber {
    AbaRoutingNumber::parse("routing_number", text).unwrap()
}

fn header(created: PrimitiveDateTime, modifier: usize) -> FileHeader {
    FileHeader {
        immediate_destination: aba("021000021"),
        immediate_origin: "1234567890".into(),
        created,
        file_id_modifier: FileIdModifier::nth(modifier).unwrap(),
        immediate_destination_name: "Acme Bank".into(),
        immediate_origin_name: "Acme Corp".into(),
        reference_code: "PAYRAIL".into(),
    }
}

fn spec(company: &str, sec: SecCode, effective_entry_date: Date) -> BatchSpec {
    BatchSpec {
        service_class: ServiceClass::Mixed,
        company_name: company.into(),
        company_discretionary_data: String::new(),
        company_id: if company == "Acme Corp" { "1234567890".into() } else { "9876543210".into() },
        sec,
        entry_description: "PAYMENT".into(),
        descriptive_date: String::new(),
        effective_entry_date,
        same_day: false,
    }
}

fn usd(cents: i64) -> u64 {
    EntryInput::usd_cents(Amount::parse("amount", cents).unwrap(), Currency::parse("currency", "USD").unwrap()).unwrap()
}

fn entry(account: AccountType, direction: EntryDirection, routing: &str, cents: i64, name: &str, addenda: &[String]) -> EntryInput {
    EntryInput {
        transaction_code: TransactionCode::live(account, direction),
        rdfi: aba(routing),
        account_number: format!("{}", 10_000_000 + cents % 1000),
        amount_cents: usd(cents),
        identification: format!("PO-{cents}"),
        receiver_name: name.into(),
        discretionary_data: String::new(),
        addenda: addenda.to_vec(),
    }
}

/// Writes `entries` (grouped by batch, as a cut-off reads them) with the streaming writer.
fn write(dir: &Path, name: &str, header: FileHeader, entries: Vec<(BatchSpec, EntryInput)>) -> Written {
    let path = dir.join(name);
    let out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut writer = NachaWriter::new(out, &header).unwrap();
    let mut batches: Vec<(BatchSpec, Vec<(EntryInput, TraceNumber)>)> = Vec::new();
    for (spec, entry) in entries {
        let trace = writer.push(&spec, entry.clone()).unwrap();
        match batches.last_mut() {
            Some((last, list)) if *last == spec => list.push((entry, trace)),
            _ => batches.push((spec, vec![(entry, trace)])),
        }
    }
    let (_, summary) = writer.finish().unwrap();
    Written { path, header, batches, summary }
}

/// Writes an in-memory `NachaFile` (batches grouped from mixed entries).
fn write_grouped(dir: &Path, name: &str, file: &NachaFile) -> Written {
    let entries = file.batches.iter().flat_map(|b| b.entries.iter().map(|e| (b.spec.clone(), e.clone()))).collect();
    write(dir, name, file.header.clone(), entries)
}

/// carta-ach's view of each file (compat/nacha/check.sh). One run at a time: the first makes
/// the venv, the others reuse it.
fn carta(paths: &[&Path]) -> Vec<Value> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let output = Command::new(root.join("compat/nacha/check.sh"))
        .args(paths)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("running compat/nacha/check.sh");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "compat/nacha/check.sh failed ({}):\n{stderr}", output.status);
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("check.py printed no JSON ({e}):\n{}\n{stderr}", String::from_utf8_lossy(&output.stdout)))
}

fn yymmdd(date: Date) -> String {
    format!("{:02}{:02}{:02}", date.year() % 100, u8::from(date.month()), date.day())
}

/// What carta-ach must see for one entry.
fn entry_json(sec: SecCode, entry: &EntryInput, trace: TraceNumber) -> Value {
    let addenda: Vec<Value> = entry.addenda.iter().enumerate().map(|(i, text)| json!({"type": "05", "text": text.to_uppercase(), "sequence": i + 1, "entry_sequence": format!("{:07}", trace.sequence())})).collect();
    let mut out = json!({
        "transaction_code": entry.transaction_code.code().to_string(),
        "routing_number": entry.rdfi.as_str(),
        "account_number": entry.account_number.to_uppercase(),
        "amount": entry.amount_cents,
        "identification": entry.identification.to_uppercase(),
        "discretionary_data": entry.discretionary_data.to_uppercase(),
        "addenda_indicator": if entry.addenda.is_empty() { "0" } else { "1" },
        "trace_number": trace.to_string(),
        "name": entry.receiver_name.to_uppercase(),
        "addenda": addenda,
    });
    if sec == SecCode::Ctx {
        out["number_of_addenda"] = json!(entry.addenda.len());
    }
    out
}

/// carta-ach sees exactly what was written, and every control equals the recomputed totals.
fn assert_carta_sees(written: &Written, seen: &Value) {
    assert_eq!(seen["carta_rejects"], json!([]), "fields carta-ach's validators refuse");
    let lines = written.summary.lines;
    assert_eq!((seen["line_lengths"].clone(), seen["line_count"].as_u64().unwrap()), (json!([94]), lines));
    assert_eq!(lines % 10, 0, "blocked to 10");
    let h = &written.header;
    let want_header = json!({
        "immediate_destination": " 021000021", "immediate_origin": "1234567890",
        "creation_date": yymmdd(h.created.date()), "creation_time": format!("{:02}{:02}", h.created.hour(), h.created.minute()),
        "file_id_modifier": h.file_id_modifier.as_char().to_string(), "record_size": "094", "blocking_factor": "10",
        "destination_name": "ACME BANK", "origin_name": "ACME CORP",
    });
    assert_eq!(seen["file_header"], want_header);
    let batches = seen["batches"].as_array().unwrap();
    assert_eq!(batches.len(), written.batches.len());
    for (i, ((spec, entries), batch)) in written.batches.iter().zip(batches).enumerate() {
        assert_batch(i, spec, entries, batch);
    }
    assert_eq!(seen["file_control"], seen["computed"], "file control against carta's entries");
    let t = written.summary.control.totals;
    let want = json!({"entry_addenda_count": t.entry_addenda_count, "entry_hash": t.entry_hash, "debit": t.debit_cents, "credit": t.credit_cents, "batch_count": written.batches.len(), "block_count": lines / 10});
    assert_eq!(seen["file_control"], want);
}

fn assert_batch(i: usize, spec: &BatchSpec, entries: &[(EntryInput, TraceNumber)], batch: &Value) {
    let want = json!({
        "service_class": format!("{}", spec.service_class.code()),
        "company_name": spec.company_name.to_uppercase(), "company_id": spec.company_id,
        "sec": spec.sec.as_str(), "entry_description": spec.entry_description.to_uppercase(),
        "descriptive_date": spec.descriptive_date, "effective_entry_date": yymmdd(spec.effective_entry_date),
        "odfi": "02100002", "batch_number": i + 1,
    });
    for (key, value) in want.as_object().unwrap() {
        assert_eq!(&batch[key], value, "batch {} {key}", i + 1);
    }
    let want_entries: Vec<Value> = entries.iter().map(|(e, t)| entry_json(spec.sec, e, *t)).collect();
    assert_eq!(batch["entries"], json!(want_entries), "batch {} entries", i + 1);
    assert_eq!(batch["control"], batch["computed"], "batch {} control against carta's entries", i + 1);
    assert_eq!(batch["control_service_class"], batch["service_class"]);
}

/// Writes, checks with carta-ach, and parses back with our own parser too.
fn check_all(written: &[Written]) -> Vec<Value> {
    let paths: Vec<&Path> = written.iter().map(|w| w.path.as_path()).collect();
    let seen = carta(&paths);
    for (w, s) in written.iter().zip(&seen) {
        assert_carta_sees(w, s);
        parse(&std::fs::read_to_string(&w.path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", w.path.display()));
    }
    seen
}

fn remittance(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("RMR*IV*INV-{i:05}**{}.00*PO-{}", 100 + i, 7000 + i)).collect()
}

#[test]
fn b3_ppd_credits_and_debits_read_by_carta_ach() {
    let dir = tempfile::tempdir().unwrap();
    let ppd = spec("Acme Corp", SecCode::Ppd, date!(2026 - 07 - 06));
    let entries = vec![
        (ppd.clone(), entry(AccountType::Checking, Credit, "121141822", 125_000, "Jane Doe", &["Payroll July 2026".into()])),
        (ppd.clone(), entry(AccountType::Savings, Credit, "011000015", 9_999_999_999, "John Q. Public", &[])),
        (ppd.clone(), entry(AccountType::Checking, Debit, "026009593", 1, "Ana Lopez", &[])),
        (ppd, entry(AccountType::Savings, Debit, "322271627", 4_321, "Sam Smith", &["Membership dues".into()])),
    ];
    let written = write(dir.path(), "ppd.ach", header(datetime!(2026-07-02 09:30), 0), entries);
    let seen = check_all(&[written]);
    let codes: Vec<&str> =
        seen[0]["batches"][0]["entries"].as_array().unwrap().iter().map(|e| e["transaction_code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["22", "32", "27", "37"]);
    assert_eq!(seen[0]["batches"][0]["service_class"], "200", "credits and debits: mixed");
}

#[test]
fn b3_ccd_and_web_batches_read_by_carta_ach() {
    let dir = tempfile::tempdir().unwrap();
    let mut ccd = spec("Acme Corp", SecCode::Ccd, date!(2026 - 07 - 06));
    ccd.service_class = ServiceClass::CreditsOnly;
    let mut web = spec("Acme Corp", SecCode::Web, date!(2026 - 07 - 06));
    web.service_class = ServiceClass::DebitsOnly;
    let mut web_debit = entry(AccountType::Checking, Debit, "121141822", 1_999, "Pat Jones", &["Subscription 2026-07".into()]);
    web_debit.discretionary_data = "S".into();
    let entries = vec![
        (ccd.clone(), entry(AccountType::Checking, Credit, "021000021", 2_500_000, "Widgets Inc", &["Invoice 1001".into()])),
        (ccd, entry(AccountType::Checking, Credit, "011000015", 730_000, "Gadgets LLC", &[])),
        (web, web_debit),
    ];
    let written = write(dir.path(), "ccd-web.ach", header(datetime!(2026-07-02 10:30), 0), entries);
    let seen = check_all(&[written]);
    let classes: Vec<&str> = seen[0]["batches"].as_array().unwrap().iter().map(|b| b["service_class"].as_str().unwrap()).collect();
    assert_eq!(classes, ["220", "225"]);
    assert_eq!(seen[0]["batches"][1]["entries"][0]["discretionary_data"], "S", "WEB payment type code");
}

#[test]
fn b3_ctx_with_many_addenda_read_by_carta_ach() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = spec("Acme Corp", SecCode::Ctx, date!(2026 - 07 - 06));
    let entries = vec![
        (ctx.clone(), entry(AccountType::Checking, Credit, "121141822", 5_512_345, "Widgets Inc", &remittance(25))),
        (ctx.clone(), entry(AccountType::Checking, Debit, "021000021", 10_000, "Gadgets LLC", &remittance(3))),
        (ctx, entry(AccountType::Checking, Credit, "011000015", 700, "No Remittance Co", &[])),
    ];
    let written = write(dir.path(), "ctx.ach", header(datetime!(2026-07-02 11:00), 0), entries);
    assert_eq!(written.summary.control.totals.entry_addenda_count, 3 + 25 + 3);
    let seen = check_all(&[written]);
    let counts: Vec<u64> =
        seen[0]["batches"][0]["entries"].as_array().unwrap().iter().map(|e| e["number_of_addenda"].as_u64().unwrap()).collect();
    assert_eq!(counts, [25, 3, 0], "positions 55-58 count the addenda");
}

#[test]
fn b3_several_batches_one_per_company_sec_date_and_same_day_read_by_carta_ach() {
    let dir = tempfile::tempdir().unwrap();
    // A cut-off at 10:15 Eastern on Thursday July 2nd 2026 (EDT): high priority goes same-day,
    // normal priority on the next banking day, Friday July 3rd (July 4th is a Saturday and the
    // Fed does not observe it on the Friday).
    let cutoff = datetime!(2026-07-02 14:15 UTC);
    let (high, normal) = (effective_entry_date(cutoff, true), effective_entry_date(cutoff, false));
    assert_eq!((high.date, high.same_day, normal.date, normal.same_day), (date!(2026 - 07 - 02), true, date!(2026 - 07 - 03), false));
    let mut same_day = spec("Acme Corp", SecCode::Ppd, high.date);
    (same_day.same_day, same_day.descriptive_date) = (true, "SD1300".into());
    let next_day = spec("Acme Corp", SecCode::Ppd, normal.date);
    let other_company = spec("Acme Payroll", SecCode::Ppd, normal.date);
    let ccd = spec("Acme Corp", SecCode::Ccd, normal.date);
    // Entries arrive interleaved; grouping makes one batch per key.
    let mixed = vec![
        (next_day.clone(), entry(AccountType::Checking, Credit, "121141822", 100, "A One", &[])),
        (same_day.clone(), entry(AccountType::Checking, Credit, "021000021", 200, "B Two", &[])),
        (other_company.clone(), entry(AccountType::Savings, Credit, "011000015", 300, "C Three", &[])),
        (ccd.clone(), entry(AccountType::Checking, Debit, "026009593", 400, "D Four Inc", &[])),
        (next_day.clone(), entry(AccountType::Checking, Debit, "322271627", 500, "E Five", &[])),
        (same_day, entry(AccountType::Savings, Debit, "121141822", 600, "F Six", &[])),
        (other_company, entry(AccountType::Checking, Credit, "021000021", 700, "G Seven", &[])),
    ];
    let file = NachaFile::group(header(datetime!(2026-07-02 10:15), 0), mixed);
    assert_eq!(file.batches.len(), 4);
    let written = write_grouped(dir.path(), "batches.ach", &file);
    let seen = check_all(&[written]);
    let batches = seen[0]["batches"].as_array().unwrap();
    let summary: Vec<(&str, &str, &str, usize)> = batches
        .iter()
        .map(|b| {
            (
                b["company_name"].as_str().unwrap(),
                b["effective_entry_date"].as_str().unwrap(),
                b["descriptive_date"].as_str().unwrap(),
                b["entries"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("ACME CORP", "260703", "", 2),
            ("ACME CORP", "260702", "SD1300", 2),
            ("ACME PAYROLL", "260703", "", 2),
            ("ACME CORP", "260703", "", 1)
        ]
    );
    let traces: Vec<&str> =
        batches.iter().flat_map(|b| b["entries"].as_array().unwrap()).map(|e| e["trace_number"].as_str().unwrap()).collect();
    assert_eq!(traces.len(), 7);
    assert!(traces.windows(2).all(|w| w[0] < w[1]), "trace numbers rise through the file: {traces:?}");
}

#[test]
fn b3_blocking_edge_cases_ten_and_eleven_records_read_by_carta_ach() {
    let dir = tempfile::tempdir().unwrap();
    let ppd = spec("Acme Corp", SecCode::Ppd, date!(2027 - 12 - 31));
    let entries = |n: i64| {
        (1..=n).map(|i| (ppd.clone(), entry(AccountType::Checking, Credit, "121141822", i * 100, "Jane Doe", &[]))).collect::<Vec<_>>()
    };
    // 1 header + 1 batch header + 6 entries + 1 batch control + 1 file control = 10 records.
    let ten = write(dir.path(), "ten.ach", header(datetime!(2027-12-30 16:45), 0), entries(6));
    let eleven = write(dir.path(), "eleven.ach", header(datetime!(2027-12-30 16:45), 1), entries(7));
    let seen = check_all(&[ten, eleven]);
    let shape = |s: &Value| {
        (s["line_count"].as_u64().unwrap(), s["padding_lines"].as_u64().unwrap(), s["file_control"]["block_count"].as_u64().unwrap())
    };
    assert_eq!(shape(&seen[0]), (10, 0, 1), "exactly one block, no padding");
    assert_eq!(shape(&seen[1]), (20, 9, 2), "eleven records: two blocks, nine padding records");
    assert_eq!(seen[1]["file_header"]["file_id_modifier"], "B", "the day's second file");
}

#[test]
fn b3_prenotes_and_a_large_file_read_by_carta_ach() {
    let dir = tempfile::tempdir().unwrap();
    let ppd = spec("Acme Corp", SecCode::Ppd, date!(2026 - 11 - 27));
    let routings = ["121141822", "021000021", "011000015", "026009593", "322271627"];
    let mut entries: Vec<_> = [AccountType::Checking, AccountType::Savings]
        .into_iter()
        .flat_map(|a| [Credit, Debit].map(|d| (a, d)))
        .map(|(a, d)| {
            let mut prenote = entry(a, d, "121141822", 1, "Prenote Test", &[]);
            (prenote.transaction_code, prenote.amount_cents) = (TransactionCode::prenote(a, d), 0);
            (ppd.clone(), prenote)
        })
        .collect();
    // Enough entries that the entry hash passes 10 digits and wraps (sum of RDFIs mod 10^10).
    entries.extend((0..1500).map(|i| {
        (
            ppd.clone(),
            entry(AccountType::Checking, if i % 3 == 0 { Debit } else { Credit }, routings[i % 5], 1_000 + i as i64, "Bulk Payee", &[]),
        )
    }));
    let written = write(dir.path(), "large.ach", header(datetime!(2026-11-25 16:45), 2), entries);
    let hash_sum: u64 = (0..1500).map(|i| routings[i % 5][..8].parse::<u64>().unwrap()).sum::<u64>() + 4 * 12_114_182;
    assert!(hash_sum >= 10_000_000_000, "the sum overflows 10 digits");
    assert_eq!(written.summary.control.totals.entry_hash, hash_sum % 10_000_000_000);
    let seen = check_all(&[written]);
    let codes: Vec<&str> =
        seen[0]["batches"][0]["entries"].as_array().unwrap()[..4].iter().map(|e| e["transaction_code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["23", "28", "33", "38"]);
}
