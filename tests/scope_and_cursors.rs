//! Issue 18, items 4, 7 and 8, over HTTPS against the real server, on either store:
//! - SPEC I2 (amended): a key made by `keys roll` shares its predecessor's idempotency scope;
//! - SPEC E2: every id in a request body that names nothing the caller's organization and mode
//!   can see is a 422 naming it, and nothing is created;
//! - SPEC L6 (with L1): list cursors are opaque, bound to their tenant and list, and paging stays
//!   exact.

#[macro_use]
mod common;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::wire::{Reply, basic, list_ids, post_idem, reply, tls_connect};
use common::{Key, TestServer, json};
use payrail::domain::api_key::Mode;
use payrail::domain::keys;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

async fn created(server: &TestServer, key: &Key, path: &str, body: &Value) -> Value {
    let (status, body) = json(server.post(path, key, body).send().await.expect("request")).await;
    assert_eq!(status, 201, "POST {path}: {body}");
    body
}

fn id_of(value: &Value) -> String {
    value["id"].as_str().unwrap_or_else(|| panic!("no id in {value}")).to_owned()
}

/// An internal account; a live one through a live connection of the key's organization (SPEC B1).
async fn internal_account(server: &TestServer, key: &Key) -> String {
    let mut body = json!({"name": "Operating", "currency": "USD"});
    if key.secret.starts_with("pr_live_") {
        body["connection_id"] = json!(common::live_connection(server, &key.org).await);
    }
    id_of(&created(server, key, "/api/internal_accounts", &body).await)
}

/// A counterparty with one account: (counterparty id, external account id).
async fn counterparty(server: &TestServer, key: &Key) -> (String, String) {
    let body = json!({"name": "Vendor", "accounts": [{
        "account_details": [{"account_number": "123456789"}],
        "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}]
    }]});
    let body = created(server, key, "/api/counterparties", &body).await;
    (id_of(&body), body["accounts"][0]["id"].as_str().expect("inline account").to_owned())
}

fn order(originating: &str, receiving: &str) -> Value {
    json!({"type": "ach", "amount": 1250, "direction": "credit", "originating_account_id": originating, "receiving_account_id": receiving})
}

/// Ids of one page (up to 100) of a list.
async fn roll(server: &TestServer, key: &Key) -> Key {
    let (issued, _) = keys::roll(server.store.as_ref(), server.clock.as_ref(), &key.id, 3600).await.expect("roll");
    Key { id: issued.key.id, secret: issued.secret.expose().to_owned(), org: key.org.clone() }
}

/// Reads one HTTP/1.1 reply's status line and Content-Length body.
async fn read_status_and_body(stream: &mut TlsStream<TcpStream>) -> (u16, Vec<u8>) {
    let (mut buf, mut chunk) = (Vec::new(), [0u8; 4096]);
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut chunk).await.expect("read");
        assert!(n > 0, "connection closed before a reply head");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status line");
    let len: usize = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, v)| v.trim().parse().expect("content-length"));
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = stream.read(&mut chunk).await.expect("read body");
        assert!(n > 0, "connection closed mid-body");
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(len);
    (status, body)
}

/// Asserts a 422 naming `parameter`, not retryable (SPEC L3, L4).
fn assert_invalid(reply: &Reply, parameter: &str, what: &str) {
    assert_eq!(reply.status, 422, "{what}: {}", String::from_utf8_lossy(&reply.body));
    let body = reply.json();
    assert_eq!(body["errors"]["parameter"], parameter, "{what}: {body}");
    assert_eq!(reply.should_retry.as_deref(), Some("false"), "{what}: a 422 retrying cannot fix says x-should-retry: false");
}

// ---------------------------------------------------------------------------------------------
// I2 (amended): a rolled key's successor shares its predecessor's idempotency scope
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn i2_a_rolled_keys_successor_replays_its_predecessors_reply() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let (originating, (_, receiving)) = (internal_account(&server, &key).await, counterparty(&server, &key).await);
    let body = order(&originating, &receiving);
    let first = post_idem(&server, "/api/payment_orders", &key, "pay-roll-1", &body).await;
    assert_eq!(first.status, 201, "{}", String::from_utf8_lossy(&first.body));
    let successor = roll(&server, &key).await;
    let retry = post_idem(&server, "/api/payment_orders", &successor, "pay-roll-1", &body).await;
    assert_eq!(retry.status, 201, "{}", String::from_utf8_lossy(&retry.body));
    assert_eq!(retry.replayed.as_deref(), Some("true"), "the successor's retry is a replay");
    assert_eq!(retry.body, first.body, "byte for byte");
    assert_eq!(list_ids(&server, "/api/payment_orders", &successor).await.len(), 1, "one payment order, not two");
}
}

on_both_stores! {
#[tokio::test]
async fn i2_a_successor_of_a_successor_still_replays() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let first = post_idem(&server, "/api/counterparties", &key, "cp-chain", &json!({"name": "Chain"})).await;
    assert_eq!(first.status, 201);
    let second = roll(&server, &key).await;
    let third = roll(&server, &second).await;
    for (which, k) in [("second", &second), ("third", &third)] {
        let retry = post_idem(&server, "/api/counterparties", k, "cp-chain", &json!({"name": "Chain"})).await;
        assert_eq!((retry.status, retry.replayed.as_deref()), (201, Some("true")), "{which} key");
        assert_eq!(retry.body, first.body, "{which} key");
    }
    // A key stored by the last of the chain is the chain's too.
    let late = post_idem(&server, "/api/counterparties", &third, "cp-chain-late", &json!({"name": "Late"})).await;
    assert_eq!(late.status, 201);
    let from_first = post_idem(&server, "/api/counterparties", &key, "cp-chain-late", &json!({"name": "Late"})).await;
    assert_eq!((from_first.replayed.as_deref(), from_first.body), (Some("true"), late.body));
    assert_eq!(list_ids(&server, "/api/counterparties", &third).await.len(), 2);
}
}

on_both_stores! {
#[tokio::test]
async fn i2_a_claim_held_by_the_predecessor_makes_the_successor_409() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let successor = roll(&server, &key).await;
    // The predecessor's request: headers and half of the body sent, so its key is claimed.
    let mut body = serde_json::to_vec(&json!({"name": "Slow"})).unwrap();
    body.resize(200, b' ');
    let head = format!(
        "POST /api/counterparties HTTP/1.1\r\nHost: localhost\r\nAuthorization: {}\r\nContent-Type: application/json\r\n\
         Idempotency-Key: held\r\nContent-Length: {}\r\n\r\n",
        basic(&key),
        body.len()
    );
    let mut stream = tls_connect(&server).await;
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.write_all(&body[..100]).await.expect("half the body");
    stream.flush().await.expect("flush");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let during = post_idem(&server, "/api/counterparties", &successor, "held", &json!({"name": "Other"})).await;
    assert_eq!(during.status, 409, "{}", String::from_utf8_lossy(&during.body));
    assert_eq!(during.json()["errors"]["parameter"], "Idempotency-Key");
    stream.write_all(&body[100..]).await.expect("the rest");
    stream.flush().await.expect("flush");
    let (status, original) = tokio::time::timeout(Duration::from_secs(10), read_status_and_body(&mut stream)).await.expect("reply");
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&original));
    let after = post_idem(&server, "/api/counterparties", &successor, "held", &json!({"name": "Other"})).await;
    assert_eq!((after.status, after.replayed.as_deref()), (201, Some("true")));
    assert_eq!(after.body, original);
    assert_eq!(list_ids(&server, "/api/counterparties", &successor).await.len(), 1);
}
}

on_both_stores! {
#[tokio::test]
async fn i2_two_independent_keys_in_one_organization_both_execute() {
    let server = TestServer::start().await;
    let (a, b) = (server.key().await, server.key().await);
    let first = post_idem(&server, "/api/counterparties", &a, "same", &json!({"name": "A"})).await;
    let second = post_idem(&server, "/api/counterparties", &b, "same", &json!({"name": "B"})).await;
    assert_eq!((first.status, second.status), (201, 201));
    assert_eq!(second.replayed, None, "an unrelated key runs independently");
    assert_ne!(first.json()["id"], second.json()["id"]);
    // Rolling one of them does not join the two scopes.
    let a2 = roll(&server, &a).await;
    let again = post_idem(&server, "/api/counterparties", &a2, "same", &json!({"name": "A"})).await;
    assert_eq!((again.replayed.as_deref(), &again.body), (Some("true"), &first.body));
    assert_eq!(list_ids(&server, "/api/counterparties", &a).await.len(), 2);
}
}

on_both_stores! {
/// `payrail keys roll` run as a separate process on the server's database.
#[tokio::test]
async fn i2_cli_keys_roll_successor_replays() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let first = post_idem(&server, "/api/counterparties", &key, "cli-roll", &json!({"name": "Cli"})).await;
    assert_eq!(first.status, 201);
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_payrail"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PAYRAIL_") {
            command.env_remove(&name);
        }
    }
    command.arg("--data-dir").arg(server.dir.path());
    if let Some(url) = common::test_database_url(server.dir.path()).await {
        command.arg("--database-url").arg(url);
    }
    if let Some(path) = &server.master_key_file {
        command.arg("--master-key-file").arg(path);
    }
    let output = command.args(["keys", "roll", &key.id, "--json"]).output().expect("run payrail keys roll");
    assert!(output.status.success(), "keys roll: {}", String::from_utf8_lossy(&output.stderr));
    let rolled: Value = serde_json::from_slice(&output.stdout).expect("--json prints one object");
    let successor = Key { id: id_of(&rolled), secret: rolled["key"].as_str().expect("secret").to_owned(), org: key.org.clone() };
    let retry = post_idem(&server, "/api/counterparties", &successor, "cli-roll", &json!({"name": "Cli"})).await;
    assert_eq!((retry.status, retry.replayed.as_deref()), (201, Some("true")));
    assert_eq!(retry.body, first.body);
}
}

// ---------------------------------------------------------------------------------------------
// E2: ids in bodies that name nothing the caller can see
// ---------------------------------------------------------------------------------------------

/// Ids of each kind that the caller cannot see: another organization's, the other mode's, one
/// that names nothing, and one that is not an id at all.
struct Foreign {
    counterparty: Vec<(&'static str, String)>,
    internal_account: Vec<(&'static str, String)>,
    external_account: Vec<(&'static str, String)>,
}

async fn foreign_ids(server: &TestServer) -> Foreign {
    let other_org = server.key_for("other_org", Mode::Sandbox).await;
    let other_mode = server.key_for("default", Mode::Live).await;
    let mut foreign = Foreign { counterparty: Vec::new(), internal_account: Vec::new(), external_account: Vec::new() };
    for (label, owner) in [("other organization", &other_org), ("other mode", &other_mode)] {
        let (cp, ea) = counterparty(server, owner).await;
        foreign.counterparty.push((label, cp));
        foreign.external_account.push((label, ea));
        foreign.internal_account.push((label, internal_account(server, owner).await));
    }
    for list in [&mut foreign.counterparty, &mut foreign.internal_account, &mut foreign.external_account] {
        list.push(("nonexistent", uuid::Uuid::new_v4().to_string()));
        list.push(("malformed", "not-an-id".to_owned()));
    }
    foreign
}

/// What a tenant's lists hold: every resource kind and the events.
async fn snapshot(server: &TestServer, key: &Key) -> Vec<Vec<String>> {
    let mut all = Vec::new();
    for path in ["/api/counterparties", "/api/external_accounts", "/api/internal_accounts", "/api/payment_orders", "/api/events"] {
        all.push(list_ids(server, path, key).await);
    }
    all
}

/// One request of the table: method, path, body, and the parameter its 422 must name.
struct Case {
    method: reqwest::Method,
    path: String,
    body: Value,
    parameter: &'static str,
}

fn post(path: &str, body: Value, parameter: &'static str) -> Case {
    Case { method: reqwest::Method::POST, path: path.to_owned(), body, parameter }
}

fn patch(path: String, body: Value, parameter: &'static str) -> Case {
    Case { method: reqwest::Method::PATCH, path, body, parameter }
}

fn account_inline(extra: (&str, &str)) -> Value {
    let mut account = json!({
        "account_details": [{"account_number": "123456789"}],
        "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}]
    });
    account[extra.0] = json!(extra.1);
    account
}

/// Every id-valued field of every request body, with one foreign id of the right kind.
fn cases(mine: &Mine, foreign: &str, kind: &str) -> Vec<Case> {
    let (ia, ea, ea_path, ia_path) = (&mine.internal, &mine.external, &mine.external_path, &mine.internal_path);
    match kind {
        "counterparty" => vec![
            post(
                "/api/payment_orders",
                json!({"type": "ach", "amount": 5, "direction": "credit", "originating_account_id": ia, "receiving_account_id": ea, "counterparty_id": foreign}),
                "counterparty_id",
            ),
            post(
                "/api/payment_orders",
                json!({"type": "ach", "amount": 5, "direction": "credit", "originating_account_id": ia, "receiving_account": account_inline(("counterparty_id", foreign))}),
                "receiving_account.counterparty_id",
            ),
            post("/api/internal_accounts", json!({"name": "X", "currency": "USD", "counterparty_id": foreign}), "counterparty_id"),
            patch(ia_path.clone(), json!({"counterparty_id": foreign}), "counterparty_id"),
            post(
                "/api/external_accounts",
                json!({"counterparty_id": foreign, "account_details": [{"account_number": "123456789"}]}),
                "counterparty_id",
            ),
            patch(ea_path.clone(), json!({"counterparty_id": foreign}), "counterparty_id"),
            post(
                "/api/counterparties",
                json!({"name": "Y", "accounts": [account_inline(("counterparty_id", foreign))]}),
                "accounts[0].counterparty_id",
            ),
        ],
        "internal_account" => vec![
            post("/api/payment_orders", order(foreign, ea), "originating_account_id"),
            post(
                "/api/payment_orders",
                json!({"type": "book", "amount": 5, "direction": "credit", "originating_account_id": ia, "receiving_account_id": foreign}),
                "receiving_account_id",
            ),
            post("/api/internal_accounts", json!({"name": "X", "currency": "USD", "parent_account_id": foreign}), "parent_account_id"),
            patch(ia_path.clone(), json!({"parent_account_id": foreign}), "parent_account_id"),
        ],
        _ => vec![post("/api/payment_orders", order(ia, foreign), "receiving_account_id")],
    }
}

/// The caller's own resources the table's bodies refer to.
struct Mine {
    internal: String,
    external: String,
    internal_path: String,
    external_path: String,
}

on_both_stores! {
#[tokio::test]
async fn e2_every_foreign_id_in_a_body_is_a_422_naming_it_and_creates_nothing() {
    let server = TestServer::start_with(|c| c.sandbox_step_ms = 3_600_000).await;
    let key = server.key().await;
    let foreign = foreign_ids(&server).await;
    let internal = internal_account(&server, &key).await;
    let (_, external) = counterparty(&server, &key).await;
    let mine = Mine {
        internal_path: format!("/api/internal_accounts/{internal}"),
        external_path: format!("/api/external_accounts/{external}"),
        internal,
        external,
    };
    let before = snapshot(&server, &key).await;
    let docs_before = (
        json(server.get(&mine.internal_path, &key).send().await.unwrap()).await,
        json(server.get(&mine.external_path, &key).send().await.unwrap()).await,
    );
    let mut failures = Vec::new();
    for (kind, ids) in [
        ("counterparty", &foreign.counterparty),
        ("internal_account", &foreign.internal_account),
        ("external_account", &foreign.external_account),
    ] {
        for (label, id) in ids {
            for case in cases(&mine, id, kind) {
                let what = format!("{} {} with {} {kind} id in {}", case.method, case.path, label, case.parameter);
                let r = reply(server.req(case.method.clone(), &case.path, &key).json(&case.body).send().await.unwrap()).await;
                let ok = r.status == 422 && r.json()["errors"]["parameter"] == case.parameter && r.should_retry.as_deref() == Some("false");
                if !ok {
                    failures.push(format!("{what}: {} {}", r.status, String::from_utf8_lossy(&r.body)));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} case(s) not refused with a 422 naming the field:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(snapshot(&server, &key).await, before, "nothing was created, no event written");
    let docs_after = (
        json(server.get(&mine.internal_path, &key).send().await.unwrap()).await,
        json(server.get(&mine.external_path, &key).send().await.unwrap()).await,
    );
    assert_eq!(docs_after, docs_before, "PATCHes changed nothing");
}
}

on_both_stores! {
/// MT links a payment order to the counterparty that owns its receiving account; a body naming
/// another counterparty than that one is refused rather than half-honoured.
#[tokio::test]
async fn e2_counterparty_id_must_own_the_receiving_account() {
    let server = TestServer::start_with(|c| c.sandbox_step_ms = 3_600_000).await;
    let key = server.key().await;
    let originating = internal_account(&server, &key).await;
    let (owner, receiving) = counterparty(&server, &key).await;
    let (stranger, _) = counterparty(&server, &key).await;
    let mut body = order(&originating, &receiving);
    body["counterparty_id"] = json!(stranger);
    let r = reply(server.post("/api/payment_orders", &key, &body).send().await.unwrap()).await;
    assert_invalid(&r, "counterparty_id", "a counterparty that does not own the receiving account");
    assert!(list_ids(&server, "/api/payment_orders", &key).await.is_empty());
    body["counterparty_id"] = json!(owner);
    let made = created(&server, &key, "/api/payment_orders", &body).await;
    assert_eq!(made["counterparty_id"], owner.as_str(), "the owner is accepted and recorded");
    // An inline receiving account is created under the named counterparty.
    let inline = json!({"type": "ach", "amount": 7, "direction": "credit", "originating_account_id": originating,
        "counterparty_id": owner, "receiving_account": account_inline(("party_name", "Inline"))});
    let made = created(&server, &key, "/api/payment_orders", &inline).await;
    assert_eq!(made["counterparty_id"], owner.as_str());
    let account =
        json(server.get(&format!("/api/external_accounts/{}", made["receiving_account_id"].as_str().unwrap()), &key).send().await.unwrap())
            .await
            .1;
    assert_eq!(account["counterparty_id"], owner.as_str(), "{account}");
}
}

// ---------------------------------------------------------------------------------------------
// L6 and L1: cursors
// ---------------------------------------------------------------------------------------------

async fn page(server: &TestServer, key: &Key, path: &str) -> (u16, Value, String) {
    let response = server.get(path, key).send().await.expect("list");
    let cursor = response.headers().get("x-after-cursor").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let (status, body) = json(response).await;
    (status, body, cursor)
}

async fn counterparties(server: &TestServer, key: &Key, n: usize, prefix: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(id_of(&created(server, key, "/api/counterparties", &json!({"name": format!("{prefix}{i}")})).await));
    }
    ids
}

on_both_stores! {
#[tokio::test]
async fn l6_a_cursor_reveals_nothing_of_other_tenants_writes() {
    let server = TestServer::start().await;
    let (a, b) = (server.key().await, server.key_for("tenant_b", Mode::Sandbox).await);
    counterparties(&server, &a, 3, "a").await;
    let (_, _, before) = page(&server, &a, "/api/counterparties?per_page=1").await;
    let (_, _, same_position) = page(&server, &a, "/api/counterparties?per_page=1").await;
    assert_ne!(before, same_position, "two cursors for one position differ (random nonce)");
    counterparties(&server, &b, 40, "b").await;
    let (_, _, after) = page(&server, &a, "/api/counterparties?per_page=1").await;
    assert_eq!(after.len(), before.len(), "the cursor's size does not move with other tenants' writes");
    for cursor in [&before, &same_position, &after] {
        let raw = URL_SAFE_NO_PAD.decode(cursor).expect("a cursor is base64url");
        assert!(!raw.starts_with(b"v1:"), "a cursor is not a plain position: {}", String::from_utf8_lossy(&raw));
        assert!(std::str::from_utf8(&raw).is_err() || !raw.iter().all(u8::is_ascii_graphic), "a cursor is no readable text");
    }
    // All three still lead to the same next page.
    let mut next = Vec::new();
    for cursor in [&before, &same_position, &after] {
        let (status, body, _) = page(&server, &a, &format!("/api/counterparties?per_page=1&after_cursor={cursor}")).await;
        assert_eq!(status, 200, "{body}");
        next.push(body);
    }
    assert!(next.windows(2).all(|w| w[0] == w[1]), "{next:?}");
}
}

on_both_stores! {
#[tokio::test]
async fn l6_a_cursor_is_refused_in_another_tenant_list_or_mode_and_when_tampered() {
    let server = TestServer::start().await;
    let a = server.key().await;
    let b = server.key_for("tenant_b", Mode::Sandbox).await;
    let a_live = server.key_for("default", Mode::Live).await;
    let a_again = server.key().await;
    for k in [&a, &b, &a_live] {
        counterparties(&server, k, 3, "x").await;
    }
    let (_, _, cursor) = page(&server, &a, "/api/counterparties?per_page=1").await;
    assert!(!cursor.is_empty());
    let refused = |k: &Key, path: String, what: &'static str| {
        let request = server.get(&path, k).send();
        async move {
            let r = reply(request.await.unwrap()).await;
            assert_invalid(&r, "after_cursor", what);
        }
    };
    refused(&b, format!("/api/counterparties?after_cursor={cursor}"), "another organization").await;
    refused(&a_live, format!("/api/counterparties?after_cursor={cursor}"), "the other mode").await;
    refused(&a, format!("/api/events?after_cursor={cursor}"), "another list").await;
    let mut tampered = cursor.clone().into_bytes();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    refused(&a, format!("/api/counterparties?after_cursor={}", String::from_utf8(tampered).unwrap()), "tampered").await;
    let old = URL_SAFE_NO_PAD.encode("v1:2");
    let r = reply(server.get(&format!("/api/counterparties?after_cursor={old}"), &a).send().await.unwrap()).await;
    assert_invalid(&r, "after_cursor", "a v1 cursor");
    assert!(r.json()["errors"]["message"].as_str().unwrap().contains("first page"), "says how to recover: {}", r.json());
    // Another key of the same organization and mode is the same tenant.
    let (status, body, _) = page(&server, &a_again, &format!("/api/counterparties?per_page=1&after_cursor={cursor}")).await;
    assert_eq!(status, 200, "{body}");
}
}

on_both_stores! {
#[tokio::test]
async fn l1_paging_60_items_by_25_gives_each_once_newest_first_while_rows_are_inserted() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let mut made = counterparties(&server, &key, 60, "p").await;
    made.reverse();
    let (mut seen, mut sizes, mut path) = (Vec::new(), Vec::new(), "/api/counterparties?per_page=25".to_owned());
    loop {
        let (status, body, cursor) = page(&server, &key, &path).await;
        assert_eq!(status, 200, "{body}");
        let items = body.as_array().expect("array");
        sizes.push(items.len());
        seen.extend(items.iter().map(id_of));
        // Rows inserted between pages are newer than every position still to come.
        counterparties(&server, &key, 2, "late").await;
        if cursor.is_empty() {
            break;
        }
        assert!(sizes.len() < 10, "paging ends");
        path = format!("/api/counterparties?per_page=25&after_cursor={cursor}");
    }
    assert_eq!(sizes, vec![25, 25, 10], "the last page has items and an empty cursor");
    assert_eq!(seen, made, "all 60, once each, newest first");
}
}
