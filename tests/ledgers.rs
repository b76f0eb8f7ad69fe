//! Ledgers (SPEC G1 to G6) over HTTPS against the real server, on both stores: shapes as the
//! Modern Treasury reference lists them, balances signed by normal balance, pending and posted
//! transactions, lock_version and balance conditions refused atomically, as-of balances with
//! backdated entries, reversal, versions, bad input, tenant isolation, and concurrency.

#[macro_use]
mod common;

use std::collections::BTreeSet;

use common::wire::post_idem;
use common::{Key, TestServer, assert_error, json};
use payrail::domain::api_key::Mode;
use serde_json::{Value, json};

const LEDGER_KEYS: &[&str] = &["id", "object", "live_mode", "created_at", "updated_at", "discarded_at", "name", "description", "metadata"];
const ACCOUNT_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "created_at",
    "updated_at",
    "discarded_at",
    "name",
    "description",
    "normal_balance",
    "balances",
    "lock_version",
    "ledger_id",
    "ledgerable_id",
    "external_id",
    "ledgerable_type",
    "metadata",
];
const TRANSACTION_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "created_at",
    "updated_at",
    "description",
    "status",
    "metadata",
    "effective_at",
    "effective_date",
    "ledger_entries",
    "posted_at",
    "ledger_id",
    "ledgerable_type",
    "ledgerable_id",
    "external_id",
    "reverses_ledger_transaction_id",
    "reversed_by_ledger_transaction_id",
    "partially_posts_ledger_transaction_id",
    "archived_reason",
];
const ENTRY_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "created_at",
    "updated_at",
    "discarded_at",
    "amount",
    "amount_string",
    "effective_at",
    "direction",
    "status",
    "ledger_account_id",
    "ledger_account_lock_version",
    "ledger_account_currency",
    "ledger_account_currency_exponent",
    "ledger_transaction_id",
    "resulting_ledger_account_balances",
    "metadata",
];
const BALANCE_KEYS: &[&str] =
    &["credits", "credits_string", "debits", "debits_string", "amount", "amount_string", "currency", "currency_exponent"];

fn keys_of(value: &Value) -> BTreeSet<String> {
    value.as_object().unwrap_or_else(|| panic!("an object: {value}")).keys().cloned().collect()
}

fn assert_keys(value: &Value, expected: &[&str]) {
    let expected: BTreeSet<String> = expected.iter().map(|k| k.to_string()).collect();
    assert_eq!(keys_of(value), expected, "fields of {value}");
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

async fn ledger(server: &TestServer, key: &Key) -> String {
    create(server, key, "/api/ledgers", json!({"name": "Books"})).await["id"].as_str().unwrap().to_owned()
}

async fn account(server: &TestServer, key: &Key, ledger_id: &str, normal: &str) -> String {
    let body = json!({"name": format!("{normal} account"), "ledger_id": ledger_id, "normal_balance": normal, "currency": "USD"});
    create(server, key, "/api/ledger_accounts", body).await["id"].as_str().unwrap().to_owned()
}

/// A ledger with a credit-normal and a debit-normal USD account: (ledger, credit, debit).
async fn books(server: &TestServer, key: &Key) -> (String, String, String) {
    let ledger = ledger(server, key).await;
    let (a, b) = (account(server, key, &ledger, "credit").await, account(server, key, &ledger, "debit").await);
    (ledger, a, b)
}

fn entry(account: &str, direction: &str, amount: i64) -> Value {
    json!({"ledger_account_id": account, "direction": direction, "amount": amount})
}

async fn transfer(server: &TestServer, key: &Key, entries: Vec<Value>, status: &str) -> (u16, Value) {
    json(server.post("/api/ledger_transactions", key, &json!({"ledger_entries": entries, "status": status})).send().await.unwrap()).await
}

/// The account's (pending, posted, available) balance amounts, as served.
async fn amounts(server: &TestServer, key: &Key, account: &str, query: &str) -> (i64, i64, i64) {
    let body = get(server, key, &format!("/api/ledger_accounts/{account}{query}")).await;
    let b = &body["balances"];
    let amount = |name: &str| b[name]["amount"].as_i64().unwrap();
    (amount("pending_balance"), amount("posted_balance"), amount("available_balance"))
}

/// What a payment order with a ledger transaction needs: (cash, payable) ledger accounts, an
/// internal account to pay from and an external account to pay to.
async fn order_books(server: &TestServer, key: &Key) -> (String, String, String, String) {
    let ledger = ledger(server, key).await;
    let (cash, payable) = (account(server, key, &ledger, "debit").await, account(server, key, &ledger, "credit").await);
    let internal = create(server, key, "/api/internal_accounts", json!({"name": "Operating", "currency": "USD"})).await;
    let cp = create(
        server,
        key,
        "/api/counterparties",
        json!({"name": "Vendor", "accounts": [{
            "account_details": [{"account_number": "123456789"}],
            "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}]
        }]}),
    )
    .await;
    let id = |v: &Value| v.as_str().unwrap().to_owned();
    (cash, payable, id(&internal["id"]), id(&cp["accounts"][0]["id"]))
}

async fn wait_for_ledger_status(server: &TestServer, key: &Key, id: &str, status: &str) -> Value {
    for _ in 0..200 {
        let txn = get(server, key, &format!("/api/ledger_transactions/{id}")).await;
        if txn["status"] == status {
            return txn;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("ledger transaction {id} never reached {status}");
}

/// Posts every other still-pending transaction (from `first`) and archives the rest.
async fn settle_some(server: &TestServer, key: &Key, written: &mut [(String, String, i64, &'static str)], first: usize) {
    let pending: Vec<usize> = (0..written.len()).filter(|i| written[*i].3 == "pending").collect();
    for (n, i) in pending.into_iter().enumerate() {
        let to = if n % 2 == first { "posted" } else { "archived" };
        let url = format!("/api/ledger_transactions/{}", written[i].0);
        let (code, reply) = json(server.patch(&url, key, &json!({"status": to})).send().await.unwrap()).await;
        assert_eq!(code, 200, "{reply}");
        written[i].3 = to;
    }
}

async fn as_of_between_entries_of_one_second_and_decades_apart(padding: i64) {
    let server = TestServer::start().await;
    let key = server.key().await;
    let (_, a, b) = books(&server, &key).await;
    for _ in 0..padding {
        let body = json!({"status": "posted", "effective_at": "2090-01-01T00:00:00Z", "ledger_entries": [entry(&a, "credit", 7), entry(&b, "debit", 7)]});
        assert_eq!(server.post("/api/ledger_transactions", &key, &body).send().await.unwrap().status(), 201);
    }
    // 2025-11-24T16:00:00Z is 1_764_000_000_000_000 us; the finest buckets (2^20 us) have an
    // edge at 1_764_000_000_901_120 us, inside that second. 1999 and 2043 lie in different
    // buckets of the 2^50 us width level 4 no longer keeps.
    let second = "2025-11-24T16:00:00";
    let instants = [format!("{second}.000001Z"), format!("{second}.901119Z"), format!("{second}.901120Z"), format!("{second}.999999Z")];
    let dated = ["1999-06-01T00:00:00Z".to_owned(), "2043-06-01T00:00:00Z".to_owned()];
    let mut written: Vec<(String, i64)> = Vec::new();
    for (at, amount) in instants.iter().chain(&dated).zip([1, 10, 100, 1_000, 10_000, 100_000]) {
        let body =
            json!({"status": "posted", "effective_at": at, "ledger_entries": [entry(&a, "credit", amount), entry(&b, "debit", amount)]});
        let (status, reply) = json(server.post("/api/ledger_transactions", &key, &body).send().await.unwrap()).await;
        assert_eq!(status, 201, "{reply}");
        written.push((reply["effective_at"].as_str().unwrap().to_owned(), amount));
    }
    let probes = [
        "1999-05-31T23:59:59.999999Z",
        "1999-06-01T00:00:00Z",
        "2025-11-24T15:59:59.999999Z",
        "2025-11-24T16:00:00.000001Z",
        "2025-11-24T16:00:00.5Z",
        "2025-11-24T16:00:00.901119Z",
        "2025-11-24T16:00:00.90112Z",
        "2025-11-24T16:00:00.999999Z",
        "2025-11-24T16:00:01Z",
        "2043-05-31T23:59:59Z",
        "2043-06-01T00:00:00Z",
    ];
    for probe in probes {
        let cut = payrail::domain::time::Timestamp::parse_rfc3339(probe).unwrap();
        let expected: i64 = written
            .iter()
            .filter(|(at, _)| payrail::domain::time::Timestamp::parse_rfc3339(at).unwrap() <= cut)
            .map(|(_, amount)| amount)
            .sum();
        let query = format!("?balances%5Beffective_at%5D={probe}");
        assert_eq!(amounts(&server, &key, &a, &query).await.1, expected, "as of {probe}");
        assert_eq!(amounts(&server, &key, &b, &query).await.1, expected, "the debit side as of {probe}");
    }
    let window =
        "?balances%5Beffective_at_lower_bound%5D=2025-11-24T16:00:00.901120Z&balances%5Beffective_at_upper_bound%5D=2043-06-01T00:00:00Z";
    assert_eq!(get(&server, &key, &format!("/api/ledger_accounts/{a}{window}")).await["balances"]["posted_balance"]["amount"], 1_100);
}

on_both_stores! {
    #[tokio::test]
    async fn g1_shapes_follow_the_reference() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = create(&server, &key, "/api/ledgers", json!({"name": "Books", "metadata": {"team": "a"}})).await;
        assert_keys(&ledger, LEDGER_KEYS);
        assert_eq!(ledger["object"], "ledger");
        let ledger_id = ledger["id"].as_str().unwrap();
        let cash = account(&server, &key, ledger_id, "debit").await;
        let wallet = create(
            &server,
            &key,
            "/api/ledger_accounts",
            json!({"name": "Wallet", "ledger_id": ledger_id, "normal_balance": "credit", "currency": "USD", "external_id": "w-1"}),
        )
        .await;
        assert_keys(&wallet, ACCOUNT_KEYS);
        assert_eq!(wallet["lock_version"], 0);
        assert_keys(&wallet["balances"]["pending_balance"], BALANCE_KEYS);
        assert_eq!(wallet["balances"]["posted_balance"]["currency_exponent"], 2);
        let wallet_id = wallet["id"].as_str().unwrap();
        let (status, txn) = transfer(&server, &key, vec![entry(&cash, "debit", 1000), entry(wallet_id, "credit", 1000)], "posted").await;
        assert_eq!(status, 201, "{txn}");
        assert_keys(&txn, TRANSACTION_KEYS);
        assert_eq!(txn["object"], "ledger_transaction");
        assert_eq!(txn["ledger_id"], ledger_id);
        assert_eq!(txn["effective_date"].as_str().unwrap().len(), 10);
        assert!(txn["posted_at"].is_string());
        for e in txn["ledger_entries"].as_array().unwrap() {
            assert_keys(e, ENTRY_KEYS);
            assert_eq!(e["status"], "posted");
            assert_eq!(e["amount_string"], "1000");
        }
        assert_eq!(get(&server, &key, &format!("/api/ledger_transactions/{}", txn["id"].as_str().unwrap())).await, txn);
        let entry_id = txn["ledger_entries"][0]["id"].as_str().unwrap();
        let entry = get(&server, &key, &format!("/api/ledger_entries/{entry_id}?show_balances=true")).await;
        assert_keys(&entry, ENTRY_KEYS);
        assert_keys(&entry["resulting_ledger_account_balances"]["available_balance"], BALANCE_KEYS);
        let events = get(&server, &key, &format!("/api/events?entity_id={}", txn["id"].as_str().unwrap())).await;
        assert_eq!(events[0]["event_name"], "created", "E4: the transaction wrote its event");
    }

    #[tokio::test]
    async fn g3_balances_are_signed_by_normal_balance_and_available_counts_pending_outflows() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let cash = account(&server, &key, &ledger, "debit").await;
        let wallet = account(&server, &key, &ledger, "credit").await;
        let (status, _) = transfer(&server, &key, vec![entry(&cash, "debit", 10_000), entry(&wallet, "credit", 10_000)], "posted").await;
        assert_eq!(status, 201);
        assert_eq!(amounts(&server, &key, &wallet, "").await, (10_000, 10_000, 10_000));
        assert_eq!(amounts(&server, &key, &cash, "").await, (10_000, 10_000, 10_000));
        // A pending outflow of the wallet: pending and available fall, posted does not.
        let (status, pending) = transfer(&server, &key, vec![entry(&wallet, "debit", 2_500), entry(&cash, "credit", 2_500)], "pending").await;
        assert_eq!(status, 201, "{pending}");
        assert_eq!(amounts(&server, &key, &wallet, "").await, (7_500, 10_000, 7_500));
        // For the debit-normal cash account the pending credit is the outflow.
        assert_eq!(amounts(&server, &key, &cash, "").await, (7_500, 10_000, 7_500));
        let account_doc = get(&server, &key, &format!("/api/ledger_accounts/{wallet}")).await;
        assert_eq!(account_doc["lock_version"], 2, "G4: lock_version counts the account's entries");
        let pending_id = pending["id"].as_str().unwrap();
        let (status, posted) = json(server.patch(&format!("/api/ledger_transactions/{pending_id}"), &key, &json!({"status": "posted"})).send().await.unwrap()).await;
        assert_eq!(status, 200, "{posted}");
        assert_eq!(posted["status"], "posted");
        assert!(posted["ledger_entries"].as_array().unwrap().iter().all(|e| e["status"] == "posted"));
        assert_eq!(amounts(&server, &key, &wallet, "").await, (7_500, 7_500, 7_500));
    }

    #[tokio::test]
    async fn g2_archived_entries_count_nowhere_and_posted_transactions_are_immutable() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (_, a, b) = books(&server, &key).await;
        let (_, pending) = transfer(&server, &key, vec![entry(&a, "credit", 700), entry(&b, "debit", 700)], "pending").await;
        let id = pending["id"].as_str().unwrap();
        assert_eq!(amounts(&server, &key, &a, "").await, (700, 0, 0));
        let (status, archived) = json(server.patch(&format!("/api/ledger_transactions/{id}"), &key, &json!({"status": "archived"})).send().await.unwrap()).await;
        assert_eq!(status, 200, "{archived}");
        assert_eq!(amounts(&server, &key, &a, "").await, (0, 0, 0));
        let (status, body) = json(server.patch(&format!("/api/ledger_transactions/{id}"), &key, &json!({"status": "posted"})).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "status");
        let (_, posted) = transfer(&server, &key, vec![entry(&a, "credit", 5), entry(&b, "debit", 5)], "posted").await;
        let posted_id = posted["id"].as_str().unwrap();
        for body in [json!({"status": "archived"}), json!({"external_id": "late"})] {
            let (status, reply) = json(server.patch(&format!("/api/ledger_transactions/{posted_id}"), &key, &body).send().await.unwrap()).await;
            assert_error(status, &reply, 422, "parameter_invalid");
        }
        // Its description and metadata may still change.
        let (status, reply) = json(server.patch(&format!("/api/ledger_transactions/{posted_id}"), &key, &json!({"metadata": {"k": "v"}, "description": "d"})).send().await.unwrap()).await;
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["metadata"]["k"], "v");
        assert_eq!(amounts(&server, &key, &a, "").await, (5, 5, 5));
        let versions = get(&server, &key, &format!("/api/ledger_transactions/{id}/versions")).await;
        let numbers: Vec<i64> = versions.as_array().unwrap().iter().map(|v| v["version"].as_i64().unwrap()).collect();
        assert_eq!(numbers, [2, 1], "a version per change, newest first");
        assert_eq!(versions[0]["status"], "archived");
        assert_eq!(versions[1]["status"], "pending");
    }

    #[tokio::test]
    async fn g2_bad_input_is_refused_naming_the_parameter_and_changes_nothing() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (ledger, a, b) = books(&server, &key).await;
        let other_ledger = self::ledger(&server, &key).await;
        let foreign = account(&server, &key, &other_ledger, "debit").await;
        let eur = create(&server, &key, "/api/ledger_accounts", json!({"name": "E", "ledger_id": ledger, "normal_balance": "debit", "currency": "EUR"})).await;
        let eur = eur["id"].as_str().unwrap();
        let stranger = server.key_for("another-org", Mode::Sandbox).await;
        let stranger_ledger = self::ledger(&server, &stranger).await;
        let strangers = account(&server, &stranger, &stranger_ledger, "debit").await;
        let cases: Vec<(Vec<Value>, &str)> = vec![
            (vec![entry(&a, "credit", 100), entry(&b, "debit", 99)], "ledger_entries"),
            (vec![entry(&a, "credit", 0), entry(&b, "debit", 0)], "ledger_entries[0].amount"),
            (vec![entry(&a, "credit", -5), entry(&b, "debit", -5)], "ledger_entries[0].amount"),
            (vec![json!({"ledger_account_id": a, "direction": "credit", "amount": 1.5}), entry(&b, "debit", 1)], "ledger_entries[0].amount"),
            (vec![entry(&a, "credit", 100), entry(&foreign, "debit", 100)], "ledger_entries[1].ledger_account_id"),
            (vec![entry(&a, "credit", 100), entry(&strangers, "debit", 100)], "ledger_entries[1].ledger_account_id"),
            (vec![entry(&a, "credit", 100), entry("00000000-0000-4000-8000-000000000000", "debit", 100)], "ledger_entries[1].ledger_account_id"),
            (vec![entry(&a, "credit", 100), entry(eur, "debit", 100)], "ledger_entries"),
            (vec![entry(&a, "sideways", 100), entry(&b, "debit", 100)], "ledger_entries[0].direction"),
            (vec![], "ledger_entries"),
        ];
        for (entries, parameter) in cases {
            let (status, body) = transfer(&server, &key, entries.clone(), "posted").await;
            assert_error(status, &body, 422, if parameter.ends_with("amount") && body["errors"]["code"] == "parameter_missing" { "parameter_missing" } else { "parameter_invalid" });
            assert_eq!(body["errors"]["parameter"], parameter, "{entries:?}: {body}");
        }
        // An effective_at and an effective_date that say different days; both agreeing is fine
        // (checked below, after "nothing was written").
        let dated = |date: &str| {
            json!({"ledger_entries": [entry(&a, "credit", 5), entry(&b, "debit", 5)], "effective_at": "2026-03-01T10:00:00Z", "effective_date": date})
        };
        let (status, body) = json(server.post("/api/ledger_transactions", &key, &dated("2026-03-02")).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "effective_date");
        assert_eq!(amounts(&server, &key, &a, "").await, (0, 0, 0), "nothing was written");
        let account_doc = get(&server, &key, &format!("/api/ledger_accounts/{a}")).await;
        assert_eq!(account_doc["lock_version"], 0);
        let (status, body) = json(server.post("/api/ledger_transactions", &key, &dated("2026-03-01")).send().await.unwrap()).await;
        assert_eq!((status, body["effective_date"].as_str()), (201, Some("2026-03-01")), "{body}");
        // The day as the instant was written (its offset) agrees too: 02:00 at +05:00 is the
        // 28th in UTC.
        let mut local = dated("2026-03-01");
        local["effective_at"] = json!("2026-03-01T02:00:00+05:00");
        let (status, body) = json(server.post("/api/ledger_transactions", &key, &local).send().await.unwrap()).await;
        assert_eq!(status, 201, "{body}");
        let both = format!("/api/ledger_accounts/{a}?balances%5Beffective_at%5D=2026-03-01T00:00:00Z&balances%5Bas_of_date%5D=2026-03-01");
        let (status, body) = json(server.get(&both, &key).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "balances[as_of_date]");
        // Accounts: a ledger the caller cannot see, a bad currency, a missing normal balance.
        for (body, parameter) in [
            (json!({"name": "x", "ledger_id": stranger_ledger, "normal_balance": "debit", "currency": "USD"}), "ledger_id"),
            (json!({"name": "x", "ledger_id": ledger, "normal_balance": "debit", "currency": "USD", "currency_exponent": 3}), "currency_exponent"),
            (json!({"name": "x", "ledger_id": ledger, "normal_balance": "debit", "currency": "TOKEN"}), "currency_exponent"),
            (json!({"name": "x", "ledger_id": ledger, "currency": "USD"}), "normal_balance"),
        ] {
            let (status, reply) = json(server.post("/api/ledger_accounts", &key, &body).send().await.unwrap()).await;
            assert_eq!(status, 422, "{body}: {reply}");
            assert_eq!(reply["errors"]["parameter"], parameter, "{reply}");
        }
        // A3: another tenant's ledger objects are 404.
        let (status, _) = json(server.get(&format!("/api/ledger_accounts/{strangers}"), &key).send().await.unwrap()).await;
        assert_eq!(status, 404);
        let (status, _) = json(server.get(&format!("/api/ledgers/{stranger_ledger}"), &key).send().await.unwrap()).await;
        assert_eq!(status, 404);
    }

    #[tokio::test]
    async fn g4_a_stale_lock_version_is_409_and_changes_nothing() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (_, a, b) = books(&server, &key).await;
        let mut first = entry(&a, "credit", 10);
        first["lock_version"] = json!(0);
        let (status, reply) = transfer(&server, &key, vec![first.clone(), entry(&b, "debit", 10)], "posted").await;
        assert_eq!(status, 201, "{reply}");
        assert_eq!(reply["ledger_entries"][0]["ledger_account_lock_version"], 0);
        // The account is at version 1 now: the same version again is stale.
        let (status, body) = transfer(&server, &key, vec![first, entry(&b, "debit", 10)], "posted").await;
        assert_error(status, &body, 409, "conflict");
        assert_eq!(body["errors"]["parameter"], "ledger_entries[0].lock_version");
        assert_eq!(amounts(&server, &key, &a, "").await, (10, 10, 10));
        assert_eq!(amounts(&server, &key, &b, "").await, (10, 10, 10), "the other account was not touched either");
        // A negative version is no race: it can never match, so it is a 422.
        let mut negative = entry(&a, "credit", 1);
        negative["lock_version"] = json!(-1);
        let (status, reply) = transfer(&server, &key, vec![negative, entry(&b, "debit", 1)], "posted").await;
        assert_error(status, &reply, 422, "parameter_invalid");
        assert_eq!(reply["errors"]["parameter"], "ledger_entries[0].lock_version");
        let mut current = entry(&a, "credit", 1);
        current["lock_version"] = json!(1);
        let (status, reply) = transfer(&server, &key, vec![current, entry(&b, "debit", 1)], "posted").await;
        assert_eq!(status, 201, "{reply}");
    }

    #[tokio::test]
    async fn g4_balance_conditions_hold_atomically_with_the_write() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (wallet, cash) = (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await);
        let (status, _) = transfer(&server, &key, vec![entry(&wallet, "credit", 100), entry(&cash, "debit", 100)], "posted").await;
        assert_eq!(status, 201);
        let spend = |amount: i64| {
            let mut debit = entry(&wallet, "debit", amount);
            debit["available_balance_amount"] = json!({"gte": 0});
            vec![debit, entry(&cash, "credit", amount)]
        };
        let (status, body) = transfer(&server, &key, spend(101), "pending").await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "ledger_entries[0].available_balance_amount[gte]");
        assert_eq!(amounts(&server, &key, &wallet, "").await, (100, 100, 100), "nothing was written");
        let (status, _) = transfer(&server, &key, spend(60), "pending").await;
        assert_eq!(status, 201);
        // The pending outflow counts against available: 40 left.
        let (status, _) = transfer(&server, &key, spend(41), "posted").await;
        assert_eq!(status, 422);
        let (status, _) = transfer(&server, &key, spend(40), "posted").await;
        assert_eq!(status, 201);
        let mut exact = entry(&wallet, "credit", 5);
        exact["posted_balance_amount"] = json!({"eq": 65, "lt": 66, "gt": 64, "lte": 65});
        let (status, reply) = transfer(&server, &key, vec![exact, entry(&cash, "debit", 5)], "posted").await;
        assert_eq!(status, 201, "{reply}");
        let mut bad = entry(&wallet, "credit", 5);
        bad["pending_balance_amount"] = json!({"about": 5});
        let (status, body) = transfer(&server, &key, vec![bad, entry(&cash, "debit", 5)], "posted").await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "ledger_entries[0].pending_balance_amount[about]");
        // Found by the re-audit: a condition with its operator twice kept the last value, so a
        // guard written first ({"gte": 0}) was loosened in silence. It is refused, naming it.
        let before = amounts(&server, &key, &wallet, "").await;
        let loosened = format!(
            r#"{{"ledger_id":"{ledger}","status":"posted","ledger_entries":[
                {{"ledger_account_id":"{wallet}","direction":"debit","amount":1000,"available_balance_amount":{{"gte":0,"gte":-100000}}}},
                {{"ledger_account_id":"{cash}","direction":"credit","amount":1000}}]}}"#
        );
        let response = server
            .req(reqwest::Method::POST, "/api/ledger_transactions", &key)
            .header("content-type", "application/json")
            .body(loosened)
            .send()
            .await
            .unwrap();
        let (status, body) = json(response).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "ledger_entries[0].available_balance_amount.gte", "{body}");
        assert_eq!(amounts(&server, &key, &wallet, "").await, before, "nothing was written");
    }

    #[tokio::test]
    async fn g5_backdated_entries_keep_every_as_of_balance_exact() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (_, a, b) = books(&server, &key).await;
        let at = |day: u32| format!("2026-03-{day:02}T12:00:00Z");
        for (day, amount) in [(10, 100), (20, 1_000), (5, 10)] {
            let body = json!({"status": "posted", "effective_at": at(day), "ledger_entries": [entry(&a, "credit", amount), entry(&b, "debit", amount)]});
            let (status, reply) = json(server.post("/api/ledger_transactions", &key, &body).send().await.unwrap()).await;
            assert_eq!(status, 201, "{reply}");
        }
        let (status, pending) = json(server.post("/api/ledger_transactions", &key, &json!({"status": "pending", "effective_at": at(15), "ledger_entries": [entry(&a, "debit", 1), entry(&b, "credit", 1)]})).send().await.unwrap()).await;
        assert_eq!(status, 201, "{pending}");
        assert_eq!(amounts(&server, &key, &a, "?balances%5Beffective_at%5D=2026-03-04T00:00:00Z").await.1, 0);
        assert_eq!(amounts(&server, &key, &a, "?balances%5Beffective_at%5D=2026-03-05T12:00:00Z").await.1, 10, "inclusive of that instant");
        assert_eq!(amounts(&server, &key, &a, "?balances%5Beffective_at%5D=2026-03-12T00:00:00Z").await.1, 110);
        assert_eq!(amounts(&server, &key, &a, "?balances%5Bas_of_date%5D=2026-03-15").await, (109, 110, 109));
        assert_eq!(amounts(&server, &key, &a, "?balances%5Bas_of_date%5D=2026-03-31").await, (1_109, 1_110, 1_109));
        let window = "?balances%5Beffective_at_lower_bound%5D=2026-03-06T00:00:00Z&balances%5Beffective_at_upper_bound%5D=2026-03-20T12:00:00Z";
        let body = get(&server, &key, &format!("/api/ledger_accounts/{a}{window}")).await;
        assert_eq!(body["balances"]["posted_balance"]["amount"], 100, "lower bound inclusive, upper exclusive");
        assert_eq!(body["balances"]["effective_at_upper_bound"], "2026-03-20T12:00:00.000000Z");
        assert_eq!(amounts(&server, &key, &a, "?balances%5Bas_of_lock_version%5D=2").await.1, 1_100, "the first two entries written");
        // Lists by effective time are exact too, and resulting balances follow effective order.
        let march = get(&server, &key, &format!("/api/ledger_entries?ledger_account_id={a}&effective_at%5Blt%5D=2026-03-15T00:00:00Z&show_balances=true")).await;
        let rows: Vec<(i64, i64)> = march.as_array().unwrap().iter().map(|e| (e["amount"].as_i64().unwrap(), e["resulting_ledger_account_balances"]["posted_balance"]["amount"].as_i64().unwrap())).collect();
        assert_eq!(rows, [(10, 10), (100, 110)], "newest first; the backdated entry's balance counts only what came before it");
        let by_date = get(&server, &key, &format!("/api/ledger_transactions?ledger_account_id={a}&effective_date%5Bgte%5D=2026-03-15")).await;
        assert_eq!(by_date.as_array().unwrap().len(), 2);
    }

    /// An account below its 64th entry sums its entries for a balance as of an instant; from
    /// it on, its time buckets (storage layout level 5). Level 4 sums the entries of the
    /// instant's own second from their rows and every bucket of the coarsest width (about 203
    /// days) before it. Either way, as-of balances stay exact between entries microseconds
    /// apart, across a bucket's edge, and across decades.
    #[tokio::test]
    async fn g5_as_of_balances_are_exact_between_entries_of_one_second_and_decades_apart() {
        as_of_between_entries_of_one_second_and_decades_apart(0).await;
    }

    #[tokio::test]
    async fn g5_as_of_balances_are_exact_between_entries_of_one_second_and_decades_apart_with_buckets() {
        // 64 entries dated after every probe take both accounts to the version buckets start at.
        as_of_between_entries_of_one_second_and_decades_apart(payrail::store::ledger::BUCKETS_FROM).await;
    }

    /// An account moves from summing its entries to keeping time buckets at its 64th entry
    /// (storage layout level 5): as-of balances, pending and posted, stay exact before, at and
    /// after it, with entries dated out of order across decades, and with pending entries
    /// posted and archived on both sides of it.
    #[tokio::test]
    async fn g5_as_of_balances_stay_exact_as_an_account_starts_keeping_buckets() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (_, a, b) = books(&server, &key).await;
        let from = payrail::store::ledger::BUCKETS_FROM as usize;
        // (transaction id, effective_at, amount, status) of each transaction written to `a`.
        let mut written: Vec<(String, String, i64, &str)> = Vec::new();
        let probes: Vec<String> = (0..12).map(|i| format!("{}-{:02}-15T{:02}:30:00.5Z", 1998 + i * 4, 1 + i % 12, i)).collect();
        let check = |written: Vec<(String, String, i64, &'static str)>, stage: &'static str| {
            let (server, key, a, b, probes) = (&server, &key, &a, &b, &probes);
            async move {
                for probe in probes.iter().chain(written.iter().map(|w| &w.1).take(6)) {
                    let cut = payrail::domain::time::Timestamp::parse_rfc3339(probe).unwrap();
                    let sum = |posted_only: bool| -> i64 {
                        written
                            .iter()
                            .filter(|(_, at, _, _)| payrail::domain::time::Timestamp::parse_rfc3339(at).unwrap() <= cut)
                            .filter(|(_, _, _, status)| *status == "posted" || (!posted_only && *status == "pending"))
                            .map(|w| w.2)
                            .sum()
                    };
                    let query = format!("?balances%5Beffective_at%5D={}", probe.replace('+', "%2B"));
                    let (pending, posted, _) = amounts(server, key, a, &query).await;
                    assert_eq!((pending, posted), (sum(false), sum(true)), "{stage}: the credit side as of {probe}");
                    let (pending, posted, _) = amounts(server, key, b, &query).await;
                    assert_eq!((pending, posted), (sum(false), sum(true)), "{stage}: the debit side as of {probe}");
                }
            }
        };
        for i in 0..from + 16 {
            let status = if i % 4 == 0 { "pending" } else { "posted" };
            let at = format!("{}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", 2000 + (i * 37) % 48, 1 + (i * 7) % 12, 1 + (i * 11) % 28, i % 24, (i * 13) % 60, (i * 29) % 60, i * 1_013);
            let body = json!({"status": status, "effective_at": at, "ledger_entries": [entry(&a, "credit", 1 + i as i64), entry(&b, "debit", 1 + i as i64)]});
            let (code, reply) = json(server.post("/api/ledger_transactions", &key, &body).send().await.unwrap()).await;
            assert_eq!(code, 201, "{reply}");
            written.push((reply["id"].as_str().unwrap().to_owned(), reply["effective_at"].as_str().unwrap().to_owned(), 1 + i as i64, status));
            if i + 1 == from / 2 || i + 1 == from - 1 || i + 1 == from || i + 1 == from + 16 {
                check(written.clone(), if i + 1 < from { "without buckets" } else { "with buckets" }).await;
            }
            if i + 1 == from / 2 {
                // Settled before the account keeps buckets: the entries' rows alone change.
                settle_some(&server, &key, &mut written, 0).await;
                check(written.clone(), "settled without buckets").await;
            }
        }
        // Settled after: the buckets built from the rows move too.
        settle_some(&server, &key, &mut written, 1).await;
        check(written.clone(), "settled with buckets").await;
        let version = get(&server, &key, &format!("/api/ledger_accounts/{a}")).await["lock_version"].as_i64().unwrap();
        assert_eq!(version, (from + 16) as i64);
    }

    #[tokio::test]
    async fn g5_concurrent_as_of_reads_each_get_their_own_accounts_sums() {
        // PostgreSQL answers concurrent balance reads together, one statement for many: each
        // read must still get its own account's sums at its own instant, pending and posted,
        // whether its account keeps time buckets or not (storage layout level 5: every other
        // account here is taken past version 64 by entries dated after every probe).
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let sink = account(&server, &key, &ledger, "debit").await;
        let mut accounts = Vec::new();
        for k in 0..6 {
            let id = account(&server, &key, &ledger, "credit").await;
            for _ in 0..if k % 2 == 0 { payrail::store::ledger::BUCKETS_FROM } else { 0 } {
                let body = json!({"status": "posted", "effective_at": "2090-01-01T00:00:00Z", "ledger_entries": [entry(&id, "credit", 1), entry(&sink, "debit", 1)]});
                assert_eq!(server.post("/api/ledger_transactions", &key, &body).send().await.unwrap().status(), 201);
            }
            accounts.push(id);
        }
        let at = |hour: u32| format!("2025-03-0{}T{:02}:00:00Z", 1 + hour / 24, hour % 24);
        // (hour, amount, pending) for account k: amounts scaled by k + 1, so no two sums agree.
        let written = [(1, 1, false), (5, 10, false), (9, 100, true), (13, 1_000, false), (30, 10_000, false)];
        for (k, id) in accounts.iter().enumerate() {
            for &(hour, amount, pending) in &written {
                let amount = amount * (k as i64 + 1);
                let body = json!({"status": if pending { "pending" } else { "posted" }, "effective_at": at(hour),
                    "ledger_entries": [entry(id, "credit", amount), entry(&sink, "debit", amount)]});
                let (status, reply) = json(server.post("/api/ledger_transactions", &key, &body).send().await.unwrap()).await;
                assert_eq!(status, 201, "{reply}");
            }
        }
        let expected = |k: usize, hour: u32| {
            let upto = written.iter().filter(|w| w.0 <= hour).map(|&(_, amount, pending)| (amount * (k as i64 + 1), pending));
            let (all, posted) = upto.fold((0, 0), |(all, posted), (amount, pending)| (all + amount, posted + if pending { 0 } else { amount }));
            (all, posted, posted)
        };
        let probes = [0, 1, 4, 9, 12, 13, 29, 30, 47];
        let mut reads = Vec::new();
        let (server_ref, key_ref) = (&server, &key);
        for (k, id) in accounts.iter().enumerate() {
            for hour in probes {
                let query = format!("?balances%5Beffective_at%5D={}", at(hour));
                reads.push(async move { (k, hour, amounts(server_ref, key_ref, id, &query).await) });
            }
        }
        for (k, hour, got) in futures_util::future::join_all(reads).await {
            assert_eq!(got, expected(k, hour), "account {k} as of hour {hour}");
        }
        // A page of accounts as of one instant, and the same accounts now, side by side.
        let list = format!("/api/ledger_accounts?ledger_id={ledger}&per_page=10&balances%5Beffective_at%5D={}", at(12));
        let (listed, now) = tokio::join!(get(&server, &key, &list), amounts(&server, &key, &accounts[5], ""));
        assert_eq!(now, expected(5, 100));
        for item in listed.as_array().unwrap().iter().filter(|a| a["id"] != sink.as_str()) {
            let k = accounts.iter().position(|id| item["id"] == id.as_str()).unwrap();
            assert_eq!(item["balances"]["posted_balance"]["amount"], expected(k, 12).1, "account {k} in the list");
            assert_eq!(item["balances"]["pending_balance"]["amount"], expected(k, 12).0, "account {k} in the list");
        }
    }

    #[tokio::test]
    async fn g2_reversal_turns_every_entry_around_once() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (_, a, b) = books(&server, &key).await;
        let (_, original) = transfer(&server, &key, vec![entry(&a, "credit", 300), entry(&b, "debit", 300)], "posted").await;
        let id = original["id"].as_str().unwrap();
        let (status, reversal) = json(server.post(&format!("/api/ledger_transactions/{id}/reversal"), &key, &json!({"description": "undo"})).send().await.unwrap()).await;
        assert_eq!(status, 201, "{reversal}");
        assert_eq!(reversal["status"], "posted");
        assert_eq!(reversal["reverses_ledger_transaction_id"], id);
        assert_eq!(reversal["effective_at"], original["effective_at"]);
        assert_eq!(reversal["ledger_entries"][0]["direction"], "debit");
        assert_eq!(amounts(&server, &key, &a, "").await, (0, 0, 0));
        let original = get(&server, &key, &format!("/api/ledger_transactions/{id}")).await;
        assert_eq!(original["reversed_by_ledger_transaction_id"], reversal["id"]);
        let (status, body) = json(server.post(&format!("/api/ledger_transactions/{id}/reversal"), &key, &json!({})).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        let listed = get(&server, &key, &format!("/api/ledger_transactions?reverses_ledger_transaction_id={id}")).await;
        assert_eq!(listed.as_array().unwrap().len(), 1);
        // An entry's transaction is its parent (storage layout level 2): each transaction's
        // entries and nothing else, with the other filters still applied, within the tenant.
        for txn in [&original, &reversal] {
            let ids = |v: &Value| v.as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect::<BTreeSet<_>>();
            let txn_id = txn["id"].as_str().unwrap();
            let listed = get(&server, &key, &format!("/api/ledger_entries?ledger_transaction_id={txn_id}")).await;
            assert_eq!(ids(&listed), ids(&txn["ledger_entries"]), "{txn_id}");
            let credits = get(&server, &key, &format!("/api/ledger_entries?ledger_transaction_id={txn_id}&direction=credit")).await;
            assert_eq!(credits.as_array().unwrap().len(), 1);
            assert_eq!(credits[0]["ledger_transaction_id"], txn_id);
        }
        let stranger = server.key_for("another-org", Mode::Sandbox).await;
        let theirs = get(&server, &stranger, &format!("/api/ledger_entries?ledger_transaction_id={id}")).await;
        assert_eq!(theirs, json!([]), "another organization sees none of these entries");
    }

    /// A pending reversal that is archived reverses nothing: the original may be reversed again
    /// (and only once more).
    #[tokio::test]
    async fn g2_an_archived_pending_reversal_leaves_the_transaction_reversible() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (_, a, b) = books(&server, &key).await;
        let (_, original) = transfer(&server, &key, vec![entry(&a, "credit", 300), entry(&b, "debit", 300)], "posted").await;
        let id = original["id"].as_str().unwrap();
        let reverse = |body: Value| {
            let (server, key) = (&server, &key);
            async move { json(server.post(&format!("/api/ledger_transactions/{id}/reversal"), key, &body).send().await.unwrap()).await }
        };
        let (status, pending) = reverse(json!({"status": "pending"})).await;
        assert_eq!((status, pending["status"].as_str()), (201, Some("pending")), "{pending}");
        let path = format!("/api/ledger_transactions/{}", pending["id"].as_str().unwrap());
        let (status, archived) = json(server.patch(&path, &key, &json!({"status": "archived"})).send().await.unwrap()).await;
        assert_eq!((status, archived["status"].as_str()), (200, Some("archived")), "{archived}");
        assert_eq!(amounts(&server, &key, &a, "").await, (300, 300, 300), "the archived reversal counts nowhere");
        let original = get(&server, &key, &format!("/api/ledger_transactions/{id}")).await;
        assert_eq!(original["reversed_by_ledger_transaction_id"], Value::Null, "an archived reversal reversed nothing: {original}");
        let versions = get(&server, &key, &format!("/api/ledger_transactions/{id}/versions")).await;
        let versions: Vec<&Value> = versions.as_array().unwrap().iter().map(|v| &v["reversed_by_ledger_transaction_id"]).collect();
        assert_eq!(versions, [&Value::Null, &pending["id"], &Value::Null], "newest first: unlinked, reversed, created");
        let (status, reversal) = reverse(json!({})).await;
        assert_eq!(status, 201, "{reversal}");
        assert_eq!(amounts(&server, &key, &a, "").await, (0, 0, 0));
        let original = get(&server, &key, &format!("/api/ledger_transactions/{id}")).await;
        assert_eq!(original["reversed_by_ledger_transaction_id"], reversal["id"]);
        let (status, body) = reverse(json!({})).await;
        assert_error(status, &body, 422, "parameter_invalid");
    }

    /// SPEC E4: a PATCH that changes nothing (empty, the status the transaction has, the
    /// metadata it holds) answers the transaction as it is and writes no version and no event.
    #[tokio::test]
    async fn e4_a_ledger_transaction_patch_that_changes_nothing_writes_nothing() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (ledger, a, b) = books(&server, &key).await;
        let body = json!({"ledger_entries": [entry(&a, "credit", 5), entry(&b, "debit", 5)], "status": "posted", "metadata": {"k": "v"}});
        let txn = create(&server, &key, "/api/ledger_transactions", body).await;
        let id = txn["id"].as_str().unwrap();
        let path = format!("/api/ledger_transactions/{id}");
        for patch in [json!({}), json!({"status": "posted"}), json!({"metadata": {"k": "v"}})] {
            let (status, reply) = json(server.patch(&path, &key, &patch).send().await.unwrap()).await;
            assert_eq!((status, &reply), (200, &txn), "{patch}");
        }
        let versions = get(&server, &key, &format!("/api/ledger_transaction_versions?ledger_transaction_id={id}")).await;
        assert_eq!(versions.as_array().unwrap().len(), 1, "{versions}");
        let names = |events: Value| events.as_array().unwrap().iter().map(|e| e["event_name"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
        assert_eq!(names(get(&server, &key, &format!("/api/events?entity_id={id}")).await), ["created"]);
        let (status, changed) = json(server.patch(&path, &key, &json!({"metadata": {"k": "w"}})).send().await.unwrap()).await;
        assert_eq!((status, changed["metadata"]["k"].as_str()), (200, Some("w")));
        assert_eq!(names(get(&server, &key, &format!("/api/events?entity_id={id}")).await).len(), 2);
        // The same for a ledger, a ledger account and an entry.
        let entry_id = txn["ledger_entries"][0]["id"].as_str().unwrap().to_owned();
        for (path, patch) in [
            (format!("/api/ledgers/{ledger}"), json!({"name": "Books"})),
            (format!("/api/ledger_accounts/{a}"), json!({})),
            (format!("/api/ledger_entries/{entry_id}"), json!({"metadata": {}})),
        ] {
            let before = get(&server, &key, &path).await;
            let events = format!("/api/events?entity_id={}", path.rsplit('/').next().unwrap());
            let events_before = names(get(&server, &key, &events).await);
            let (status, reply) = json(server.patch(&path, &key, &patch).send().await.unwrap()).await;
            assert_eq!((status, &reply["updated_at"]), (200, &before["updated_at"]), "{path}: {reply}");
            assert_eq!(names(get(&server, &key, &events).await), events_before, "{path}");
        }
    }

    /// SPEC E2, A3: a `ledgerable_id` names an object of its type the caller can see, as every
    /// other id in a body does; a type filter outside MT's list is refused.
    #[tokio::test]
    async fn e2_a_ledgerable_id_must_name_the_callers_own_object() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (ledger, a, b) = books(&server, &key).await;
        let stranger = server.key_for("another-org", Mode::Sandbox).await;
        let theirs = create(&server, &stranger, "/api/counterparties", json!({"name": "Theirs"})).await;
        let ours = create(&server, &key, "/api/counterparties", json!({"name": "Ours"})).await;
        let account_with = |counterparty: &Value| {
            json!({"name": "Linked", "ledger_id": ledger, "normal_balance": "credit", "currency": "USD",
                   "ledgerable_type": "counterparty", "ledgerable_id": counterparty["id"]})
        };
        let (status, body) = json(server.post("/api/ledger_accounts", &key, &account_with(&theirs)).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "ledgerable_id");
        create(&server, &key, "/api/ledger_accounts", account_with(&ours)).await;
        let unknown = "00000000-0000-4000-8000-000000000000";
        for (kind, id) in [("payment_order", unknown), ("expected_payment", unknown), ("reversal", unknown)] {
            let body = json!({"ledger_entries": [entry(&a, "credit", 5), entry(&b, "debit", 5)], "ledgerable_type": kind, "ledgerable_id": id});
            let (status, reply) = json(server.post("/api/ledger_transactions", &key, &body).send().await.unwrap()).await;
            assert_error(status, &reply, 422, "parameter_invalid");
            assert_eq!(reply["errors"]["parameter"], "ledgerable_id", "{kind}: {reply}");
        }
        assert_eq!(amounts(&server, &key, &a, "").await, (0, 0, 0), "a refused transaction changes nothing");
        let (status, reply) = json(server.get("/api/ledger_transactions?ledgerable_type=bogus", &key).send().await.unwrap()).await;
        assert_error(status, &reply, 422, "parameter_invalid");
        assert_eq!(reply["errors"]["parameter"], "ledgerable_type");
    }

    #[tokio::test]
    async fn g1_entries_and_transactions_filter_by_status_direction_and_effective_time_as_they_move() {
        // Storage layout level 3: these filters read each entry's posting row, which its
        // transaction's post or archive moves in the same commit as the entry, and a
        // transaction's read its entries' rows.
        let server = TestServer::start().await;
        let key = server.key().await;
        let (_, a, b) = books(&server, &key).await;
        let mut ids = Vec::new();
        for (status, day, a_side, amount) in [("posted", 10, "credit", 100), ("pending", 20, "debit", 5), ("pending", 25, "credit", 7)] {
            let b_side = if a_side == "credit" { "debit" } else { "credit" };
            let body = json!({"status": status, "effective_at": format!("2026-03-{day}T12:00:00Z"), "ledger_entries": [entry(&a, a_side, amount), entry(&b, b_side, amount)]});
            ids.push(create(&server, &key, "/api/ledger_transactions", body).await["id"].as_str().unwrap().to_owned());
        }
        let amounts_of = |path: String| {
            let (server, key) = (&server, &key);
            async move {
                let listed = get(server, key, &path).await;
                listed.as_array().unwrap().iter().map(|e| e["amount"].as_i64().unwrap()).collect::<Vec<_>>()
            }
        };
        let on_a = format!("/api/ledger_entries?ledger_account_id={a}");
        assert_eq!(amounts_of(format!("{on_a}&status=pending")).await, [7, 5]);
        for (id, to) in [(&ids[1], "posted"), (&ids[2], "archived")] {
            let (status, reply) = json(server.patch(&format!("/api/ledger_transactions/{id}"), &key, &json!({"status": to})).send().await.unwrap()).await;
            assert_eq!(status, 200, "{reply}");
        }
        assert_eq!(amounts_of(format!("{on_a}&status=pending")).await, Vec::<i64>::new(), "posting and archiving moved them");
        assert_eq!(amounts_of(format!("{on_a}&status=posted")).await, [5, 100]);
        assert_eq!(amounts_of(format!("{on_a}&status%5B%5D=archived")).await, [7]);
        assert_eq!(amounts_of(format!("{on_a}&status%5B%5D=posted&status%5B%5D=archived")).await, [7, 5, 100]);
        assert_eq!(amounts_of(format!("{on_a}&direction=debit")).await, [5]);
        assert_eq!(amounts_of(format!("{on_a}&direction=credit&status=posted")).await, [100]);
        assert_eq!(amounts_of(format!("{on_a}&effective_date=2026-03-20")).await, [5]);
        let window = "effective_at%5Bgte%5D=2026-03-20T12:00:00Z&effective_at%5Blt%5D=2026-03-25T12:00:00Z";
        assert_eq!(amounts_of(format!("{on_a}&{window}")).await, [5], "lower bound inclusive, upper exclusive");
        assert_eq!(amounts_of(format!("{on_a}&{window}&direction=credit")).await, Vec::<i64>::new());
        assert_eq!(amounts_of(format!("{on_a}&effective_at%5Bgt%5D=2026-03-10T12:00:00Z&effective_at%5Blte%5D=2026-03-25T12:00:00Z")).await, [7, 5]);
        // A transaction's status and effective time are its entries' (the same rows).
        let txns = |query: &'static str| {
            let (server, key, a) = (&server, &key, &a);
            async move {
                let listed = get(server, key, &format!("/api/ledger_transactions?ledger_account_id={a}&{query}")).await;
                listed.as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
            }
        };
        assert_eq!(txns("status=pending").await, Vec::<String>::new());
        assert_eq!(txns("status=posted").await, [ids[1].clone(), ids[0].clone()]);
        assert_eq!(txns("status%5B%5D=archived&effective_date%5Bgte%5D=2026-03-21").await, [ids[2].clone()]);
        // Found by the time audit: MT's document types this filter as a date-time, so an SDK may
        // send one; it names the day it is written on.
        assert_eq!(txns("status%5B%5D=archived&effective_date%5Bgte%5D=2026-03-21T00:00:00-05:00").await, [ids[2].clone()]);
        assert_eq!(txns("effective_date%5Beq%5D=2026-03-20T23:00:00Z").await, [ids[1].clone()]);
        assert_eq!(txns("effective_at=2026-03-20T12:00:00Z").await, [ids[1].clone()]);
        assert_eq!(txns("effective_at%5Blt%5D=2026-03-20T12:00:00Z&status=posted").await, [ids[0].clone()]);
        let (status, body) = json(server.get("/api/ledger_transactions?status=settled", &key).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        // Without an account: every entry of the organization, by its posting row alone.
        let sides: Vec<(String, i64)> = get(&server, &key, "/api/ledger_entries?status=archived")
            .await
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["direction"].as_str().unwrap().to_owned(), e["amount"].as_i64().unwrap()))
            .collect();
        assert_eq!(sides.len(), 2, "{sides:?}");
        assert!(sides.iter().all(|(_, amount)| *amount == 7), "{sides:?}");
        assert_eq!(amounts_of("/api/ledger_entries?status=archived&direction=debit".into()).await, [7]);
        let stranger = server.key_for("another-org", Mode::Sandbox).await;
        let (status, theirs) = json(server.get("/api/ledger_entries?status=posted&direction=credit", &stranger).send().await.unwrap()).await;
        assert_eq!((status, theirs), (200, json!([])), "another organization sees none of these entries");
        let refused = [
            ("status=settled", "status"),
            ("direction=up", "direction"),
            ("effective_at%5Bgte%5D=soon", "effective_at[gte]"),
            ("effective_at%5Bgtee%5D=2026-03-20T12:00:00Z", "effective_at[gtee]"),
            ("effective_date%5Bgte%5D=2026-03-20T25:00:00Z", "effective_date[gte]"),
            ("effective_date%5Bgte%5D=20260320", "effective_date[gte]"),
        ];
        for (query, parameter) in refused {
            let (status, body) = json(server.get(&format!("{on_a}&{query}"), &key).send().await.unwrap()).await;
            assert_error(status, &body, 422, "parameter_invalid");
            assert_eq!(body["errors"]["parameter"], parameter, "{body}");
        }
    }

    #[tokio::test]
    async fn g2_external_id_is_unique_per_ledger_among_live_transactions() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (_, a, b) = books(&server, &key).await;
        let body = |status: &str| json!({"status": status, "external_id": "ext-1", "ledger_entries": [entry(&a, "credit", 1), entry(&b, "debit", 1)]});
        let (status, first) = json(server.post("/api/ledger_transactions", &key, &body("pending")).send().await.unwrap()).await;
        assert_eq!(status, 201);
        let (status, reply) = json(server.post("/api/ledger_transactions", &key, &body("posted")).send().await.unwrap()).await;
        assert_error(status, &reply, 422, "parameter_invalid");
        assert_eq!(reply["errors"]["parameter"], "external_id");
        assert_eq!(amounts(&server, &key, &a, "").await, (1, 0, 0), "the refused one wrote nothing");
        let id = first["id"].as_str().unwrap();
        let (status, _) = json(server.patch(&format!("/api/ledger_transactions/{id}"), &key, &json!({"status": "archived"})).send().await.unwrap()).await;
        assert_eq!(status, 200);
        let (status, reply) = json(server.post("/api/ledger_transactions", &key, &body("posted")).send().await.unwrap()).await;
        assert_eq!(status, 201, "an archived transaction gives its external_id back: {reply}");
        let listed = get(&server, &key, "/api/ledger_transactions?external_id=ext-1&status=posted").await;
        assert_eq!(listed.as_array().unwrap().len(), 1);
    }

    /// Racing writers with one external_id (on PostgreSQL they share group commits, whose
    /// unguarded postings write their documents before the verdict): one wins, and nothing of
    /// the others is left anywhere: no transaction, no entry, no event, no version.
    #[tokio::test]
    async fn g2_racing_transactions_with_one_external_id_leave_exactly_one() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (ledger, a, b) = books(&server, &key).await;
        let body = json!({"status": "posted", "external_id": "race-1", "ledger_entries": [entry(&a, "credit", 7), entry(&b, "debit", 7)]});
        let posts = (0..24).map(|_| {
            let (server, key, body) = (&server, &key, &body);
            async move { json(server.post("/api/ledger_transactions", key, body).send().await.unwrap()).await }
        });
        let replies = futures_util::future::join_all(posts).await;
        let won: Vec<&Value> = replies.iter().filter(|(status, _)| *status == 201).map(|(_, body)| body).collect();
        assert_eq!(won.len(), 1, "exactly one wins: {replies:?}");
        for (status, reply) in replies.iter().filter(|(status, _)| *status != 201) {
            assert_error(*status, reply, 422, "parameter_invalid");
            assert_eq!(reply["errors"]["parameter"], "external_id");
        }
        let winner = won[0]["id"].as_str().unwrap();
        let listed = get(&server, &key, &format!("/api/ledger_transactions?ledger_id={ledger}")).await;
        let ids: Vec<&str> = listed.as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
        assert_eq!(ids, [winner], "only the winner is listed");
        for account in [&a, &b] {
            let entries = get(&server, &key, &format!("/api/ledger_entries?ledger_account_id={account}")).await;
            assert_eq!(entries.as_array().unwrap().len(), 1, "one entry on {account}: {entries}");
            let doc = get(&server, &key, &format!("/api/ledger_accounts/{account}")).await;
            assert_eq!(doc["lock_version"], 1, "{doc}");
        }
        assert_eq!(amounts(&server, &key, &a, "").await, (7, 7, 7));
        let events = get(&server, &key, "/api/events?resource=ledger_transaction").await;
        let about: BTreeSet<&str> = events.as_array().unwrap().iter().map(|e| e["entity_id"].as_str().unwrap()).collect();
        assert_eq!(about, BTreeSet::from([winner]), "events only of the winner: {events}");
        let versions = get(&server, &key, &format!("/api/ledger_transactions/{winner}/versions")).await;
        assert_eq!(versions.as_array().unwrap().len(), 1, "{versions}");
    }

    #[tokio::test]
    async fn g1_versions_filter_by_version_range_and_created_at_as_the_sdks_send_them() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (_, a, b) = books(&server, &key).await;
        let (_, txn) = transfer(&server, &key, vec![entry(&a, "credit", 5), entry(&b, "debit", 5)], "pending").await;
        let id = txn["id"].as_str().unwrap();
        for patch in [json!({"metadata": {"step": "one"}}), json!({"status": "posted"})] {
            let (status, _) = json(server.patch(&format!("/api/ledger_transactions/{id}"), &key, &patch).send().await.unwrap()).await;
            assert_eq!(status, 200);
        }
        let versions = |query: String| {
            let (server, key) = (&server, &key);
            async move {
                let list = get(server, key, &format!("/api/ledger_transaction_versions?ledger_transaction_id={id}{query}")).await;
                list.as_array().unwrap().iter().map(|v| v["version"].as_i64().unwrap()).collect::<Vec<_>>()
            }
        };
        assert_eq!(versions(String::new()).await, [3, 2, 1]);
        assert_eq!(versions("&version%5Bgte%5D=2".into()).await, [3, 2], "the SDKs send version[gte]");
        assert_eq!(versions("&version%5Bgt%5D=1&version%5Blt%5D=3".into()).await, [2]);
        assert_eq!(versions("&version%5Beq%5D=1".into()).await, [1]);
        assert_eq!(versions("&version=3&version%5Blte%5D=3".into()).await, [3]);
        assert_eq!(versions("&version%5Blt%5D=0".into()).await, Vec::<i64>::new());
        assert_eq!(versions("&version%5Bgt%5D=3".into()).await, Vec::<i64>::new());
        assert_eq!(versions("&created_at%5Blt%5D=2000-01-01".into()).await, Vec::<i64>::new());
        assert_eq!(versions("&created_at%5Bgte%5D=2000-01-01+00%3A00%3A00%2B00%3A00".into()).await, [3, 2, 1]);
        let of = get(&server, &key, &format!("/api/ledger_transactions/{id}/versions?version%5Blte%5D=1")).await;
        assert_eq!(of.as_array().unwrap().len(), 1);
        for bad in ["version%5Bgte%5D=two", "version%5Beq%5D=-1", "version=1.5"] {
            let (status, body) = json(server.get(&format!("/api/ledger_transaction_versions?{bad}"), &key).send().await.unwrap()).await;
            assert_error(status, &body, 422, "parameter_invalid");
            assert!(body["errors"]["parameter"].as_str().unwrap().starts_with("version"), "{body}");
        }
    }

    #[tokio::test]
    async fn l1_g5_ledger_lists_read_sdk_encodings_and_refuse_an_order_they_cannot_keep() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (ledger, a, b) = books(&server, &key).await;
        let body = json!({"status": "posted", "effective_at": "2026-03-10T12:00:00Z", "ledger_entries": [entry(&a, "credit", 1), entry(&b, "debit", 1)]});
        let old = create(&server, &key, "/api/ledger_transactions", body).await;
        let (_, new) = transfer(&server, &key, vec![entry(&a, "credit", 2), entry(&b, "debit", 2)], "posted").await;
        let ids = |list: Value| list.as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
        // Python's SDK writes a datetime inside a filter dict as str(datetime): a space, not a T.
        let base = format!("/api/ledger_transactions?ledger_id={ledger}");
        let before = get(&server, &key, &format!("{base}&effective_at%5Blte%5D=2026-03-10+12%3A00%3A00%2B00%3A00")).await;
        assert_eq!(ids(before), [old["id"].as_str().unwrap()]);
        let after = get(&server, &key, &format!("{base}&effective_at%5Bgt%5D=2026-03-10+12%3A00%3A00.000001%2B00%3A00")).await;
        assert_eq!(ids(after), [new["id"].as_str().unwrap()]);
        let newest_first = get(&server, &key, &format!("{base}&order_by%5Bcreated_at%5D=desc")).await;
        assert_eq!(ids(newest_first), [new["id"].as_str().unwrap(), old["id"].as_str().unwrap()], "L1: the default order, asked for");
        for (path, order) in [("ledger_transactions", "order_by%5Beffective_at%5D=asc"), ("ledger_entries", "order_by%5Bcreated_at%5D=asc")] {
            let (status, reply) = json(server.get(&format!("/api/{path}?{order}"), &key).send().await.unwrap()).await;
            assert_error(status, &reply, 422, "parameter_invalid");
            assert!(reply["errors"]["parameter"].as_str().unwrap().starts_with("order_by["), "{reply}");
        }
    }

    #[tokio::test]
    async fn i4_a_retried_ledger_transaction_is_written_once() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (_, a, b) = books(&server, &key).await;
        let body = json!({"status": "posted", "ledger_entries": [entry(&a, "credit", 42), entry(&b, "debit", 42)]});
        let first = post_idem(&server, "/api/ledger_transactions", &key, "once", &body).await;
        let again = post_idem(&server, "/api/ledger_transactions", &key, "once", &body).await;
        assert_eq!(first.status, 201);
        assert_eq!(again.body, first.body);
        assert_eq!(again.replayed.as_deref(), Some("true"));
        assert_eq!(amounts(&server, &key, &a, "").await, (42, 42, 42));
    }

    #[tokio::test]
    async fn g6_racing_writers_on_a_hot_account_lose_nothing_and_never_overrun_a_condition() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (wallet, cash) = (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await);
        let (status, _) = transfer(&server, &key, vec![entry(&wallet, "credit", 1_000), entry(&cash, "debit", 1_000)], "posted").await;
        assert_eq!(status, 201);
        // 40 writers each try to spend 50 from 1,000 with `available >= 0`: exactly 20 may.
        let mut tasks = Vec::new();
        for _ in 0..40 {
            let (client, url, secret) = (server.client.clone(), server.url("/api/ledger_transactions"), key.secret.clone());
            let mut debit = entry(&wallet, "debit", 50);
            debit["available_balance_amount"] = json!({"gte": 0});
            let body = json!({"status": "posted", "ledger_entries": [debit, entry(&cash, "credit", 50)]});
            tasks.push(tokio::spawn(async move { client.post(url).basic_auth("x-api-key", Some(secret)).json(&body).send().await.unwrap().status().as_u16() }));
        }
        let mut statuses = Vec::new();
        for task in tasks {
            statuses.push(task.await.unwrap());
        }
        assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 20, "{statuses:?}");
        assert!(statuses.iter().all(|s| *s == 201 || *s == 422), "{statuses:?}");
        assert_eq!(amounts(&server, &key, &wallet, "").await, (0, 0, 0));
        let account_doc = get(&server, &key, &format!("/api/ledger_accounts/{wallet}")).await;
        assert_eq!(account_doc["lock_version"], 21);
    }

    #[tokio::test]
    async fn g7_an_order_s_ledger_transaction_follows_the_order() {
        let server = TestServer::start_with(|c| c.sandbox_step_ms = 0).await;
        let key = server.key().await;
        let (cash, payable, internal, receiving) = order_books(&server, &key).await;
        let order = |amount: i64| json!({
            "type": "ach", "amount": amount, "direction": "credit",
            "originating_account_id": internal, "receiving_account_id": receiving,
            "ledger_transaction": {"description": "payout", "ledger_entries": [entry(&payable, "debit", amount), entry(&cash, "credit", amount)]}
        });
        // Completed: pending while in flight, then posted.
        let completed = create(&server, &key, "/api/payment_orders", order(700)).await;
        let txn_id = completed["ledger_transaction_id"].as_str().expect("the order names its ledger transaction").to_owned();
        let txn = get(&server, &key, &format!("/api/ledger_transactions/{txn_id}")).await;
        assert_eq!(txn["ledgerable_type"], "payment_order");
        assert_eq!(txn["ledgerable_id"], completed["id"]);
        let txn = wait_for_ledger_status(&server, &key, &txn_id, "posted").await;
        assert!(txn["posted_at"].is_string());
        let order_now = get(&server, &key, &format!("/api/payment_orders/{}", completed["id"].as_str().unwrap())).await;
        assert_eq!(order_now["status"], "completed");
        // Its order's return reverses it: a reversal by hand as well would count the money's
        // return twice, or leave the return nothing to reverse (found by the ledger2 audit).
        let (status, body) = json(server.post(&format!("/api/ledger_transactions/{txn_id}/reversal"), &key, &json!({})).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "id", "{body}");
        // Failed (sandbox magic amount 1313): archived, counting nowhere.
        let failed = create(&server, &key, "/api/payment_orders", order(1313)).await;
        wait_for_ledger_status(&server, &key, failed["ledger_transaction_id"].as_str().unwrap(), "archived").await;
        // Returned (magic amount 4040): stays posted, and a reversing transaction is written.
        let returned = create(&server, &key, "/api/payment_orders", order(4040)).await;
        let returned_txn = returned["ledger_transaction_id"].as_str().unwrap();
        let mut reversal = Value::Null;
        for _ in 0..200 {
            let txn = get(&server, &key, &format!("/api/ledger_transactions/{returned_txn}")).await;
            if txn["reversed_by_ledger_transaction_id"].is_string() {
                assert_eq!(txn["status"], "posted");
                reversal = get(&server, &key, &format!("/api/ledger_transactions/{}", txn["reversed_by_ledger_transaction_id"].as_str().unwrap())).await;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(reversal["reverses_ledger_transaction_id"], returned_txn, "a reversing transaction was written");
        assert_eq!(reversal["ledgerable_type"], "return");
        // Effective when the money came back, not backdated to when it left (as-of balances of
        // the days between keep the money out).
        let original = get(&server, &key, &format!("/api/ledger_transactions/{returned_txn}")).await;
        let (left, came_back) = (original["effective_at"].as_str().unwrap(), reversal["effective_at"].as_str().unwrap());
        let return_id = reversal["ledgerable_id"].as_str().unwrap();
        let the_return = get(&server, &key, &format!("/api/returns/{return_id}")).await;
        assert!(came_back > left, "the return's reversal is effective at {came_back}, the payout at {left}");
        assert!(came_back >= the_return["created_at"].as_str().unwrap(), "{came_back} vs {the_return}");
        // Nor is the return's reversal: undoing it would put the returned money back out while
        // the order says returned (found by the re-audit).
        let reversal_id = reversal["id"].as_str().unwrap();
        let (status, body) = json(server.post(&format!("/api/ledger_transactions/{reversal_id}/reversal"), &key, &json!({})).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        // Only the completed payout is left on the books.
        assert_eq!(amounts(&server, &key, &payable, "").await, (-700, -700, -700));
        // A linked transaction's status cannot be set by hand.
        let (status, body) = json(server.patch(&format!("/api/ledger_transactions/{returned_txn}"), &key, &json!({"status": "archived"})).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
    }

    /// MT's GET of a ledger account or transaction takes its `external_id` as well as its id
    /// (a transaction's only while it is not archived); found missing by the ledger2 audit.
    #[tokio::test]
    async fn g1_accounts_and_transactions_are_read_by_external_id_as_mt_serves_them() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let (ledger_id, a, b) = books(&server, &key).await;
        let body = json!({"name": "wallet", "ledger_id": ledger_id, "normal_balance": "credit", "currency": "USD", "external_id": "wallet-7"});
        let wallet = create(&server, &key, "/api/ledger_accounts", body).await;
        assert_eq!(get(&server, &key, "/api/ledger_accounts/wallet-7").await["id"], wallet["id"]);
        let transfer_with = |external_id: &str, status: &str| json!({"status": status, "external_id": external_id, "ledger_entries": [entry(&a, "credit", 5), entry(&b, "debit", 5)]});
        let posted = create(&server, &key, "/api/ledger_transactions", transfer_with("payout-1", "posted")).await;
        assert_eq!(get(&server, &key, "/api/ledger_transactions/payout-1").await["id"], posted["id"]);
        // An archived transaction is not found by its external_id (which it gave back).
        let pending = create(&server, &key, "/api/ledger_transactions", transfer_with("payout-2", "pending")).await;
        assert_eq!(get(&server, &key, "/api/ledger_transactions/payout-2").await["id"], pending["id"]);
        let path = format!("/api/ledger_transactions/{}", pending["id"].as_str().unwrap());
        let (status, _) = json(server.patch(&path, &key, &json!({"status": "archived"})).send().await.unwrap()).await;
        assert_eq!(status, 200);
        let (status, body) = json(server.get("/api/ledger_transactions/payout-2", &key).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
        // An external id two ledgers share names neither.
        let other = ledger(&server, &key).await;
        let body = json!({"name": "wallet", "ledger_id": other, "normal_balance": "credit", "currency": "USD", "external_id": "wallet-7"});
        create(&server, &key, "/api/ledger_accounts", body).await;
        let (status, body) = json(server.get("/api/ledger_accounts/wallet-7", &key).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        // Another organization's external id names nothing here.
        let stranger = server.key_for("elsewhere", Mode::Sandbox).await;
        let (status, body) = json(server.get("/api/ledger_transactions/payout-1", &stranger).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
    }

    #[tokio::test]
    async fn g7_an_invalid_inline_transaction_refuses_the_order() {
        let server = TestServer::start_with(|c| c.sandbox_step_ms = 3_600_000).await;
        let key = server.key().await;
        let (cash, payable, internal, receiving) = order_books(&server, &key).await;
        let with = |ledger_transaction: Value| json!({
            "type": "ach", "amount": 100, "direction": "credit",
            "originating_account_id": internal, "receiving_account_id": receiving,
            "ledger_transaction": ledger_transaction
        });
        let mut stale = entry(&payable, "debit", 100);
        stale["lock_version"] = json!(7);
        for (body, status, parameter) in [
            (with(json!({"ledger_entries": [entry(&payable, "debit", 100), entry(&cash, "credit", 99)]})), 422, "ledger_transaction.ledger_entries"),
            (with(json!({"ledger_entries": [entry(&payable, "debit", 100), entry(&cash, "nowhere", 100)]})), 422, "ledger_transaction.ledger_entries[1].direction"),
            (with(json!({"status": "posted", "ledger_entries": [entry(&payable, "debit", 100), entry(&cash, "credit", 100)]})), 422, "ledger_transaction.status"),
            (with(json!({"ledger_entries": [stale, entry(&cash, "credit", 100)]})), 409, "ledger_transaction.ledger_entries[0].lock_version"),
        ] {
            let (got, reply) = json(server.post("/api/payment_orders", &key, &body).send().await.unwrap()).await;
            assert_eq!(got, status, "{reply}");
            assert_eq!(reply["errors"]["parameter"], parameter, "{reply}");
        }
        let (_, orders) = json(server.get("/api/payment_orders", &key).send().await.unwrap()).await;
        assert_eq!(orders.as_array().unwrap().len(), 0, "no order was created");
        assert_eq!(amounts(&server, &key, &payable, "").await, (0, 0, 0));
    }
}

on_both_stores! {
    /// Found probing edge amounts beside compat/fuzz-mt.sh: a settlement whose balance is past what one entry carries
    /// (two posted entries of 2^53 - 1) was refused naming `amount`, a parameter the request
    /// does not have; the refusal names the settled account, and nothing is written.
    #[tokio::test]
    async fn g2_a_settlement_past_the_largest_entry_amount_names_the_settled_account() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (wallet, cash) = (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await);
        let max = (1_i64 << 53) - 1;
        for _ in 0..2 {
            let (status, reply) = transfer(&server, &key, vec![entry(&wallet, "credit", max), entry(&cash, "debit", max)], "posted").await;
            assert_eq!(status, 201, "{reply}");
        }
        let body = json!({"settled_ledger_account_id": wallet, "contra_ledger_account_id": cash});
        let (status, reply) = json(server.post("/api/ledger_account_settlements", &key, &body).send().await.unwrap()).await;
        assert_error(status, &reply, 422, "parameter_invalid");
        assert_eq!(reply["errors"]["parameter"], "settled_ledger_account_id", "{reply}");
        assert_eq!(amounts(&server, &key, &wallet, "").await, (2 * max, 2 * max, 2 * max), "nothing was settled");
        let listed = get(&server, &key, "/api/ledger_account_settlements").await;
        assert_eq!(listed, json!([]), "no settlement was written");
        // Without a transaction to write, the same balance settles (as a record of it).
        let body = json!({"settled_ledger_account_id": wallet, "contra_ledger_account_id": cash, "skip_settlement_ledger_transaction": true});
        let (status, reply) = json(server.post("/api/ledger_account_settlements", &key, &body).send().await.unwrap()).await;
        assert_eq!((status, reply["amount"].clone()), (201, json!(2 * max)), "{reply}");
    }
}

on_both_stores! {
    /// Found probing edge amounts beside compat/fuzz-mt.sh: each running sum of an account was
    /// checked on its own, so posted and pending credits that each fit in an i64 but not
    /// together were written, and from then on every read of the account (and any list of its
    /// ledger) answered 422. The posting that would make a served balance unrepresentable is
    /// the one refused; the account stays readable.
    #[tokio::test]
    async fn g3_a_posting_past_the_largest_pending_balance_is_refused_and_the_account_stays_readable() {
        let server = TestServer::start().await;
        let key = server.key().await;
        let ledger = ledger(&server, &key).await;
        let (wallet, cash) = (account(&server, &key, &ledger, "credit").await, account(&server, &key, &ledger, "debit").await);
        let max = (1_i64 << 53) - 1;
        let hundred = |status: &str| {
            let mut entries: Vec<Value> = (0..100).map(|_| entry(&wallet, "credit", max)).collect();
            entries.extend((0..100).map(|_| entry(&cash, "debit", max)));
            json!({"ledger_entries": entries, "status": status})
        };
        let post = |body: Value| {
            let server = &server;
            let key = &key;
            async move { json(server.post("/api/ledger_transactions", key, &body).send().await.unwrap()).await }
        };
        for _ in 0..6 {
            let (status, reply) = post(hundred("posted")).await;
            assert_eq!(status, 201, "{reply}");
        }
        // 600 posted and 400 pending credits of 2^53 - 1 fit in an i64; 500 pending do not.
        for _ in 0..4 {
            let (status, reply) = post(hundred("pending")).await;
            assert_eq!(status, 201, "{reply}");
        }
        let (status, reply) = post(hundred("pending")).await;
        assert_error(status, &reply, 422, "parameter_invalid");
        assert_eq!(reply["errors"]["parameter"], "ledger_entries", "{reply}");
        assert_eq!(amounts(&server, &key, &wallet, "").await, (1000 * max, 600 * max, 600 * max));
        assert_eq!(amounts(&server, &key, &cash, "").await, (1000 * max, 600 * max, 600 * max));
        let listed = get(&server, &key, &format!("/api/ledger_accounts?ledger_id={ledger}")).await;
        assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    }
}

on_both_stores! {
/// L2: a filter Payrail knows is honoured or refused, never ignored: a bare `created_at` is
/// `[eq]`, a versions list takes MT's `id[]`, and a misspelt `balances[...]` key or a
/// `show_deleted` that is no boolean is a 422 naming it (ignoring them answered the unfiltered
/// list, or current balances that looked like the ones asked for).
#[tokio::test]
async fn l2_known_ledger_filters_are_honoured_or_refused_never_ignored() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let (_, a, b) = books(&server, &key).await;
    let (status, txn) = transfer(&server, &key, vec![entry(&a, "credit", 5), entry(&b, "debit", 5)], "pending").await;
    assert_eq!(status, 201, "{txn}");
    let id = txn["id"].as_str().unwrap();
    let (status, _) = json(server.patch(&format!("/api/ledger_transactions/{id}"), &key, &json!({"description": "v2"})).send().await.unwrap()).await;
    assert_eq!(status, 200);
    let versions = get(&server, &key, &format!("/api/ledger_transactions/{id}/versions")).await;
    let first = versions[1]["id"].as_str().unwrap().to_owned();
    for path in [
        format!("/api/ledger_transactions/{id}/versions?id%5B%5D={first}"),
        format!("/api/ledger_transaction_versions?ledger_transaction_id={id}&id%5B%5D={first}"),
    ] {
        let listed = get(&server, &key, &path).await;
        assert_eq!(listed.as_array().map(|l| l.len()), Some(1), "{path}: {listed}");
        assert_eq!(listed[0]["id"], first.as_str());
    }
    assert_eq!(get(&server, &key, &format!("/api/ledger_transactions/{id}/versions?id%5B%5D=nothing")).await, json!([]));

    let created = get(&server, &key, &format!("/api/ledger_accounts/{a}")).await["created_at"].as_str().unwrap().to_owned();
    let listed = get(&server, &key, &format!("/api/ledger_accounts?created_at={created}")).await;
    let ids: Vec<&str> = listed.as_array().unwrap().iter().map(|x| x["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [a.as_str()], "a bare created_at is [eq]");
    assert_eq!(get(&server, &key, "/api/ledger_accounts?created_at=2020-01-01T00:00:00Z").await, json!([]));

    for (path, parameter) in [
        ("/api/ledger_accounts?balances%5Bas_of_dat%5D=2026-01-09".to_owned(), "balances[as_of_dat]"),
        (format!("/api/ledger_accounts/{a}?balances%5Bas_of_dat%5D=2026-01-09"), "balances[as_of_dat]"),
        ("/api/ledger_account_categories?balances%5Bfoo%5D=x".to_owned(), "balances[foo]"),
        ("/api/ledger_entries?show_deleted=bad".to_owned(), "show_deleted"),
    ] {
        let (status, body) = json(server.get(&path, &key).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], parameter, "{path}: {body}");
    }
    get(&server, &key, "/api/ledger_entries?show_deleted=false").await;
}
}
