//! The resources banks' answers create (SPEC B5, B7, E4, L1 to L3, I4; issue 21), over HTTPS on
//! both stores: transactions and their line items, returns, expected payments, incoming payment
//! details with the sandbox simulation, and balance reports, in Modern Treasury's shapes.
//! Transactions, returns and balance reports are made by the inbound worker, never by a client:
//! these tests stage them with the same domain functions the worker calls, on the server's own
//! store, and read them back through the API.

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::wire::{REPLAYED, list_ids, post_idem};
use common::{Key, TestServer, assert_error, json};
use payrail::domain::Ctx;
use payrail::domain::api_key::{Mode, Scope};
use payrail::domain::balance_report::{self, NewBalance, NewBalanceReport};
use payrail::domain::enums::Direction;
use payrail::domain::expected_payment::Reconciler;
use payrail::domain::money::Currency;
use payrail::domain::payment_order::PaymentOrder;
use payrail::domain::returns::{self, NewReturn};
use payrail::domain::time::Clock;
use payrail::domain::transaction::{self, NewTransaction, Settles, Transaction};
use payrail::store::WriteBatch;
use serde_json::{Value, json};

const TRANSACTION_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "created_at",
    "updated_at",
    "discarded_at",
    "amount",
    "amount_string",
    "currency",
    "direction",
    "vendor_description",
    "vendor_code",
    "vendor_code_type",
    "vendor_id",
    "as_of_date",
    "as_of_time",
    "as_of_timezone",
    "internal_account_id",
    "metadata",
    "posted",
    "vendor_customer_id",
    "reconciled",
    "type",
    "details",
    "foreign_exchange_rate",
    "custom_identifiers",
];
const LINE_ITEM_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "created_at",
    "updated_at",
    "discarded_at",
    "type",
    "transactable_type",
    "transactable_id",
    "amount",
    "description",
    "counterparty_id",
    "expected_payment_id",
    "transaction_id",
    "reconciliation_group_id",
    "reconcilable",
];
const EXPECTED_PAYMENT_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "created_at",
    "updated_at",
    "external_id",
    "amount_upper_bound",
    "amount_lower_bound",
    "direction",
    "internal_account_id",
    "type",
    "currency",
    "date_upper_bound",
    "date_lower_bound",
    "description",
    "statement_descriptor",
    "metadata",
    "counterparty_id",
    "remittance_information",
    "reconciliation_groups",
    "reconciliation_filters",
    "reconciliation_rule_variables",
    "amount_reconciled",
    "amount_reconciled_direction",
    "amount_unreconciled",
    "amount_unreconciled_direction",
    "transaction_id",
    "transaction_line_item_id",
    "status",
    "reconciliation_method",
    "ledger_transaction_id",
];
const DETAIL_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "created_at",
    "updated_at",
    "internal_account_id",
    "virtual_account_id",
    "virtual_account",
    "transaction_line_item_id",
    "transaction_id",
    "ledger_transaction_id",
    "type",
    "data",
    "amount",
    "currency",
    "direction",
    "status",
    "metadata",
    "as_of_date",
    "vendor_id",
    "originating_routing_number",
    "originating_routing_number_type",
    "originating_account_number",
    "originating_account_number_safe",
    "originating_account_number_type",
    "originating_party_name",
    "originating_party_address",
    "originating_party_vendor_identifier",
    "receiving_account_number",
    "receiving_account_number_safe",
    "subtype",
    "reconciliation_status",
];
const BALANCE_REPORT_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "created_at",
    "updated_at",
    "balance_report_type",
    "as_of_date",
    "as_of_time",
    "balances",
    "internal_account_id",
];
const BALANCE_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "created_at",
    "updated_at",
    "amount",
    "amount_string",
    "currency",
    "balance_type",
    "vendor_code",
    "vendor_code_type",
    "as_of_date",
    "as_of_time",
    "value_date",
];

fn assert_keys(value: &Value, expected: &[&str]) {
    let got: BTreeSet<&str> = value.as_object().unwrap_or_else(|| panic!("an object: {value}")).keys().map(String::as_str).collect();
    let want: BTreeSet<&str> = expected.iter().copied().collect();
    assert_eq!(got, want, "fields of {value}");
}

/// A server whose sandbox bank never moves anything during a test.
async fn frozen_bank() -> TestServer {
    TestServer::start_with(|c| c.sandbox_step_ms = 3_600_000).await
}

async fn get(server: &TestServer, key: &Key, path: &str) -> (u16, Value) {
    json(server.get(path, key).send().await.unwrap()).await
}

async fn ok(server: &TestServer, key: &Key, path: &str) -> Value {
    let (status, body) = get(server, key, path).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

async fn post(server: &TestServer, key: &Key, path: &str, body: &Value) -> (u16, Value) {
    json(server.post(path, key, body).send().await.unwrap()).await
}

/// `status` 422 naming `parameter`.
fn assert_422(status: u16, body: &Value, parameter: &str) {
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["errors"]["parameter"], parameter, "{body}");
}

async fn internal_account(server: &TestServer, key: &Key) -> String {
    let (status, body) = post(server, key, "/api/internal_accounts", &json!({"name": "Operating", "currency": "USD"})).await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

async fn scope_of(server: &TestServer, key: &Key) -> Scope {
    let current = ok(server, key, "/api/api_keys/current").await;
    Scope { organization_id: current["organization_id"].as_str().unwrap().to_owned(), live_mode: current["live_mode"] == true }
}

/// Runs `stage` as the inbound worker would: against the server's store, in `key`'s
/// organization and mode, and commits what it staged.
async fn as_worker<T>(server: &TestServer, key: &Key, stage: impl FnOnce(&Ctx<'_>, &mut WriteBatch) -> T) -> T {
    let scope = scope_of(server, key).await;
    let ctx = Ctx { store: server.store.as_ref(), rails: None, secrets: &server.secrets, scope: &scope, now: server.clock.now() };
    let mut batch = WriteBatch::new();
    let out = stage(&ctx, &mut batch);
    server.store.commit(batch).await.expect("commit the staged batch");
    out
}

fn usd() -> Currency {
    Currency::parse("currency", "USD").unwrap()
}

fn booked(account: &str, amount: i64, direction: Direction, day: &str, rail: &str) -> NewTransaction {
    NewTransaction {
        internal_account_id: account.into(),
        amount,
        currency: usd(),
        direction,
        as_of_date: day.into(),
        as_of_time: Some("16:30:00".into()),
        transaction_type: rail.into(),
        vendor_description: Some(format!("{rail} entry {amount}")),
        vendor_code: Some("PMNT".into()),
        vendor_code_type: Some("iso20022".into()),
        vendor_id: Some(format!("bank-ref-{amount}")),
        posted: rail != "wire",
        details: Default::default(),
        custom_identifiers: Default::default(),
    }
}

async fn stage_transaction(server: &TestServer, key: &Key, new: NewTransaction) -> Transaction {
    as_worker(server, key, |ctx, batch| transaction::stage_new(ctx, batch, new).unwrap()).await
}

async fn event_names(server: &TestServer, key: &Key, entity_id: &str) -> Vec<String> {
    let events = ok(server, key, &format!("/api/events?entity_id={entity_id}&per_page=100")).await;
    let mut names: Vec<String> = events.as_array().unwrap().iter().map(|e| e["event_name"].as_str().unwrap().to_owned()).collect();
    names.reverse();
    names
}

on_both_stores! {
#[tokio::test]
async fn b5_transactions_mt_shape_filters_and_metadata() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let account = internal_account(&server, &key).await;
    let credit = stage_transaction(&server, &key, booked(&account, 1_000, Direction::Credit, "2026-03-02", "ach")).await;
    let debit = stage_transaction(&server, &key, booked(&account, 2_500, Direction::Debit, "2026-03-05", "wire")).await;
    let body = ok(&server, &key, &format!("/api/transactions/{}", credit.id)).await;
    assert_keys(&body, TRANSACTION_KEYS);
    assert_eq!((body["object"].clone(), body["amount"].clone(), body["amount_string"].clone()), (json!("transaction"), json!(1000), json!("1000")));
    assert_eq!((body["direction"].clone(), body["as_of_date"].clone(), body["type"].clone()), (json!("credit"), json!("2026-03-02"), json!("ach")));
    assert_eq!((body["reconciled"].clone(), body["posted"].clone(), body["live_mode"].clone()), (json!(false), json!(true), json!(false)));
    assert_eq!(body["internal_account_id"], account.as_str());
    assert_eq!(event_names(&server, &key, &credit.id).await, ["created"], "E4: the staged transaction wrote its event");

    assert_eq!(list_ids(&server, "/api/transactions", &key).await, [debit.id.clone(), credit.id.clone()], "L1: newest first");
    assert_eq!(list_ids(&server, &format!("/api/transactions?internal_account_id={account}"), &key).await.len(), 2);
    assert_eq!(list_ids(&server, "/api/transactions?direction=debit", &key).await, [debit.id.as_str()]);
    assert_eq!(list_ids(&server, "/api/transactions?as_of_date_start=2026-03-03", &key).await, [debit.id.as_str()]);
    assert_eq!(list_ids(&server, "/api/transactions?as_of_date_end=2026-03-02", &key).await, [credit.id.as_str()]);
    assert_eq!(list_ids(&server, "/api/transactions?posted=false", &key).await, [debit.id.as_str()]);
    assert_eq!(list_ids(&server, "/api/transactions?payment_type=ach", &key).await, [credit.id.as_str()]);
    assert_eq!(list_ids(&server, "/api/transactions?vendor_id=bank-ref-2500", &key).await, [debit.id.as_str()]);
    assert_eq!(list_ids(&server, "/api/transactions?description=WIRE+entry", &key).await, [debit.id.as_str()], "L2: + is a space");
    assert!(list_ids(&server, "/api/transactions?virtual_account_id=anything", &key).await.is_empty(), "no virtual accounts");

    let path = format!("/api/transactions/{}", credit.id);
    let (status, patched) = json(server.patch(&path, &key, &json!({"metadata": {"invoice": "42"}})).send().await.unwrap()).await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["metadata"], json!({"invoice": "42"}));
    assert_eq!(list_ids(&server, "/api/transactions?metadata[invoice]=42", &key).await, [credit.id.as_str()]);
    assert_eq!(event_names(&server, &key, &credit.id).await, ["created", "updated"]);
    let (status, again) = json(server.patch(&path, &key, &json!({"metadata": {"invoice": "42"}})).send().await.unwrap()).await;
    assert_eq!((status, &again["updated_at"]), (200, &patched["updated_at"]), "E4: the metadata it holds changes nothing");
    assert_eq!(event_names(&server, &key, &credit.id).await, ["created", "updated"], "E4: and writes no event");

    for (query, param) in [
        ("direction=sideways", "direction"),
        ("posted=maybe", "posted"),
        ("payment_type=teleport", "payment_type"),
        ("type=teleport", "type"),
        ("as_of_date_start=03/02/2026", "as_of_date_start"),
        ("as_of_date_end=2026-02-30", "as_of_date_end"),
        ("counterparty_id=x", "counterparty_id"),
        ("transactable_type=payment_order", "transactable_type"),
    ] {
        let (status, body) = get(&server, &key, &format!("/api/transactions?{query}")).await;
        assert_422(status, &body, param);
    }
}
}

on_both_stores! {
#[tokio::test]
async fn b5_line_items_link_a_transaction_to_what_it_settles() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let account = internal_account(&server, &key).await;
    // Staged in one batch, as a file's entry and its match are: the transaction is inserted
    // already reconciled, with its events in order.
    let (txn, item) = as_worker(&server, &key, |ctx, batch| {
        let mut txn = transaction::stage_new(ctx, batch, booked(&account, 700, Direction::Debit, "2026-03-02", "ach")).unwrap();
        let item = transaction::stage_line_item(ctx, batch, &mut txn, Settles::PaymentOrder("po_1".into()), 700).unwrap();
        (txn, item)
    })
    .await;
    let body = ok(&server, &key, &format!("/api/transactions/{}", txn.id)).await;
    assert_eq!(body["reconciled"], true);
    assert_eq!(event_names(&server, &key, &txn.id).await, ["created", "reconciled"]);
    let items = ok(&server, &key, &format!("/api/transactions/{}/line_items", txn.id)).await;
    assert_eq!(items.as_array().unwrap().len(), 1);
    assert_keys(&items[0], LINE_ITEM_KEYS);
    assert_eq!((items[0]["transactable_type"].clone(), items[0]["transactable_id"].clone()), (json!("payment_order"), json!("po_1")));
    assert_eq!((items[0]["type"].clone(), items[0]["amount"].clone()), (json!("originating"), json!(700)));
    assert_eq!(ok(&server, &key, &format!("/api/transaction_line_items/{}", item.id)).await, items[0]);
    assert_eq!(list_ids(&server, &format!("/api/transaction_line_items?transaction_id={}", txn.id), &key).await, [item.id.as_str()]);
    assert!(list_ids(&server, "/api/transaction_line_items?type=receiving", &key).await.is_empty());
    let (status, body) = get(&server, &key, "/api/transaction_line_items?type=sideways").await;
    assert_422(status, &body, "type");
    // L2: MT's deep-object id (`id[0]=`, the SDKs' form for a map of ids) filters as id[] does,
    // and the nested list takes MT's `type` too.
    let other = as_worker(&server, &key, |ctx, batch| {
        let mut txn = transaction::stage_new(ctx, batch, booked(&account, 300, Direction::Debit, "2026-03-03", "ach")).unwrap();
        transaction::stage_line_item(ctx, batch, &mut txn, Settles::PaymentOrder("po_2".into()), 300).unwrap()
    })
    .await;
    for form in ["id%5B0%5D", "id[0]", "id[]", "id"] {
        let path = format!("/api/transaction_line_items?{form}={}", item.id);
        assert_eq!(list_ids(&server, &path, &key).await, [item.id.as_str()], "{form}");
    }
    let both = format!("/api/transaction_line_items?id%5B0%5D={}&id%5B1%5D={}", item.id, other.id);
    assert_eq!(list_ids(&server, &both, &key).await.len(), 2);
    let nested = |line_type: &str| format!("/api/transactions/{}/line_items?type={line_type}", txn.id);
    assert_eq!(list_ids(&server, &nested("originating"), &key).await, [item.id.as_str()]);
    assert!(list_ids(&server, &nested("receiving"), &key).await.is_empty());
    let (status, body) = get(&server, &key, &nested("sideways")).await;
    assert_422(status, &body, "type");

    // A stored transaction linked later is replaced at the version it was read at.
    let stored = server.store.get("transaction", &scope_of(&server, &key).await, &txn.id).await.unwrap().unwrap();
    let mut again = transaction::parse(&stored).unwrap();
    as_worker(&server, &key, |ctx, batch| transaction::stage_line_item(ctx, batch, &mut again, Settles::Return("ret_1".into()), 700).unwrap())
        .await;
    assert_eq!(ok(&server, &key, &format!("/api/transactions/{}/line_items", txn.id)).await.as_array().unwrap().len(), 2);
}
}

on_both_stores! {
#[tokio::test]
async fn b7_sandbox_return_is_a_document_of_its_own() {
    let server = TestServer::start_with(|c| c.sandbox_step_ms = 0).await;
    let key = server.key().await;
    let account = internal_account(&server, &key).await;
    let body = json!({"name": "Vendor", "accounts": [{
        "account_details": [{"account_number": "123456789"}],
        "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}]
    }]});
    let (_, counterparty) = post(&server, &key, "/api/counterparties", &body).await;
    let receiving = counterparty["accounts"][0]["id"].as_str().unwrap();
    let order = json!({"type": "ach", "amount": 4040, "direction": "credit", "originating_account_id": account, "receiving_account_id": receiving});
    let (status, created) = post(&server, &key, "/api/payment_orders", &order).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let mut returned = Value::Null;
    for _ in 0..200 {
        returned = ok(&server, &key, &format!("/api/payment_orders/{id}")).await;
        if returned["status"] == "returned" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(returned["status"], "returned", "{returned}");
    let return_id = returned["current_return"]["id"].as_str().unwrap();
    let stored = ok(&server, &key, &format!("/api/returns/{return_id}")).await;
    assert_eq!(stored, returned["current_return"], "GET /api/returns/{{id}} serves the order's current_return");
    assert_eq!((stored["code"].clone(), stored["returnable_type"].clone()), (json!("R01"), json!("payment_order")));
    assert_eq!(event_names(&server, &key, return_id).await, ["created"]);
    assert_eq!(list_ids(&server, &format!("/api/returns?returnable_id={id}"), &key).await, [return_id.to_owned()]);
    assert_eq!(list_ids(&server, &format!("/api/returns?internal_account_id={account}&returnable_type=payment_order"), &key).await.len(), 1);
    assert_eq!(list_ids(&server, &format!("/api/returns?counterparty_id={}", counterparty["id"].as_str().unwrap()), &key).await.len(), 1);
    assert!(list_ids(&server, "/api/returns?returnable_id=other", &key).await.is_empty());
    let (status, body) = get(&server, &key, "/api/returns?returnable_type=parcel").await;
    assert_422(status, &body, "returnable_type");
}
}

on_both_stores! {
#[tokio::test]
async fn b5_stage_return_stores_the_banks_code() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let account = internal_account(&server, &key).await;
    let order = json!({"type": "ach", "amount": 999, "direction": "credit", "originating_account_id": account,
        "receiving_account": {"party_name": "Vendor", "account_details": [{"account_number": "10003"}],
        "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}]}});
    let (status, created) = post(&server, &key, "/api/payment_orders", &order).await;
    assert_eq!(status, 201, "{created}");
    let order: PaymentOrder = serde_json::from_value(created).unwrap();
    let new = NewReturn { code: Some("R03".into()), reason: Some("No Account".into()), ..NewReturn::default() };
    let ret = as_worker(&server, &key, |ctx, batch| returns::stage_return(ctx, batch, &order, new).unwrap()).await;
    let body = ok(&server, &key, &format!("/api/returns/{}", ret.id)).await;
    assert_eq!((body["code"].clone(), body["reason"].clone(), body["amount"].clone()), (json!("R03"), json!("No Account"), json!(999)));
    assert_eq!((body["returnable_id"].clone(), body["type"].clone()), (json!(order.id.to_string()), json!("ach")));
}
}

on_both_stores! {
#[tokio::test]
async fn b5_balance_reports_under_their_account() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let account = internal_account(&server, &key).await;
    let other_account = internal_account(&server, &key).await;
    let balance = |balance_type: &str, amount: i64, code: &str| NewBalance {
        balance_type: balance_type.into(),
        amount,
        currency: usd(),
        vendor_code: code.into(),
        vendor_code_type: Some("iso20022".into()),
    };
    let report = |day: &str| NewBalanceReport {
        internal_account_id: account.clone(),
        balance_report_type: "previous_day".into(),
        as_of_date: day.into(),
        as_of_time: "23:00:00".into(),
        balances: vec![balance("opening_ledger", 10_000, "OPBD"), balance("closing_ledger", -250, "CLBD")],
    };
    let first = as_worker(&server, &key, |ctx, batch| balance_report::stage_balance_report(ctx, batch, report("2026-03-02")).unwrap()).await;
    let second = as_worker(&server, &key, |ctx, batch| balance_report::stage_balance_report(ctx, batch, report("2026-03-03")).unwrap()).await;
    let base = format!("/api/internal_accounts/{account}/balance_reports");
    let body = ok(&server, &key, &format!("{base}/{}", first.id)).await;
    assert_keys(&body, BALANCE_REPORT_KEYS);
    assert_keys(&body["balances"][0], BALANCE_KEYS);
    assert_eq!(
        (body["balance_report_type"].clone(), body["as_of_date"].clone(), body["as_of_time"].clone()),
        (json!("previous_day"), json!("2026-03-02"), json!("23:00:00")),
        "MT's as_of_time is a required string"
    );
    let balances: Vec<(Value, Value)> =
        body["balances"].as_array().unwrap().iter().map(|b| (b["balance_type"].clone(), b["amount"].clone())).collect();
    assert_eq!(balances, [(json!("opening_ledger"), json!(10_000)), (json!("closing_ledger"), json!(-250))]);
    assert_eq!(body["balances"][1]["vendor_code"], "CLBD");
    assert_eq!(event_names(&server, &key, &first.id).await, ["created"]);
    assert_eq!(list_ids(&server, &base, &key).await, [second.id.clone(), first.id.clone()]);
    assert_eq!(list_ids(&server, &format!("{base}?as_of_date=2026-03-03"), &key).await, [second.id.as_str()]);
    assert!(list_ids(&server, &format!("{base}?balance_report_type=intraday"), &key).await.is_empty());
    let (status, body) = get(&server, &key, &format!("{base}?balance_report_type=hourly")).await;
    assert_422(status, &body, "balance_report_type");
    let (status, body) = get(&server, &key, &format!("{base}?as_of_date=yesterday")).await;
    assert_422(status, &body, "as_of_date");
    let (status, body) = get(&server, &key, &format!("/api/internal_accounts/{other_account}/balance_reports/{}", first.id)).await;
    assert_error(status, &body, 404, "resource_not_found");
    assert!(list_ids(&server, &format!("/api/internal_accounts/{other_account}/balance_reports"), &key).await.is_empty());
    let (status, body) = get(&server, &key, "/api/internal_accounts/nope/balance_reports").await;
    assert_error(status, &body, 404, "resource_not_found");
}
}

fn expectation(account: &str) -> Value {
    json!({"amount_lower_bound": 900, "amount_upper_bound": 1100, "direction": "credit", "internal_account_id": account,
        "type": "ach", "date_lower_bound": "2026-03-01", "date_upper_bound": "2026-03-31", "description": "Invoice 42",
        "metadata": {"invoice": "42"}, "reconciliation_filters": {"amount_lower_bound": 900},
        "reconciliation_groups": {"group": ["a"]}})
}

on_both_stores! {
#[tokio::test]
async fn e_expected_payments_crud_shape_and_bad_input() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let account = internal_account(&server, &key).await;
    let (status, created) = post(&server, &key, "/api/expected_payments", &expectation(&account)).await;
    assert_eq!(status, 201, "{created}");
    assert_keys(&created, EXPECTED_PAYMENT_KEYS);
    assert_eq!((created["status"].clone(), created["currency"].clone(), created["type"].clone()), (json!("unreconciled"), json!("USD"), json!("ach")));
    assert_eq!(created["reconciliation_filters"], json!({"amount_lower_bound": 900}), "stored as given");
    let id = created["id"].as_str().unwrap().to_owned();
    let path = format!("/api/expected_payments/{id}");
    assert_eq!(ok(&server, &key, &path).await, created);

    let rule = json!({"amount_lower_bound": 1, "amount_upper_bound": 1, "direction": "debit", "internal_account_id": account});
    let (_, second) = post(&server, &key, "/api/expected_payments", &json!({"amount_lower_bound": 1, "amount_upper_bound": 1,
        "direction": "debit", "internal_account_id": account, "reconciliation_rule_variables": [rule]})).await;
    // A rule variable comes back with every key MT's schema has (those not given as null).
    let variable = &second["reconciliation_rule_variables"][0];
    assert_eq!(variable.as_object().map(|v| v.len()), Some(10), "{second}");
    assert_eq!((&variable["currency"], &variable["type"], &variable["direction"]), (&json!("USD"), &Value::Null, &json!("debit")));
    let second = second["id"].as_str().unwrap().to_owned();
    assert_eq!(list_ids(&server, "/api/expected_payments", &key).await, [second.clone(), id.clone()]);
    assert_eq!(list_ids(&server, "/api/expected_payments?direction=credit", &key).await, [id.as_str()]);
    assert_eq!(list_ids(&server, "/api/expected_payments?type=ach", &key).await, [id.as_str()]);
    assert_eq!(list_ids(&server, "/api/expected_payments?status=unreconciled", &key).await.len(), 2);
    assert_eq!(list_ids(&server, &format!("/api/expected_payments?internal_account_id={account}&metadata[invoice]=42"), &key).await, [id.as_str()]);
    for (query, param) in [("?status=lost", "status"), ("?direction=up", "direction"), ("?type=teleport", "type"),
        ("?created_at_lower_bound=soon", "created_at_lower_bound"), ("?updated_at_lower_bound=2026-01-01", "updated_at_lower_bound")] {
        let (status, body) = get(&server, &key, &format!("/api/expected_payments{query}")).await;
        assert_422(status, &body, param);
    }
    // Found by the SDK audit: MT's newer form gives the terms in one rule variable alone.
    let only_rule = json!({"amount_lower_bound": 7, "amount_upper_bound": 9, "direction": "credit", "internal_account_id": account, "type": "wire"});
    let (status, third) = post(&server, &key, "/api/expected_payments", &json!({"reconciliation_rule_variables": [only_rule]})).await;
    assert_eq!(status, 201, "{third}");
    let terms = ["amount_lower_bound", "amount_upper_bound", "direction", "internal_account_id", "type"];
    assert_eq!(terms.map(|t| third[t].clone()), terms.map(|t| only_rule[t].clone()), "{third}");
    let (status, body) = post(&server, &key, "/api/expected_payments", &json!({"reconciliation_rule_variables": [only_rule, only_rule]})).await;
    assert_422(status, &body, "reconciliation_rule_variables");
    // Found by the re-audit: a rule variable that says other terms than the ones Payrail matches
    // on was kept, on create beside top-level terms and on a PATCH.
    let (status, body) = post(&server, &key, "/api/expected_payments",
        &json!({"amount_lower_bound": 999, "amount_upper_bound": 999, "reconciliation_rule_variables": [only_rule]})).await;
    assert_422(status, &body, "reconciliation_rule_variables[0].amount_lower_bound");
    let contrary = json!({"amount_lower_bound": 7, "amount_upper_bound": 9, "direction": "debit", "internal_account_id": account});
    let (status, body) = json(server.patch(&format!("/api/expected_payments/{}", third["id"].as_str().unwrap()), &key,
        &json!({"reconciliation_rule_variables": [contrary]})).send().await.unwrap()).await;
    assert_422(status, &body, "reconciliation_rule_variables[0].direction");
    let (status, _) = json(server.delete(&format!("/api/expected_payments/{}", third["id"].as_str().unwrap()), &key).send().await.unwrap()).await;
    assert_eq!(status, 200);

    let (status, patched) = json(server.patch(&path, &key, &json!({"description": null, "amount_upper_bound": 1200,
        "metadata": {"invoice": null, "po": "7"}})).send().await.unwrap()).await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!((patched["description"].clone(), patched["amount_upper_bound"].clone()), (Value::Null, json!(1200)));
    assert_eq!(patched["metadata"], json!({"po": "7"}));
    assert_eq!((patched["created_at"].clone(), patched["type"].clone()), (created["created_at"].clone(), json!("ach")));
    for (patch, param) in [(json!({"amount_upper_bound": 100}), "amount_upper_bound"), (json!({"direction": "up"}), "direction"), (json!({"amount_lower_bound": "ten"}), "amount_lower_bound"),
        (json!({"status": "reconciled"}), "status"), (json!({"internal_account_id": "nope"}), "internal_account_id"),
        (json!({"currency": "EUR"}), "currency")] {
        let (status, body) = json(server.patch(&path, &key, &patch).send().await.unwrap()).await;
        assert_422(status, &body, param);
    }

    let bad = |change: Value| {
        let mut body = expectation(&account);
        body.as_object_mut().unwrap().extend(change.as_object().unwrap().clone());
        body
    };
    for (body, param) in [
        (bad(json!({"amount_lower_bound": 2000})), "amount_upper_bound"),
        (bad(json!({"amount_upper_bound": null})), "amount_upper_bound"),
        (bad(json!({"direction": "sideways"})), "direction"),
        (bad(json!({"direction": null})), "direction"),
        (bad(json!({"internal_account_id": "00000000-0000-0000-0000-000000000000"})), "internal_account_id"),
        (bad(json!({"counterparty_id": "00000000-0000-0000-0000-000000000000"})), "counterparty_id"),
        (bad(json!({"date_lower_bound": "2026-04-01"})), "date_upper_bound"),
        (bad(json!({"date_upper_bound": "31/03/2026"})), "date_upper_bound"),
        (bad(json!({"currency": "XXX"})), "currency"),
        // The account holds USD: EUR money never reaches it, so this could never reconcile.
        (bad(json!({"currency": "EUR"})), "currency"),
        (bad(json!({"type": "teleport"})), "type"),
        (bad(json!({"reconciliation_filters": [1]})), "reconciliation_filters"),
        (bad(json!({"reconciliation_rule_variables": [{"a": "b"}]})), "reconciliation_rule_variables[0].a"),
        (bad(json!({"reconciliation_rule_variables": [1]})), "reconciliation_rule_variables[0]"),
        (bad(json!({"reconciliation_rule_variables": [{"amount_upper_bound": 1, "amount_lower_bound": 1, "direction": "up", "internal_account_id": "x"}]})),
            "reconciliation_rule_variables[0].direction"),
        (bad(json!({"reconciliation_rule_variables": [{"amount_upper_bound": 1, "direction": "credit", "internal_account_id": "x"}]})),
            "reconciliation_rule_variables[0].amount_lower_bound"),
        (bad(json!({"line_items": [{"amount": 1}]})), "line_items"),
    ] {
        let (status, reply) = post(&server, &key, "/api/expected_payments", &body).await;
        assert_422(status, &reply, param);
    }

    let (status, deleted) = json(server.delete(&path, &key).send().await.unwrap()).await;
    assert_eq!(status, 200, "MT answers a delete with the expected payment: {deleted}");
    assert_eq!(deleted["status"], "archived");
    assert_eq!(ok(&server, &key, &path).await["status"], "archived");
    // Found by the SDK audit: a retried delete (its first reply lost) answered 422; it answers
    // as the first one did, and writes nothing.
    let (status, again) = json(server.delete(&path, &key).send().await.unwrap()).await;
    assert_eq!((status, &again), (200, &deleted));
    let (status, body) = json(server.patch(&path, &key, &json!({"description": "again"})).send().await.unwrap()).await;
    assert_422(status, &body, "status");
    assert_eq!(event_names(&server, &key, &id).await, ["created", "updated", "archived"]);
}
}

on_both_stores! {
#[tokio::test]
async fn i4_expected_payment_create_is_idempotent() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let account = internal_account(&server, &key).await;
    let first = post_idem(&server, "/api/expected_payments", &key, "ep-1", &expectation(&account)).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let again = post_idem(&server, "/api/expected_payments", &key, "ep-1", &expectation(&account)).await;
    assert_eq!((again.status, again.replayed.as_deref()), (201, Some("true")));
    assert_eq!(again.body, first.body, "I4: byte for byte");
    assert_eq!(list_ids(&server, "/api/expected_payments", &key).await, [first.id()]);
    assert!(first.replayed.is_none(), "{REPLAYED} only on replays");
}
}

on_both_stores! {
/// Found by the hostile audit: two simulations racing for one expected payment answered the
/// loser 409 ("the expected payment was changed by another request"), for a conflict the
/// caller never made. Each is now answered; each expected payment is reconciled once.
#[tokio::test]
async fn b7_racing_simulations_are_each_answered_and_reconcile_each_expected_payment_once() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let account = internal_account(&server, &key).await;
    let mut expected = Vec::new();
    for _ in 0..3 {
        expected.push(post(&server, &key, "/api/expected_payments", &expectation(&account)).await.1["id"].as_str().unwrap().to_owned());
    }
    let simulation = json!({"type": "ach", "direction": "credit", "amount": 1000, "internal_account_id": account, "as_of_date": "2026-03-10"});
    let racing = (0..8).map(|_| post(&server, &key, "/api/simulations/incoming_payment_details/create_async", &simulation));
    let answers = futures_util::future::join_all(racing).await;
    assert!(answers.iter().all(|(status, _)| *status == 202), "{answers:?}");
    let reconciled = answers.iter().filter(|(_, d)| d["reconciliation_status"] == "reconciled").count();
    assert_eq!(reconciled, 3, "{answers:?}");
    let mut transactions = BTreeSet::new();
    for id in &expected {
        let payment = ok(&server, &key, &format!("/api/expected_payments/{id}")).await;
        assert_eq!(payment["status"], "reconciled", "{payment}");
        assert!(transactions.insert(payment["transaction_id"].as_str().unwrap().to_owned()), "one transaction each: {payment}");
    }
}

#[tokio::test]
async fn b7_simulated_incoming_payment_reconciles_an_expected_payment() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let account = internal_account(&server, &key).await;
    let (_, expected) = post(&server, &key, "/api/expected_payments", &expectation(&account)).await;
    let expected_id = expected["id"].as_str().unwrap();
    let simulation = json!({"type": "ach", "direction": "credit", "amount": 1000, "internal_account_id": account, "as_of_date": "2026-03-10"});
    let path = "/api/simulations/incoming_payment_details/create_async";
    let (status, detail) = post(&server, &key, path, &simulation).await;
    assert_eq!(status, 202, "{detail}");
    assert_keys(&detail, DETAIL_KEYS);
    assert_eq!((detail["object"].clone(), detail["status"].clone()), (json!("incoming_payment_detail"), json!("completed")));
    assert_eq!((detail["amount"].clone(), detail["currency"].clone()), (json!(1000), json!("USD")));
    assert_eq!(detail["reconciliation_status"], "reconciled");
    let detail_id = detail["id"].as_str().unwrap();
    assert_eq!(ok(&server, &key, &format!("/api/incoming_payment_details/{detail_id}")).await, detail);

    let txn_id = detail["transaction_id"].as_str().expect("the detail names its transaction");
    let txn = ok(&server, &key, &format!("/api/transactions/{txn_id}")).await;
    assert_eq!((txn["amount"].clone(), txn["direction"].clone(), txn["reconciled"].clone()), (json!(1000), json!("credit"), json!(true)));
    assert_eq!(txn["as_of_date"], "2026-03-10");
    let reconciled = ok(&server, &key, &format!("/api/expected_payments/{expected_id}")).await;
    assert_eq!(reconciled["status"], "reconciled", "{reconciled}");
    assert_eq!(reconciled["transaction_id"], txn_id);
    assert_eq!((reconciled["amount_reconciled"].clone(), reconciled["amount_unreconciled"].clone()), (json!(1000), json!(0)));
    let items = ok(&server, &key, &format!("/api/transactions/{txn_id}/line_items")).await;
    let links: BTreeSet<(String, String)> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["transactable_type"].as_str().unwrap_or("-").to_owned(), i["expected_payment_id"].as_str().unwrap_or("-").to_owned()))
        .collect();
    assert_eq!(links, BTreeSet::from([("incoming_payment_detail".into(), "-".into()), ("-".into(), expected_id.to_owned())]));
    assert!(items.as_array().unwrap().iter().any(|i| i["id"] == reconciled["transaction_line_item_id"]));
    assert_eq!(event_names(&server, &key, expected_id).await, ["created", "reconciled"]);
    assert_eq!(event_names(&server, &key, detail_id).await, ["created", "completed"]);

    // The expected payment is spent: the same money again stays unreconciled.
    let (_, second) = post(&server, &key, path, &simulation).await;
    assert_eq!(second["reconciliation_status"], "unreconciled");
    let (_, outside) = post(&server, &key, path, &json!({"amount": 5000, "internal_account_id": account, "type": "wire"})).await;
    assert_eq!((outside["direction"].clone(), outside["type"].clone()), (json!("credit"), json!("wire")));
    assert_eq!(outside["as_of_date"].as_str().unwrap().len(), 10, "defaults to today");

    assert_eq!(list_ids(&server, "/api/incoming_payment_details", &key).await.len(), 3);
    assert_eq!(list_ids(&server, "/api/incoming_payment_details?type=wire", &key).await, [outside["id"].as_str().unwrap().to_owned()]);
    assert_eq!(list_ids(&server, "/api/incoming_payment_details?as_of_date_start=2026-03-10&as_of_date_end=2026-03-10&status=completed&direction=credit", &key).await.len(), 2);
    let (status, patched) =
        json(server.patch(&format!("/api/incoming_payment_details/{detail_id}"), &key, &json!({"metadata": {"k": "v"}})).send().await.unwrap()).await;
    assert_eq!((status, patched["metadata"].clone()), (200, json!({"k": "v"})));
    let (status, again) =
        json(server.patch(&format!("/api/incoming_payment_details/{detail_id}"), &key, &json!({"metadata": {"k": "v"}})).send().await.unwrap()).await;
    assert_eq!((status, &again["updated_at"]), (200, &patched["updated_at"]), "E4: the metadata it holds changes nothing");
    assert_eq!(list_ids(&server, "/api/incoming_payment_details?metadata[k]=v", &key).await, [detail_id.to_owned()]);
    for (query, param) in [("?status=lost", "status"), ("?direction=up", "direction"), ("?type=teleport", "type"), ("?as_of_date_start=x", "as_of_date_start")] {
        let (status, body) = get(&server, &key, &format!("/api/incoming_payment_details{query}")).await;
        assert_422(status, &body, param);
    }
    for (body, param) in [
        (json!({"internal_account_id": account}), "amount"),
        (json!({"amount": 0, "internal_account_id": account}), "amount"),
        (json!({"amount": 1}), "internal_account_id"),
        (json!({"amount": 1, "internal_account_id": "nope"}), "internal_account_id"),
        (json!({"amount": 1, "internal_account_id": account, "type": "card"}), "type"),
        (json!({"amount": 1, "internal_account_id": account, "virtual_account_id": "va"}), "virtual_account_id"),
        // Found by the SDK audit: EUR money booked on a USD account.
        (json!({"amount": 1, "internal_account_id": account, "currency": "EUR"}), "currency"),
        (json!({"amount": 1, "internal_account_id": account, "currency": "XXQ"}), "currency"),
    ] {
        let (status, reply) = post(&server, &key, path, &body).await;
        assert_422(status, &reply, param);
    }
    let live = server.key_for("default", Mode::Live).await;
    let (status, body) = post(&server, &live, path, &json!({"amount": 1, "internal_account_id": account})).await;
    assert_422(status, &body, "live_mode");
}
}

on_both_stores! {
#[tokio::test]
async fn a_other_organizations_get_404() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let stranger = server.key_for("other_org", Mode::Sandbox).await;
    let account = internal_account(&server, &key).await;
    let (_, expected) = post(&server, &key, "/api/expected_payments", &expectation(&account)).await;
    let (_, detail) = post(&server, &key, "/api/simulations/incoming_payment_details/create_async",
        &json!({"amount": 1000, "internal_account_id": account, "as_of_date": "2026-03-10"})).await;
    let txn = detail["transaction_id"].as_str().unwrap();
    let items = ok(&server, &key, &format!("/api/transactions/{txn}/line_items")).await;
    let report = as_worker(&server, &key, |ctx, batch| {
        let new = NewBalanceReport { internal_account_id: account.clone(), balance_report_type: "previous_day".into(),
            as_of_date: "2026-03-10".into(), as_of_time: "23:00:00".into(), balances: Vec::new() };
        balance_report::stage_balance_report(ctx, batch, new).unwrap()
    })
    .await;
    for path in [
        format!("/api/transactions/{txn}"),
        format!("/api/transactions/{txn}/line_items"),
        format!("/api/transaction_line_items/{}", items[0]["id"].as_str().unwrap()),
        format!("/api/expected_payments/{}", expected["id"].as_str().unwrap()),
        format!("/api/incoming_payment_details/{}", detail["id"].as_str().unwrap()),
        format!("/api/internal_accounts/{account}/balance_reports"),
        format!("/api/internal_accounts/{account}/balance_reports/{}", report.id),
    ] {
        let (status, body) = get(&server, &stranger, &path).await;
        assert_error(status, &body, 404, "resource_not_found");
    }
    for path in [format!("/api/transactions/{txn}"), format!("/api/expected_payments/{}", expected["id"].as_str().unwrap()),
        format!("/api/incoming_payment_details/{}", detail["id"].as_str().unwrap())] {
        let (status, body) = json(server.patch(&path, &stranger, &json!({"metadata": {"k": "v"}})).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
    }
    let (status, body) = json(server.delete(&format!("/api/expected_payments/{}", expected["id"].as_str().unwrap()), &stranger).send().await.unwrap()).await;
    assert_error(status, &body, 404, "resource_not_found");
    for list in ["/api/transactions", "/api/transaction_line_items", "/api/expected_payments", "/api/incoming_payment_details", "/api/returns"] {
        assert!(list_ids(&server, list, &stranger).await.is_empty(), "{list} shows nothing of another organization");
    }
    let (status, body) = post(&server, &stranger, "/api/expected_payments", &expectation(&account)).await;
    assert_422(status, &body, "internal_account_id");
}
}

on_both_stores! {
#[tokio::test]
async fn b5_one_batch_never_reconciles_an_expected_payment_twice() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let account = internal_account(&server, &key).await;
    let (_, older) = post(&server, &key, "/api/expected_payments", &expectation(&account)).await;
    let (_, newer) = post(&server, &key, "/api/expected_payments", &expectation(&account)).await;
    let scope = scope_of(&server, &key).await;
    let ctx = Ctx { store: server.store.as_ref(), rails: None, secrets: &server.secrets, scope: &scope, now: server.clock.now() };
    let mut batch = WriteBatch::new();
    let mut reconciler = Reconciler::new();
    let mut matched = Vec::new();
    let mut booked_ids = Vec::new();
    for _ in 0..3 {
        let mut txn = transaction::stage_new(&ctx, &mut batch, booked(&account, 1_000, Direction::Credit, "2026-03-10", "ach")).unwrap();
        matched.push(reconciler.reconcile(&ctx, &mut batch, &mut txn).await.unwrap().map(|e| e.id));
        booked_ids.push(txn.id);
    }
    server.store.commit(batch).await.expect("one batch, no conflict with itself");
    let id = |v: &Value| Some(v["id"].as_str().unwrap().to_owned());
    assert_eq!(matched, [id(&older), id(&newer), None], "the oldest first, each once");
    let reconciled: Vec<Value> = reconciled_flags(&server, &key, &booked_ids).await;
    assert_eq!(reconciled, [json!(true), json!(true), json!(false)], "an unmatched transaction stays unreconciled");
    assert_eq!(ok(&server, &key, &format!("/api/expected_payments/{}", older["id"].as_str().unwrap())).await["transaction_id"], booked_ids[0]);
}
}

async fn reconciled_flags(server: &TestServer, key: &Key, ids: &[String]) -> Vec<Value> {
    let mut out = Vec::new();
    for id in ids {
        out.push(ok(server, key, &format!("/api/transactions/{id}")).await["reconciled"].clone());
    }
    out
}
