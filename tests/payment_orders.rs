//! Payment orders (SPEC E2, E3, E4), the sandbox bank, and their idempotency (I4), over HTTPS.

#[macro_use]
mod common;

use std::time::Duration;

use common::{Key, TestServer, assert_error, json};
use payrail::domain::api_key::Mode;
use serde_json::{Value, json};

/// A server whose sandbox bank never gets to move anything during a test.
async fn frozen_bank() -> TestServer {
    TestServer::start_with(|c| c.sandbox_step_ms = 3_600_000).await
}

async fn fast_bank() -> TestServer {
    TestServer::start_with(|c| c.sandbox_step_ms = 0).await
}

async fn internal_account(server: &TestServer, key: &Key, currency: &str) -> String {
    let (status, body) =
        json(server.post("/api/internal_accounts", key, &json!({"name": "Operating", "currency": currency})).send().await.unwrap()).await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

/// A counterparty with one account; returns (counterparty id, external account id).
async fn counterparty(server: &TestServer, key: &Key) -> (String, String) {
    let body = json!({"name": "Vendor", "accounts": [{
        "account_details": [{"account_number": "123456789"}],
        "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}]
    }]});
    let (status, body) = json(server.post("/api/counterparties", key, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "{body}");
    (body["id"].as_str().unwrap().to_owned(), body["accounts"][0]["id"].as_str().unwrap().to_owned())
}

fn order(originating: &str, receiving: &str, amount: i64) -> Value {
    json!({"type": "ach", "amount": amount, "direction": "credit", "originating_account_id": originating, "receiving_account_id": receiving})
}

async fn create_order(server: &TestServer, key: &Key, body: &Value) -> Value {
    let (status, body) = json(server.post("/api/payment_orders", key, body).send().await.unwrap()).await;
    assert_eq!(status, 201, "{body}");
    body
}

/// How many items the first page of `path` holds (at most 100).
async fn list_len(server: &TestServer, key: &Key, path: &str) -> usize {
    let (status, body) = json(server.get(&format!("{path}?per_page=100"), key).send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    body.as_array().unwrap().len()
}

async fn patch_order(server: &TestServer, key: &Key, id: &str, body: &Value) -> (u16, Value) {
    json(server.patch(&format!("/api/payment_orders/{id}"), key, body).send().await.unwrap()).await
}

async fn get_order(server: &TestServer, key: &Key, id: &str) -> Value {
    let (status, body) = json(server.get(&format!("/api/payment_orders/{id}"), key).send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Polls until the order reaches `status` (bounded: 10 s).
async fn wait_for_status(server: &TestServer, key: &Key, id: &str, status: &str) -> Value {
    for _ in 0..200 {
        let order = get_order(server, key, id).await;
        if order["status"] == status {
            return order;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("payment order {id} never reached {status}: {}", get_order(server, key, id).await);
}

async fn event_names(server: &TestServer, key: &Key, entity_id: &str) -> Vec<String> {
    let (_, events) = json(server.get(&format!("/api/events?entity_id={entity_id}&per_page=100"), key).send().await.unwrap()).await;
    let mut names: Vec<String> = events.as_array().unwrap().iter().map(|e| e["event_name"].as_str().unwrap().to_owned()).collect();
    names.reverse();
    names
}

const PAYMENT_ORDER_FIELDS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "type",
    "subtype",
    "amount",
    "currency",
    "direction",
    "status",
    "priority",
    "originating_account_id",
    "originating_account_type",
    "receiving_account_id",
    "receiving_account_type",
    "counterparty_id",
    "effective_date",
    "description",
    "statement_descriptor",
    "remittance_information",
    "purpose",
    "metadata",
    "external_id",
    "process_after",
    "expires_at",
    "send_remittance_advice",
    "nsf_protected",
    "charge_bearer",
    "accounting",
    "accounting_category_id",
    "accounting_ledger_class_id",
    "batch_id",
    "current_hold",
    "current_return",
    "foreign_exchange_contract",
    "foreign_exchange_indicator",
    "foreign_exchange_rate",
    "ledger_transaction_id",
    "originating_party_name",
    "originating_party_address",
    "reconciliation_status",
    "reference_numbers",
    "transaction_ids",
    "ultimate_originating_account",
    "ultimate_originating_account_id",
    "ultimate_originating_account_type",
    "ultimate_originating_party_identifier",
    "ultimate_originating_party_name",
    "ultimate_receiving_party_identifier",
    "ultimate_receiving_party_name",
    "vendor_attributes",
    "vendor_failure_reason",
    "created_at",
    "updated_at",
];

on_both_stores! {
#[tokio::test]
async fn e2_create_by_receiving_account_id_derives_counterparty() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let originating = internal_account(&server, &key, "USD").await;
    let (counterparty_id, account_id) = counterparty(&server, &key).await;
    let created = create_order(&server, &key, &order(&originating, &account_id, 12_345)).await;
    let mut fields: Vec<&str> = created.as_object().unwrap().keys().map(String::as_str).collect();
    let mut expected = PAYMENT_ORDER_FIELDS.to_vec();
    fields.sort_unstable();
    expected.sort_unstable();
    assert_eq!(fields, expected);
    assert_eq!(created["counterparty_id"], counterparty_id.as_str());
    assert_eq!(created["receiving_account_type"], "external_account");
    assert_eq!(created["currency"], "USD", "defaults to the originating account's currency");
    assert_eq!(created["status"], "approved");
    assert_eq!(created["accounting"], json!({"account_id": null, "class_id": null}));
    assert_eq!(get_order(&server, &key, created["id"].as_str().unwrap()).await, created);
}
}

on_both_stores! {
#[tokio::test]
async fn e2_inline_receiving_account_creates_an_external_account() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let originating = internal_account(&server, &key, "USD").await;
    let body = json!({"type": "wire", "amount": 500, "direction": "credit", "originating_account_id": originating,
        "receiving_account": {"party_name": "Jane Doe", "account_details": [{"account_number": "987654321"}],
            "routing_details": [{"routing_number": "021000021", "routing_number_type": "aba"}]}});
    let created = create_order(&server, &key, &body).await;
    let account_id = created["receiving_account_id"].as_str().unwrap();
    let (status, account) = json(server.get(&format!("/api/external_accounts/{account_id}"), &key).send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(account["party_name"], "Jane Doe");
}
}

on_both_stores! {
#[tokio::test]
async fn e2_book_transfer_between_internal_accounts() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let from = internal_account(&server, &key, "USD").await;
    let to = internal_account(&server, &key, "USD").await;
    let created = create_order(
        &server,
        &key,
        &json!({"type": "book", "amount": 1, "direction": "credit", "originating_account_id": from, "receiving_account_id": to}),
    )
    .await;
    assert_eq!(created["receiving_account_type"], "internal_account");
    let (status, body) = json(server.post("/api/payment_orders", &key, &order(&from, &to, 1)).send().await.unwrap()).await;
    assert_error(status, &body, 422, "parameter_invalid");
    assert_eq!(body["errors"]["parameter"], "receiving_account_id", "an ach order cannot pay an internal account");
    let said = body["errors"]["message"].as_str().unwrap();
    assert!(said.contains("internal account") && !said.contains("does not name"), "the account exists; say why it cannot be paid: {said}");

    // Found by the core audit: a book order crossed currencies, or paid its own account.
    let euros = internal_account(&server, &key, "EUR").await;
    let before = list_len(&server, &key, "/api/payment_orders").await;
    for (receiving, why) in [(&euros, "another currency"), (&from, "itself")] {
        let body = json!({"type": "book", "amount": 1, "direction": "credit", "originating_account_id": from, "receiving_account_id": receiving});
        let (status, refused) = json(server.post("/api/payment_orders", &key, &body).send().await.unwrap()).await;
        assert_error(status, &refused, 422, "parameter_invalid");
        assert_eq!(refused["errors"]["parameter"], "receiving_account_id", "a book order to {why}: {refused}");
    }
    assert_eq!(list_len(&server, &key, "/api/payment_orders").await, before, "a refused order is not created");
}
}

on_both_stores! {
#[tokio::test]
async fn e2_every_invalid_parameter_is_named() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let originating = internal_account(&server, &key, "USD").await;
    let (_, receiving) = counterparty(&server, &key).await;
    let other = server.key_for("other-org", Mode::Sandbox).await;
    let foreign = internal_account(&server, &other, "USD").await;
    let base = order(&originating, &receiving, 100);
    let with = |field: &str, value: Value| {
        let mut body = base.clone();
        body[field] = value;
        body
    };
    let without = |field: &str| {
        let mut body = base.clone();
        body.as_object_mut().unwrap().remove(field);
        body
    };
    let cases: Vec<(Value, &str, &str)> = vec![
        (without("type"), "type", "parameter_missing"),
        (without("amount"), "amount", "parameter_missing"),
        (without("direction"), "direction", "parameter_missing"),
        (without("originating_account_id"), "originating_account_id", "parameter_missing"),
        (without("receiving_account_id"), "receiving_account_id", "parameter_missing"),
        (with("type", json!("teleport")), "type", "parameter_invalid"),
        (with("direction", json!("sideways")), "direction", "parameter_invalid"),
        (with("amount", json!(0)), "amount", "parameter_invalid"),
        (with("amount", json!(-5)), "amount", "parameter_invalid"),
        (with("amount", json!(9_007_199_254_740_992_i64)), "amount", "parameter_invalid"),
        (with("amount", json!(10.5)), "amount", "parameter_invalid"),
        (with("amount", json!("100")), "amount", "parameter_invalid"),
        (with("originating_account_id", json!(foreign)), "originating_account_id", "parameter_invalid"),
        (with("originating_account_id", json!(receiving)), "originating_account_id", "parameter_invalid"),
        (with("receiving_account_id", json!("5b8c1a44-0000-4000-8000-000000000000")), "receiving_account_id", "parameter_invalid"),
        (with("receiving_account", json!({"party_name": "x"})), "receiving_account_id", "parameter_invalid"),
        (with("currency", json!("EUR")), "currency", "parameter_invalid"),
        (with("currency", json!("XYZ")), "currency", "parameter_invalid"),
        (with("effective_date", json!("2026-02-30")), "effective_date", "parameter_invalid"),
        (with("priority", json!("urgent")), "priority", "parameter_invalid"),
        (with("statement_descriptor", json!("eleven char")), "statement_descriptor", "parameter_invalid"),
        (with("subtype", json!("XYZ")), "subtype", "parameter_invalid"),
        (with("process_after", json!("tomorrow")), "process_after", "parameter_invalid"),
        (with("metadata", json!({"k": 1})), "metadata.k", "parameter_invalid"),
        (with("line_items", json!([{"amount": 60}, {"amount": 50}])), "line_items", "parameter_invalid"),
        (with("line_items", json!([{"amount": 0}, {"amount": 100}])), "line_items[0].amount", "parameter_invalid"),
        (with("ledger_transaction_id", json!("5b8c1a44-0000-4000-8000-000000000000")), "ledger_transaction_id", "parameter_invalid"),
    ];
    for (body, parameter, code) in cases {
        let (status, reply) = json(server.post("/api/payment_orders", &key, &body).send().await.unwrap()).await;
        assert_error(status, &reply, 422, code);
        assert_eq!(reply["errors"]["parameter"], parameter, "for {body}: {reply}");
    }
    let (_, listed) = json(server.get("/api/payment_orders", &key).send().await.unwrap()).await;
    assert_eq!(listed, json!([]), "no failed create left anything behind");
}
}

on_both_stores! {
#[tokio::test]
async fn e3_cancel_before_processing_and_retried_cancel_succeeds() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let originating = internal_account(&server, &key, "USD").await;
    let (_, receiving) = counterparty(&server, &key).await;
    let id = create_order(&server, &key, &order(&originating, &receiving, 100)).await["id"].as_str().unwrap().to_owned();
    let (status, cancelled) = patch_order(&server, &key, &id, &json!({"status": "cancelled"})).await;
    assert_eq!((status, cancelled["status"].as_str()), (200, Some("cancelled")));
    let (status, again) = patch_order(&server, &key, &id, &json!({"status": "cancelled"})).await;
    assert_eq!((status, &again), (200, &cancelled), "a blind retry of the cancel changes nothing");
    let response = server.patch(&format!("/api/payment_orders/{id}"), &key, &json!({"status": "approved"})).send().await.unwrap();
    assert_eq!(response.headers()["x-should-retry"], "false");
    let (status, body) = json(response).await;
    assert_error(status, &body, 422, "parameter_invalid");
    assert_eq!(body["errors"]["parameter"], "status");
    assert_eq!(get_order(&server, &key, &id).await, cancelled, "a refused transition changes nothing");
    assert_eq!(event_names(&server, &key, &id).await, ["created", "cancelled"]);
}
}

on_both_stores! {
#[tokio::test]
async fn e3_clients_cannot_make_bank_moves_and_approval_round_trips() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let originating = internal_account(&server, &key, "USD").await;
    let (_, receiving) = counterparty(&server, &key).await;
    let id = create_order(&server, &key, &order(&originating, &receiving, 100)).await["id"].as_str().unwrap().to_owned();
    for bank_only in ["processing", "sent", "completed", "failed", "returned", "pending", "bogus"] {
        let (status, body) = patch_order(&server, &key, &id, &json!({"status": bank_only})).await;
        assert_error(status, &body, 422, "parameter_invalid");
    }
    let (status, body) = patch_order(&server, &key, &id, &json!({"status": "needs_approval"})).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("needs_approval")));
    let (status, body) = patch_order(&server, &key, &id, &json!({"status": "approved", "description": "checked"})).await;
    assert_eq!((status, body["status"].as_str(), body["description"].as_str()), (200, Some("approved"), Some("checked")));
    assert_eq!(event_names(&server, &key, &id).await, ["created", "needs_approval", "updated", "approved"]);
}
}

on_both_stores! {
#[tokio::test]
async fn e3_fixed_fields_cannot_change() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let originating = internal_account(&server, &key, "USD").await;
    let (_, receiving) = counterparty(&server, &key).await;
    let id = create_order(&server, &key, &order(&originating, &receiving, 100)).await["id"].as_str().unwrap().to_owned();
    for (field, value) in
        [("type", json!("wire")), ("direction", json!("debit")), ("currency", json!("USD")), ("originating_account_id", json!(originating))]
    {
        let (status, body) = patch_order(&server, &key, &id, &json!({ field: value })).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], field);
    }
    let (status, body) = patch_order(&server, &key, &id, &json!({"amount": 250, "metadata": {"invoice": "7"}})).await;
    assert_eq!((status, body["amount"].as_i64()), (200, Some(250)));
}
}

on_both_stores! {
/// Found by the SDK audit: nine fields of MT's update request were answered 200 and left as they
/// were, with no event. Each is applied (or refused naming it); `reconciliation_status` also on
/// an order that is no longer editable, since it is the client's bookkeeping.
#[tokio::test]
async fn e3_every_update_field_of_mt_s_request_is_applied() {
    let server = fast_bank().await;
    let key = server.key().await;
    let originating = internal_account(&server, &key, "USD").await;
    let (_, receiving) = counterparty(&server, &key).await;
    let mut body = order(&originating, &receiving, 100);
    // A Python datetime without a time zone comes as a date-time without an offset: UTC, as on
    // every other date-time Payrail reads.
    body["process_after"] = json!("2099-01-01T00:00:00");
    let created = create_order(&server, &key, &body).await;
    assert!(created["process_after"].as_str().unwrap().starts_with("2099-01-01T00:00:00"), "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let (status, patched) = patch_order(&server, &key, &id, &json!({"expires_at": "2099-02-01T12:30:00"})).await;
    assert!(status == 200 && patched["expires_at"].as_str().unwrap().starts_with("2099-02-01T12:30:00"), "{patched}");
    let edits = json!({
        "ultimate_originating_party_name": "Ult O", "ultimate_originating_party_identifier": "UO-1",
        "ultimate_receiving_party_name": "Ult R", "ultimate_receiving_party_identifier": "UR-1",
        "charge_bearer": "shared", "foreign_exchange_indicator": "fixed_to_variable",
        "foreign_exchange_contract": "FX-42", "reconciliation_status": "tentatively_reconciled",
    });
    let (status, patched) = patch_order(&server, &key, &id, &edits).await;
    assert_eq!(status, 200, "{patched}");
    for (field, value) in edits.as_object().unwrap() {
        assert_eq!(&patched[field], value, "{field}");
    }
    let address = json!({"line1": "1 Main St", "locality": "Springfield", "region": "IL", "postal_code": "62701", "country": "US"});
    let (status, patched) = patch_order(&server, &key, &id, &json!({"originating_party_address": address})).await;
    assert_eq!((status, &patched["originating_party_address"]["line1"]), (200, &json!("1 Main St")), "{patched}");
    assert_eq!(get_order(&server, &key, &id).await, patched);
    assert_eq!(event_names(&server, &key, &id).await, ["created", "updated", "updated", "updated"]);
    for (field, value) in [("charge_bearer", json!("nobody")), ("reconciliation_status", json!("done")), ("ultimate_receiving_party_name", json!(""))] {
        let (status, body) = patch_order(&server, &key, &id, &json!({ field: value })).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], field);
    }
    // Completed (and so reconciled by its settlement), its reconciliation can still change, and
    // nothing else.
    patch_order(&server, &key, &id, &json!({"process_after": null})).await;
    wait_for_status(&server, &key, &id, "completed").await;
    let (status, done) = patch_order(&server, &key, &id, &json!({"reconciliation_status": "tentatively_reconciled"})).await;
    assert_eq!((status, &done["reconciliation_status"]), (200, &json!("tentatively_reconciled")), "{done}");
    let (status, body) = patch_order(&server, &key, &id, &json!({"charge_bearer": "debtor"})).await;
    assert_error(status, &body, 422, "parameter_invalid");
}
}

on_both_stores! {
#[tokio::test]
async fn sandbox_bank_completes_an_order_with_an_event_per_step() {
    let server = fast_bank().await;
    let key = server.key().await;
    let originating = internal_account(&server, &key, "USD").await;
    let (_, receiving) = counterparty(&server, &key).await;
    let id = create_order(&server, &key, &order(&originating, &receiving, 100)).await["id"].as_str().unwrap().to_owned();
    let completed = wait_for_status(&server, &key, &id, "completed").await;
    assert_eq!(event_names(&server, &key, &id).await, ["created", "begin_processing", "sent", "completed"]);
    let (_, events) = json(server.get(&format!("/api/events?entity_id={id}&event_name=completed"), &key).send().await.unwrap()).await;
    assert_eq!(events[0]["data"], completed, "the event carries the order as returned (E4)");
    let (status, body) = patch_order(&server, &key, &id, &json!({"description": "too late"})).await;
    assert_error(status, &body, 422, "parameter_invalid");
    assert_eq!(body["errors"]["parameter"], "description");
    let (status, _) = patch_order(&server, &key, &id, &json!({"status": "cancelled"})).await;
    assert_eq!(status, 422, "cancelled is reachable only before processing");
}
}

on_both_stores! {
#[tokio::test]
async fn sandbox_magic_amounts_fail_and_return() {
    let server = fast_bank().await;
    let key = server.key().await;
    let originating = internal_account(&server, &key, "USD").await;
    let (_, receiving) = counterparty(&server, &key).await;
    let failing = create_order(&server, &key, &order(&originating, &receiving, 1313)).await["id"].as_str().unwrap().to_owned();
    let returning = create_order(&server, &key, &order(&originating, &receiving, 4040)).await["id"].as_str().unwrap().to_owned();
    let failed = wait_for_status(&server, &key, &failing, "failed").await;
    assert!(failed["vendor_failure_reason"].as_str().is_some_and(|r| !r.is_empty()));
    let returned = wait_for_status(&server, &key, &returning, "returned").await;
    assert_eq!(returned["current_return"]["code"], "R01");
    assert_eq!(returned["current_return"]["amount"], 4040);
    assert_eq!(event_names(&server, &key, &returning).await, ["created", "begin_processing", "sent", "completed", "returned"]);
}
}

on_both_stores! {
#[tokio::test]
async fn sandbox_bank_never_moves_live_orders() {
    let server = fast_bank().await;
    let live = server.key_for("default", Mode::Live).await;
    let connection = common::live_connection(&server, "default").await;
    let (status, body) = json(
        server.post("/api/internal_accounts", &live, &json!({"name": "Operating", "currency": "USD", "connection_id": connection})).send().await.unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let originating = body["id"].as_str().unwrap().to_owned();
    let (_, receiving) = counterparty(&server, &live).await;
    let created = create_order(&server, &live, &order(&originating, &receiving, 100)).await;
    assert_eq!(created["live_mode"], true);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(get_order(&server, &live, created["id"].as_str().unwrap()).await["status"], "approved");
}
}

on_both_stores! {
/// SPEC B3: an order reads its receiving account when its cut-off comes, so while it is unsent
/// the account cannot change in a way its rail cannot carry (422 naming the account's field),
/// nor be deleted, alone or with its counterparty (409); once the order is cancelled, it can.
#[tokio::test]
async fn b3_an_unsent_order_s_receiving_account_keeps_what_its_rail_needs() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let usd = internal_account(&server, &key, "USD").await;
    let (counterparty_id, receiving) = counterparty(&server, &key).await;
    let id = create_order(&server, &key, &order(&usd, &receiving, 100)).await["id"].as_str().unwrap().to_owned();
    let account_path = format!("/api/external_accounts/{receiving}");
    let (status, body) = json(server.patch(&account_path, &key, &json!({"party_name": "J\u{fc}rgen M\u{fc}ller"})).send().await.unwrap()).await;
    assert_error(status, &body, 422, "parameter_invalid");
    assert_eq!(body["errors"]["parameter"], "party_name", "{body}");
    let (status, body) = json(server.patch(&account_path, &key, &json!({"party_name": "Jurgen Muller"})).send().await.unwrap()).await;
    assert_eq!((status, body["party_name"].as_str()), (200, Some("Jurgen Muller")), "{body}");
    for path in [account_path.clone(), format!("/api/counterparties/{counterparty_id}")] {
        let (status, body) = json(server.delete(&path, &key).send().await.unwrap()).await;
        assert_error(status, &body, 409, "conflict");
        assert!(body["errors"]["message"].as_str().unwrap().contains(&id), "{body}");
    }
    let (status, _) = patch_order(&server, &key, &id, &json!({"status": "cancelled"})).await;
    assert_eq!(status, 200);
    let response = server.delete(&format!("/api/counterparties/{counterparty_id}"), &key).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 204);
    // An account given inline with no counterparty is held the same way (found through the
    // order's receiving_account_id term), and so is an order's own edit its rail checks.
    let inline = json!({"type": "ach", "amount": 100, "direction": "credit", "originating_account_id": usd,
        "receiving_account": {"party_name": "Dan", "account_details": [{"account_number": "123456789"}],
            "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}]}});
    let order = create_order(&server, &key, &inline).await;
    let (id, account) = (order["id"].as_str().unwrap(), order["receiving_account_id"].as_str().unwrap());
    assert_eq!(order["counterparty_id"], Value::Null, "{order}");
    let inline_path = format!("/api/external_accounts/{account}");
    let (status, body) = json(server.patch(&inline_path, &key, &json!({"party_name": "Dan \u{2603}"})).send().await.unwrap()).await;
    assert_error(status, &body, 422, "parameter_invalid");
    assert_eq!(body["errors"]["parameter"], "party_name", "{body}");
    assert!(body["errors"]["message"].as_str().unwrap().contains(id), "{body}");
    let (status, body) = json(server.delete(&inline_path, &key).send().await.unwrap()).await;
    assert_error(status, &body, 409, "conflict");
    assert!(body["errors"]["message"].as_str().unwrap().contains(id), "{body}");
    let (status, body) = patch_order(&server, &key, id, &json!({"description": "still editable"})).await;
    assert_eq!((status, body["description"].as_str()), (200, Some("still editable")), "{body}");
    let (status, body) = patch_order(&server, &key, id, &json!({"remittance_information": "na\u{ef}ve"})).await;
    assert_error(status, &body, 422, "parameter_invalid");
    assert_eq!(body["errors"]["parameter"], "remittance_information", "{body}");
    let (status, _) = patch_order(&server, &key, id, &json!({"status": "cancelled"})).await;
    assert_eq!(status, 200);
    let (status, body) = json(server.patch(&inline_path, &key, &json!({"party_name": "Dan \u{2603}"})).send().await.unwrap()).await;
    assert_eq!(status, 200, "once the order is cancelled the account is free: {body}");
    let response = server.delete(&inline_path, &key).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 204);
}
}

on_both_stores! {
/// SPEC B3: a live order whose connection cannot make its rail's file (no `[ach]` or
/// `[iso20022]` section in its config) is refused at creation, naming the paying account,
/// rather than waiting at every cut-off.
#[tokio::test]
async fn b3_an_order_its_connection_cannot_send_is_refused_at_creation() {
    let server = frozen_bank().await;
    let live = server.key_for("default", Mode::Live).await;
    let connection = common::live_connection_with(&server, "default", "").await;
    let body = json!({"name": "Operating", "currency": "USD", "connection_id": connection});
    let (status, body) = json(server.post("/api/internal_accounts", &live, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "{body}");
    let originating = body["id"].as_str().unwrap().to_owned();
    let (_, receiving) = counterparty(&server, &live).await;
    for kind in ["ach", "wire", "rtp"] {
        let mut body = order(&originating, &receiving, 100);
        body["type"] = json!(kind);
        let (status, reply) = json(server.post("/api/payment_orders", &live, &body).send().await.unwrap()).await;
        assert_error(status, &reply, 422, "parameter_invalid");
        assert_eq!(reply["errors"]["parameter"], "originating_account_id", "{kind}: {reply}");
    }
    // Found by the re-audit: a live book or check order has no bank file to travel in, so it
    // stayed approved for ever; it is refused naming its type (B3: at creation, never at cut-off).
    for kind in ["book", "check"] {
        let mut body = order(&originating, &receiving, 100);
        body["type"] = json!(kind);
        let (status, reply) = json(server.post("/api/payment_orders", &live, &body).send().await.unwrap()).await;
        assert_error(status, &reply, 422, "parameter_invalid");
        assert_eq!(reply["errors"]["parameter"], "type", "{kind}: {reply}");
    }
    let (_, listed) = json(server.get("/api/payment_orders", &live).send().await.unwrap()).await;
    assert_eq!(listed, json!([]), "nothing was created");
}
}

on_both_stores! {
#[tokio::test]
async fn e3_concurrent_patches_never_lose_a_change() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let originating = internal_account(&server, &key, "USD").await;
    let (_, receiving) = counterparty(&server, &key).await;
    let id = create_order(&server, &key, &order(&originating, &receiving, 100)).await["id"].as_str().unwrap().to_owned();
    let edits = (0..12).map(|i| {
        let request = server.patch(&format!("/api/payment_orders/{id}"), &key, &json!({"description": format!("edit {i}")}));
        tokio::spawn(async move { request.send().await.unwrap().status().as_u16() })
    });
    for edit in edits.collect::<Vec<_>>() {
        assert_eq!(edit.await.unwrap(), 200);
    }
    let names = event_names(&server, &key, &id).await;
    assert_eq!(names.iter().filter(|n| *n == "updated").count(), 12, "every edit landed: {names:?}");
    let cancels = (0..8).map(|_| {
        let request = server.patch(&format!("/api/payment_orders/{id}"), &key, &json!({"status": "cancelled"}));
        tokio::spawn(async move { request.send().await.unwrap().status().as_u16() })
    });
    for cancel in cancels.collect::<Vec<_>>() {
        assert_eq!(cancel.await.unwrap(), 200);
    }
    let names = event_names(&server, &key, &id).await;
    assert_eq!(names.iter().filter(|n| *n == "cancelled").count(), 1, "one transition, however many asked: {names:?}");
}
}

on_both_stores! {
#[tokio::test]
async fn i4_payment_order_create_is_never_made_twice() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let originating = internal_account(&server, &key, "USD").await;
    let (_, receiving) = counterparty(&server, &key).await;
    let body = order(&originating, &receiving, 100);
    let send = || server.post("/api/payment_orders", &key, &body).header("Idempotency-Key", "po-1").send();
    let first = send().await.unwrap();
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first_bytes = first.bytes().await.unwrap();
    for _ in 0..3 {
        let replay = send().await.unwrap();
        assert_eq!(replay.status(), 201);
        assert_eq!(replay.headers()["idempotent-replayed"], "true");
        assert_eq!(replay.bytes().await.unwrap(), first_bytes);
    }
    let (_, listed) = json(server.get("/api/payment_orders", &key).send().await.unwrap()).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
}
}

on_both_stores! {
#[tokio::test]
async fn l2_payment_order_list_filters() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let originating = internal_account(&server, &key, "USD").await;
    let (counterparty_id, receiving) = counterparty(&server, &key).await;
    let mut debit = order(&originating, &receiving, 700);
    debit["direction"] = json!("debit");
    debit["metadata"] = json!({"batch": "night run"});
    debit["effective_date"] = json!("2030-01-15");
    let debit_id = create_order(&server, &key, &debit).await["id"].as_str().unwrap().to_owned();
    let credit_id = create_order(&server, &key, &order(&originating, &receiving, 800)).await["id"].as_str().unwrap().to_owned();
    patch_order(&server, &key, &credit_id, &json!({"status": "cancelled"})).await;
    let ids = |query: &'static str| {
        let request = server.get(&format!("/api/payment_orders?{query}"), &key);
        async move {
            let (status, body) = json(request.send().await.unwrap()).await;
            assert_eq!(status, 200, "{query}: {body}");
            body.as_array().unwrap().iter().map(|o| o["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
        }
    };
    assert_eq!(ids("direction=debit").await, vec![debit_id.clone()]);
    assert_eq!(ids("status=cancelled").await, vec![credit_id.clone()]);
    assert_eq!(ids("metadata%5Bbatch%5D=night+run").await, vec![debit_id.clone()]);
    assert_eq!(ids("effective_date_start=2030-01-01&effective_date_end=2030-01-31").await, vec![debit_id.clone()]);
    assert_eq!(ids("type=ach&per_page=10").await, [credit_id.clone(), debit_id.clone()]);
    assert_eq!(ids(Box::leak(format!("counterparty_id={counterparty_id}").into_boxed_str())).await.len(), 2);
    assert_eq!(ids("created_at_start=2000-01-01&created_at_end=2100-01-01").await.len(), 2);
    assert!(ids("created_at_end=2000-01-01").await.is_empty());
    let (status, body) = json(server.get("/api/payment_orders?status=lost", &key).send().await.unwrap()).await;
    assert_error(status, &body, 422, "parameter_invalid");
    assert_eq!(body["errors"]["parameter"], "status");
}
}

on_both_stores! {
/// SPEC B3: an order its rail cannot carry is refused when it is created, naming the field,
/// never found out at cut-off; what the rail can carry is accepted.
#[tokio::test]
async fn b3_an_order_its_rail_cannot_carry_is_refused_at_creation() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let usd = internal_account(&server, &key, "USD").await;
    let eur = internal_account(&server, &key, "EUR").await;
    let (_, us_account) = counterparty(&server, &key).await;
    let (status, long_named) = json(
        server
            .post("/api/internal_accounts", &key, &json!({"name": "Ops", "party_name": "N".repeat(150), "currency": "USD"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{long_named}");
    let long_named = long_named["id"].as_str().unwrap().to_owned();
    let body = json!({"name": "Lieferant", "accounts": [{
        "account_details": [{"account_number": "DE89370400440532013000", "account_number_type": "iban"}],
        "routing_details": [{"routing_number": "COBADEFFXXX", "routing_number_type": "swift"}]
    }]});
    let (status, de) = json(server.post("/api/counterparties", &key, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "{de}");
    let de_account = de["accounts"][0]["id"].as_str().unwrap().to_owned();
    let with = |kind: &str, from: &str, to: &str, extra: Value| {
        let mut order = json!({"type": kind, "amount": 1000, "direction": "credit", "originating_account_id": from, "receiving_account_id": to});
        for (k, v) in extra.as_object().unwrap() {
            order[k] = v.clone();
        }
        order
    };
    let refused = [
        (with("ach", &eur, &us_account, json!({})), "currency"),
        (with("ach", &usd, &us_account, json!({"subtype": "IAT"})), "subtype"),
        (with("ach", &usd, &us_account, json!({"remittance_information": "x".repeat(81)})), "remittance_information"),
        (with("sepa", &usd, &de_account, json!({})), "currency"),
        (with("sepa", &eur, &us_account, json!({})), "receiving_account_id.account_details"),
        (with("rtp", &eur, &us_account, json!({})), "currency"),
        // pain.001 carries credit transfers only.
        (with("wire", &usd, &us_account, json!({"direction": "debit"})), "direction"),
        (with("rtp", &usd, &us_account, json!({"direction": "debit"})), "direction"),
        (with("sepa", &eur, &de_account, json!({"direction": "debit"})), "direction"),
        // Same Day ACH carries at most $1,000,000.00 an entry.
        (with("ach", &usd, &us_account, json!({"priority": "high", "amount": 100_000_001})), "amount"),
        // The paying side is checked too: a wire's debtor name is at most 140 characters.
        (with("wire", &long_named, &us_account, json!({})), "originating_account_id.party_name"),
    ];
    for (order, parameter) in refused {
        let (status, body) = json(server.post("/api/payment_orders", &key, &order).send().await.unwrap()).await;
        assert_eq!(status, 422, "{order}: {body}");
        assert!(body["errors"]["parameter"].as_str().unwrap().starts_with(parameter), "{order}: {body}");
    }
    let carried = [
        with("ach", &usd, &us_account, json!({})),
        with("ach", &usd, &us_account, json!({"direction": "debit", "priority": "high", "amount": 100_000_000})),
        with("sepa", &eur, &de_account, json!({})),
        with("wire", &usd, &us_account, json!({})),
    ];
    for order in carried {
        let (status, body) = json(server.post("/api/payment_orders", &key, &order).send().await.unwrap()).await;
        assert_eq!(status, 201, "{order}: {body}");
    }
}
}

on_both_stores! {
/// SPEC B3: a PATCH is held to the rail's rules as a creation is, so an edit cannot leave an
/// order its rail cannot carry waiting at cut-off; a refused edit changes nothing.
#[tokio::test]
async fn b3_an_edit_its_rail_cannot_carry_is_refused_and_changes_nothing() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let usd = internal_account(&server, &key, "USD").await;
    let (_, receiving) = counterparty(&server, &key).await;
    let future = json!({"process_after": "2099-01-01T00:00:00Z"});
    let mut ach = order(&usd, &receiving, 1000);
    ach["process_after"] = future["process_after"].clone();
    let id = create_order(&server, &key, &ach).await["id"].as_str().unwrap().to_owned();
    let before = get_order(&server, &key, &id).await;
    let refused = [
        (json!({"subtype": "IAT"}), "subtype"),
        (json!({"amount": 10_000_000_000i64}), "amount"),
        (json!({"remittance_information": "Zahlung f\u{fc}r M\u{fc}ller"}), "remittance_information"),
        (json!({"priority": "high", "amount": 200_000_000}), "amount"),
    ];
    for (patch, parameter) in refused {
        let (status, body) = patch_order(&server, &key, &id, &patch).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], parameter, "{patch}: {body}");
    }
    assert_eq!(get_order(&server, &key, &id).await, before, "a refused edit changes nothing");
    assert_eq!(event_names(&server, &key, &id).await, ["created"]);
    let (status, body) = patch_order(&server, &key, &id, &json!({"amount": 2500, "priority": "high"})).await;
    assert_eq!((status, body["amount"].as_i64()), (200, Some(2500)), "{body}");
}
}
