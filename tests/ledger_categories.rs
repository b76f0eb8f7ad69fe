//! Ledger account categories and statements (SPEC G1, G3, G5, A3) over HTTPS against the real
//! server, on both stores: shapes as the Modern Treasury reference lists them, balances summed
//! over a category's whole tree (each account once) and signed by the category's normal
//! balance, as-of balances with backdated entries, cycles and mixed ledgers or currencies
//! refused, tenant isolation, statements' balances at both ends of their window, the list
//! filters by category and statement, and bad input named.

#[macro_use]
mod common;

use std::collections::BTreeSet;

use common::{Key, TestServer, assert_error, json};
use payrail::domain::api_key::Mode;
use reqwest::Method;
use serde_json::{Value, json};

const CATEGORY_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "created_at",
    "updated_at",
    "discarded_at",
    "name",
    "description",
    "metadata",
    "ledger_id",
    "normal_balance",
    "external_id",
    "balances",
];
const STATEMENT_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "created_at",
    "updated_at",
    "ledger_id",
    "description",
    "ledger_account_id",
    "ledger_account_lock_version",
    "ledger_account_normal_balance",
    "effective_at_lower_bound",
    "effective_at_upper_bound",
    "starting_balance",
    "ending_balance",
    "metadata",
];
const BALANCES_KEYS: &[&str] = &["pending_balance", "posted_balance", "available_balance"];
const BALANCE_KEYS: &[&str] =
    &["credits", "credits_string", "debits", "debits_string", "amount", "amount_string", "currency", "currency_exponent"];

fn keys_of(value: &Value) -> BTreeSet<String> {
    value.as_object().unwrap_or_else(|| panic!("an object: {value}")).keys().cloned().collect()
}

fn assert_keys(value: &Value, expected: &[&str]) {
    let expected: BTreeSet<String> = expected.iter().map(|k| k.to_string()).collect();
    assert_eq!(keys_of(value), expected, "fields of {value}");
}

/// MT's `ledger_balances`: the three balances, each with every field.
fn assert_balances_shape(balances: &Value) {
    assert_keys(balances, BALANCES_KEYS);
    for name in BALANCES_KEYS {
        assert_keys(&balances[*name], BALANCE_KEYS);
    }
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

/// Status and body of a PUT or DELETE on a membership path (MT answers 200 without a body).
async fn call(server: &TestServer, key: &Key, method: Method, path: &str) -> (u16, Value) {
    json(server.req(method, path, key).send().await.unwrap()).await
}

async fn put_account(server: &TestServer, key: &Key, category: &str, account: &str) -> (u16, Value) {
    call(server, key, Method::PUT, &format!("/api/ledger_account_categories/{category}/ledger_accounts/{account}")).await
}

async fn nest(server: &TestServer, key: &Key, parent: &str, sub: &str) -> (u16, Value) {
    call(server, key, Method::PUT, &format!("/api/ledger_account_categories/{parent}/ledger_account_categories/{sub}")).await
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

async fn category_in(server: &TestServer, key: &Key, ledger_id: &str, normal: &str, currency: &str) -> String {
    let body = json!({"name": format!("{normal} category"), "ledger_id": ledger_id, "normal_balance": normal, "currency": currency});
    create(server, key, "/api/ledger_account_categories", body).await["id"].as_str().unwrap().to_owned()
}

async fn category(server: &TestServer, key: &Key, ledger_id: &str, normal: &str) -> String {
    category_in(server, key, ledger_id, normal, "USD").await
}

fn entry(account: &str, direction: &str, amount: i64) -> Value {
    json!({"ledger_account_id": account, "direction": direction, "amount": amount})
}

async fn transfer(server: &TestServer, key: &Key, entries: Vec<Value>, status: &str, effective_at: Option<&str>) -> Value {
    let mut body = json!({"ledger_entries": entries, "status": status});
    if let Some(at) = effective_at {
        body["effective_at"] = json!(at);
    }
    create(server, key, "/api/ledger_transactions", body).await
}

/// (pending, posted, available) amounts of served balances.
fn amounts_of(balances: &Value) -> (i64, i64, i64) {
    let amount = |name: &str| balances[name]["amount"].as_i64().unwrap_or_else(|| panic!("{name} in {balances}"));
    (amount("pending_balance"), amount("posted_balance"), amount("available_balance"))
}

async fn category_amounts(server: &TestServer, key: &Key, category: &str, query: &str) -> (i64, i64, i64) {
    amounts_of(&get(server, key, &format!("/api/ledger_account_categories/{category}{query}")).await["balances"])
}

/// The ids in a list reply.
fn ids(list: &Value) -> BTreeSet<String> {
    list.as_array().unwrap_or_else(|| panic!("a list: {list}")).iter().map(|item| item["id"].as_str().unwrap().to_owned()).collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn day(day: u32) -> String {
    format!("2026-03-{day:02}T12:00:00Z")
}

on_both_stores! {
    #[tokio::test]
    async fn g1_category_and_statement_shapes_follow_the_reference() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let body = json!({"name": "Wallets", "description": "all wallets", "ledger_id": ledger, "normal_balance": "credit",
            "currency": "USD", "external_id": "wallets", "metadata": {"team": "a"}});
        let wallets = create(&server, &key, "/api/ledger_account_categories", body).await;
        assert_keys(&wallets, CATEGORY_KEYS);
        assert_balances_shape(&wallets["balances"]);
        assert_eq!(wallets["object"], "ledger_account_category");
        assert_eq!(wallets["live_mode"], false);
        assert_eq!(wallets["discarded_at"], Value::Null);
        assert_eq!(wallets["normal_balance"], "credit");
        assert_eq!(wallets["external_id"], "wallets");
        assert_eq!(wallets["balances"]["posted_balance"]["currency"], "USD");
        assert_eq!(wallets["balances"]["posted_balance"]["currency_exponent"], 2);
        assert_eq!(wallets["balances"]["posted_balance"]["amount_string"], "0");
        let id = wallets["id"].as_str().unwrap();
        assert_eq!(get(&server, &key, &format!("/api/ledger_account_categories/{id}")).await, wallets);
        let listed = get(&server, &key, &format!("/api/ledger_account_categories?ledger_id={ledger}")).await;
        assert_eq!(listed[0], wallets);
        // Membership changes answer 200 without a body, as MT documents.
        let (wallet, cash) = (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await);
        let response = server.req(Method::PUT, &format!("/api/ledger_account_categories/{id}/ledger_accounts/{wallet}"), &key).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        // No content type either: the Node SDK parses a JSON-typed body even when it is empty.
        assert_eq!(response.headers().get("content-type"), None, "{:?}", response.headers());
        assert!(response.text().await.unwrap().is_empty(), "no body");
        let (status, reply) = json(server.patch(&format!("/api/ledger_account_categories/{id}"), &key, &json!({"name": "All wallets", "metadata": {"team": "b"}, "description": null})).send().await.unwrap()).await;
        assert_eq!(status, 200, "{reply}");
        assert_keys(&reply, CATEGORY_KEYS);
        assert_eq!(reply["name"], "All wallets");
        assert_eq!(reply["metadata"]["team"], "b");
        assert_eq!(reply["description"], Value::Null);
        // E4: every change wrote its event.
        let events = get(&server, &key, &format!("/api/events?entity_id={id}")).await;
        let names: Vec<&str> = events.as_array().unwrap().iter().map(|e| e["event_name"].as_str().unwrap()).collect();
        assert_eq!(names, ["updated", "updated", "created"], "newest first");
        assert_eq!(events[0]["resource"], "ledger_account_category");

        transfer(&server, &key, vec![entry(&wallet, "credit", 700), entry(&cash, "debit", 700)], "posted", Some(&day(10))).await;
        let body = json!({"ledger_account_id": wallet, "effective_at_lower_bound": day(1), "effective_at_upper_bound": day(31),
            "description": "March", "metadata": {"k": "v"}});
        let statement = create(&server, &key, "/api/ledger_account_statements", body).await;
        assert_keys(&statement, STATEMENT_KEYS);
        assert_balances_shape(&statement["starting_balance"]);
        assert_balances_shape(&statement["ending_balance"]);
        assert_eq!(statement["object"], "ledger_account_statement");
        assert_eq!(statement["ledger_id"], ledger.as_str());
        assert_eq!(statement["ledger_account_normal_balance"], "credit");
        assert_eq!(statement["ledger_account_lock_version"], 1);
        assert_eq!(statement["effective_at_lower_bound"], "2026-03-01T12:00:00.000000Z");
        assert_eq!(statement["description"], "March");
        assert_eq!(statement["metadata"]["k"], "v");
        let statement_id = statement["id"].as_str().unwrap();
        assert_eq!(get(&server, &key, &format!("/api/ledger_account_statements/{statement_id}")).await, statement);
        let events = get(&server, &key, &format!("/api/events?entity_id={statement_id}")).await;
        assert_eq!(events[0]["event_name"], "created");

        let (status, deleted) = json(server.delete(&format!("/api/ledger_account_categories/{id}"), &key).send().await.unwrap()).await;
        assert_eq!(status, 200, "{deleted}");
        assert_keys(&deleted, CATEGORY_KEYS);
        assert!(deleted["discarded_at"].is_string());
        assert_eq!(amounts_of(&deleted["balances"]), (700, 700, 700));
        let (status, _) = json(server.get(&format!("/api/ledger_account_categories/{id}"), &key).send().await.unwrap()).await;
        assert_eq!(status, 404);
    }

    #[tokio::test]
    async fn g3_category_balances_sum_the_whole_tree_once_signed_by_its_normal_balance() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (a, b, c, cash) = (
            account(&server, &key, &ledger, "credit").await,
            account(&server, &key, &ledger, "credit").await,
            account(&server, &key, &ledger, "debit").await,
            account(&server, &key, &ledger, "debit").await,
        );
        let t1 = transfer(&server, &key, vec![entry(&a, "credit", 1_000), entry(&cash, "debit", 1_000)], "posted", None).await;
        let t2 = transfer(&server, &key, vec![entry(&b, "credit", 300), entry(&cash, "debit", 300)], "posted", None).await;
        let t3 = transfer(&server, &key, vec![entry(&c, "debit", 50), entry(&a, "credit", 50)], "posted", None).await;
        let t4 = transfer(&server, &key, vec![entry(&a, "debit", 200), entry(&cash, "credit", 200)], "pending", None).await;
        // root holds a, and child; child holds a again and b, and grand; grand holds c.
        let (root, child, grand) =
            (category(&server, &key, &ledger, "credit").await, category(&server, &key, &ledger, "credit").await, category(&server, &key, &ledger, "credit").await);
        for (cat, acct) in [(&root, &a), (&child, &a), (&child, &b), (&grand, &c)] {
            assert_eq!(put_account(&server, &key, cat, acct).await.0, 200);
        }
        assert_eq!(nest(&server, &key, &root, &child).await.0, 200);
        assert_eq!(nest(&server, &key, &child, &grand).await.0, 200);
        // Again: nothing changes, still 200.
        assert_eq!(put_account(&server, &key, &root, &a).await.0, 200);
        assert_eq!(nest(&server, &key, &root, &child).await.0, 200);
        // Posted: credits 1,050 (a) + 300 (b), debits 50 (c). Pending adds a's pending debit of
        // 200, which is an outflow for the credit-normal category, so available counts it too.
        assert_eq!(category_amounts(&server, &key, &root, "").await, (1_100, 1_300, 1_100), "a counted once");
        let root_doc = get(&server, &key, &format!("/api/ledger_account_categories/{root}")).await;
        assert_eq!(root_doc["balances"]["posted_balance"]["credits"], 1_350);
        assert_eq!(root_doc["balances"]["posted_balance"]["debits"], 50);
        assert_eq!(root_doc["balances"]["pending_balance"]["debits"], 250);
        assert_eq!(category_amounts(&server, &key, &child, "").await, (1_100, 1_300, 1_100));
        assert_eq!(category_amounts(&server, &key, &grand, "").await, (-50, -50, -50), "a debit-normal account in a credit-normal category");
        // A debit-normal category over the debit-normal cash account: debits 1,300 posted, a
        // pending credit (outflow) of 200.
        let assets = category(&server, &key, &ledger, "debit").await;
        put_account(&server, &key, &assets, &cash).await;
        assert_eq!(category_amounts(&server, &key, &assets, "").await, (1_100, 1_300, 1_100));
        // The list filters by category take the whole tree.
        let listed = get(&server, &key, &format!("/api/ledger_accounts?ledger_account_category_id={root}")).await;
        assert_eq!(ids(&listed), set(&[&a, &b, &c]));
        let listed = get(&server, &key, &format!("/api/ledger_transactions?ledger_account_category_id={grand}")).await;
        assert_eq!(ids(&listed), set(&[t3["id"].as_str().unwrap()]));
        let listed = get(&server, &key, &format!("/api/ledger_transactions?ledger_account_category_id={root}")).await;
        assert_eq!(ids(&listed).len(), 4, "{:?}", [&t1["id"], &t2["id"], &t4["id"]]);
        let listed = get(&server, &key, &format!("/api/ledger_entries?ledger_account_category_id={child}&ledger_transaction_id={}", t3["id"].as_str().unwrap())).await;
        assert_eq!(listed.as_array().unwrap().len(), 2, "a's credit and c's debit: {listed}");
        let listed = get(&server, &key, &format!("/api/ledger_account_categories?ledger_account_id={c}")).await;
        assert_eq!(ids(&listed), set(&[&root, &child, &grand]), "categories holding c directly or through nested ones");
        let listed = get(&server, &key, &format!("/api/ledger_account_categories?parent_ledger_account_category_id={root}")).await;
        assert_eq!(ids(&listed), set(&[&child]));
        let listed = get(&server, &key, &format!("/api/ledger_account_categories?ledger_account_id={a}&parent_ledger_account_category_id={root}")).await;
        assert_eq!(ids(&listed), set(&[&child]), "filters are ANDed");
        let empty = category(&server, &key, &ledger, "credit").await;
        let listed = get(&server, &key, &format!("/api/ledger_transactions?ledger_account_category_id={empty}")).await;
        assert_eq!(listed, json!([]), "an empty category holds no transaction");

        // Taking a out of root leaves it counted through child; unnesting child leaves root empty.
        let (status, _) = call(&server, &key, Method::DELETE, &format!("/api/ledger_account_categories/{root}/ledger_accounts/{a}")).await;
        assert_eq!(status, 200);
        assert_eq!(category_amounts(&server, &key, &root, "").await, (1_100, 1_300, 1_100));
        let (status, body) = call(&server, &key, Method::DELETE, &format!("/api/ledger_account_categories/{root}/ledger_accounts/{a}")).await;
        assert_error(status, &body, 404, "resource_not_found");
        let (status, _) = call(&server, &key, Method::DELETE, &format!("/api/ledger_account_categories/{root}/ledger_account_categories/{child}")).await;
        assert_eq!(status, 200);
        assert_eq!(category_amounts(&server, &key, &root, "").await, (0, 0, 0));
        let (status, body) = call(&server, &key, Method::DELETE, &format!("/api/ledger_account_categories/{root}/ledger_account_categories/{child}")).await;
        assert_error(status, &body, 404, "resource_not_found");
        // Deleting grand takes c out of child's tree.
        let (status, _) = json(server.delete(&format!("/api/ledger_account_categories/{grand}"), &key).send().await.unwrap()).await;
        assert_eq!(status, 200);
        assert_eq!(category_amounts(&server, &key, &child, "").await, (1_150, 1_350, 1_150), "a and b; c's debit is gone");
        let listed = get(&server, &key, &format!("/api/ledger_account_categories?ledger_account_id={c}")).await;
        assert_eq!(listed, json!([]));
        // A ledger holding a category is not deleted until the category is.
        let bare = self::ledger(&server, &key).await;
        let lone = category(&server, &key, &bare, "debit").await;
        let (status, body) = json(server.delete(&format!("/api/ledgers/{bare}"), &key).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        let (status, _) = json(server.delete(&format!("/api/ledger_account_categories/{lone}"), &key).send().await.unwrap()).await;
        assert_eq!(status, 200);
        let (status, body) = json(server.delete(&format!("/api/ledgers/{bare}"), &key).send().await.unwrap()).await;
        assert_eq!(status, 200, "{body}");
    }

    #[tokio::test]
    async fn g5_category_balances_as_of_an_instant_count_backdated_entries() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (a, b, cash) = (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await);
        let (top, sub) = (category(&server, &key, &ledger, "credit").await, category(&server, &key, &ledger, "credit").await);
        put_account(&server, &key, &top, &a).await;
        put_account(&server, &key, &sub, &b).await;
        nest(&server, &key, &top, &sub).await;
        // Written out of order: day 10 and 20, then day 5 backdated, then a pending one on day 15.
        for (d, acct, amount) in [(10, &a, 100), (20, &b, 1_000), (5, &b, 10)] {
            transfer(&server, &key, vec![entry(acct, "credit", amount), entry(&cash, "debit", amount)], "posted", Some(&day(d))).await;
        }
        transfer(&server, &key, vec![entry(&a, "debit", 1), entry(&cash, "credit", 1)], "pending", Some(&day(15))).await;
        let at = |t: &str| format!("?balances%5Beffective_at%5D={t}");
        assert_eq!(category_amounts(&server, &key, &top, &at("2026-03-04T00:00:00Z")).await, (0, 0, 0));
        assert_eq!(category_amounts(&server, &key, &top, &at("2026-03-05T12:00:00Z")).await, (10, 10, 10), "inclusive of that instant");
        assert_eq!(category_amounts(&server, &key, &top, &at("2026-03-12T00:00:00Z")).await, (110, 110, 110));
        assert_eq!(category_amounts(&server, &key, &top, "?balances%5Bas_of_date%5D=2026-03-15").await, (109, 110, 109));
        assert_eq!(category_amounts(&server, &key, &top, "?balances%5Bas_of_date%5D=2026-03-31").await, (1_109, 1_110, 1_109));
        assert_eq!(category_amounts(&server, &key, &top, "").await, (1_109, 1_110, 1_109));
        assert_eq!(category_amounts(&server, &key, &sub, &at("2026-03-19T00:00:00Z")).await, (10, 10, 10));
        let listed = get(&server, &key, &format!("/api/ledger_account_categories?id%5B%5D={top}&balances%5Beffective_at%5D=2026-03-12T00:00:00Z")).await;
        assert_eq!(amounts_of(&listed[0]["balances"]), (110, 110, 110), "lists take the as-of parameter too");
        // A later backdated entry changes the as-of balance it falls before.
        transfer(&server, &key, vec![entry(&b, "credit", 5_000), entry(&cash, "debit", 5_000)], "posted", Some(&day(1))).await;
        assert_eq!(category_amounts(&server, &key, &top, &at("2026-03-04T00:00:00Z")).await, (5_000, 5_000, 5_000));
        // Window parameters of accounts are refused, naming themselves.
        for name in ["effective_at_lower_bound", "effective_at_upper_bound", "as_of_lock_version"] {
            let (status, body) = json(server.get(&format!("/api/ledger_account_categories/{top}?balances%5B{name}%5D=1"), &key).send().await.unwrap()).await;
            assert_error(status, &body, 422, "parameter_invalid");
            assert_eq!(body["errors"]["parameter"], format!("balances[{name}]"));
        }
        let (status, body) = json(server.get(&format!("/api/ledger_account_categories/{top}?balances%5Beffective_at%5D=yesterday"), &key).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "balances[effective_at]");
    }

    #[tokio::test]
    async fn g1_nesting_refuses_cycles_and_mixing_ledgers_or_currencies() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (x, y, z) = (category(&server, &key, &ledger, "credit").await, category(&server, &key, &ledger, "credit").await, category(&server, &key, &ledger, "debit").await);
        assert_eq!(nest(&server, &key, &x, &y).await.0, 200);
        assert_eq!(nest(&server, &key, &y, &z).await.0, 200, "normal balances may differ");
        for (parent, sub) in [(&z, &x), (&y, &x), (&x, &x), (&z, &y)] {
            let (status, body) = nest(&server, &key, parent, sub).await;
            assert_error(status, &body, 422, "parameter_invalid");
            assert_eq!(body["errors"]["parameter"], "sub_category_id", "{body}");
        }
        // A category in several parents is fine (no cycle): x > y > z and x > z.
        assert_eq!(nest(&server, &key, &x, &z).await.0, 200);
        let euros = category_in(&server, &key, &ledger, "credit", "EUR").await;
        let other_ledger = self::ledger(&server, &key).await;
        let elsewhere = category(&server, &key, &other_ledger, "credit").await;
        for sub in [&euros, &elsewhere] {
            let (status, body) = nest(&server, &key, &x, sub).await;
            assert_error(status, &body, 422, "parameter_invalid");
            assert_eq!(body["errors"]["parameter"], "sub_category_id");
        }
        let eur_account = account_in(&server, &key, &ledger, "credit", "EUR").await;
        let far_account = account(&server, &key, &other_ledger, "credit").await;
        for acct in [&eur_account, &far_account] {
            let (status, body) = put_account(&server, &key, &x, acct).await;
            assert_error(status, &body, 422, "parameter_invalid");
            assert_eq!(body["errors"]["parameter"], "ledger_account_id");
        }
        // At creation: an account's or a category's categories, same rules, the index named.
        let body = json!({"name": "n", "ledger_id": ledger, "normal_balance": "credit", "currency": "USD", "ledger_account_category_ids": [x, euros]});
        let (status, reply) = json(server.post("/api/ledger_accounts", &key, &body).send().await.unwrap()).await;
        assert_error(status, &reply, 422, "parameter_invalid");
        assert_eq!(reply["errors"]["parameter"], "ledger_account_category_ids[1]");
        let (status, reply) = json(server.post("/api/ledger_account_categories", &key, &body).send().await.unwrap()).await;
        assert_error(status, &reply, 422, "parameter_invalid");
        assert_eq!(reply["errors"]["parameter"], "ledger_account_category_ids[1]");
        let listed = get(&server, &key, &format!("/api/ledger_accounts?ledger_id={ledger}")).await;
        assert_eq!(listed.as_array().unwrap().len(), 1, "the refused account was not made: {listed}");
        let body = json!({"name": "n", "ledger_id": ledger, "normal_balance": "credit", "currency": "USD", "ledger_account_category_ids": [y, z, y]});
        let made = create(&server, &key, "/api/ledger_accounts", body.clone()).await;
        let made_id = made["id"].as_str().unwrap();
        let listed = get(&server, &key, &format!("/api/ledger_account_categories?ledger_account_id={made_id}")).await;
        assert_eq!(ids(&listed), set(&[&x, &y, &z]));
        let inner = create(&server, &key, "/api/ledger_account_categories", body).await;
        let inner_id = inner["id"].as_str().unwrap();
        let listed = get(&server, &key, &format!("/api/ledger_account_categories?parent_ledger_account_category_id={z}")).await;
        assert_eq!(ids(&listed), set(&[inner_id]));
        let (status, body) = nest(&server, &key, inner_id, &x).await;
        assert_error(status, &body, 422, "parameter_invalid");
        // Deleting an account takes it out of its categories.
        let (status, _) = json(server.delete(&format!("/api/ledger_accounts/{made_id}"), &key).send().await.unwrap()).await;
        assert_eq!(status, 200);
        let listed = get(&server, &key, &format!("/api/ledger_account_categories?ledger_account_id={made_id}")).await;
        assert_eq!(listed, json!([]));
    }

    #[tokio::test]
    async fn g6_racing_nestings_never_close_a_cycle() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        for _ in 0..4 {
            let (p, q, r) = (category(&server, &key, &ledger, "credit").await, category(&server, &key, &ledger, "credit").await, category(&server, &key, &ledger, "credit").await);
            // p > q, q > r and r > p at once: at most two may commit.
            let mut tasks = Vec::new();
            for (parent, sub) in [(p.clone(), q.clone()), (q.clone(), r.clone()), (r.clone(), p.clone())] {
                let (client, url, secret) = (server.client.clone(), server.url(&format!("/api/ledger_account_categories/{parent}/ledger_account_categories/{sub}")), key.secret.clone());
                tasks.push(tokio::spawn(async move { client.put(url).basic_auth("x-api-key", Some(secret)).send().await.unwrap().status().as_u16() }));
            }
            let mut statuses = Vec::new();
            for task in tasks {
                statuses.push(task.await.unwrap());
            }
            assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 2, "{statuses:?}");
            assert!(statuses.iter().all(|s| *s == 200 || *s == 422), "{statuses:?}");
            // And the tree still reads (a cycle would loop or double count).
            get(&server, &key, &format!("/api/ledger_account_categories/{p}")).await;
        }
    }

    #[tokio::test]
    async fn a3_another_organizations_categories_and_statements_are_invisible() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let mine = category(&server, &key, &ledger, "credit").await;
        let my_account = account(&server, &key, &ledger, "credit").await;
        let stranger = server.key_for("another-org", Mode::Sandbox).await;
        let their_ledger = self::ledger(&server, &stranger).await;
        let theirs = category(&server, &stranger, &their_ledger, "credit").await;
        let their_account = account(&server, &stranger, &their_ledger, "credit").await;
        let their_cash = account(&server, &stranger, &their_ledger, "debit").await;
        transfer(&server, &stranger, vec![entry(&their_account, "credit", 5), entry(&their_cash, "debit", 5)], "posted", None).await;
        put_account(&server, &stranger, &theirs, &their_account).await;
        let statement = create(&server, &stranger, "/api/ledger_account_statements", json!({"ledger_account_id": their_account, "effective_at_lower_bound": day(1), "effective_at_upper_bound": "2030-01-01T00:00:00Z"})).await;
        let their_statement = statement["id"].as_str().unwrap();
        for path in [format!("/api/ledger_account_categories/{theirs}"), format!("/api/ledger_account_statements/{their_statement}")] {
            let (status, body) = json(server.get(&path, &key).send().await.unwrap()).await;
            assert_error(status, &body, 404, "resource_not_found");
        }
        for (method, path) in [
            (Method::PUT, format!("/api/ledger_account_categories/{mine}/ledger_accounts/{their_account}")),
            (Method::PUT, format!("/api/ledger_account_categories/{theirs}/ledger_accounts/{my_account}")),
            (Method::PUT, format!("/api/ledger_account_categories/{mine}/ledger_account_categories/{theirs}")),
            (Method::PUT, format!("/api/ledger_account_categories/{theirs}/ledger_account_categories/{mine}")),
            (Method::DELETE, format!("/api/ledger_account_categories/{theirs}/ledger_accounts/{their_account}")),
            (Method::DELETE, format!("/api/ledger_account_categories/{theirs}")),
            (Method::PATCH, format!("/api/ledger_account_categories/{theirs}")),
        ] {
            let request = server.req(method.clone(), &path, &key);
            let request = if method == Method::PATCH { request.json(&json!({"name": "mine now"})) } else { request };
            let (status, body) = json(request.send().await.unwrap()).await;
            assert_error(status, &body, 404, "resource_not_found");
        }
        // Ids in a body are 422 naming them.
        let body = json!({"name": "n", "ledger_id": their_ledger, "normal_balance": "credit", "currency": "USD"});
        let (status, reply) = json(server.post("/api/ledger_account_categories", &key, &body).send().await.unwrap()).await;
        assert_error(status, &reply, 422, "parameter_invalid");
        assert_eq!(reply["errors"]["parameter"], "ledger_id");
        let body = json!({"name": "n", "ledger_id": ledger, "normal_balance": "credit", "currency": "USD", "ledger_account_category_ids": [theirs]});
        for path in ["/api/ledger_account_categories", "/api/ledger_accounts"] {
            let (status, reply) = json(server.post(path, &key, &body).send().await.unwrap()).await;
            assert_error(status, &reply, 422, "parameter_invalid");
            assert_eq!(reply["errors"]["parameter"], "ledger_account_category_ids[0]");
        }
        let body = json!({"ledger_account_id": their_account, "effective_at_lower_bound": day(1), "effective_at_upper_bound": day(2)});
        let (status, reply) = json(server.post("/api/ledger_account_statements", &key, &body).send().await.unwrap()).await;
        assert_error(status, &reply, 422, "parameter_invalid");
        assert_eq!(reply["errors"]["parameter"], "ledger_account_id");
        // Filters naming another organization's objects find nothing.
        for path in [
            format!("/api/ledger_account_categories?ledger_account_id={their_account}"),
            format!("/api/ledger_account_categories?parent_ledger_account_category_id={theirs}"),
            format!("/api/ledger_accounts?ledger_account_category_id={theirs}"),
            format!("/api/ledger_transactions?ledger_account_category_id={theirs}"),
            format!("/api/ledger_entries?ledger_account_category_id={theirs}"),
            format!("/api/ledger_entries?ledger_account_statement_id={their_statement}"),
        ] {
            assert_eq!(get(&server, &key, &path).await, json!([]), "{path}");
        }
        // Their category still holds their account, untouched.
        assert_eq!(category_amounts(&server, &stranger, &theirs, "").await, (5, 5, 5));
    }

    #[tokio::test]
    async fn g5_statements_give_balances_at_both_ends_of_their_window() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (wallet, cash) = (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await);
        // Day 20 is written first, then 10, 5 and 25, and a pending outflow on day 15.
        for (d, amount) in [(20, 1_000), (10, 100), (5, 10), (25, 10_000)] {
            transfer(&server, &key, vec![entry(&wallet, "credit", amount), entry(&cash, "debit", amount)], "posted", Some(&day(d))).await;
        }
        transfer(&server, &key, vec![entry(&wallet, "debit", 1), entry(&cash, "credit", 1)], "pending", Some(&day(15))).await;
        // Archived before the statement: in none of its balances, nor in its entries (the
        // ledger2 audit found it listed).
        let dropped = transfer(&server, &key, vec![entry(&wallet, "credit", 40), entry(&cash, "debit", 40)], "pending", Some(&day(12))).await;
        let path = format!("/api/ledger_transactions/{}", dropped["id"].as_str().unwrap());
        let (status, _) = json(server.patch(&path, &key, &json!({"status": "archived"})).send().await.unwrap()).await;
        assert_eq!(status, 200);
        // From day 10 at 12:00 (inclusive) to day 20 at 12:00 (exclusive).
        let body = json!({"ledger_account_id": wallet, "effective_at_lower_bound": day(10), "effective_at_upper_bound": day(20)});
        let statement = create(&server, &key, "/api/ledger_account_statements", body).await;
        assert_eq!(amounts_of(&statement["starting_balance"]), (10, 10, 10), "before the lower bound only");
        assert_eq!(amounts_of(&statement["ending_balance"]), (109, 110, 109), "the entry at the upper bound is not in it");
        assert_eq!(statement["ending_balance"]["posted_balance"]["credits"], 110);
        assert_eq!(statement["ledger_account_lock_version"], 6);
        assert_eq!(statement["effective_at_upper_bound"], "2026-03-20T12:00:00.000000Z");
        let id = statement["id"].as_str().unwrap();
        let entries = get(&server, &key, &format!("/api/ledger_entries?ledger_account_statement_id={id}")).await;
        let rows: Vec<(i64, &str)> = entries.as_array().unwrap().iter().map(|e| (e["amount"].as_i64().unwrap(), e["effective_at"].as_str().unwrap())).collect();
        assert_eq!(rows, [(1, "2026-03-15T12:00:00.000000Z"), (100, "2026-03-10T12:00:00.000000Z")], "newest first, the window's entries of its account");
        // The statement is a picture taken once: a later backdated entry leaves it as it was.
        transfer(&server, &key, vec![entry(&wallet, "credit", 7), entry(&cash, "debit", 7)], "posted", Some(&day(2))).await;
        assert_eq!(get(&server, &key, &format!("/api/ledger_account_statements/{id}")).await, statement);
        // So are its entries: one written later, even dated inside its window, is not in them.
        transfer(&server, &key, vec![entry(&wallet, "credit", 9), entry(&cash, "debit", 9)], "posted", Some(&day(12))).await;
        let after = get(&server, &key, &format!("/api/ledger_entries?ledger_account_statement_id={id}")).await;
        assert_eq!(after, entries, "the statement's entries are the ones its balances were made from");
        // A debit-normal account's statement is signed its way; an empty window is allowed.
        let body = json!({"ledger_account_id": cash, "effective_at_lower_bound": day(30), "effective_at_upper_bound": day(30)});
        let cash_statement = create(&server, &key, "/api/ledger_account_statements", body).await;
        assert_eq!(cash_statement["ledger_account_normal_balance"], "debit");
        assert_eq!(amounts_of(&cash_statement["starting_balance"]), (11_125, 11_126, 11_125));
        assert_eq!(cash_statement["ending_balance"], cash_statement["starting_balance"]);
    }

    #[tokio::test]
    async fn g1_bad_input_is_refused_naming_the_parameter() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let wallet = account(&server, &key, &ledger, "credit").await;
        let good = json!({"name": "n", "ledger_id": ledger, "normal_balance": "credit", "currency": "USD", "external_id": "e-1"});
        create(&server, &key, "/api/ledger_account_categories", good.clone()).await;
        let with = |field: &str, value: Value| {
            let mut body = good.clone();
            body[field] = value;
            body
        };
        let without = |field: &str| {
            let mut body = good.clone();
            body.as_object_mut().unwrap().remove(field);
            body
        };
        for (body, parameter, code) in [
            (without("external_id"), "", ""),
            (good.clone(), "external_id", "parameter_invalid"),
            (without("name"), "name", "parameter_missing"),
            (without("currency"), "currency", "parameter_missing"),
            (without("ledger_id"), "ledger_id", "parameter_missing"),
            (without("normal_balance"), "normal_balance", "parameter_missing"),
            (with("normal_balance", json!("sideways")), "normal_balance", "parameter_invalid"),
            (with("currency_exponent", json!(3)), "currency_exponent", "parameter_invalid"),
            (with("currency", json!("TOKEN")), "currency_exponent", "parameter_invalid"),
            (with("ledger_id", json!("00000000-0000-4000-8000-000000000000")), "ledger_id", "parameter_invalid"),
            (with("ledger_account_category_ids", json!(["00000000-0000-4000-8000-000000000000"])), "ledger_account_category_ids[0]", "parameter_invalid"),
            (with("metadata", json!({"k": 1})), "metadata.k", "parameter_invalid"),
        ] {
            let (status, reply) = json(server.post("/api/ledger_account_categories", &key, &body).send().await.unwrap()).await;
            if parameter.is_empty() {
                assert_eq!(status, 201, "{reply}");
                continue;
            }
            assert_error(status, &reply, 422, code);
            assert_eq!(reply["errors"]["parameter"], parameter, "{body}: {reply}");
        }
        let listed = get(&server, &key, "/api/ledger_account_categories?external_id=e-1").await;
        assert_eq!(listed.as_array().unwrap().len(), 1, "external_id is unique in its ledger");
        let statement = |lower: Value, upper: Value| json!({"ledger_account_id": wallet, "effective_at_lower_bound": lower, "effective_at_upper_bound": upper});
        for (body, parameter, code) in [
            (json!({"effective_at_lower_bound": day(1), "effective_at_upper_bound": day(2)}), "ledger_account_id", "parameter_missing"),
            (statement(Value::Null, json!(day(2))), "effective_at_lower_bound", "parameter_missing"),
            (statement(json!(day(1)), json!("soon")), "effective_at_upper_bound", "parameter_invalid"),
            (statement(json!(day(2)), json!(day(1))), "effective_at_upper_bound", "parameter_invalid"),
            (json!({"ledger_account_id": ledger, "effective_at_lower_bound": day(1), "effective_at_upper_bound": day(2)}), "ledger_account_id", "parameter_invalid"),
        ] {
            let (status, reply) = json(server.post("/api/ledger_account_statements", &key, &body).send().await.unwrap()).await;
            assert_error(status, &reply, 422, code);
            assert_eq!(reply["errors"]["parameter"], parameter, "{body}: {reply}");
        }
        // Unknown path ids are 404; the membership paths name nothing else.
        let nobody = "00000000-0000-4000-8000-000000000000";
        let cat = category(&server, &key, &ledger, "credit").await;
        for (status, body) in [put_account(&server, &key, nobody, &wallet).await, put_account(&server, &key, &cat, nobody).await, nest(&server, &key, &cat, nobody).await] {
            assert_error(status, &body, 404, "resource_not_found");
        }
        let (status, body) = json(server.get(&format!("/api/ledger_account_statements/{nobody}"), &key).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
    }
}

on_both_stores! {
    /// G1, L3: each account's sums fit in an i64 (postings past it are refused, G2), but a
    /// category's total over several accounts may not: reading it is refused naming `id`, with
    /// a message that says why, never served wrapped or as an error about entries; adding an
    /// account that would take a category there is refused the same way and changes nothing.
    #[tokio::test]
    async fn g1_a_category_whose_accounts_add_up_past_i64_is_refused_by_name() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (both, one) = (category(&server, &key, &ledger, "credit").await, category(&server, &key, &ledger, "credit").await);
        let max = (1_i64 << 53) - 1;
        let mut wallets = Vec::new();
        for _ in 0..2 {
            let wallet = account(&server, &key, &ledger, "credit").await;
            let (status, body) = put_account(&server, &key, &both, &wallet).await;
            assert!(status < 300, "{body}");
            wallets.push(wallet);
        }
        let (status, body) = put_account(&server, &key, &one, &wallets[0]).await;
        assert!(status < 300, "{body}");
        for wallet in &wallets {
            let cash = account(&server, &key, &ledger, "debit").await;
            for _ in 0..6 {
                let mut entries: Vec<Value> = (0..100).map(|_| entry(wallet, "credit", max)).collect();
                entries.extend((0..100).map(|_| entry(&cash, "debit", max)));
                transfer(&server, &key, entries, "posted", None).await;
            }
        }
        let refused = |status: u16, body: &Value| {
            assert_error(status, body, 422, "parameter_invalid");
            assert_eq!(body["errors"]["parameter"], "id", "{body}");
            assert!(body["errors"]["message"].as_str().unwrap().contains("category's accounts add up"), "{body}");
        };
        let (status, body) = call(&server, &key, Method::GET, &format!("/api/ledger_account_categories/{both}")).await;
        refused(status, &body);
        let (status, body) = put_account(&server, &key, &one, &wallets[1]).await;
        refused(status, &body);
        assert_eq!(category_amounts(&server, &key, &one, "").await, (600 * max, 600 * max, 600 * max), "still one account");
    }
}
