//! The bank's answers (SPEC B4, B5, B6, K): files dropped in a live connection's inbound folder
//! are read by `payrail bank inbound` (as the server's worker does each tick), each applied once
//! and whole: `pain.002` rejections fail orders, NACHA returns return them, `camt.053`
//! statements make transactions and balance reports and complete the orders they settle.
//! Unreadable files are moved aside and change nothing; the same bytes twice change nothing.

#[macro_use]
mod common;

use std::path::{Path, PathBuf};

use common::bank::*;
use common::{TestServer, json};
use serde_json::{Value, json};

const PAIN002_XSD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/compat/iso20022/xsd/pain.002.001.03.xsd");

/// A server whose bank worker never runs, so `payrail bank inbound` is the only reader of
/// the folders and its output says what happened.
async fn quiet_server() -> TestServer {
    TestServer::start_with(|config| config.bank_tick_ms = 0).await
}

/// The connection's inbound folder (next to its outbound one).
fn inbound(live: &Live) -> PathBuf {
    live.outbound.parent().unwrap().join("inbound")
}

/// Drops `bytes` in the inbound folder as `name`, as the bank would (whole, then renamed).
fn drop_file(live: &Live, name: &str, bytes: &[u8]) {
    let dir = inbound(live);
    std::fs::create_dir_all(&dir).unwrap();
    let part = dir.join(format!(".{name}.tmp"));
    std::fs::write(&part, bytes).unwrap();
    std::fs::rename(&part, dir.join(name)).unwrap();
}

/// Runs `payrail bank inbound CONNECTION`; its stdout.
async fn read_inbound(server: &TestServer, live: &Live) -> String {
    let output = common::cli(server, &["bank", "inbound", &live.connection]).await;
    assert!(output.status.success(), "bank inbound: {}\n{}", text(&output.stdout), text(&output.stderr));
    text(&output.stdout)
}

/// Runs a cut-off now; every order it carried is `sent` after it.
async fn cutoff_now(server: &TestServer, live: &Live) {
    let output = common::cli(server, &["bank", "cutoff", &live.connection]).await;
    assert!(output.status.success(), "bank cutoff: {}\n{}", text(&output.stdout), text(&output.stderr));
}

/// The order's `EndToEndId` in its pain.001: its UUID without dashes.
fn end_to_end_id(order: &Value) -> String {
    order["id"].as_str().unwrap().replace('-', "")
}

/// A `pain.002.001.03` status report with one transaction status per `(end-to-end id, status,
/// reason code)`, as a bank writes it.
fn pain002(statuses: &[(&str, &str, Option<&str>)]) -> String {
    let mut tx = String::new();
    for (e2e, status, reason) in statuses {
        let reason = reason
            .map(|code| format!("<StsRsnInf><Rsn><Cd>{code}</Cd></Rsn><AddtlInf>Closed account number</AddtlInf></StsRsnInf>"))
            .unwrap_or_default();
        tx.push_str(&format!("<TxInfAndSts><OrgnlEndToEndId>{e2e}</OrgnlEndToEndId><TxSts>{status}</TxSts>{reason}</TxInfAndSts>"));
    }
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:pain.002.001.03"><CstmrPmtStsRpt><GrpHdr><MsgId>STS-20261126-1</MsgId><CreDtTm>2026-11-26T10:00:00</CreDtTm></GrpHdr><OrgnlGrpInfAndSts><OrgnlMsgId>PAYRAIL-1</OrgnlMsgId><OrgnlMsgNmId>pain.001.001.09</OrgnlMsgNmId></OrgnlGrpInfAndSts><OrgnlPmtInfAndSts><OrgnlPmtInfId>PMT-1</OrgnlPmtInfId>{tx}</OrgnlPmtInfAndSts></CstmrPmtStsRpt></Document>
"#
    )
}

fn assert_xsd_valid(xsd: &str, bytes: &[u8]) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), bytes).unwrap();
    let output = std::process::Command::new("xmllint").args(["--noout", "--schema", xsd]).arg(file.path()).output().expect("xmllint");
    let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success() && said.contains("validates"), "the sample fails the official XSD:\n{said}");
}

async fn events_of(server: &TestServer, live: &Live, entity: &str) -> Vec<String> {
    let (status, body) = json(server.get(&format!("/api/events?entity_id={entity}"), &live.key).send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    body.as_array().unwrap().iter().map(|e| e["event_name"].as_str().unwrap().to_owned()).collect()
}

fn names_in(dir: &Path) -> Vec<String> {
    if !dir.exists() {
        return Vec::new();
    }
    let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

on_both_stores! {
    /// B4, B5, B6: a pain.002 rejection fails the wire order it names (reason kept), once; the
    /// file leaves the inbound folder, is listed as received (with the order it moved) and shown
    /// byte for byte, beside the sent file (with the orders it carried); the same
    /// bytes again under another name change nothing; an accepted status moves nothing.
    #[tokio::test]
    async fn b5_a_pain002_rejection_fails_the_order_once_and_the_file_is_kept() {
        let server = quiet_server().await;
        let live = live(&server, "acme").await;
        let rejected = order(&server, &live, json!({"type": "wire", "amount": 1_000_000, "direction": "credit", "receiving_account": wire_receiving("Widgets Inc")})).await;
        let accepted = order(&server, &live, json!({"type": "wire", "amount": 5_000, "direction": "credit", "receiving_account": wire_receiving("Gadgets LLC")})).await;
        cutoff_now(&server, &live).await;
        let id = rejected["id"].as_str().unwrap();
        assert_eq!(get_order(&server, &live, id).await["status"], "sent");

        let report = pain002(&[(&end_to_end_id(&rejected), "RJCT", Some("AC04")), (&end_to_end_id(&accepted), "ACCP", None)]);
        assert_xsd_valid(PAIN002_XSD, report.as_bytes());
        drop_file(&live, "status-1.xml", report.as_bytes());
        let printed = read_inbound(&server, &live).await;
        assert!(printed.contains("status-1.xml") && printed.contains("applied") && printed.contains("orders=1"), "{printed}");

        let failed = get_order(&server, &live, id).await;
        assert_eq!(failed["status"], "failed", "{failed}");
        assert_eq!(failed["vendor_failure_reason"], "AC04: Closed account number");
        assert_eq!(get_order(&server, &live, accepted["id"].as_str().unwrap()).await["status"], "sent", "ACCP moves nothing");
        assert_eq!(events_of(&server, &live, id).await.iter().filter(|e| *e == "failed").count(), 1);
        assert!(names_in(&inbound(&live)).is_empty(), "an applied file leaves the folder");

        let files = bank_files(&server, &live.connection).await;
        let received: Vec<&Value> = files.iter().filter(|f| f["direction"] == "inbound").collect();
        assert_eq!(received.len(), 1, "{files:?}");
        assert_eq!((received[0]["status"].as_str(), received[0]["rail"].as_str()), (Some("applied"), Some("pain.002")));
        assert_eq!(received[0]["sha256"], sha256_hex(report.as_bytes()));
        assert_eq!((&received[0]["orders"], &received[0]["order_count"]), (&json!([id]), &json!(1)), "the orders it moved, by id");
        let sent: Vec<&Value> = files.iter().filter(|f| f["direction"] == "outbound").collect();
        assert_eq!(sent.len(), 1, "{files:?}");
        let mut carried = vec![id, accepted["id"].as_str().unwrap()];
        carried.sort_unstable();
        let mut listed: Vec<&str> = sent[0]["orders"].as_array().unwrap().iter().map(|o| o.as_str().unwrap()).collect();
        listed.sort_unstable();
        assert_eq!((listed, &sent[0]["order_count"]), (carried, &json!(2)), "the orders the wire file carried, by id");
        let shown = common::cli(&server, &["bank", "files", "show", received[0]["id"].as_str().unwrap()]).await;
        assert!(shown.status.success(), "{}", text(&shown.stderr));
        assert_eq!(shown.stdout, report.as_bytes(), "kept byte for byte");

        // The same bytes again, under another name: applied before, nothing changes.
        drop_file(&live, "status-1-again.xml", report.as_bytes());
        let printed = read_inbound(&server, &live).await;
        assert!(printed.contains("applied before"), "{printed}");
        assert_eq!(events_of(&server, &live, id).await.iter().filter(|e| *e == "failed").count(), 1, "never failed twice");
        assert_eq!(bank_files(&server, &live.connection).await.iter().filter(|f| f["direction"] == "inbound").count(), 1);
        assert!(names_in(&inbound(&live)).is_empty());
    }

    /// B5: a file that cannot be read is moved aside (`rejected/NAME`), recorded as rejected with
    /// the reason and an event, and changes nothing else; a partial (truncated) file the same.
    #[tokio::test]
    async fn b5_an_unreadable_file_is_moved_aside_and_changes_nothing() {
        let server = quiet_server().await;
        let live = live(&server, "acme").await;
        let wire = order(&server, &live, json!({"type": "wire", "amount": 7_000, "direction": "credit", "receiving_account": wire_receiving("Widgets Inc")})).await;
        cutoff_now(&server, &live).await;
        let report = pain002(&[(&end_to_end_id(&wire), "RJCT", Some("AC04"))]);
        let truncated = &report.as_bytes()[..report.len() / 2];
        drop_file(&live, "garbage.txt", b"this is not a bank file\n");
        drop_file(&live, "truncated.xml", truncated);
        let printed = read_inbound(&server, &live).await;
        assert!(printed.matches("rejected").count() >= 2, "{printed}");

        assert_eq!(get_order(&server, &live, wire["id"].as_str().unwrap()).await["status"], "sent", "nothing moved");
        assert!(names_in(&inbound(&live)).iter().all(|n| n == "rejected"), "{:?}", names_in(&inbound(&live)));
        assert_eq!(names_in(&inbound(&live).join("rejected")), ["garbage.txt", "truncated.xml"]);
        let files = bank_files(&server, &live.connection).await;
        let rejected: Vec<&Value> = files.iter().filter(|f| f["direction"] == "inbound").collect();
        assert_eq!(rejected.len(), 2);
        for file in rejected {
            assert_eq!(file["status"], "rejected");
            assert!(file["error"].as_str().is_some_and(|e| !e.is_empty()), "{file}");
            assert_eq!(events_of(&server, &live, file["id"].as_str().unwrap()).await, ["rejected"]);
        }
    }
}

/// Registers a live SFTP connection to `sshd` for `org` (its folders under the server's dir)
/// with an internal account on it.
async fn sftp_live(server: &TestServer, sshd: &common::sshd::Sshd, org: &str) -> (Live, PathBuf) {
    let key = server.key_for(org, payrail::domain::api_key::Mode::Live).await;
    let root = sshd.dir().join(format!("bank-{org}"));
    for folder in ["outbound", "inbound"] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
    }
    let identity = server.dir.path().join(format!("{org}_ed25519"));
    std::fs::write(&identity, &sshd.user_key.private).unwrap();
    let transport = sshd.transport_toml(&identity, &root);
    let connection = add_connection(server, &root, &config_toml(org, &far_cutoff(), &transport)).await;
    let body = json!({"name": "Operating", "currency": "USD", "party_name": "Acme Corp", "connection_id": connection});
    let (status, account) = json(server.post("/api/internal_accounts", &key, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "{account}");
    let live = Live { key, connection, outbound: root.join("outbound"), account: account["id"].as_str().unwrap().to_owned() };
    (live, root.join("inbound"))
}

/// B2, B5 over SFTP against a real OpenSSH server: the cut-off uploads its files to the bank's
/// server (whole: no `.part` left) and the orders end `sent`; the bank's pain.002 left in its
/// inbound folder is fetched, applied (the rejected order fails) and removed from the server.
#[tokio::test]
async fn b2_b5_a_cutoff_and_an_answer_travel_over_sftp() {
    let sshd = common::sshd::Sshd::start();
    let server = quiet_server().await;
    let (live, inbound_dir) = sftp_live(&server, &sshd, "acme").await;
    let ach = order(
        &server,
        &live,
        json!({"type": "ach", "amount": 12_500, "direction": "credit", "receiving_account": ach_receiving("Jane Doe")}),
    )
    .await;
    let wire = order(
        &server,
        &live,
        json!({"type": "wire", "amount": 900_000, "direction": "credit", "receiving_account": wire_receiving("Widgets Inc")}),
    )
    .await;
    cutoff_now(&server, &live).await;
    let uploaded = names_in(&live.outbound);
    assert_eq!(uploaded.len(), 2, "one file per rail: {uploaded:?}\n{}", sshd.log());
    assert!(uploaded.iter().all(|n| !n.ends_with(".part")), "{uploaded:?}");
    for created in [&ach, &wire] {
        assert_eq!(get_order(&server, &live, created["id"].as_str().unwrap()).await["status"], "sent");
    }

    let report = pain002(&[(&end_to_end_id(&wire), "RJCT", Some("AC04"))]);
    std::fs::write(inbound_dir.join("pain002-1.xml"), report.as_bytes()).unwrap();
    let printed = read_inbound(&server, &live).await;
    assert!(printed.contains("orders=1"), "{printed}");
    assert_eq!(get_order(&server, &live, wire["id"].as_str().unwrap()).await["status"], "failed");
    assert_eq!(get_order(&server, &live, ach["id"].as_str().unwrap()).await["status"], "sent");
    assert!(names_in(&inbound_dir).is_empty(), "the applied file is removed from the bank's server");
}

/// A NACHA answer file for the entries of the sent ACH file `sent`: each `(trace, kind)` is
/// answered as the receiving bank would (returns with their code, or a notification of change).
fn nacha_answers(sent: &[u8], answers: &[(String, payrail::bank::formats::nacha::answers::AnswerKind)]) -> Vec<u8> {
    use payrail::bank::formats::nacha::answers::{AnswerWriter, EntryAnswer};
    let payments = payrail::sandbox::payments::read(sent).unwrap();
    let parsed = payrail::bank::formats::nacha::parse(std::str::from_utf8(sent).unwrap()).unwrap();
    let day = parsed.header.created.date();
    let mut writer = AnswerWriter::new(Vec::new(), &parsed.header, day).unwrap();
    for (trace, kind) in answers {
        let original = payments.iter().find_map(|p| p.ach.clone().filter(|e| e.trace.to_string() == *trace)).expect("the trace was sent");
        writer.push(&EntryAnswer { original, kind: kind.clone() }).unwrap();
    }
    writer.finish().unwrap().0
}

/// The trace number the cut-off gave an ACH order.
fn trace_of(order: &Value) -> String {
    order["reference_numbers"].as_array().unwrap().iter().find(|r| r["reference_number_type"] == "ach_trace_number").unwrap()["reference_number"]
        .as_str()
        .unwrap()
        .to_owned()
}

on_both_stores! {
    /// B5: a NACHA return returns the order its trace number names (code and NACHA's reason,
    /// event `returned`), a notification of change corrects the receiving external account
    /// (C01: the account number; event `updated`), an unknown trace changes nothing and is
    /// counted as unmatched; the same file again changes nothing.
    #[tokio::test]
    async fn b5_nacha_returns_and_notifications_of_change_apply_once() {
        use payrail::bank::formats::nacha::answers::AnswerKind;
        let server = quiet_server().await;
        let live = live(&server, "acme").await;
        let returned = order(&server, &live, json!({"type": "ach", "amount": 12_500, "direction": "credit", "receiving_account": ach_receiving("Jane Doe")})).await;
        let corrected = order(&server, &live, json!({"type": "ach", "amount": 7_700, "direction": "credit", "receiving_account": ach_receiving("Sam Smith")})).await;
        cutoff_now(&server, &live).await;
        let returned = get_order(&server, &live, returned["id"].as_str().unwrap()).await;
        let corrected = get_order(&server, &live, corrected["id"].as_str().unwrap()).await;
        let sent = folder(&live.outbound).into_values().next().unwrap();

        let answers = nacha_answers(
            &sent,
            &[
                (trace_of(&returned), AnswerKind::Return { code: "R03".into(), date_of_death: None, information: "NO ACCOUNT".into() }),
                (trace_of(&corrected), AnswerKind::Change { code: "C01".into(), corrected_data: "5550001111".into() }),
            ],
        );
        drop_file(&live, "returns-1.ach", &answers);
        let printed = read_inbound(&server, &live).await;
        assert!(printed.contains("orders=1") && printed.contains("returns=1"), "{printed}");

        let id = returned["id"].as_str().unwrap();
        let now_returned = get_order(&server, &live, id).await;
        assert_eq!(now_returned["status"], "returned", "{now_returned}");
        assert_eq!(now_returned["current_return"]["code"], "R03");
        assert_eq!(now_returned["current_return"]["reason"], "No Account/Unable to Locate Account");
        assert_eq!(events_of(&server, &live, id).await.iter().filter(|e| *e == "returned").count(), 1);

        let account_id = corrected["receiving_account_id"].as_str().unwrap();
        let (status, account) = json(server.get(&format!("/api/external_accounts/{account_id}"), &live.key).send().await.unwrap()).await;
        assert_eq!(status, 200, "{account}");
        assert_eq!(account["account_details"][0]["account_number"], "5550001111", "C01 corrected the account number");
        assert_eq!(events_of(&server, &live, account_id).await.iter().filter(|e| *e == "updated").count(), 1);
        assert_eq!(get_order(&server, &live, corrected["id"].as_str().unwrap()).await["status"], "sent", "a notification of change moves no order");

        drop_file(&live, "returns-1-again.ach", &answers);
        assert!(read_inbound(&server, &live).await.contains("applied before"));
        assert_eq!(events_of(&server, &live, id).await.iter().filter(|e| *e == "returned").count(), 1, "never returned twice");
        assert_eq!(events_of(&server, &live, account_id).await.iter().filter(|e| *e == "updated").count(), 1);

        // The account changes after the entry was sent (here the client's edit; a later
        // correction does the same): a bank sending a notification for that entry again, in a
        // file of other bytes, does not roll the account back.
        server.clock.advance_secs(5);
        let (status, _) = json(server.patch(&format!("/api/external_accounts/{account_id}"), &live.key, &json!({"party_name": "Samuel Smith"})).send().await.unwrap()).await;
        assert_eq!(status, 200);
        let stale = nacha_answers(&sent, &[(trace_of(&corrected), AnswerKind::Change { code: "C01".into(), corrected_data: "5550002222".into() })]);
        drop_file(&live, "returns-resent.ach", &stale);
        let printed = read_inbound(&server, &live).await;
        assert!(printed.contains(" applied ") && printed.contains("unmatched=1"), "{printed}");
        let (_, account) = json(server.get(&format!("/api/external_accounts/{account_id}"), &live.key).send().await.unwrap()).await;
        assert_eq!(account["account_details"][0]["account_number"], "5550001111", "not rolled back: {account}");
        assert_eq!(account["party_name"], "Samuel Smith");
    }
}

/// A second live connection of `live`'s tenant, with the same ACH identities (so the same ODFI),
/// its own folders and an internal account on it.
async fn second_connection(server: &TestServer, live: &Live, org: &str) -> Live {
    let dir = server.dir.path().join(format!("bank-{org}-2"));
    std::fs::create_dir_all(&dir).unwrap();
    let config = config_toml(org, &far_cutoff(), "kind = \"directory\"\noutbound_dir = \"outbound\"\ninbound_dir = \"inbound\"");
    let connection = add_connection(server, &dir, &config).await;
    let body = json!({"name": "Second", "currency": "USD", "party_name": "Acme Corp", "connection_id": connection});
    let (status, account) = json(server.post("/api/internal_accounts", &live.key, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "{account}");
    let key = live.key.clone();
    Live { key, connection, outbound: dir.join("outbound").canonicalize().unwrap(), account: account["id"].as_str().unwrap().to_owned() }
}

/// The NACHA return of `order`'s entry (`code`), from whichever of `live`'s sent files carried it.
fn return_of(live: &Live, order: &Value, code: &str) -> Vec<u8> {
    use payrail::bank::formats::nacha::answers::AnswerKind;
    let trace = trace_of(order);
    let sent = folder(&live.outbound)
        .into_values()
        .find(|bytes| {
            payrail::sandbox::payments::read(bytes).unwrap().iter().any(|p| p.ach.as_ref().is_some_and(|e| e.trace.to_string() == trace))
        })
        .expect("a sent file carried the trace");
    nacha_answers(&sent, &[(trace, AnswerKind::Return { code: code.into(), date_of_death: None, information: String::new() })])
}

on_both_stores! {
    /// B3, B5: trace numbers are unique across a connection's files, not only within one (the
    /// second file of the day goes on from the first), and a return names an order only among
    /// those its own connection sent: a second connection with the same ODFI numbers its own
    /// entries from 1, and a return of that trace on one connection never touches the other's.
    #[tokio::test]
    async fn b3_b5_trace_numbers_are_unique_per_connection_and_returns_stay_on_theirs() {
        let server = quiet_server().await;
        let first = live(&server, "acme").await;
        let other = second_connection(&server, &first, "acme").await;
        let ach = |name: &str| json!({"type": "ach", "amount": 2_500, "direction": "credit", "receiving_account": ach_receiving(name)});
        let a = order(&server, &first, ach("Ann")).await;
        cutoff_now(&server, &first).await;
        let b = order(&server, &first, ach("Bob")).await;
        cutoff_now(&server, &first).await;
        let c = order(&server, &other, ach("Cat")).await;
        cutoff_now(&server, &other).await;
        let [a, b, c] = [(&first, &a), (&first, &b), (&other, &c)];
        let a = get_order(&server, a.0, a.1["id"].as_str().unwrap()).await;
        let b = get_order(&server, b.0, b.1["id"].as_str().unwrap()).await;
        let c = get_order(&server, c.0, c.1["id"].as_str().unwrap()).await;
        assert_eq!(folder(&first.outbound).len(), 2, "two files on the first connection");
        let sequence = |o: &Value| trace_of(o)[8..].parse::<u32>().unwrap();
        assert_eq!((sequence(&a), sequence(&b)), (1, 2), "the second file goes on from the first");
        assert_eq!(trace_of(&c), trace_of(&a), "the other connection, same ODFI, numbers its own entries from 1");

        drop_file(&other, "returns-other.ach", &return_of(&other, &c, "R02"));
        read_inbound(&server, &other).await;
        assert_eq!(get_order(&server, &other, c["id"].as_str().unwrap()).await["status"], "returned");
        assert_eq!(get_order(&server, &first, a["id"].as_str().unwrap()).await["status"], "sent", "not the other connection's order");

        // The first connection's return of the same trace number names its own order, not the
        // other connection's newer one.
        drop_file(&first, "returns-first.ach", &return_of(&first, &a, "R01"));
        read_inbound(&server, &first).await;
        let returned = get_order(&server, &first, a["id"].as_str().unwrap()).await;
        assert_eq!((returned["status"].as_str(), returned["current_return"]["code"].as_str()), (Some("returned"), Some("R01")));
        assert_eq!(get_order(&server, &other, c["id"].as_str().unwrap()).await["current_return"]["code"], "R02", "untouched");
        assert_eq!(get_order(&server, &first, b["id"].as_str().unwrap()).await["status"], "sent");
    }
}

/// A `camt.053` of `n` booked credits of 1.00 to account `number`, as a bank writes it.
fn statement(number: &str, n: usize) -> Vec<u8> {
    use payrail::domain::bank_answer::EntryDirection;
    statement_of(number, (0..n).map(|_| unnamed(number, 100, EntryDirection::Credit, "2026-11-26")).collect())
}

/// A booked entry of account `number` naming no order, as a bank writes it.
fn unnamed(
    number: &str,
    amount: i64,
    direction: payrail::domain::bank_answer::EntryDirection,
    booked: &str,
) -> payrail::domain::bank_answer::StatementEntry {
    payrail::domain::bank_answer::StatementEntry {
        account: payrail::domain::bank_answer::AccountRef { iban: None, account_number: Some(number.to_owned()) },
        amount,
        currency: payrail::domain::money::Currency::USD,
        direction,
        booking_date: booked.to_owned(),
        booking_time: None,
        value_date: None,
        end_to_end_id: None,
        ach_trace_number: None,
        bank_reference: None,
        description: "INCOMING ACH".into(),
        rail: Some("ach".into()),
        reversal: false,
        return_code: None,
        counterparty: None,
    }
}

/// A `camt.053` of account `number` with `entries` (each given a bank reference), as a bank
/// writes it.
fn statement_of(number: &str, entries: Vec<payrail::domain::bank_answer::StatementEntry>) -> Vec<u8> {
    use payrail::bank::formats::iso20022::camt::{CamtWriter, ReportHeader};
    use payrail::domain::bank_answer::{AccountRef, StatementBalance};
    let usd = payrail::domain::money::Currency::USD;
    let account = AccountRef { iban: None, account_number: Some(number.to_owned()) };
    let balance = |balance_type: &str, amount| StatementBalance {
        account: account.clone(),
        balance_type: balance_type.into(),
        amount,
        currency: usd,
        as_of_date: "2026-11-26".into(),
        as_of_time: None,
    };
    let total: i64 = entries.iter().map(|e| e.amount).sum();
    let header = ReportHeader {
        message_id: format!("STMT-{}-{total}", entries.len()),
        created_at: time::OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(13 * 3600 + 45 * 60 + 30),
        report_id: format!("STMT-{}", entries.len()),
        account: account.clone(),
        currency: usd,
    };
    let mut writer = CamtWriter::statement(Vec::new(), &header, &[balance("opening_ledger", 0), balance("closing_ledger", total)]).unwrap();
    for mut entry in entries {
        // The bank's own reference of each booking, unique as a bank's is, unless the test
        // names one (the same booking told again).
        entry.bank_reference.get_or_insert_with(|| payrail::domain::common::new_id().replace('-', ""));
        writer.entry(&entry).unwrap();
    }
    writer.finish().unwrap()
}

/// A camt.054 (an intraday notification) of `entries` on account `number`, each keeping the
/// bank reference it names.
fn notification_of(number: &str, entries: Vec<payrail::domain::bank_answer::StatementEntry>) -> Vec<u8> {
    use payrail::bank::formats::iso20022::camt::{CamtWriter, ReportHeader};
    let account = payrail::domain::bank_answer::AccountRef { iban: None, account_number: Some(number.to_owned()) };
    let header = ReportHeader {
        message_id: format!("N{}", payrail::domain::common::new_id().replace('-', "")),
        created_at: time::OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(10 * 3600),
        report_id: format!("NTFCTN-{}", entries.len()),
        account,
        currency: payrail::domain::money::Currency::USD,
    };
    let mut writer = CamtWriter::notification(Vec::new(), &header).unwrap();
    for entry in &entries {
        writer.entry(entry).unwrap();
    }
    writer.finish().unwrap()
}

on_both_stores! {
    /// B5: the bank's answers in the order real banks send them. A return's money booked
    /// before the order's own (an intraday reversal ahead of yesterday's statement) leaves the
    /// order's booking to be linked when it comes; an entry that names no order is matched by
    /// amount only among the orders the rest of its file does not name; a dishonored or
    /// contested return (R61 to R77) answers a return, so it returns nothing.
    #[tokio::test]
    async fn b5_answers_in_real_banks_order_settle_each_booking_once() {
        use payrail::bank::formats::nacha::answers::AnswerKind;
        use payrail::domain::bank_answer::EntryDirection::{Credit, Debit};
        let server = quiet_server().await;
        let live = live(&server, "acme").await;
        let wire = order(&server, &live, json!({"type": "wire", "amount": 5_010, "direction": "credit", "receiving_account": wire_receiving("Widgets Inc")})).await;
        let named = order(&server, &live, json!({"type": "ach", "amount": 1_017, "direction": "credit", "receiving_account": ach_receiving("Jane Doe")})).await;
        let dishonored = order(&server, &live, json!({"type": "ach", "amount": 2_222, "direction": "credit", "receiving_account": ach_receiving("Sam Smith")})).await;
        cutoff_now(&server, &live).await;
        let (wire, named, dishonored) = (
            get_order(&server, &live, wire["id"].as_str().unwrap()).await,
            get_order(&server, &live, named["id"].as_str().unwrap()).await,
            get_order(&server, &live, dishonored["id"].as_str().unwrap()).await,
        );
        let day = wire["effective_date"].as_str().unwrap().to_owned();
        let ours = account_number(&server, &live).await;
        let wire_entry = |direction, reversal| {
            let mut entry = unnamed(&ours, 5_010, direction, &day);
            (entry.end_to_end_id, entry.reversal, entry.rail) = (Some(end_to_end_id(&wire)), reversal, Some("wire".into()));
            entry
        };
        drop_file(&live, "intraday-reversal.xml", &notification_of(&ours, vec![wire_entry(Credit, true)]));
        read_inbound(&server, &live).await;
        let mut fee = unnamed(&ours, 1_017, Debit, &day);
        fee.description = "SERVICE FEE".into();
        let mut by_trace = unnamed(&ours, 1_017, Debit, &day);
        by_trace.ach_trace_number = Some(trace_of(&named));
        drop_file(&live, "statement.xml", &statement_of(&ours, vec![wire_entry(Debit, false), fee, by_trace]));
        read_inbound(&server, &live).await;

        let wire = get_order(&server, &live, wire["id"].as_str().unwrap()).await;
        let return_booking = wire["current_return"]["transaction_id"].as_str().unwrap().to_owned();
        let own: Vec<&Value> = wire["transaction_ids"].as_array().unwrap().iter().filter(|t| **t != return_booking.as_str()).collect();
        assert_eq!((wire["status"].as_str(), own.len()), (Some("returned"), 1), "the order's own debit is linked too: {wire}");
        let named = get_order(&server, &live, named["id"].as_str().unwrap()).await;
        assert_eq!(named["status"], "completed");
        let linked = named["transaction_ids"][0].as_str().unwrap();
        let txn = get_json(&server, &live, &format!("/api/transactions/{linked}")).await;
        assert_eq!(txn["vendor_description"], "INCOMING ACH", "the line naming the order settles it, not the fee: {txn}");
        let fees: Vec<Value> = transactions(&server, &live).await.into_iter().filter(|t| t["vendor_description"] == "SERVICE FEE").collect();
        assert_eq!((fees.len(), &fees[0]["reconciled"]), (1, &json!(false)), "the fee stays the account's own: {fees:?}");

        let sent = folder(&live.outbound).into_iter().find(|(name, _)| name.ends_with(".ach")).unwrap().1;
        let kind = AnswerKind::Return { code: "R61".into(), date_of_death: None, information: "MISROUTED RETURN".into() };
        drop_file(&live, "dishonored.ach", &nacha_answers(&sent, &[(trace_of(&dishonored), kind)]));
        let printed = read_inbound(&server, &live).await;
        assert!(printed.contains("returns=0") && printed.contains("unmatched=1"), "{printed}");
        assert_eq!(get_order(&server, &live, dishonored["id"].as_str().unwrap()).await["status"], "sent");

        // Banks zero-pad account numbers: the statement is still this account's.
        let padded = format!("0000{ours}");
        drop_file(&live, "padded.xml", &statement_of(&padded, vec![unnamed(&padded, 4_242, Credit, &day)]));
        read_inbound(&server, &live).await;
        assert!(transactions(&server, &live).await.iter().any(|t| t["amount"] == 4_242), "booked on the account its number names");
    }
}

on_both_stores! {
    /// B5: a bank tells one booking twice, in an intraday camt.054 and again in the day's
    /// camt.053 (the same bank reference, account, direction, amount, booking date and order
    /// reference): it is one transaction, the order it settles is settled once, and incoming
    /// money is counted once. Within one file every entry is a booking (a batch's equal items
    /// share its reference), and a later file telling them again books none of them; another
    /// booking of the same amount, with its own reference or on another day, is its own.
    #[tokio::test]
    async fn b5_one_booking_told_twice_is_one_transaction() {
        use payrail::domain::bank_answer::EntryDirection::{Credit, Debit};
        let server = quiet_server().await;
        let live = live(&server, "acme").await;
        let wire = order(&server, &live, json!({"type": "wire", "amount": 7_500, "direction": "credit", "receiving_account": wire_receiving("Widgets Inc")})).await;
        cutoff_now(&server, &live).await;
        let day = wire["effective_date"].as_str().unwrap().to_owned();
        let ours = account_number(&server, &live).await;
        let with_reference = |mut entry: payrail::domain::bank_answer::StatementEntry, reference: &str| {
            entry.bank_reference = Some(reference.into());
            entry
        };
        let mut paid = with_reference(unnamed(&ours, 7_500, Debit, &day), "BREF-W1");
        (paid.end_to_end_id, paid.rail) = (Some(end_to_end_id(&wire)), Some("wire".into()));
        let incoming = with_reference(unnamed(&ours, 12_345, Credit, &day), "BREF-IN-1");

        drop_file(&live, "intraday.xml", &notification_of(&ours, vec![paid.clone(), incoming.clone()]));
        read_inbound(&server, &live).await;
        assert_eq!(transactions(&server, &live).await.len(), 2);
        let settled = get_order(&server, &live, wire["id"].as_str().unwrap()).await;
        assert_eq!((settled["status"].as_str(), settled["transaction_ids"].as_array().map(Vec::len)), (Some("completed"), Some(1)));

        drop_file(&live, "statement.xml", &statement_of(&ours, vec![paid.clone(), incoming.clone()]));
        let printed = read_inbound(&server, &live).await;
        assert!(printed.contains(" applied ") && printed.contains("transactions=0"), "{printed}");
        assert_eq!(transactions(&server, &live).await.len(), 2, "the day's statement tells the same two bookings");
        assert_eq!(get_order(&server, &live, wire["id"].as_str().unwrap()).await, settled);

        let item = with_reference(unnamed(&ours, 500, Credit, &day), "BATCH-1");
        drop_file(&live, "batch.xml", &notification_of(&ours, vec![item.clone(), item.clone()]));
        read_inbound(&server, &live).await;
        assert_eq!(transactions(&server, &live).await.len(), 4, "a batch's two equal items are two bookings");
        drop_file(&live, "batch-again.xml", &statement_of(&ours, vec![item.clone(), item]));
        read_inbound(&server, &live).await;
        assert_eq!(transactions(&server, &live).await.len(), 4, "told again: none of them booked twice");

        let later = unnamed(&ours, 12_345, Credit, "2026-12-31");
        drop_file(&live, "another.xml", &statement_of(&ours, vec![with_reference(incoming, "BREF-IN-3"), with_reference(later, "BREF-IN-1")]));
        read_inbound(&server, &live).await;
        let amounts: Vec<i64> = transactions(&server, &live).await.iter().map(|t| t["amount"].as_i64().unwrap()).collect();
        assert_eq!(amounts.iter().filter(|a| **a == 12_345).count(), 3, "another reference, or another day, is another booking: {amounts:?}");
    }
}

on_both_stores! {
    /// B5: a booked entry that names no order (no end-to-end id, no trace number) settles the
    /// oldest order of its account awaiting settlement with its direction, currency and amount
    /// whose effective date is near its booking date; an entry booked a month later, or in the
    /// other direction, settles nothing; one with no order left stays an unreconciled
    /// transaction.
    #[tokio::test]
    async fn b5_an_entry_naming_no_order_settles_the_oldest_matching_one() {
        use payrail::domain::bank_answer::EntryDirection::{Credit, Debit};
        let server = quiet_server().await;
        let live = live(&server, "acme").await;
        let wire = |amount: i64| json!({"type": "wire", "amount": amount, "direction": "credit", "receiving_account": wire_receiving("Widgets Inc")});
        let first = order(&server, &live, wire(4_200)).await;
        let second = order(&server, &live, wire(4_200)).await;
        let late = order(&server, &live, wire(9_900)).await;
        cutoff_now(&server, &live).await;
        let number = account_number(&server, &live).await;
        let effective = first["effective_date"].as_str().unwrap().to_owned();
        let day = time::Date::parse(&effective, time::macros::format_description!("[year]-[month]-[day]")).unwrap();
        let month_later = (day + time::Duration::days(30)).to_string();
        let status = |o: Value| {
            let server = &server;
            let live = &live;
            async move { get_order(server, live, o["id"].as_str().unwrap()).await }
        };

        let file = statement_of(
            &number,
            vec![unnamed(&number, 4_200, Debit, &effective), unnamed(&number, 9_900, Debit, &month_later), unnamed(&number, 4_200, Credit, &effective)],
        );
        drop_file(&live, "statement-1.xml", &file);
        let printed = read_inbound(&server, &live).await;
        assert!(printed.contains("transactions=3") && printed.contains("orders=1"), "{printed}");
        let settled = status(first.clone()).await;
        assert_eq!(settled["status"], "completed", "the oldest matching order: {settled}");
        assert_eq!(settled["transaction_ids"].as_array().map(Vec::len), Some(1));
        assert_eq!(status(second.clone()).await["status"], "sent");
        assert_eq!(status(late.clone()).await["status"], "sent", "booked a month after its effective date: not settled");

        let file = statement_of(&number, vec![unnamed(&number, 4_200, Debit, &effective), unnamed(&number, 4_200, Debit, &effective)]);
        drop_file(&live, "statement-2.xml", &file);
        let printed = read_inbound(&server, &live).await;
        assert!(printed.contains("transactions=2") && printed.contains("orders=1"), "{printed}");
        assert_eq!(status(second).await["status"], "completed");
        let unreconciled: Vec<Value> = transactions(&server, &live).await.into_iter().filter(|t| t["reconciled"] == false).collect();
        assert_eq!(unreconciled.len(), 3, "the month-late debit, the credit and the debit with no order left: {unreconciled:?}");
    }

    /// B5: a bank may book an entry of no money; it makes no transaction (a transaction moves a
    /// positive amount) and is counted unmatched on the file, and the rest of the file applies.
    #[tokio::test]
    async fn b5_an_entry_of_no_money_is_noted_and_the_rest_of_the_file_applies() {
        use payrail::domain::bank_answer::EntryDirection::Credit;
        let server = quiet_server().await;
        let live = live(&server, "acme").await;
        let number = account_number(&server, &live).await;
        let file = statement_of(&number, vec![unnamed(&number, 0, Credit, "2026-11-26"), unnamed(&number, 250, Credit, "2026-11-26")]);
        drop_file(&live, "statement-zero.xml", &file);
        let printed = read_inbound(&server, &live).await;
        assert!(printed.contains(" applied ") && printed.contains("transactions=1") && printed.contains("unmatched=1"), "{printed}");
        let amounts: Vec<Value> = transactions(&server, &live).await.iter().map(|t| t["amount"].clone()).collect();
        assert_eq!(amounts, [json!(250)]);
        assert!(names_in(&inbound(&live)).is_empty(), "applied and removed from the folder");
    }

    /// B5: a booked reversal that names a sent order returns it with the reason its `RtrInf`
    /// gives: an ISO code (`AC04`) is not one of Modern Treasury's return codes, which the SDKs
    /// check, so it leads the reason and the code stays null.
    #[tokio::test]
    async fn b5_a_reversal_with_a_return_reason_returns_the_order_with_its_code() {
        use payrail::domain::bank_answer::EntryDirection::Credit;
        let server = quiet_server().await;
        let live = live(&server, "acme").await;
        let wire = order(&server, &live, json!({"type": "wire", "amount": 7_500, "direction": "credit", "receiving_account": wire_receiving("Widgets Inc")})).await;
        cutoff_now(&server, &live).await;
        let number = account_number(&server, &live).await;
        let mut reversal = unnamed(&number, 7_500, Credit, wire["effective_date"].as_str().unwrap());
        (reversal.end_to_end_id, reversal.reversal, reversal.return_code) = (Some(end_to_end_id(&wire)), true, Some("AC04".into()));
        drop_file(&live, "reversal.xml", &statement_of(&number, vec![reversal]));
        let printed = read_inbound(&server, &live).await;
        assert!(printed.contains("returns=1"), "{printed}");
        let returned = get_order(&server, &live, wire["id"].as_str().unwrap()).await;
        assert_eq!(returned["status"], "returned", "{returned}");
        assert_eq!(returned["current_return"]["code"], Value::Null);
        assert_eq!(returned["current_return"]["reason"], "AC04: Closed Account Number");
        // The reversal's transaction: `details` holds strings only, as MT types it (the SDKs
        // refuse a transaction, and any page holding it, otherwise).
        let booked = transactions(&server, &live).await;
        let reversed = booked.iter().find(|t| t["details"]["reversal"].is_string()).expect("the reversal's transaction");
        assert_eq!(reversed["details"]["reversal"], "true", "{reversed}");
        for transaction in &booked {
            assert!(transaction["details"].as_object().unwrap().values().all(Value::is_string), "{transaction}");
        }
    }

    /// B5 (issue 21 item 3): an expected payment that names a counterparty takes only money the
    /// statement says came from one of that counterparty's accounts (`RltdPties/DbtrAcct`), and
    /// wins over an older expectation that names nobody; a payer the statement does not name
    /// is not refused on it. The transaction's `details` name the payer as the bank did.
    #[tokio::test]
    async fn b5_an_expected_payment_naming_a_counterparty_takes_only_its_money() {
        use payrail::domain::bank_answer::{AccountRef, EntryDirection::Credit, Party};
        let server = quiet_server().await;
        let live = live(&server, "acme").await;
        let number = account_number(&server, &live).await;
        let counterparty = |name: &str, account: &str| {
            json!({"name": name, "accounts": [{"account_details": [{"account_number": account}],
                "routing_details": [{"routing_number": "021000021", "routing_number_type": "aba"}]}]})
        };
        let created = |body: Value| {
            let server = &server;
            let live = &live;
            async move {
                let path = if body.get("accounts").is_some() { "/api/counterparties" } else { "/api/expected_payments" };
                let (status, created) = json(server.post(path, &live.key, &body).send().await.unwrap()).await;
                assert_eq!(status, 201, "{created}");
                created["id"].as_str().unwrap().to_owned()
            }
        };
        let globex = created(counterparty("Globex", "000777222")).await;
        let acme = created(counterparty("Acme Payer", "000555111")).await;
        let expect = |counterparty: Option<&str>| {
            json!({"amount_lower_bound": 5_000, "amount_upper_bound": 5_000, "direction": "credit", "currency": "USD",
                "internal_account_id": live.account, "counterparty_id": counterparty})
        };
        let anyone = created(expect(None)).await;
        let from_globex = created(expect(Some(&globex))).await;
        let from_acme = created(expect(Some(&acme))).await;
        let day = time::OffsetDateTime::now_utc().date().to_string();
        let paid_by = |payer: Option<&str>| {
            let mut entry = unnamed(&number, 5_000, Credit, &day);
            entry.booking_time = Some("21:00:00".into());
            entry.counterparty = payer.map(|n| Party { name: Some("PAYER".into()), account: AccountRef { iban: None, account_number: Some(n.into()) } });
            entry
        };

        let file = statement_of(&number, vec![paid_by(Some("000 555 111")), paid_by(Some("000999999"))]);
        drop_file(&live, "statement-1.xml", &file);
        let printed = read_inbound(&server, &live).await;
        assert!(printed.contains("transactions=2"), "{printed}");
        let status = |id: String| {
            let server = &server;
            let live = &live;
            async move { get_json(server, live, &format!("/api/expected_payments/{id}")).await }
        };
        let acme_ep = status(from_acme).await;
        assert_eq!(acme_ep["status"], "reconciled", "Acme's money, though an older expectation takes anyone's: {acme_ep}");
        assert_eq!(status(anyone).await["status"], "reconciled", "the unknown payer's money goes to the expectation of anyone");
        assert_eq!(status(from_globex.clone()).await["status"], "unreconciled", "nobody paid from a Globex account");
        let paid = get_json(&server, &live, &format!("/api/transactions/{}", acme_ep["transaction_id"].as_str().unwrap())).await;
        assert_eq!(paid["details"]["counterparty_account_number"], "000 555 111", "{paid}");
        assert_eq!(paid["details"]["counterparty_name"], "PAYER");
        assert_eq!(paid["as_of_time"], "21:00:00", "the booking time the bank gave (time audit)");

        // A later statement that names no payer: Globex's expectation is not refused on it.
        drop_file(&live, "statement-2.xml", &statement_of(&number, vec![paid_by(None)]));
        read_inbound(&server, &live).await;
        assert_eq!(status(from_globex).await["status"], "reconciled");
        assert!(transactions(&server, &live).await.iter().all(|t| t["reconciled"] == true));
    }
}

/// The account number of the tenant's internal account.
async fn account_number(server: &TestServer, live: &Live) -> String {
    let account = get_json(server, live, &format!("/api/internal_accounts/{}", live.account)).await;
    account["account_details"][0]["account_number"].as_str().unwrap().to_owned()
}

async fn get_json(server: &TestServer, live: &Live, path: &str) -> Value {
    let (status, body) = json(server.get(path, &live.key).send().await.unwrap()).await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// The transactions of the tenant's internal account, all pages.
async fn transactions(server: &TestServer, live: &Live) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor = String::new();
    loop {
        let path = format!("/api/transactions?internal_account_id={}&per_page=100&after_cursor={cursor}", live.account);
        // A keep-alive connection the server closed while the test waited is retried once.
        let response = match server.get(&path, &live.key).send().await {
            Ok(response) => response,
            Err(_) => server.get(&path, &live.key).send().await.unwrap(),
        };
        let next = response.headers().get("x-after-cursor").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        let (status, page) = json(response).await;
        assert_eq!(status, 200, "{page}");
        out.extend(page.as_array().unwrap().iter().cloned());
        if next.is_empty() {
            return out;
        }
        cursor = next;
    }
}

on_both_stores! {
    /// B5, B6: a camt.053 makes a transaction per booked entry (unreconciled: nothing expected
    /// them) and a balance report with its OPBD and CLBD balances; `kill -9` of the reader in
    /// the middle of the file, then a second reader, leave it applied exactly once.
    #[tokio::test]
    async fn b5_kill_9_while_applying_a_statement_applies_it_exactly_once() {
        let server = quiet_server().await;
        let live = live(&server, "acme").await;
        let number = account_number(&server, &live).await;
        let entries = 3_000;
        drop_file(&live, "statement-1.xml", &statement(&number, entries));
        let mut child = common::cli_command(&server, &["bank", "inbound", &live.connection]).await.spawn().unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        child.kill().unwrap(); // SIGKILL, most likely while the file is read or staged
        child.wait().unwrap();
        // The killed reader's lease runs out; the next reader waits for it, then finishes.
        let printed = read_inbound(&server, &live).await;
        assert!(printed.contains("statement-1.xml") || printed.contains("empty"), "{printed}");

        let all = transactions(&server, &live).await;
        assert_eq!(all.len(), entries, "every entry once");
        assert!(all.iter().all(|t| t["reconciled"] == false && t["amount"] == 100 && t["direction"] == "credit"));
        let reports = get_json(&server, &live, &format!("/api/internal_accounts/{}/balance_reports", live.account)).await;
        let reports = reports.as_array().unwrap();
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert_eq!(reports[0]["as_of_time"], "13:45:30", "the statement's CreDtTm: MT's as_of_time is never null");
        let mut kinds: Vec<(&str, i64)> =
            reports[0]["balances"].as_array().unwrap().iter().map(|b| (b["balance_type"].as_str().unwrap(), b["amount"].as_i64().unwrap())).collect();
        kinds.sort();
        assert_eq!(kinds, [("closing_ledger", entries as i64 * 100), ("opening_ledger", 0)]);
        assert_eq!(bank_files(&server, &live.connection).await.iter().filter(|f| f["direction"] == "inbound").count(), 1);
        assert!(names_in(&inbound(&live)).is_empty());
    }

    /// B5: two readers of one inbound folder at once (two processes on one database) apply each
    /// file exactly once.
    #[tokio::test]
    async fn b5_two_readers_of_one_folder_apply_each_file_once() {
        let server = quiet_server().await;
        let live = live(&server, "acme").await;
        let number = account_number(&server, &live).await;
        for (n, entries) in [(1, 40), (2, 60), (3, 80)] {
            drop_file(&live, &format!("statement-{n}.xml"), &statement(&number, entries));
        }
        let mut first = common::cli_command(&server, &["bank", "inbound", &live.connection]).await;
        let mut second = common::cli_command(&server, &["bank", "inbound", &live.connection]).await;
        let (a, b) = tokio::join!(
            tokio::task::spawn_blocking(move || first.output().unwrap()),
            tokio::task::spawn_blocking(move || second.output().unwrap())
        );
        for output in [a.unwrap(), b.unwrap()] {
            assert!(output.status.success(), "{}", text(&output.stderr));
        }
        assert_eq!(transactions(&server, &live).await.len(), 180, "each file once");
        assert_eq!(bank_files(&server, &live.connection).await.iter().filter(|f| f["direction"] == "inbound").count(), 3);
    }
}

on_both_stores! {
    /// B5: an order's money is booked once, and only by its own connection's files. Another
    /// connection's statement line or status report naming it changes nothing; its own statement
    /// completes it and links the booking; the same line in a later statement settles nothing
    /// again; a booked reversal returns it and settles the return (its transaction and line item,
    /// `reconciled`), and a second one settles nothing. A NACHA R14 return keeps the date of
    /// death and the bank's text.
    #[tokio::test]
    async fn b5_a_booking_settles_its_order_once_and_only_on_its_own_connection() {
        use payrail::bank::formats::nacha::answers::AnswerKind;
        use payrail::domain::bank_answer::EntryDirection::{Credit, Debit};
        let server = quiet_server().await;
        let live = live(&server, "acme").await;
        let other = second_connection(&server, &live, "acme").await;
        let wire = order(&server, &live, json!({"type": "wire", "amount": 7_500, "direction": "credit", "receiving_account": wire_receiving("Widgets Inc")})).await;
        let ach = order(&server, &live, json!({"type": "ach", "amount": 1_200, "direction": "credit", "receiving_account": ach_receiving("Jane Doe")})).await;
        cutoff_now(&server, &live).await;
        let (id, day) = (wire["id"].as_str().unwrap(), wire["effective_date"].as_str().unwrap().to_owned());
        let named = |number: &str, direction, reversal| {
            let mut entry = unnamed(number, 7_500, direction, &day);
            (entry.end_to_end_id, entry.reversal, entry.rail) = (Some(end_to_end_id(&wire)), reversal, Some("wire".into()));
            entry
        };

        let theirs = account_number(&server, &other).await;
        drop_file(&other, "cross.xml", &statement_of(&theirs, vec![named(&theirs, Debit, false)]));
        drop_file(&other, "cross-status.xml", pain002(&[(&end_to_end_id(&wire), "RJCT", Some("AC04"))]).as_bytes());
        read_inbound(&server, &other).await;
        let now = get_order(&server, &live, id).await;
        assert_eq!((now["status"].as_str(), now["transaction_ids"].as_array().unwrap().len()), (Some("sent"), 0), "{now}");

        let ours = account_number(&server, &live).await;
        drop_file(&live, "booked.xml", &statement_of(&ours, vec![named(&ours, Debit, false)]));
        read_inbound(&server, &live).await;
        let completed = get_order(&server, &live, id).await;
        assert_eq!((completed["status"].as_str(), completed["transaction_ids"].as_array().unwrap().len()), (Some("completed"), 1));
        let events = events_of(&server, &live, id).await;
        drop_file(&live, "booked-again.xml", &statement_of(&ours, vec![named(&ours, Debit, false), unnamed(&ours, 3, Credit, &day)]));
        read_inbound(&server, &live).await;
        assert_eq!(get_order(&server, &live, id).await, completed, "a second booking settles nothing");
        assert_eq!(events_of(&server, &live, id).await, events);

        drop_file(&live, "reversal.xml", &statement_of(&ours, vec![named(&ours, Credit, true)]));
        read_inbound(&server, &live).await;
        let returned = get_order(&server, &live, id).await;
        let ret = &returned["current_return"];
        assert_eq!((returned["status"].as_str(), ret["reconciliation_status"].as_str()), (Some("returned"), Some("reconciled")), "{returned}");
        let booking = ret["transaction_id"].as_str().expect("the return names its booking").to_owned();
        assert_eq!(returned["transaction_ids"][1], booking.as_str());
        let stored = get_json(&server, &live, &format!("/api/returns/{}", ret["id"].as_str().unwrap())).await;
        assert_eq!((stored["transaction_id"].as_str(), &stored["transaction_line_item_id"]), (Some(booking.as_str()), &ret["transaction_line_item_id"]));
        let items = get_json(&server, &live, &format!("/api/transactions/{booking}/line_items")).await;
        assert_eq!(items[0]["id"], ret["transaction_line_item_id"], "{items}");
        drop_file(&live, "reversal-again.xml", &statement_of(&ours, vec![named(&ours, Credit, true), unnamed(&ours, 4, Credit, &day)]));
        read_inbound(&server, &live).await;
        assert_eq!(get_order(&server, &live, id).await, returned, "a second reversal settles nothing");

        let ach = get_order(&server, &live, ach["id"].as_str().unwrap()).await;
        let death = time::macros::date!(2026 - 10 - 15);
        let kind = AnswerKind::Return { code: "R14".into(), date_of_death: Some(death), information: "PAYEE DECEASED PER SSA".into() };
        let sent = folder(&live.outbound).into_iter().find(|(name, _)| name.ends_with(".ach")).unwrap().1;
        drop_file(&live, "r14.ach", &nacha_answers(&sent, &[(trace_of(&ach), kind)]));
        read_inbound(&server, &live).await;
        let ret = get_order(&server, &live, ach["id"].as_str().unwrap()).await["current_return"].clone();
        assert_eq!((ret["code"].as_str(), ret["date_of_death"].as_str()), (Some("R14"), Some("2026-10-15")), "{ret}");
        assert_eq!(ret["additional_information"], "PAYEE DECEASED PER SSA");
    }
}

on_both_stores! {
    /// B5: a client editing the expected payments a statement reconciles, while the file is
    /// applied, makes the file's commit a conflict; the file is staged again from the new state
    /// and applied whole by the same reader (it exits 0), each payment reconciled once. (A
    /// client editing them faster than the file can be staged holds it back to a later poll:
    /// optimistic versions, retried a bounded number of times.)
    #[tokio::test]
    async fn b5_a_statement_applies_whole_while_clients_edit_what_it_reconciles() {
        use payrail::domain::bank_answer::EntryDirection::Credit;
        let server = quiet_server().await;
        let live = live(&server, "acme").await;
        let number = account_number(&server, &live).await;
        let expected = 150;
        let mut ids = Vec::new();
        for i in 0..expected {
            let body = json!({"amount_lower_bound": 1_000 + i, "amount_upper_bound": 1_000 + i, "direction": "credit",
                "currency": "USD", "internal_account_id": live.account});
            let (status, made) = json(server.post("/api/expected_payments", &live.key, &body).send().await.unwrap()).await;
            assert_eq!(status, 201, "{made}");
            ids.push(made["id"].as_str().unwrap().to_owned());
        }
        let day = time::OffsetDateTime::now_utc().date().to_string();
        let file = statement_of(&number, (0..expected).map(|i| unnamed(&number, 1_000 + i, Credit, &day)).collect());
        drop_file(&live, "statement-1.xml", &file);

        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // One client editing the expected payments in turn, about ten edits a second for two
        // seconds: a reader's retries either fit between two edits or outlast them.
        let editor = {
            let (client, base, key, ids, stop) = (server.client.clone(), server.url(""), live.key.clone(), ids.clone(), stop.clone());
            tokio::spawn(async move {
                let mut edits = 0usize;
                for id in ids.iter().take(20) {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let url = format!("{base}/api/expected_payments/{id}");
                    let body = json!({"description": format!("edit {edits}")});
                    let response = client.patch(url).basic_auth("x-api-key", Some(&key.secret)).json(&body).send().await;
                    edits += usize::from(response.is_ok_and(|r| r.status().is_success()));
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                edits
            })
        };
        // The reader runs off the test's thread, so the editors and the server keep running.
        let reader = common::cli_command(&server, &["bank", "inbound", &live.connection]).await;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let output = tokio::task::spawn_blocking(move || { reader }.output().unwrap()).await.unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let printed = text(&output.stdout);
        assert!(output.status.success(), "bank inbound: {printed}\n{}", text(&output.stderr));
        assert!(editor.await.unwrap() > 0);
        assert!(printed.contains(&format!("transactions={expected}")), "{printed}");

        let all = transactions(&server, &live).await;
        assert_eq!(all.len(), expected as usize, "every entry once");
        assert!(all.iter().all(|t| t["reconciled"] == true), "every booking reconciled its expected payment");
        for id in &ids {
            let payment = get_json(&server, &live, &format!("/api/expected_payments/{id}")).await;
            assert_eq!(payment["status"], "reconciled", "{payment}");
        }
    }
}
