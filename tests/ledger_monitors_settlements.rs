//! Ledger account balance monitors and ledger account settlements (SPEC G1, G3, G6) over HTTPS
//! against the real server, on both stores: shapes as Modern Treasury's reference lists them,
//! a monitor's state judged from the account's balances and exactly one event per crossing,
//! settlements that take an account's unsettled posted entries before a bound and zero them in
//! one transaction, racing settlements that never take an entry twice, bad input named, and
//! tenant isolation.

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::wire::list_ids;
use common::{Key, TestServer, assert_error, json};
use payrail::domain::api_key::Mode;
use payrail::store::ledger::{Claim, Claimed};
use payrail::store::{Write, WriteBatch};
use serde_json::{Value, json};

const MONITOR_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "created_at",
    "updated_at",
    "discarded_at",
    "ledger_account_id",
    "description",
    "alert_condition",
    "current_ledger_account_balance_state",
    "metadata",
];
const STATE_KEYS: &[&str] = &["balances", "ledger_account_lock_version", "triggered"];
const SETTLEMENT_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "created_at",
    "updated_at",
    "ledger_id",
    "description",
    "status",
    "settled_ledger_account_id",
    "contra_ledger_account_id",
    "effective_at_upper_bound",
    "ledger_transaction_id",
    "amount",
    "settlement_entry_direction",
    "currency",
    "currency_exponent",
    "metadata",
];
const MONITORS: &str = "/api/ledger_account_balance_monitors";
const SETTLEMENTS: &str = "/api/ledger_account_settlements";
const BOUND: &str = "2026-02-01T00:00:00Z";

fn keys_of(value: &Value) -> BTreeSet<String> {
    value.as_object().unwrap_or_else(|| panic!("an object: {value}")).keys().cloned().collect()
}

fn assert_keys(value: &Value, expected: &[&str]) {
    assert_eq!(keys_of(value), expected.iter().map(|k| k.to_string()).collect(), "fields of {value}");
}

async fn create(server: &TestServer, key: &Key, path: &str, body: Value) -> Value {
    let (status, reply) = json(server.post(path, key, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "POST {path}: {reply}");
    reply
}

async fn get(server: &TestServer, key: &Key, path: &str) -> Value {
    let (status, reply) = json(server.get(path, key).send().await.unwrap()).await;
    assert_eq!(status, 200, "GET {path}: {reply}");
    reply
}

async fn patch(server: &TestServer, key: &Key, path: &str, body: Value) -> (u16, Value) {
    json(server.patch(path, key, &body).send().await.unwrap()).await
}

async fn ledger(server: &TestServer, key: &Key) -> String {
    create(server, key, "/api/ledgers", json!({"name": "Books"})).await["id"].as_str().unwrap().to_owned()
}

async fn account_in(server: &TestServer, key: &Key, ledger_id: &str, normal: &str, currency: &str) -> String {
    let body = json!({"name": format!("{normal} account"), "ledger_id": ledger_id, "normal_balance": normal, "currency": currency});
    create(server, key, "/api/ledger_accounts", body).await["id"].as_str().unwrap().to_owned()
}

async fn account(server: &TestServer, key: &Key, ledger_id: &str, normal: &str) -> String {
    account_in(server, key, ledger_id, normal, "USD").await
}

fn entry(account: &str, direction: &str, amount: i64) -> Value {
    json!({"ledger_account_id": account, "direction": direction, "amount": amount})
}

/// Books `amount` on `account` in `direction`, the other side on `other`; the transaction.
async fn book(
    server: &TestServer,
    key: &Key,
    (account, other): (&str, &str),
    direction: &str,
    amount: i64,
    at: &str,
    status: &str,
) -> Value {
    let opposite = if direction == "credit" { "debit" } else { "credit" };
    let body = json!({"status": status, "effective_at": at, "ledger_entries": [entry(account, direction, amount), entry(other, opposite, amount)]});
    create(server, key, "/api/ledger_transactions", body).await
}

/// The account's (pending, posted, available) balance amounts, as served.
async fn amounts(server: &TestServer, key: &Key, account: &str, query: &str) -> (i64, i64, i64) {
    let body = get(server, key, &format!("/api/ledger_accounts/{account}{query}")).await;
    let amount = |name: &str| body["balances"][name]["amount"].as_i64().unwrap();
    (amount("pending_balance"), amount("posted_balance"), amount("available_balance"))
}

/// The names of the events of `entity`, oldest first.
async fn event_names(server: &TestServer, key: &Key, entity: &str) -> Vec<String> {
    let events = get(server, key, &format!("/api/events?entity_id={entity}&per_page=100")).await;
    let mut names: Vec<String> = events.as_array().unwrap().iter().map(|e| e["event_name"].as_str().unwrap().to_owned()).collect();
    names.reverse();
    names
}

/// Waits (boundedly) until the monitor's events are `want`, then a few evaluator passes more,
/// and checks nothing more was reported.
async fn assert_events_settle_at(server: &TestServer, key: &Key, monitor: &str, want: &[&str]) {
    let mut names = Vec::new();
    for _ in 0..150 {
        names = event_names(server, key, monitor).await;
        if names.len() >= want.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(names, want, "events of monitor {monitor}");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(event_names(server, key, monitor).await, want, "no crossing is reported twice");
}

/// A bare claim of what was summed up to version 2 (the store's half of a settlement).
fn claim(account: &str, settlement: &str, before_micros: i64, expected: Claimed) -> WriteBatch {
    let mut batch = WriteBatch::new();
    let claim = Claim {
        account_id: account.into(),
        settlement_id: settlement.into(),
        before_micros,
        upto_version: 2,
        expected,
        own_entry_ids: vec![],
    };
    batch.push(Write::LedgerClaim(claim));
    batch
}

async fn settle(server: &TestServer, key: &Key, body: Value) -> Value {
    create(server, key, SETTLEMENTS, body).await
}

on_both_stores! {
    #[tokio::test]
    async fn g1_monitor_shape_state_and_lifecycle() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (wallet, cash) = (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await);
        let body = json!({
            "ledger_account_id": wallet, "description": "Wallet above 100",
            "alert_condition": {"field": "posted_balance_amount", "operator": "greater_than", "value": 100},
            "metadata": {"team": "ops"}
        });
        let monitor = create(&server, &key, MONITORS, body).await;
        assert_keys(&monitor, MONITOR_KEYS);
        assert_eq!(monitor["object"], "ledger_account_balance_monitor");
        assert_eq!(monitor["discarded_at"], Value::Null);
        assert_eq!(monitor["alert_condition"], json!({"field": "posted_balance_amount", "operator": "greater_than", "value": 100}));
        let state = &monitor["current_ledger_account_balance_state"];
        assert_keys(state, STATE_KEYS);
        assert_keys(&state["balances"], &["pending_balance", "posted_balance", "available_balance"]);
        assert_eq!(state["balances"]["posted_balance"]["currency"], "USD");
        assert_eq!((state["triggered"].clone(), state["ledger_account_lock_version"].clone()), (json!(false), json!(0)));
        let id = monitor["id"].as_str().unwrap().to_owned();
        let path = format!("{MONITORS}/{id}");

        // Served state is judged from the account's balances at the moment it is read.
        book(&server, &key, (&wallet, &cash), "credit", 150, "2026-01-05T00:00:00Z", "posted").await;
        let now = get(&server, &key, &path).await;
        let state = &now["current_ledger_account_balance_state"];
        assert_eq!((state["triggered"].clone(), state["ledger_account_lock_version"].clone()), (json!(true), json!(1)));
        assert_eq!(state["balances"]["posted_balance"]["amount"], 150);

        // Lists: by id, by account, by metadata.
        let other = create(&server, &key, MONITORS, json!({"ledger_account_id": cash,
            "alert_condition": {"field": "ledger_account_lock_version", "operator": "greater_than_or_equals", "value": 1}})).await;
        assert_eq!(other["current_ledger_account_balance_state"]["triggered"], true);
        assert_eq!(list_ids(&server, MONITORS, &key).await.len(), 2);
        assert_eq!(list_ids(&server, &format!("{MONITORS}?ledger_account_id={wallet}"), &key).await, vec![id.clone()]);
        assert_eq!(list_ids(&server, &format!("{MONITORS}?metadata[team]=ops"), &key).await, vec![id.clone()]);
        assert_eq!(list_ids(&server, &format!("{MONITORS}?id[]={}", other["id"].as_str().unwrap()), &key).await.len(), 1);

        // Update: description and metadata; the condition stays.
        let (status, updated) = patch(&server, &key, &path, json!({"description": null, "metadata": {"team": null, "tier": "1"}})).await;
        assert_eq!(status, 200, "{updated}");
        assert_eq!((updated["description"].clone(), updated["metadata"].clone()), (Value::Null, json!({"tier": "1"})));
        assert_eq!(updated["alert_condition"]["value"], 100);

        // Delete: 200 with the monitor, then gone.
        let (status, deleted) = json(server.delete(&path, &key).send().await.unwrap()).await;
        assert_eq!(status, 200, "{deleted}");
        assert!(deleted["discarded_at"].is_string(), "{deleted}");
        let (status, body) = json(server.get(&path, &key).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
        let names = event_names(&server, &key, &id).await;
        assert_eq!(names.first().map(String::as_str), Some("created"));
        assert_eq!(names.last().map(String::as_str), Some("deleted"));
    }

    #[tokio::test]
    async fn g3_each_crossing_is_reported_once_including_one_by_posting_alone() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (wallet, cash) = (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await);
        let condition = json!({"field": "posted_balance_amount", "operator": "greater_than_or_equals", "value": 50});
        let monitor = create(&server, &key, MONITORS, json!({"ledger_account_id": wallet, "alert_condition": condition})).await;
        let id = monitor["id"].as_str().unwrap().to_owned();

        // A pending credit moves the pending balance only: nothing crosses.
        let pending = book(&server, &key, (&wallet, &cash), "credit", 60, "2026-01-05T00:00:00Z", "pending").await;
        assert_events_settle_at(&server, &key, &id, &["created"]).await;
        // Posting it crosses without moving lock_version: triggered, once.
        let (status, body) = patch(&server, &key, &format!("/api/ledger_transactions/{}", pending["id"].as_str().unwrap()), json!({"status": "posted"})).await;
        assert_eq!(status, 200, "{body}");
        assert_events_settle_at(&server, &key, &id, &["created", "triggered"]).await;
        let events = get(&server, &key, &format!("/api/events?entity_id={id}&event_name=triggered")).await;
        let reported = &events[0]["data"];
        assert_eq!(events[0]["resource"], "ledger_account_balance_monitor");
        assert_keys(reported, MONITOR_KEYS);
        assert_eq!(reported["current_ledger_account_balance_state"]["triggered"], true);
        assert_eq!(reported["current_ledger_account_balance_state"]["balances"]["posted_balance"]["amount"], 60);
        // Back below: resolved, once; above again: triggered again.
        book(&server, &key, (&wallet, &cash), "debit", 20, "2026-01-06T00:00:00Z", "posted").await;
        assert_events_settle_at(&server, &key, &id, &["created", "triggered", "resolved"]).await;
        book(&server, &key, (&wallet, &cash), "credit", 10, "2026-01-07T00:00:00Z", "posted").await;
        assert_events_settle_at(&server, &key, &id, &["created", "triggered", "resolved", "triggered"]).await;
        // Moves that keep it above report nothing.
        book(&server, &key, (&wallet, &cash), "credit", 10, "2026-01-08T00:00:00Z", "posted").await;
        assert_events_settle_at(&server, &key, &id, &["created", "triggered", "resolved", "triggered"]).await;
    }

    #[tokio::test]
    async fn g1_bad_monitor_input_names_the_parameter() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let wallet = account(&server, &key, &ledger, "credit").await;
        let stranger = server.key_for("another-org", Mode::Sandbox).await;
        let foreign = {
            let theirs = self::ledger(&server, &stranger).await;
            account(&server, &stranger, &theirs, "credit").await
        };
        let good = json!({"field": "available_balance_amount", "operator": "less_than", "value": 0});
        for (body, code, parameter) in [
            (json!({"alert_condition": good}), "parameter_missing", "ledger_account_id"),
            (json!({"ledger_account_id": wallet}), "parameter_missing", "alert_condition"),
            (json!({"ledger_account_id": foreign, "alert_condition": good}), "parameter_invalid", "ledger_account_id"),
            (json!({"ledger_account_id": wallet, "alert_condition": {"field": "balance", "operator": "less_than", "value": 0}}), "parameter_invalid", "alert_condition.field"),
            (json!({"ledger_account_id": wallet, "alert_condition": {"field": "available_balance_amount", "operator": "lt", "value": 0}}), "parameter_invalid", "alert_condition.operator"),
            (json!({"ledger_account_id": wallet, "alert_condition": {"field": "available_balance_amount", "operator": "less_than", "value": 1.5}}), "parameter_invalid", "alert_condition.value"),
            (json!({"ledger_account_id": wallet, "alert_condition": {"field": "available_balance_amount", "operator": "less_than"}}), "parameter_missing", "alert_condition.value"),
        ] {
            let (status, reply) = json(server.post(MONITORS, &key, &body).send().await.unwrap()).await;
            assert_error(status, &reply, 422, code);
            assert_eq!(reply["errors"]["parameter"], parameter, "{body}: {reply}");
        }
        assert!(list_ids(&server, MONITORS, &key).await.is_empty(), "nothing was created");
    }

    #[tokio::test]
    async fn g1_settlement_takes_posted_unsettled_entries_before_its_bound_and_zeroes_them() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (payable, cash, revenue) =
            (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await, account(&server, &key, &ledger, "credit").await);
        let books = (payable.as_str(), revenue.as_str());
        let mut taken = vec![
            book(&server, &key, books, "credit", 100, "2026-01-02T00:00:00Z", "posted").await,
            book(&server, &key, books, "credit", 50, "2026-01-10T00:00:00Z", "posted").await,
            book(&server, &key, books, "debit", 30, "2026-01-20T00:00:00Z", "posted").await,
        ];
        let pending = book(&server, &key, books, "credit", 40, "2026-01-15T00:00:00Z", "pending").await;
        let later = book(&server, &key, books, "credit", 70, "2026-02-10T00:00:00Z", "posted").await;
        let body = json!({"settled_ledger_account_id": payable, "contra_ledger_account_id": cash, "effective_at_upper_bound": BOUND,
            "status": "posted", "description": "January payout", "metadata": {"period": "2026-01"}});
        let first = settle(&server, &key, body).await;
        assert_keys(&first, SETTLEMENT_KEYS);
        assert_eq!(first["object"], "ledger_account_settlement");
        assert_eq!((first["status"].clone(), first["amount"].clone(), first["settlement_entry_direction"].clone()), (json!("posted"), json!(120), json!("debit")));
        assert_eq!((first["currency"].clone(), first["currency_exponent"].clone(), first["ledger_id"].clone()), (json!("USD"), json!(2), json!(ledger)));
        assert_eq!(first["effective_at_upper_bound"], "2026-02-01T00:00:00.000000Z");
        let id = first["id"].as_str().unwrap().to_owned();
        assert_eq!(get(&server, &key, &format!("{SETTLEMENTS}/{id}")).await, first);
        let txn = get(&server, &key, &format!("/api/ledger_transactions/{}", first["ledger_transaction_id"].as_str().unwrap())).await;
        assert_eq!(txn["status"], "posted");
        let sides: BTreeSet<(String, String, i64)> = txn["ledger_entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["ledger_account_id"].as_str().unwrap().to_owned(), e["direction"].as_str().unwrap().to_owned(), e["amount"].as_i64().unwrap()))
            .collect();
        assert_eq!(sides, [(payable.clone(), "debit".to_owned(), 120), (cash.clone(), "credit".to_owned(), 120)].into_iter().collect());
        // Posted balance before the bound is zero; the pending entry and the later one remain.
        assert_eq!(amounts(&server, &key, &payable, &format!("?balances[effective_at_upper_bound]={BOUND}")).await.1, 0);
        assert_eq!(amounts(&server, &key, &payable, "").await, (110, 70, 70));
        assert_eq!(amounts(&server, &key, &cash, "").await.1, -120);

        // The entries it took (with its own), and their transactions.
        let entries: BTreeSet<String> = list_ids(&server, &format!("/api/ledger_entries?ledger_account_settlement_id={id}"), &key).await.into_iter().collect();
        taken.push(txn.clone());
        let expected: BTreeSet<String> = taken
            .iter()
            .flat_map(|t| t["ledger_entries"].as_array().unwrap().iter())
            .filter(|e| e["ledger_account_id"] == payable.as_str())
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(entries, expected);
        let txns: BTreeSet<String> = list_ids(&server, &format!("/api/ledger_transactions?ledger_account_settlement_id={id}"), &key).await.into_iter().collect();
        assert_eq!(txns, taken.iter().map(|t| t["id"].as_str().unwrap().to_owned()).collect());

        // Later: the pending entry posted, an entry backdated into January, and the February
        // one: the next settlement takes exactly those (the backdated one too).
        patch(&server, &key, &format!("/api/ledger_transactions/{}", pending["id"].as_str().unwrap()), json!({"status": "posted"})).await;
        book(&server, &key, books, "credit", 25, "2026-01-03T00:00:00Z", "posted").await;
        let second = settle(&server, &key, json!({"settled_ledger_account_id": payable, "contra_ledger_account_id": cash,
            "effective_at_upper_bound": "2026-03-01T00:00:00Z", "status": "posted"})).await;
        assert_eq!(second["amount"], 40 + 25 + 70);
        assert_eq!(amounts(&server, &key, &payable, "").await, (0, 0, 0));
        let _ = later;
        // Nothing left: a settlement of zero, without a transaction.
        let third = settle(&server, &key, json!({"settled_ledger_account_id": payable, "contra_ledger_account_id": cash})).await;
        assert_eq!((third["amount"].clone(), third["ledger_transaction_id"].clone(), third["settlement_entry_direction"].clone()), (json!(0), Value::Null, Value::Null));
        assert_eq!(third["status"], "pending");

        // Lists.
        assert_eq!(list_ids(&server, SETTLEMENTS, &key).await.len(), 3);
        assert_eq!(list_ids(&server, &format!("{SETTLEMENTS}?metadata[period]=2026-01"), &key).await, vec![id.clone()]);
        assert_eq!(list_ids(&server, &format!("{SETTLEMENTS}?settlement_entry_direction=debit"), &key).await.len(), 2);
        assert_eq!(list_ids(&server, &format!("{SETTLEMENTS}?ledger_transaction_id={}", first["ledger_transaction_id"].as_str().unwrap()), &key).await, vec![id.clone()]);
        assert_eq!(list_ids(&server, &format!("{SETTLEMENTS}?settled_ledger_account_id={payable}&ledger_id={ledger}"), &key).await.len(), 3);
    }

    #[tokio::test]
    async fn g1_pending_settlement_posts_or_archives_with_its_transaction() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (payable, cash, revenue) =
            (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await, account(&server, &key, &ledger, "credit").await);
        book(&server, &key, (&payable, &revenue), "credit", 500, "2026-01-02T00:00:00Z", "posted").await;
        let body = json!({"settled_ledger_account_id": payable, "contra_ledger_account_id": cash, "effective_at_upper_bound": BOUND});
        let pending = settle(&server, &key, body.clone()).await;
        assert_eq!((pending["status"].clone(), pending["amount"].clone()), (json!("pending"), json!(500)));
        let txn_path = format!("/api/ledger_transactions/{}", pending["ledger_transaction_id"].as_str().unwrap());
        assert_eq!(get(&server, &key, &txn_path).await["status"], "pending");
        assert_eq!(amounts(&server, &key, &payable, "").await, (0, 500, 0));
        // Its transaction follows the settlement, not a hand.
        let (status, reply) = patch(&server, &key, &txn_path, json!({"status": "posted"})).await;
        assert_error(status, &reply, 422, "parameter_invalid");
        assert_eq!(reply["errors"]["parameter"], "status");
        // Archived: the transaction is archived and the entries are given back...
        let path = format!("{SETTLEMENTS}/{}", pending["id"].as_str().unwrap());
        let (status, archived) = patch(&server, &key, &path, json!({"status": "archived", "description": "wrong contra"})).await;
        assert_eq!(status, 200, "{archived}");
        assert_eq!((archived["status"].clone(), archived["description"].clone()), (json!("archived"), json!("wrong contra")));
        assert_eq!(get(&server, &key, &txn_path).await["status"], "archived");
        assert_eq!(amounts(&server, &key, &payable, "").await, (500, 500, 500));
        // ...so the next settlement takes them; posting it posts its transaction.
        let again = settle(&server, &key, body).await;
        assert_eq!(again["amount"], 500);
        let path = format!("{SETTLEMENTS}/{}", again["id"].as_str().unwrap());
        let (status, posted) = patch(&server, &key, &path, json!({"status": "posted"})).await;
        assert_eq!((status, posted["status"].clone()), (200, json!("posted")), "{posted}");
        assert_eq!(get(&server, &key, &format!("/api/ledger_transactions/{}", again["ledger_transaction_id"].as_str().unwrap())).await["status"], "posted");
        assert_eq!(amounts(&server, &key, &payable, "").await, (0, 0, 0));
        // A posted settlement is final.
        let (status, reply) = patch(&server, &key, &path, json!({"status": "archived"})).await;
        assert_error(status, &reply, 422, "parameter_invalid");
        assert_eq!(reply["errors"]["parameter"], "status");
        // Entries are never added or removed by hand.
        for method in [reqwest::Method::PATCH, reqwest::Method::DELETE] {
            let entries = json!({"ledger_entry_ids": [pending["ledger_transaction_id"]]});
            let (status, reply) = json(server.req(method.clone(), &format!("{path}/ledger_entries"), &key).json(&entries).send().await.unwrap()).await;
            assert_error(status, &reply, 422, "parameter_invalid");
            assert_eq!(reply["errors"]["parameter"], "ledger_entry_ids");
            let (status, reply) = json(server.req(method, &format!("{SETTLEMENTS}/nope/ledger_entries"), &key).json(&entries).send().await.unwrap()).await;
            assert_error(status, &reply, 404, "resource_not_found");
        }
        let names = event_names(&server, &key, pending["id"].as_str().unwrap()).await;
        assert_eq!(names, ["created", "archived"]);
    }

    #[tokio::test]
    async fn g1_bad_settlement_input_names_the_parameter_and_changes_nothing() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (payable, cash) = (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await);
        let euros = account_in(&server, &key, &ledger, "debit", "EUR").await;
        let elsewhere = {
            let other = self::ledger(&server, &key).await;
            account(&server, &key, &other, "debit").await
        };
        // The payable is below zero: it owes.
        book(&server, &key, (&payable, &cash), "debit", 80, "2026-01-02T00:00:00Z", "posted").await;
        let with = |extra: Value| {
            let mut body = json!({"settled_ledger_account_id": payable, "contra_ledger_account_id": cash, "effective_at_upper_bound": BOUND});
            body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            body
        };
        for (body, code, parameter) in [
            (json!({"contra_ledger_account_id": cash}), "parameter_missing", "settled_ledger_account_id"),
            (with(json!({"contra_ledger_account_id": payable})), "parameter_invalid", "contra_ledger_account_id"),
            (with(json!({"contra_ledger_account_id": euros})), "parameter_invalid", "contra_ledger_account_id"),
            (with(json!({"contra_ledger_account_id": elsewhere})), "parameter_invalid", "contra_ledger_account_id"),
            (with(json!({"settled_ledger_account_id": "0b7a5b9c-1111-4222-8333-944445555666"})), "parameter_invalid", "settled_ledger_account_id"),
            (with(json!({"effective_at_upper_bound": "last tuesday"})), "parameter_invalid", "effective_at_upper_bound"),
            (with(json!({"status": "drafting"})), "parameter_invalid", "status"),
            (with(json!({"status": "archived"})), "parameter_invalid", "status"),
            (with(json!({})), "parameter_invalid", "allow_either_direction"),
        ] {
            let (status, reply) = json(server.post(SETTLEMENTS, &key, &body).send().await.unwrap()).await;
            assert_error(status, &reply, 422, code);
            assert_eq!(reply["errors"]["parameter"], parameter, "{body}: {reply}");
        }
        assert!(list_ids(&server, SETTLEMENTS, &key).await.is_empty(), "nothing was created");
        assert_eq!(amounts(&server, &key, &payable, "").await, (-80, -80, -80));
        // Allowed either way, it settles back up: a credit to the payable.
        let up = settle(&server, &key, with(json!({"allow_either_direction": true, "status": "posted"}))).await;
        assert_eq!((up["amount"].clone(), up["settlement_entry_direction"].clone()), (json!(80), json!("credit")));
        assert_eq!(amounts(&server, &key, &payable, "").await, (0, 0, 0));
        // Skipping the transaction still takes the entries (a migrated settlement).
        book(&server, &key, (&payable, &cash), "credit", 30, "2026-01-03T00:00:00Z", "posted").await;
        let skipped = settle(&server, &key, with(json!({"skip_settlement_ledger_transaction": true}))).await;
        assert_eq!((skipped["amount"].clone(), skipped["ledger_transaction_id"].clone()), (json!(30), Value::Null));
        assert_eq!(settle(&server, &key, with(json!({}))).await["amount"], 0, "already taken");
    }

    #[tokio::test]
    async fn g6_racing_settlements_never_take_an_entry_twice() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (payable, cash, revenue) =
            (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await, account(&server, &key, &ledger, "credit").await);
        let mut total = 0;
        for i in 1..=12 {
            book(&server, &key, (&payable, &revenue), "credit", i, &format!("2026-01-{i:02}T00:00:00Z"), "posted").await;
            total += i;
        }
        // Eight settlements race each other and sixteen new postings.
        let mut tasks = Vec::new();
        for i in 0..24i64 {
            let (client, secret) = (server.client.clone(), key.secret.clone());
            let (url, body) = if i % 3 == 0 {
                (server.url(SETTLEMENTS), json!({"settled_ledger_account_id": payable, "contra_ledger_account_id": cash, "status": "posted", "effective_at_upper_bound": "2026-06-01T00:00:00Z"}))
            } else {
                let entries = [entry(&payable, "credit", 100 + i), entry(&revenue, "debit", 100 + i)];
                (server.url("/api/ledger_transactions"), json!({"status": "posted", "effective_at": format!("2026-01-{:02}T12:00:00Z", 1 + i % 28), "ledger_entries": entries}))
            };
            if i % 3 != 0 {
                total += 100 + i;
            }
            tasks.push(tokio::spawn(async move {
                let reply = client.post(url).basic_auth("x-api-key", Some(secret)).json(&body).send().await.unwrap();
                let status = reply.status().as_u16();
                (status, reply.json::<Value>().await.unwrap())
            }));
        }
        for task in tasks {
            let (status, body) = task.await.unwrap();
            assert_eq!(status, 201, "{body}");
        }
        // One more takes what is left; then the amounts add up to every credit, once.
        settle(&server, &key, json!({"settled_ledger_account_id": payable, "contra_ledger_account_id": cash, "status": "posted", "effective_at_upper_bound": "2026-06-01T00:00:00Z"})).await;
        assert_eq!(amounts(&server, &key, &payable, "").await, (0, 0, 0));
        let settlements = get(&server, &key, &format!("{SETTLEMENTS}?per_page=100")).await;
        let settlements = settlements.as_array().unwrap();
        assert_eq!(settlements.len(), 9);
        assert_eq!(settlements.iter().map(|s| s["amount"].as_i64().unwrap()).sum::<i64>(), total);
        // Every entry of the payable was taken by exactly one settlement.
        let mut seen = BTreeSet::new();
        for s in settlements {
            for entry in list_ids(&server, &format!("/api/ledger_entries?ledger_account_settlement_id={}", s["id"].as_str().unwrap()), &key).await {
                assert!(seen.insert(entry.clone()), "entry {entry} taken twice");
            }
        }
        let all: BTreeSet<String> = list_ids(&server, &format!("/api/ledger_entries?ledger_account_id={payable}"), &key).await.into_iter().collect();
        assert_eq!(seen, all);
    }

    #[tokio::test]
    async fn g6_the_store_refuses_a_claim_whose_entries_changed_since_they_were_summed() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (payable, revenue) = (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "credit").await);
        book(&server, &key, (&payable, &revenue), "credit", 10, "2026-01-02T00:00:00Z", "posted").await;
        let pending = book(&server, &key, (&payable, &revenue), "credit", 5, "2026-01-03T00:00:00Z", "pending").await;
        let before = payrail::domain::time::Timestamp::parse_rfc3339(BOUND).unwrap().as_micros();
        let summed = server.store.ledger_unsettled(&payable, before, 2).await.unwrap();
        assert_eq!(summed, Claimed { count: 1, debits: 0, credits: 10 });
        // The pending entry posts between the sum and the claim: the claim would take 15, not 10.
        patch(&server, &key, &format!("/api/ledger_transactions/{}", pending["id"].as_str().unwrap()), json!({"status": "posted"})).await;
        let refused = server.store.commit(claim(&payable, "s1", before, summed)).await.unwrap_err();
        assert!(matches!(refused, payrail::error::Error::Conflict { parameter: None, .. }), "{refused:?}");
        let summed = server.store.ledger_unsettled(&payable, before, 2).await.unwrap();
        assert_eq!(summed, Claimed { count: 2, debits: 0, credits: 15 });
        server.store.commit(claim(&payable, "s2", before, summed)).await.unwrap();
        // A second claim of the same entries finds them taken.
        let refused = server.store.commit(claim(&payable, "s3", before, summed)).await.unwrap_err();
        assert!(matches!(refused, payrail::error::Error::Conflict { parameter: None, .. }), "{refused:?}");
        assert_eq!(server.store.ledger_unsettled(&payable, before, 2).await.unwrap(), Claimed::default());
        // Given back, they can be taken again.
        let mut give_back = WriteBatch::new();
        give_back.push(Write::LedgerUnclaim { account_id: payable.clone(), settlement_id: "s2".into() });
        server.store.commit(give_back).await.unwrap();
        assert_eq!(server.store.ledger_unsettled(&payable, before, 2).await.unwrap(), summed);
    }

    #[tokio::test]
    async fn g1_monitors_and_settlements_are_tenant_scoped() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let stranger = server.key_for("another-org", Mode::Sandbox).await;
        let ledger = ledger(&server, &key).await;
        let (payable, cash, revenue) =
            (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await, account(&server, &key, &ledger, "credit").await);
        book(&server, &key, (&payable, &revenue), "credit", 10, "2026-01-02T00:00:00Z", "posted").await;
        let monitor = create(&server, &key, MONITORS, json!({"ledger_account_id": payable,
            "alert_condition": {"field": "posted_balance_amount", "operator": "equals", "value": 10}})).await;
        let settlement = settle(&server, &key, json!({"settled_ledger_account_id": payable, "contra_ledger_account_id": cash, "effective_at_upper_bound": BOUND})).await;
        for path in [format!("{MONITORS}/{}", monitor["id"].as_str().unwrap()), format!("{SETTLEMENTS}/{}", settlement["id"].as_str().unwrap())] {
            let (status, body) = json(server.get(&path, &stranger).send().await.unwrap()).await;
            assert_error(status, &body, 404, "resource_not_found");
            let (status, body) = patch(&server, &stranger, &path, json!({"description": "mine"})).await;
            assert_error(status, &body, 404, "resource_not_found");
        }
        assert!(list_ids(&server, MONITORS, &stranger).await.is_empty());
        assert!(list_ids(&server, SETTLEMENTS, &stranger).await.is_empty());
        let by_settlement = format!("/api/ledger_entries?ledger_account_settlement_id={}", settlement["id"].as_str().unwrap());
        assert!(list_ids(&server, &by_settlement, &stranger).await.is_empty());
        assert_eq!(list_ids(&server, &by_settlement, &key).await.len(), 2);
        let (status, body) = json(server.post(SETTLEMENTS, &stranger, &json!({"settled_ledger_account_id": payable, "contra_ledger_account_id": cash})).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "settled_ledger_account_id");
        let (status, body) = json(server.delete(&format!("{MONITORS}/{}", monitor["id"].as_str().unwrap()), &stranger).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
    }
}

on_postgres_only! {
    #[tokio::test]
    async fn g6_two_instances_report_each_crossing_once_and_settle_each_entry_once() {
        let a = TestServer::start().await;
        let url = common::test_database_url(a.dir.path()).await.expect("a PostgreSQL database");
        let b = TestServer::start_with(|c| c.database_url = Some(url)).await;
        let key = a.key().await;
        let ledger = ledger(&a, &key).await;
        let (payable, cash, revenue) = (account(&a, &key, &ledger, "credit").await, account(&a, &key, &ledger, "debit").await, account(&a, &key, &ledger, "credit").await);
        // Both instances' evaluators judge this monitor; each crossing is reported once.
        let condition = json!({"field": "available_balance_amount", "operator": "greater_than", "value": 0});
        let monitor = create(&b, &key, MONITORS, json!({"ledger_account_id": payable, "alert_condition": condition})).await;
        let id = monitor["id"].as_str().unwrap().to_owned();
        let mut want = vec!["created"];
        for (server, direction, name) in [(&a, "credit", "triggered"), (&b, "debit", "resolved"), (&a, "credit", "triggered")] {
            book(server, &key, (&payable, &revenue), direction, 5, "2026-01-02T00:00:00Z", "posted").await;
            want.push(name);
            assert_events_settle_at(&a, &key, &id, &want).await;
        }
        // Settlements racing on both instances take each entry once.
        let mut tasks = Vec::new();
        for i in 0..8 {
            let server = if i % 2 == 0 { &a } else { &b };
            let body = json!({"settled_ledger_account_id": payable, "contra_ledger_account_id": cash, "status": "posted", "effective_at_upper_bound": BOUND});
            let request = server.post(SETTLEMENTS, &key, &body);
            tasks.push(tokio::spawn(async move { json(request.send().await.unwrap()).await }));
        }
        let mut settled = 0;
        for task in tasks {
            let (status, body) = task.await.unwrap();
            assert_eq!(status, 201, "{body}");
            settled += body["amount"].as_i64().unwrap();
        }
        assert_eq!(settled, 5);
        assert_eq!(amounts(&a, &key, &payable, "").await, (0, 0, 0));
        want.push("resolved");
        assert_events_settle_at(&b, &key, &id, &want).await;
    }
}

on_both_stores! {
    /// SPEC E4: a PATCH that changes nothing (empty, the description or metadata it holds) of a
    /// monitor, a category or a settlement answers it as it is, with no event and `updated_at`
    /// kept; a real change writes one `updated`. A monitor's `alert_condition`, not in MT's
    /// update request, is refused rather than ignored.
    #[tokio::test]
    async fn e4_monitor_category_and_settlement_patches_that_change_nothing_write_nothing() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (payable, cash) = (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await);
        let monitor = create(&server, &key, MONITORS, json!({"ledger_account_id": payable, "description": "low", "metadata": {"k": "v"},
            "alert_condition": {"field": "posted_balance_amount", "operator": "greater_than", "value": 100}})).await;
        let category = create(&server, &key, "/api/ledger_account_categories", json!({"ledger_id": ledger, "name": "Payables",
            "normal_balance": "credit", "currency": "USD", "description": "d", "metadata": {"k": "v"}})).await;
        let settlement = settle(&server, &key, json!({"settled_ledger_account_id": payable, "contra_ledger_account_id": cash,
            "description": "d", "metadata": {"k": "v"}})).await;
        for (object, path) in [
            (&monitor, format!("{MONITORS}/{}", monitor["id"].as_str().unwrap())),
            (&category, format!("/api/ledger_account_categories/{}", category["id"].as_str().unwrap())),
            (&settlement, format!("{SETTLEMENTS}/{}", settlement["id"].as_str().unwrap())),
        ] {
            let id = object["id"].as_str().unwrap();
            for body in [json!({}), json!({"description": object["description"]}), json!({"metadata": {"k": "v"}})] {
                let (status, reply) = patch(&server, &key, &path, body.clone()).await;
                assert_eq!(status, 200, "{path} {body}: {reply}");
                assert_eq!(reply["updated_at"], object["updated_at"], "{path} {body}: updated_at kept");
            }
            assert_eq!(event_names(&server, &key, id).await, ["created"], "{path}: no event for no change");
            let (status, reply) = patch(&server, &key, &path, json!({"description": "changed"})).await;
            assert_eq!((status, reply["description"].as_str()), (200, Some("changed")), "{path}: {reply}");
            assert_eq!(event_names(&server, &key, id).await, ["created", "updated"], "{path}");
        }
        let path = format!("{MONITORS}/{}", monitor["id"].as_str().unwrap());
        let condition = json!({"field": "posted_balance_amount", "operator": "less_than", "value": 1});
        let (status, body) = patch(&server, &key, &path, json!({"alert_condition": condition})).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "alert_condition", "{body}");
        assert_eq!(get(&server, &key, &path).await["alert_condition"]["operator"], "greater_than", "the refused edit changed nothing");
    }
}
