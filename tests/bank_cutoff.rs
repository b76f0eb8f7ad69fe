//! Cut-offs (SPEC B2, B4, B6, K): live payment orders carried to a bank through a directory
//! connection by `payrail bank cutoff`, run as an operator would beside the server.
//!
//! The files are checked by tools nobody here wrote: NACHA files by carta-ach (PyPI, through
//! `compat/nacha/check.sh`, as `tests/nacha_files.rs` does), pain.001 files by `xmllint` against
//! the official XSD (as `tests/iso20022_files.rs` does). Exactly once is checked the hard way:
//! two cut-offs racing, an upload failing, and `kill -9` in the middle of a cut-off of thousands
//! of orders, each followed by asserting that every order is in exactly one uploaded file whose
//! entries, counts and totals match its orders.

#[macro_use]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::bank::*;
use common::{TestServer, json};
use payrail::base::api_key::Scope;
use payrail::domain::payment_order::PaymentOrder;
use payrail::store::{Filter, ListQuery, ObjectRecord, Store, Write, WriteBatch};
use serde_json::{Value, json};

const XSD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/compat/iso20022/xsd/pain.001.001.09.xsd");

/// The `payrail` command on `server`'s database, as `common::cli` runs it, not yet started.
async fn payrail(server: &TestServer, args: &[&str]) -> Command {
    common::cli_command(server, args).await
}

/// Runs `payrail bank cutoff CONNECTION`; its output.
async fn cutoff(server: &TestServer, connection: &str) -> std::process::Output {
    let mut command = payrail(server, &["bank", "cutoff", connection]).await;
    tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap()
}

// ---- the independent checkers ----

/// carta-ach's view of NACHA files (compat/nacha/check.sh), one run at a time.
fn carta(paths: &[&Path]) -> Vec<Value> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let output = Command::new(root.join("compat/nacha/check.sh"))
        .args(paths)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("compat/nacha/check.sh");
    assert!(output.status.success(), "compat/nacha/check.sh failed:\n{}", text(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("check.py prints JSON")
}

/// The independent checks of one NACHA file: every field valid to carta-ach, 94-character
/// lines, and every control record equal to the totals recomputed from the entries.
fn assert_carta_accepts(seen: &Value) {
    assert_eq!(seen["carta_rejects"], json!([]), "fields carta-ach's validators refuse");
    assert_eq!(seen["line_lengths"], json!([94]));
    assert_eq!(seen["line_count"].as_u64().unwrap() % 10, 0, "blocked to 10");
    assert_eq!(seen["file_control"], seen["computed"], "file control against carta's entries");
    for batch in seen["batches"].as_array().unwrap() {
        assert_eq!(batch["control"], batch["computed"], "batch control against carta's entries");
    }
}

fn assert_xsd_valid(file: &Path) {
    let output = Command::new("xmllint")
        .args(["--noout", "--schema", XSD])
        .arg(file)
        .output()
        .expect("xmllint is required (apt-get install libxml2-utils)");
    let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success() && said.contains("validates"), "{} fails the official XSD:\n{said}", file.display());
}

// ---- the invariants every test ends with ----

/// Every order of `ids` in exactly one uploaded file: its `bank_file_id` names an uploaded file;
/// each file's entries (parsed from the bytes in the outbound folder) are exactly its orders,
/// with their amounts and trace numbers; counts, totals and the ids `bank files` lists match; no
/// file twice, no `.part`.
async fn assert_each_in_exactly_one_file(server: &TestServer, live: &Live, scope: &Scope, ids: &BTreeSet<String>) {
    let files = bank_files(server, &live.connection).await;
    let outbound = folder(&live.outbound);
    assert!(outbound.keys().all(|n| !n.ends_with(".part")), "a .part was left: {:?}", outbound.keys());
    assert_eq!(outbound.len(), files.len(), "one outbound file per recorded file: {:?}", outbound.keys());
    // (file id, trace number) -> amount, from the orders.
    let mut from_orders: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut per_file: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut ids_per_file: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for stored in all_orders(server.store.as_ref(), scope).await {
        if !ids.contains(&stored["id"].as_str().unwrap().to_owned()) {
            continue;
        }
        assert_eq!(stored["status"], "sent", "{}", stored["id"]);
        let file_id = stored["vendor_attributes"]["bank_file_id"].as_str().expect("the order names its file").to_owned();
        let traces: Vec<&Value> =
            stored["reference_numbers"].as_array().unwrap().iter().filter(|r| r["reference_number_type"] == "ach_trace_number").collect();
        assert_eq!(traces.len(), 1, "one trace number: {}", stored["reference_numbers"]);
        let amount = stored["amount"].as_u64().unwrap();
        let previous = from_orders.insert((file_id.clone(), traces[0]["reference_number"].as_str().unwrap().to_owned()), amount);
        assert!(previous.is_none(), "two orders with one trace number in one file");
        ids_per_file.entry(file_id.clone()).or_default().insert(stored["id"].as_str().unwrap().to_owned());
        let totals = per_file.entry(file_id).or_default();
        totals.0 += 1;
        totals.1 += amount;
    }
    assert_eq!(from_orders.len(), ids.len(), "every order was found");
    let mut from_files: BTreeMap<(String, String), u64> = BTreeMap::new();
    for file in &files {
        let id = file["id"].as_str().unwrap().to_owned();
        assert_eq!(file["status"], "uploaded", "{file}");
        let bytes =
            outbound.get(file["name"].as_str().unwrap()).unwrap_or_else(|| panic!("{} is not in the outbound folder", file["name"]));
        assert_eq!(file["sha256"].as_str().unwrap(), sha256_hex(bytes), "the recorded sha256 is the uploaded file's");
        let parsed =
            payrail::bank::formats::nacha::parse(std::str::from_utf8(bytes).unwrap()).expect("the project's NACHA parser reads it");
        let entries: Vec<_> = parsed.batches.iter().flat_map(|b| b.entries.iter()).collect();
        let (count, total) = per_file.get(&id).copied().unwrap_or_default();
        assert_eq!(
            (file["order_count"].as_u64().unwrap(), entries.len() as u64),
            (count, count),
            "file {} carries its orders",
            file["name"]
        );
        let listed: Vec<String> = file["orders"].as_array().unwrap().iter().map(|o| o.as_str().unwrap().to_owned()).collect();
        let listed_set: BTreeSet<String> = listed.iter().cloned().collect();
        assert_eq!(listed.len(), listed_set.len(), "file {} lists an order twice", file["name"]);
        assert_eq!(Some(&listed_set), ids_per_file.get(&id).or(Some(&BTreeSet::new())), "file {} lists its orders by id", file["name"]);
        assert_eq!(file["credit_total"].as_u64().unwrap(), total, "file {} totals", file["name"]);
        for entry in entries {
            from_files.insert((id.clone(), entry.detail.trace.to_string()), entry.detail.amount_cents);
        }
    }
    assert_eq!(from_files, from_orders, "the files' entries are exactly the orders, each once");
}

/// Every payment order of `scope`, as stored.
async fn all_orders(store: &dyn Store, scope: &Scope) -> Vec<Value> {
    let mut out = Vec::new();
    let mut after_seq = None;
    loop {
        let query = ListQuery { kind: "payment_order", scope: scope.clone(), filters: vec![], after_seq, limit: 1000 };
        let page = store.list(&query).await.unwrap();
        out.extend(page.items.iter().map(|s| serde_json::from_str::<Value>(&s.doc).unwrap()));
        match page.next_seq {
            Some(seq) => after_seq = Some(seq),
            None => return out,
        }
    }
}

/// The statuses of `sample`'s orders, read by id in one query: cheap and steady enough to poll
/// while a cut-off runs (a status filter on a database loaded seconds ago and not yet analysed
/// can take longer than the whole `sent` phase of a few thousand orders).
async fn statuses(store: &dyn Store, scope: &Scope, sample: &[String]) -> BTreeSet<String> {
    let query = ListQuery {
        kind: "payment_order",
        scope: scope.clone(),
        filters: vec![Filter::IdIn(sample.to_vec())],
        after_seq: None,
        limit: sample.len(),
    };
    let page = store.list(&query).await.unwrap();
    page.items.iter().map(|stored| serde_json::from_str::<Value>(&stored.doc).unwrap()["status"].as_str().unwrap().to_owned()).collect()
}

/// `n` approved ACH orders like `template`, written straight to the store (creating thousands
/// through the API would take most of the test's time); their ids.
async fn seed(store: &dyn Store, scope: &Scope, template: &Value, n: usize) -> BTreeSet<String> {
    let template: PaymentOrder = serde_json::from_value(template.clone()).unwrap();
    let mut ids = BTreeSet::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let mut batch = WriteBatch::new();
        for i in chunk {
            let mut order = template.clone();
            order.id = payrail::domain::id::Id::generate();
            order.amount = payrail::domain::money::Amount::parse("amount", 100 + *i as i64).unwrap();
            ids.insert(order.id.to_string());
            batch.push(Write::Insert(ObjectRecord {
                id: order.id.to_string(),
                kind: "payment_order",
                scope: scope.clone(),
                parent_id: None,
                created_at: order.created_at,
                doc: serde_json::to_string(&order).unwrap(),
                terms: order.terms(),
            }));
        }
        store.commit(batch).await.unwrap();
    }
    ids
}

fn live_scope(org: &str) -> Scope {
    Scope { organization_id: org.into(), live_mode: true }
}

on_both_stores! {
    /// B2, B3, B4, B6, K: approved live orders end `sent` (events begin_processing then sent),
    /// one file per rail that carta-ach and the official XSD accept, recorded and shown byte for
    /// byte; what is not due (process_after or effective_date ahead) stays approved.
    #[tokio::test]
    async fn b2_b4_live_orders_go_out_in_one_file_per_rail_and_end_sent() {
        let server = TestServer::start().await;
        let live = live(&server, "acme").await;
        let ach_credit = order(&server, &live, json!({"type": "ach", "amount": 12_500, "direction": "credit", "receiving_account": ach_receiving("Jane Doe"), "remittance_information": "Invoice 42", "statement_descriptor": "PAYROLL"})).await;
        let ach_debit = order(&server, &live, json!({"type": "ach", "amount": 2_000, "direction": "debit", "receiving_account": ach_receiving("Sam Smith")})).await;
        let ach_high = order(&server, &live, json!({"type": "ach", "amount": 750, "direction": "credit", "priority": "high", "receiving_account": ach_receiving("Pat Jones")})).await;
        let wire = order(&server, &live, json!({"type": "wire", "amount": 1_000_000, "direction": "credit", "receiving_account": wire_receiving("Widgets Inc"), "remittance_information": "PO 7"})).await;
        let rtp = order(&server, &live, json!({"type": "rtp", "amount": 2_500, "direction": "credit", "receiving_account": wire_receiving("Gadgets LLC")})).await;
        let later = order(&server, &live, json!({"type": "ach", "amount": 300, "direction": "credit", "receiving_account": ach_receiving("Later Co"), "process_after": "2099-01-01T00:00:00Z"})).await;
        // Dated ahead: its money must not move before its effective_date, on either rail kind.
        let dated = order(&server, &live, json!({"type": "ach", "amount": 310, "direction": "credit", "receiving_account": ach_receiving("Dated Co"), "effective_date": "2099-01-02"})).await;
        let dated_wire = order(&server, &live, json!({"type": "wire", "amount": 320, "direction": "credit", "receiving_account": wire_receiving("Dated Wire Co"), "effective_date": "2099-01-02"})).await;
        let cancelled = order(&server, &live, json!({"type": "ach", "amount": 400, "direction": "credit", "receiving_account": ach_receiving("Gone Co")})).await;
        let (status, _) = json(server.patch(&format!("/api/payment_orders/{}", cancelled["id"].as_str().unwrap()), &live.key, &json!({"status": "cancelled"})).send().await.unwrap()).await;
        assert_eq!(status, 200);

        let run = cutoff(&server, &live.connection).await;
        assert!(run.status.success(), "bank cutoff: {}\n{}", text(&run.stdout), text(&run.stderr));
        let printed = text(&run.stdout);
        let lines: Vec<&str> = printed.lines().collect();
        assert_eq!(lines.len(), 3, "a line per file, one file per rail: {printed}");
        assert!(lines[0].contains("  ach  orders=3  credit_total=13250  debit_total=2000  uploaded"), "{printed}");
        assert!(lines[1].contains("  wire  orders=1  credit_total=1000000  debit_total=0  uploaded"), "{printed}");
        assert!(lines[2].contains("  rtp  orders=1  credit_total=2500  debit_total=0  uploaded"), "{printed}");

        let files = bank_files(&server, &live.connection).await;
        assert_eq!(files.len(), 3);
        let by_rail: BTreeMap<String, Value> = files.iter().map(|f| (f["rail"].as_str().unwrap().to_owned(), f.clone())).collect();
        let outbound = folder(&live.outbound);
        assert_eq!(outbound.len(), 3, "{:?}", outbound.keys());
        for file in &files {
            let name = file["name"].as_str().unwrap();
            assert!(name.starts_with("payrail-") && (name.ends_with("-A-ach.ach") || name.ends_with("-A-wire.xml") || name.ends_with("-A-rtp.xml")), "{name}");
            assert_eq!((file["direction"].as_str(), file["status"].as_str()), (Some("outbound"), Some("uploaded")));
            assert_eq!(file["sha256"].as_str().unwrap(), sha256_hex(&outbound[name]));
            // Each step is stamped when it happened, not all at the run's start (B6).
            let at = |key: &str| {
                time::OffsetDateTime::parse(file[key].as_str().unwrap(), &time::format_description::well_known::Rfc3339).unwrap()
            };
            assert!(at("created_at") < at("written_at") && at("written_at") < at("uploaded_at"), "{file}");
        }

        // Orders: sent, naming their file, ACH ones with their trace number; events in order.
        for (created, rail) in [(&ach_credit, "ach"), (&ach_debit, "ach"), (&ach_high, "ach"), (&wire, "wire"), (&rtp, "rtp")] {
            let id = created["id"].as_str().unwrap();
            let now = get_order(&server, &live, id).await;
            assert_eq!(now["status"], "sent", "{now}");
            assert_eq!(now["vendor_attributes"]["bank_file_id"], by_rail[rail]["id"]);
            let (_, events) = json(server.get(&format!("/api/events?entity_id={id}"), &live.key).send().await.unwrap()).await;
            let mut names: Vec<&str> = events.as_array().unwrap().iter().map(|e| e["event_name"].as_str().unwrap()).collect();
            names.reverse();
            assert_eq!(names, ["created", "begin_processing", "sent"], "{events}");
            let references = now["reference_numbers"].as_array().unwrap();
            if rail == "ach" {
                assert_eq!(references.len(), 1, "{now}");
                let r = &references[0];
                let keys: BTreeSet<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
                assert_eq!(keys, BTreeSet::from(["id", "object", "live_mode", "reference_number", "reference_number_type", "created_at", "updated_at"]));
                assert_eq!((r["object"].as_str(), r["reference_number_type"].as_str(), r["live_mode"].as_bool()), (Some("payment_reference"), Some("ach_trace_number"), Some(true)));
                assert!(r["reference_number"].as_str().unwrap().starts_with("02100002"), "ODFI = first 8 digits of immediate_destination: {r}");
                // The trace number finds the order (the inbound half matches returns by it).
                let trace = r["reference_number"].as_str().unwrap();
                let (_, found) = json(server.get(&format!("/api/payment_orders?reference_number={trace}"), &live.key).send().await.unwrap()).await;
                assert_eq!(found.as_array().unwrap().len(), 1);
                assert_eq!(found[0]["id"], now["id"]);
            } else {
                assert!(references.is_empty());
            }
        }
        for (left, status) in [(&later, "approved"), (&dated, "approved"), (&dated_wire, "approved"), (&cancelled, "cancelled")] {
            assert_eq!(get_order(&server, &live, left["id"].as_str().unwrap()).await["status"], status);
        }

        // The NACHA file: the project's parser and carta-ach agree, controls hold.
        let ach_name = by_rail["ach"]["name"].as_str().unwrap();
        let ach_path = live.outbound.join(ach_name);
        let parsed = payrail::bank::formats::nacha::parse(std::str::from_utf8(&outbound[ach_name]).unwrap()).unwrap();
        let seen = carta(&[&ach_path]);
        assert_carta_accepts(&seen[0]);
        assert_eq!(seen[0]["file_header"]["immediate_destination"].as_str().unwrap().trim(), "021000021");
        assert_eq!(seen[0]["file_header"]["file_id_modifier"], "A");
        let entries: usize = parsed.batches.iter().map(|b| b.entries.len()).sum();
        assert_eq!(entries, 3);
        let batches = seen[0]["batches"].as_array().unwrap();
        let descriptions: BTreeSet<&str> = batches.iter().map(|b| b["entry_description"].as_str().unwrap()).collect();
        assert!(descriptions.contains("PAYROLL"), "the statement descriptor is the company entry description: {descriptions:?}");
        assert!(batches.iter().all(|b| b["company_name"] == "ACME CORP" && b["odfi"] == "02100002"));
        // The wire and RTP files: valid against the official XSD.
        for rail in ["wire", "rtp"] {
            assert_xsd_valid(&live.outbound.join(by_rail[rail]["name"].as_str().unwrap()));
        }
        let xml = text(&outbound[by_rail["wire"]["name"].as_str().unwrap()]);
        assert!(xml.contains("<NbOfTxs>1</NbOfTxs>") && xml.contains("<CtrlSum>10000.00</CtrlSum>"), "{xml}");
        assert!(xml.contains(&wire["id"].as_str().unwrap().replace('-', "")), "the end-to-end id is the order's");

        // `bank files show`: the bytes exactly as uploaded, also once the kept copy is gone.
        for file in &files {
            let shown = common::cli(&server, &["bank", "files", "show", file["id"].as_str().unwrap()]).await;
            assert!(shown.status.success(), "{}", text(&shown.stderr));
            assert_eq!(shown.stdout, outbound[file["name"].as_str().unwrap()]);
        }
        std::fs::remove_dir_all(server.dir.path().join("bank/outbound")).unwrap();
        let shown = common::cli(&server, &["bank", "files", "show", by_rail["ach"]["id"].as_str().unwrap()]).await;
        assert_eq!(shown.stdout, outbound[ach_name], "written again from its record, byte for byte");
        let listed = common::cli(&server, &["bank", "files"]).await;
        let listed = text(&listed.stdout);
        assert!(listed.lines().next().unwrap().starts_with("ID") && listed.contains(ach_name) && listed.contains("uploaded"), "{listed}");

        // A second cut-off finds nothing due and makes no file.
        let again = cutoff(&server, &live.connection).await;
        assert!(again.status.success() && text(&again.stdout).contains("was due"), "{}", text(&again.stdout));
        assert_eq!(folder(&live.outbound).len(), 3);
    }

    /// B2: an upload that fails (the bank's folder is gone) leaves the orders processing and the
    /// file written, with an event and a retry time; the next attempt uploads it under the same
    /// name, once.
    #[tokio::test]
    async fn b2_an_upload_failure_keeps_orders_processing_and_the_retry_sends_the_same_name_once() {
        let server = TestServer::start().await;
        let live = live(&server, "acme").await;
        let mut ids = BTreeSet::new();
        for amount in [1_000, 2_000] {
            ids.insert(order(&server, &live, json!({"type": "ach", "amount": amount, "direction": "credit", "receiving_account": ach_receiving("Jane Doe")})).await["id"].as_str().unwrap().to_owned());
        }
        // The bank is unreachable: its folder is a plain file now (refused even to root).
        let aside = live.outbound.with_extension("aside");
        std::fs::rename(&live.outbound, &aside).unwrap();
        std::fs::write(&live.outbound, b"not a folder").unwrap();
        let failed = cutoff(&server, &live.connection).await;
        assert!(!failed.status.success(), "a failed upload is a failed command");
        assert!(text(&failed.stdout).contains("upload failed"), "{}", text(&failed.stdout));
        for id in &ids {
            assert_eq!(get_order(&server, &live, id).await["status"], "processing");
        }
        let files = bank_files(&server, &live.connection).await;
        assert_eq!(files.len(), 1);
        let file = &files[0];
        assert_eq!((file["status"].as_str(), file["upload_attempts"].as_u64()), (Some("written"), Some(1)), "{file}");
        assert!(file["last_error"].is_string() && file["next_attempt_at"].is_string(), "{file}");
        let (_, events) = json(server.get("/api/events?event_name=upload_failed", &live.key).send().await.unwrap()).await;
        assert_eq!(events.as_array().unwrap().len(), 1, "{events}");
        assert_eq!((events[0]["resource"].as_str(), events[0]["entity_id"].as_str()), (Some("bank_file"), file["id"].as_str()));

        // A second failure backs off further.
        let failed = cutoff(&server, &live.connection).await;
        assert!(!failed.status.success());
        let again = &bank_files(&server, &live.connection).await[0];
        assert_eq!(again["upload_attempts"], 2);
        assert!(again["next_attempt_at"].as_str() > file["next_attempt_at"].as_str());

        // The bank is back: the same file, under its name, once.
        std::fs::remove_file(&live.outbound).unwrap();
        std::fs::rename(&aside, &live.outbound).unwrap();
        let run = cutoff(&server, &live.connection).await;
        assert!(run.status.success(), "{}\n{}", text(&run.stdout), text(&run.stderr));
        assert!(text(&run.stdout).contains(file["name"].as_str().unwrap()));
        let outbound = folder(&live.outbound);
        assert_eq!(outbound.keys().collect::<Vec<_>>(), [file["name"].as_str().unwrap()]);
        assert_eq!(sha256_hex(&outbound[file["name"].as_str().unwrap()]), file["sha256"].as_str().unwrap(), "the very bytes recorded before the failure");
        assert_each_in_exactly_one_file(&server, &live, &live_scope("acme"), &ids).await;
    }

    /// B2: two cut-offs of one connection started together (two operators, or an operator and
    /// a scheduled run) never put an order in two files.
    #[tokio::test]
    async fn b2_racing_cutoffs_never_put_an_order_in_two_files() {
        let server = TestServer::start().await;
        let live = live(&server, "acme").await;
        let template = order(&server, &live, json!({"type": "ach", "amount": 100, "direction": "credit", "receiving_account": ach_receiving("Jane Doe")})).await;
        let scope = live_scope("acme");
        let mut ids = seed(server.store.as_ref(), &scope, &template, 1_500).await;
        ids.insert(template["id"].as_str().unwrap().to_owned());
        let mut children = Vec::new();
        for _ in 0..2 {
            let mut command = payrail(&server, &["bank", "cutoff", &live.connection]).await;
            children.push(command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
        }
        for child in children {
            let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
            assert!(output.status.success(), "{}\n{}", text(&output.stdout), text(&output.stderr));
        }
        assert_each_in_exactly_one_file(&server, &live, &scope, &ids).await;
    }

    /// B2: clients cancelling orders while a cut-off claims them (its chunks' commits in flight
    /// side by side on PostgreSQL): an order whose cancel was answered 200 is cancelled and in no
    /// file; every other order is in exactly one file, whose totals are its orders'.
    #[tokio::test]
    async fn b2_cancels_racing_a_cutoff_leave_each_order_cancelled_or_in_one_file() {
        let server = std::sync::Arc::new(TestServer::start().await);
        let live = live(&server, "acme").await;
        let template = order(&server, &live, json!({"type": "ach", "amount": 100, "direction": "credit", "receiving_account": ach_receiving("Jane Doe")})).await;
        let scope = live_scope("acme");
        let mut ids = seed(server.store.as_ref(), &scope, &template, 3_000).await;
        ids.insert(template["id"].as_str().unwrap().to_owned());
        // Every third order, oldest first (a cut-off claims the newest first), by 8 clients.
        let targets: Vec<String> = ids.iter().step_by(3).cloned().collect();
        let mut command = payrail(&server, &["bank", "cutoff", &live.connection]).await;
        let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut cancellers = Vec::new();
        for share in targets.chunks(targets.len().div_ceil(8)) {
            let (server, key, share) = (server.clone(), live.key.clone(), share.to_vec());
            cancellers.push(tokio::spawn(async move {
                let mut won = Vec::new();
                for id in share {
                    let reply = server.patch(&format!("/api/payment_orders/{id}"), &key, &json!({"status": "cancelled"})).send().await.unwrap();
                    let (status, body) = json(reply).await;
                    match status {
                        200 => won.push(id),
                        409 | 422 => assert!(body["errors"]["message"].is_string(), "{body}"),
                        other => panic!("a cancel racing the cut-off got {other}: {body}"),
                    }
                }
                won
            }));
        }
        let mut cancelled = BTreeSet::new();
        for canceller in cancellers {
            cancelled.extend(canceller.await.unwrap());
        }
        let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
        assert!(output.status.success(), "{}\n{}", text(&output.stdout), text(&output.stderr));
        assert!(!cancelled.is_empty() && cancelled.len() < ids.len(), "{} cancels won", cancelled.len());
        for stored in all_orders(server.store.as_ref(), &scope).await {
            if cancelled.contains(stored["id"].as_str().unwrap()) {
                assert_eq!((stored["status"].as_str(), &stored["vendor_attributes"]["bank_file_id"]), (Some("cancelled"), &Value::Null), "{stored}");
            }
        }
        let carried: BTreeSet<String> = ids.difference(&cancelled).cloned().collect();
        assert_each_in_exactly_one_file(&server, &live, &scope, &carried).await;
    }

    /// B2: `kill -9` in the middle of a cut-off of thousands of orders (once while claiming,
    /// once while marking them sent) loses and duplicates nothing: the next runs finish the
    /// recorded file under its name and carry the rest.
    #[tokio::test]
    async fn b2_kill_9_during_a_cutoff_loses_and_duplicates_nothing() {
        let server = TestServer::start().await;
        let live = live(&server, "acme").await;
        let template = order(&server, &live, json!({"type": "ach", "amount": 100, "direction": "credit", "receiving_account": ach_receiving("Jane Doe")})).await;
        let scope = live_scope("acme");
        let mut ids = seed(server.store.as_ref(), &scope, &template, 4_000).await;
        ids.insert(template["id"].as_str().unwrap().to_owned());
        let store = server.store.clone();
        let sample: Vec<String> = ids.iter().step_by(ids.len() / 40).cloned().collect();
        let mut killed = 0;
        for stage in ["processing", "sent"] {
            let mut command = payrail(&server, &["bank", "cutoff", &live.connection]).await;
            let mut child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
            let started = Instant::now();
            // Kill it as soon as it is in the middle of `stage` (some orders there, some not yet),
            // as a spread of 40 orders shows it: chunks and parts are 500 orders, so the sample
            // sees each one land.
            loop {
                let seen = statuses(store.as_ref(), &scope, &sample).await;
                if seen.contains(stage) && seen.contains(if stage == "processing" { "approved" } else { "processing" }) {
                    break;
                }
                assert!(child.try_wait().unwrap().is_none(), "the cut-off ended before it could be killed in {stage}");
                assert!(started.elapsed() < Duration::from_secs(120), "no progress to {stage}");
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            killed += 1;
        }
        assert_eq!(killed, 2);
        // The lease of the killed run runs out; the next run waits for it, then finishes.
        let run = cutoff(&server, &live.connection).await;
        assert!(run.status.success(), "{}\n{}", text(&run.stdout), text(&run.stderr));
        assert_each_in_exactly_one_file(&server, &live, &scope, &ids).await;
    }
}

/// B2: the scheduled worker inside `payrail serve` runs the cut-off at the connection's local
/// cut-off time (the server's clock moved past it), once per slot.
#[tokio::test]
async fn b2_the_server_runs_the_cutoff_at_the_connection_local_time() {
    let server = TestServer::start_with(|config| config.bank_tick_ms = 100).await;
    // Two minutes from now, in New York.
    let soon = jiff::Timestamp::now().checked_add(jiff::SignedDuration::from_mins(2)).unwrap();
    let cutoff_at = soon.to_zoned(jiff::tz::TimeZone::get("America/New_York").unwrap()).strftime("%H:%M").to_string();
    let live = live_at(&server, "acme", &cutoff_at).await;
    let id =
        order(&server, &live, json!({"type": "ach", "amount": 500, "direction": "credit", "receiving_account": ach_receiving("Jane Doe")}))
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(get_order(&server, &live, &id).await["status"], "approved", "not before its time");
    server.clock.advance_secs(180);
    let started = Instant::now();
    while get_order(&server, &live, &id).await["status"] != "sent" {
        assert!(started.elapsed() < Duration::from_secs(30), "the scheduled cut-off did not run");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A new order after the slot waits for the next one.
    let next =
        order(&server, &live, json!({"type": "ach", "amount": 600, "direction": "credit", "receiving_account": ach_receiving("Jane Doe")}))
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(get_order(&server, &live, &next).await["status"], "approved", "one run per slot");
    assert_eq!(bank_files(&server, &live.connection).await.len(), 1);
}

on_both_stores! {
/// Found by the bank audit on PostgreSQL: a scheduled cut-off whose run died after it took the
/// slot (kill -9 a quarter second in) left the slot's other orders `approved` until the next
/// slot, a banking day later: every later run of the slot only finished files. A slot whose
/// runs never finished is run again; one that finished is not.
#[tokio::test]
async fn b2_a_scheduled_cutoff_whose_run_died_is_run_again_by_the_next_tick() {
    let server = TestServer::start_with(|config| config.bank_tick_ms = 100).await;
    let new_york = jiff::tz::TimeZone::get("America/New_York").unwrap();
    let soon = jiff::Timestamp::now().checked_add(jiff::SignedDuration::from_mins(2)).unwrap().to_zoned(new_york);
    let cutoff_at = soon.strftime("%H:%M").to_string();
    let live = live_at(&server, "acme", &cutoff_at).await;
    let body = json!({"type": "ach", "amount": 500, "direction": "credit", "receiving_account": ach_receiving("Jane Doe")});
    let id = order(&server, &live, body.clone()).await["id"].as_str().unwrap().to_owned();
    // What a run that took the slot and was killed at once leaves behind.
    let slot = format!("{}T{cutoff_at}", soon.date());
    let mut batch = WriteBatch::new();
    for key in [format!("bank_cutoff_slot/{}/{slot}", live.connection), format!("bank_cutoff_slot_unfinished/{}/{slot}", live.connection)] {
        batch.push(Write::Unique { key, parameter: "slot".into(), message: "taken".into() });
    }
    server.store.commit(batch).await.unwrap();
    server.clock.advance_secs(180);
    let started = Instant::now();
    while get_order(&server, &live, &id).await["status"] != "sent" {
        assert!(started.elapsed() < Duration::from_secs(30), "the slot's orders were left for the next slot");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // That run finished the slot: a later order waits for the next one.
    let next = order(&server, &live, body).await["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(get_order(&server, &live, &next).await["status"], "approved", "one finished run per slot");
    assert_eq!(bank_files(&server, &live.connection).await.len(), 1);
}
}

on_both_stores! {
/// Found by the bank audit on PostgreSQL: a file recorded before its first claim landed (its
/// run killed at once, or every order it was made for cancelled meanwhile) was written and
/// uploaded empty, spending one of the day's 36 NACHA file id modifiers. It is dropped instead.
#[tokio::test]
async fn b2_a_file_that_holds_no_order_is_dropped_not_sent() {
    use payrail::bank::cutoff::files::FileStatus;
    let server = TestServer::start().await;
    let live = live(&server, "acme").await;
    // A recorded, claimed file that no order made it into, as a killed run leaves it.
    let mut empty = one_ach_file_sent(&server, &live).await;
    empty.file.id = payrail::domain::id::Id::generate().to_string();
    empty.file.name = empty.file.name.replace("-A-", "-B-");
    (empty.file.status, empty.file.order_count, empty.file.credit_total, empty.file.groups) = (FileStatus::Claimed, 0, 0, Vec::new());
    (empty.file.sha256, empty.file.size_bytes, empty.file.trace_start, empty.file.written_at, empty.file.uploaded_at) = (None, None, None, None, None);
    let mut batch = WriteBatch::new();
    batch.push(empty.insert().unwrap());
    server.store.commit(batch).await.unwrap();
    let sent_before: Vec<_> = std::fs::read_dir(&live.outbound).unwrap().map(|e| e.unwrap().file_name()).collect();
    let run = cutoff(&server, &live.connection).await;
    assert!(run.status.success(), "{}\n{}", text(&run.stdout), text(&run.stderr));
    let sent_after: Vec<_> = std::fs::read_dir(&live.outbound).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(sent_after, sent_before, "nothing more reached the bank");
    assert_eq!(bank_files(&server, &live.connection).await.len(), 1, "the empty file's record is gone");
}
}

on_both_stores! {
/// Found by the bank audit on PostgreSQL: once a connection had made NACHA's 36 ACH files of a
/// day, the whole cut-off failed, and its wires were held as well. The ACH rail still fails,
/// saying why; the other rails go out.
#[tokio::test]
async fn b2_a_rail_that_cannot_make_a_file_holds_back_no_other_rail() {
    let server = TestServer::start().await;
    let live = live(&server, "acme").await;
    // 35 more ACH files of the same day (records only): the day's modifiers are used up.
    let first = one_ach_file_sent(&server, &live).await;
    let mut batch = WriteBatch::new();
    for n in 0..35 {
        let mut copy = first.clone();
        copy.file.id = payrail::domain::id::Id::generate().to_string();
        copy.file.name = format!("{}-{n}", first.file.name);
        batch.push(copy.insert().unwrap());
    }
    server.store.commit(batch).await.unwrap();
    let ach = order(&server, &live, json!({"type": "ach", "amount": 200, "direction": "credit", "receiving_account": ach_receiving("Jane Doe")})).await;
    let wire = order(&server, &live, json!({"type": "wire", "amount": 300, "direction": "credit", "receiving_account": wire_receiving("Widgets Inc")})).await;
    let run = cutoff(&server, &live.connection).await;
    assert!(!run.status.success(), "the ACH rail's failure is reported");
    assert!(text(&run.stderr).contains("file id modifiers are used up"), "{}", text(&run.stderr));
    assert_eq!(get_order(&server, &live, wire["id"].as_str().unwrap()).await["status"], "sent", "the wire went out");
    assert_eq!(get_order(&server, &live, ach["id"].as_str().unwrap()).await["status"], "approved", "the ACH order waits");
}
}

on_both_stores! {
/// Found by CI, which ran at 00:10 UTC (19:10 in New York): an order created without an
/// `effective_date` was dated by UTC's day, the bank's tomorrow, so the evening's cut-off held
/// its wire back as not yet due. It is dated by the bank's day, moved to the next banking day on
/// a weekend or holiday as Modern Treasury defaults it. The connection's zone is picked to be on
/// another day than UTC's now (twelve hours behind before 11:00 UTC, fourteen ahead after), so
/// the test means the same at any hour it runs.
#[tokio::test]
async fn b2_an_order_without_an_effective_date_is_for_the_bank_s_day_and_due_at_its_cutoff() {
    use payrail::bank::calendar::banking_day_on_or_after;
    let day_in = |zone: &str| {
        let local = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::get(zone).unwrap()).date();
        time::Date::from_calendar_date(local.year().into(), (local.month() as u8).try_into().unwrap(), local.day() as u8).unwrap()
    };
    let zone = if jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).hour() < 11 { "Etc/GMT+12" } else { "Etc/GMT-14" };
    assert_ne!(day_in(zone), day_in("UTC"), "the zone is on another day than UTC");
    let server = TestServer::start().await;
    let live = live_in(&server, "acme", &far_cutoff_in(zone), zone).await;
    let wire = order(&server, &live, json!({"type": "wire", "amount": 300, "direction": "credit", "receiving_account": wire_receiving("Widgets Inc")})).await;
    let ach = order(&server, &live, json!({"type": "ach", "amount": 200, "direction": "credit", "receiving_account": ach_receiving("Jane Doe")})).await;
    let rtp = order(&server, &live, json!({"type": "rtp", "amount": 100, "direction": "credit", "receiving_account": wire_receiving("Widgets Inc")})).await;
    assert_eq!(wire["effective_date"], banking_day_on_or_after(day_in(zone)).to_string(), "a wire's day is the connection's");
    assert_eq!(ach["effective_date"], banking_day_on_or_after(day_in(NEW_YORK)).to_string(), "a NACHA file's day is Eastern");
    assert_eq!(rtp["effective_date"], day_in(zone).to_string(), "RTP settles every day");
    let run = cutoff(&server, &live.connection).await;
    assert!(run.status.success(), "{}\n{}", text(&run.stdout), text(&run.stderr));
    for (order, rail) in [(&wire, "wire"), (&ach, "ach"), (&rtp, "rtp")] {
        assert_eq!(get_order(&server, &live, order["id"].as_str().unwrap()).await["status"], "sent", "the {rail} order was due");
    }
}
}

on_both_stores! {
/// Found by the time audit: a wire cut off on Thanksgiving or a Saturday asked its bank to
/// execute it that day, when Fedwire is closed. A `pain.001` asks for the rail's next business
/// day (the days of each rail are `cutoff::tests`'), the day the order was for. This run checks
/// today's: a weekend or a holiday is where it would fail.
#[tokio::test]
async fn b3_a_pain001_asks_for_its_rail_s_next_business_day() {
    use payrail::bank::calendar::banking_day_on_or_after;
    let server = TestServer::start().await;
    let live = live(&server, "acme").await;
    let wire = order(&server, &live, json!({"type": "wire", "amount": 300, "direction": "credit", "receiving_account": wire_receiving("Widgets Inc")})).await;
    let run = cutoff(&server, &live.connection).await;
    assert!(run.status.success(), "{}\n{}", text(&run.stdout), text(&run.stderr));
    let files = bank_files(&server, &live.connection).await;
    let sent = std::fs::read_to_string(live.outbound.join(files[0]["name"].as_str().unwrap())).unwrap();
    let asked = sent.split("<ReqdExctnDt>").nth(1).and_then(|rest| rest.split("<Dt>").nth(1)).unwrap().split('<').next().unwrap().to_owned();
    assert_eq!(asked, wire["effective_date"].as_str().unwrap(), "the day the order was for");
    let asked = time::Date::parse(&asked, time::macros::format_description!("[year]-[month]-[day]")).unwrap();
    assert_eq!(banking_day_on_or_after(asked), asked, "{asked} is a banking day");
}
}

/// An ACH order of `live` sent by a cut-off: the stored record of its file.
async fn one_ach_file_sent(server: &TestServer, live: &Live) -> payrail::bank::cutoff::files::Stored {
    order(server, live, json!({"type": "ach", "amount": 100, "direction": "credit", "receiving_account": ach_receiving("Jane Doe")})).await;
    let run = cutoff(server, &live.connection).await;
    assert!(run.status.success(), "{}\n{}", text(&run.stdout), text(&run.stderr));
    let files = payrail::bank::cutoff::files::of_connection(server.store.as_ref(), &live_scope("acme"), &live.connection).await.unwrap();
    files.into_iter().next().expect("the cut-off's file")
}
