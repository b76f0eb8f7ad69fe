//! The sandbox bank (SPEC B7): sandbox orders travel through the same pipeline as live ones
//! (cut-off, file, the bank's answer files, the inbound reader), and the bank answers as Modern
//! Treasury's sandbox does on the receiving account number: `123456789` settles (a transaction
//! that reconciles the order), `100XX` is returned (ACH with `RXX`, wires without a code),
//! `11111111...` fails; an expected payment gets a matching transaction within seconds.

#[macro_use]
mod common;

use std::time::Duration;

use common::{Key, TestServer, json};
use serde_json::{Value, json};

async fn fast_bank() -> TestServer {
    TestServer::start_with(|c| c.sandbox_step_ms = 0).await
}

async fn account(server: &TestServer, key: &Key) -> String {
    let body = json!({"name": "Operating", "currency": "USD", "party_name": "Acme Corp"});
    let (status, created) = json(server.post("/api/internal_accounts", key, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "{created}");
    created["id"].as_str().unwrap().to_owned()
}

fn receiving(number: &str) -> Value {
    json!({
        "party_name": "Jane Doe",
        "party_address": {"line1": "1 Main St", "locality": "Springfield", "region": "IL", "postal_code": "62701", "country": "US"},
        "account_type": "checking",
        "account_details": [{"account_number": number}],
        "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}],
    })
}

async fn order(server: &TestServer, key: &Key, account: &str, kind: &str, number: &str, amount: i64) -> String {
    let body = json!({"type": kind, "amount": amount, "direction": "credit", "originating_account_id": account, "receiving_account": receiving(number)});
    let (status, created) = json(server.post("/api/payment_orders", key, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "{created}");
    created["id"].as_str().unwrap().to_owned()
}

async fn get(server: &TestServer, key: &Key, path: &str) -> Value {
    let (status, body) = json(server.get(path, key).send().await.unwrap()).await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// Polls `path` until `done` holds (bounded: 20 s).
async fn wait_until(server: &TestServer, key: &Key, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..400 {
        let body = get(server, key, path).await;
        if done(&body) {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{path} never got there: {}", get(server, key, path).await);
}

async fn final_status(server: &TestServer, key: &Key, id: &str, status: &'static str) -> Value {
    wait_until(server, key, &format!("/api/payment_orders/{id}"), |o| o["status"] == status).await
}

on_both_stores! {
    /// B7: the receiving account number decides, for ACH and wires; a settled order is completed
    /// by a booked transaction that names it (reconciled, a line item to the order).
    #[tokio::test]
    async fn b7_the_sandbox_bank_answers_by_receiving_account_number() {
        let server = fast_bank().await;
        let key = server.key().await;
        let account = account(&server, &key).await;
        let settles = order(&server, &key, &account, "ach", "123456789", 2_500).await;
        let returns = order(&server, &key, &account, "ach", "10003", 2_600).await;
        let fails = order(&server, &key, &account, "ach", "111111119999", 2_700).await;
        let wire_returns = order(&server, &key, &account, "wire", "10029", 2_800).await;

        let completed = final_status(&server, &key, &settles, "completed").await;
        let txn_id = completed["transaction_ids"][0].as_str().expect("the booked transaction is linked").to_owned();
        let txn = get(&server, &key, &format!("/api/transactions/{txn_id}")).await;
        assert_eq!((txn["amount"].as_i64(), txn["direction"].as_str(), txn["reconciled"].as_bool()), (Some(2_500), Some("debit"), Some(true)));
        assert_eq!(txn["internal_account_id"], account.as_str());
        let items = get(&server, &key, &format!("/api/transactions/{txn_id}/line_items")).await;
        assert_eq!(items[0]["transactable_id"], settles.as_str(), "{items}");

        let returned = final_status(&server, &key, &returns, "returned").await;
        assert_eq!(returned["current_return"]["code"], "R03", "{returned}");
        let ret_id = returned["current_return"]["id"].as_str().unwrap();
        assert_eq!(get(&server, &key, &format!("/api/returns/{ret_id}")).await["returnable_id"], returns.as_str());
        // The bank books the returned money back, and that booking settles the return.
        let settled = wait_until(&server, &key, &format!("/api/returns/{ret_id}"), |r| r["transaction_id"].is_string()).await;
        assert_eq!(settled["reconciliation_status"], "reconciled", "{settled}");
        let back = get(&server, &key, &format!("/api/transactions/{}", settled["transaction_id"].as_str().unwrap())).await;
        assert_eq!((back["amount"].as_i64(), back["direction"].as_str(), back["type"].as_str()), (Some(2_600), Some("credit"), Some("ach")), "{back}");
        let order = get(&server, &key, &format!("/api/payment_orders/{returns}")).await;
        assert_eq!(order["transaction_ids"].as_array().map(Vec::len), Some(2), "the payout and the money back: {order}");
        assert_eq!(order["current_return"]["code"], "R03", "{order}");
        let all = get(&server, &key, &format!("/api/returns?returnable_id={returns}")).await;
        assert_eq!(all.as_array().map(Vec::len), Some(1), "one return, though both the statement and the return file told it: {all}");

        let failed = final_status(&server, &key, &fails, "failed").await;
        assert!(failed["vendor_failure_reason"].as_str().is_some_and(|r| r.starts_with("AC06")), "{failed}");

        let wire = final_status(&server, &key, &wire_returns, "returned").await;
        assert_eq!(wire["current_return"]["code"], Value::Null, "a wire comes back without a code: {wire}");
        let events = get(&server, &key, &format!("/api/events?entity_id={wire_returns}&per_page=100")).await;
        let mut names: Vec<&str> = events.as_array().unwrap().iter().map(|e| e["event_name"].as_str().unwrap()).collect();
        names.reverse();
        assert_eq!(names, ["created", "begin_processing", "sent", "completed", "returned"]);
    }

    /// B7, B5: the sandbox bank's statements book each payment under its own rail, as a bank's
    /// do: an RTP payment's transaction, and its return's, are `rtp`, a wire's `wire` (MT's
    /// transaction `type`, which lists filter on).
    #[tokio::test]
    async fn b7_transactions_carry_their_orders_rail() {
        let server = fast_bank().await;
        let key = server.key().await;
        let account = account(&server, &key).await;
        let cases = [("rtp", "123456789", "completed"), ("rtp", "10003", "returned"), ("wire", "123456789", "completed")];
        for (kind, number, status) in cases {
            let id = order(&server, &key, &account, kind, number, 3_100).await;
            let done = final_status(&server, &key, &id, status).await;
            let booked = done["transaction_ids"].as_array().unwrap();
            assert_eq!(booked.len(), if status == "returned" { 2 } else { 1 }, "{done}");
            for transaction_id in booked {
                let transaction = get(&server, &key, &format!("/api/transactions/{}", transaction_id.as_str().unwrap())).await;
                assert_eq!(transaction["type"], kind, "{kind} to {number}: {transaction}");
            }
        }
    }

    /// B7: an expected payment gets a matching transaction from the sandbox bank within seconds
    /// and is reconciled to it.
    #[tokio::test]
    async fn b7_an_expected_payment_is_booked_and_reconciled_within_seconds() {
        let server = fast_bank().await;
        let key = server.key().await;
        let account = account(&server, &key).await;
        // Of a rail that travels in a file, and of one that does not (a check: the statement
        // line names its type, which must still match).
        for kind in ["ach", "check"] {
            let body = json!({"amount_lower_bound": 10_000, "amount_upper_bound": 10_500, "direction": "credit", "internal_account_id": account, "currency": "USD", "type": kind});
            let (status, expected) = json(server.post("/api/expected_payments", &key, &body).send().await.unwrap()).await;
            assert_eq!(status, 201, "{expected}");
            let id = expected["id"].as_str().unwrap();
            let reconciled = wait_until(&server, &key, &format!("/api/expected_payments/{id}"), |e| e["status"] == "reconciled").await;
            let txn_id = reconciled["transaction_id"].as_str().expect("reconciled to a transaction");
            let txn = get(&server, &key, &format!("/api/transactions/{txn_id}")).await;
            assert_eq!((txn["amount"].as_i64(), txn["direction"].as_str(), txn["reconciled"].as_bool()), (Some(10_000), Some("credit"), Some(true)));
            assert_eq!((txn["internal_account_id"].as_str(), txn["type"].as_str()), (Some(account.as_str()), Some(kind)));
        }
    }

    /// B7: an expected payment whose bounds allow no positive amount (0 to 0) gets no booking
    /// (a bank books no payment of nothing) and stays unreconciled, and the bank goes on
    /// answering everything else.
    #[tokio::test]
    async fn b7_an_expected_payment_of_nothing_is_not_booked_and_holds_nothing_up() {
        let server = fast_bank().await;
        let key = server.key().await;
        let account = account(&server, &key).await;
        let expect = |lower: i64, upper: i64| json!({"amount_lower_bound": lower, "amount_upper_bound": upper, "direction": "credit",
            "internal_account_id": account, "currency": "USD", "type": "ach"});
        let (status, nothing) = json(server.post("/api/expected_payments", &key, &expect(0, 0)).send().await.unwrap()).await;
        assert_eq!(status, 201, "{nothing}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (status, something) = json(server.post("/api/expected_payments", &key, &expect(700, 900)).send().await.unwrap()).await;
        assert_eq!(status, 201, "{something}");
        let settles = order(&server, &key, &account, "ach", "123456789", 1_900).await;

        wait_until(&server, &key, &format!("/api/expected_payments/{}", something["id"].as_str().unwrap()), |e| e["status"] == "reconciled").await;
        final_status(&server, &key, &settles, "completed").await;
        let still = get(&server, &key, &format!("/api/expected_payments/{}", nothing["id"].as_str().unwrap())).await;
        assert_eq!(still["status"], "unreconciled", "{still}");
        let transactions = get(&server, &key, "/api/transactions?per_page=100").await;
        let mut amounts: Vec<i64> = transactions.as_array().unwrap().iter().map(|t| t["amount"].as_i64().unwrap()).collect();
        amounts.sort();
        assert_eq!(amounts, [700, 1_900], "one booking for the expected payment of 7.00, one for the order, none of 0");
    }

    /// B7: an expected payment that names a counterparty is paid, in the sandbox bank's
    /// statement, from that counterparty's account, so it reconciles as a live one would.
    #[tokio::test]
    async fn b7_an_expected_payment_from_a_counterparty_is_paid_from_its_account() {
        let server = fast_bank().await;
        let key = server.key().await;
        let account = account(&server, &key).await;
        let body = json!({"name": "Acme Payer", "accounts": [{"account_details": [{"account_number": "000555111"}],
            "routing_details": [{"routing_number": "021000021", "routing_number_type": "aba"}]}]});
        let (status, counterparty) = json(server.post("/api/counterparties", &key, &body).send().await.unwrap()).await;
        assert_eq!(status, 201, "{counterparty}");
        let body = json!({"amount_lower_bound": 2_500, "amount_upper_bound": 2_500, "direction": "credit", "internal_account_id": account,
            "currency": "USD", "counterparty_id": counterparty["id"]});
        let (status, expected) = json(server.post("/api/expected_payments", &key, &body).send().await.unwrap()).await;
        assert_eq!(status, 201, "{expected}");
        let id = expected["id"].as_str().unwrap();
        let reconciled = wait_until(&server, &key, &format!("/api/expected_payments/{id}"), |e| e["status"] == "reconciled").await;
        let txn = get(&server, &key, &format!("/api/transactions/{}", reconciled["transaction_id"].as_str().unwrap())).await;
        assert_eq!((txn["details"]["counterparty_name"].as_str(), txn["details"]["counterparty_account_number"].as_str()),
            (Some("Acme Payer"), Some("000555111")), "{txn}");
    }
}
