//! SPEC G2 to G6 as properties: random concurrent streams of ledger writes (transactions pending
//! and posted, backdated, some with a stale or fresh `lock_version`, spends guarded by
//! `available >= 0`, posts, archives and reversals of earlier ones) run against the real server,
//! and after every round the books are checked from outside:
//! - every currency sums to zero across the ledger (posted, and posted plus pending);
//! - each account's balances equal the sums of its listed entries;
//! - each balance as of an instant equals the sum of the entries effective up to it;
//! - `lock_version` counts the account's entries;
//! - the guarded account's available balance never went below zero.
//!
//! Every reply must be 2xx, 409 or 422: a 500 or a lost write fails the property. The seed is
//! printed; `LEDGER_PROPERTY_SEED` replays one.

#[macro_use]
mod common;

use std::sync::{Arc, Mutex};

use common::{Key, TestServer, json};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const ACCOUNTS: usize = 6;
const ROUNDS: usize = 5;
const WRITERS: usize = 8;
const OPS_PER_WRITER: usize = 6;
/// Effective times spread over this many days before now: most writes are backdated.
const DAYS_BACK: i64 = 30;

struct Books {
    server: TestServer,
    key: Key,
    accounts: Vec<String>,
    guarded: String,
    /// Transactions written, by id, with whether they are pending (posts and archives pick here).
    pending: Mutex<Vec<String>>,
    posted: Mutex<Vec<String>>,
}

async fn call(server: &TestServer, key: &Key, method: reqwest::Method, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut request = server.req(method, path, key);
    if let Some(body) = body {
        request = request.json(body);
    }
    json(request.send().await.expect("request")).await
}

fn instant(days_ago: i64, second: i64) -> String {
    let now = time::OffsetDateTime::now_utc();
    let at = now - time::Duration::days(days_ago) + time::Duration::seconds(second);
    at.format(&time::format_description::well_known::Rfc3339).unwrap()
}

impl Books {
    async fn open(server: TestServer) -> Books {
        let key = server.key().await;
        let (status, ledger) = call(&server, &key, reqwest::Method::POST, "/api/ledgers", Some(&json!({"name": "Property books"}))).await;
        assert_eq!(status, 201, "{ledger}");
        let ledger_id = ledger["id"].as_str().unwrap().to_owned();
        let mut accounts = Vec::new();
        for i in 0..=ACCOUNTS {
            let normal = if i % 2 == 0 { "credit" } else { "debit" };
            let body = json!({"name": format!("a{i}"), "ledger_id": ledger_id, "normal_balance": normal, "currency": "USD"});
            let (status, account) = call(&server, &key, reqwest::Method::POST, "/api/ledger_accounts", Some(&body)).await;
            assert_eq!(status, 201, "{account}");
            accounts.push(account["id"].as_str().unwrap().to_owned());
        }
        let guarded = accounts.pop().unwrap();
        Books { server, key, accounts, guarded, pending: Mutex::new(Vec::new()), posted: Mutex::new(Vec::new()) }
    }

    /// One random write; panics on any reply but 2xx, 409 and 422.
    async fn random_write(&self, rng: &mut StdRng) {
        let choice = rng.random_range(0..10);
        let (status, body) = match choice {
            0..=4 => self.transfer(rng).await,
            5 | 6 => self.spend_guarded(rng).await,
            7 => self.settle(rng).await,
            8 => self.reverse(rng).await,
            _ => self.with_lock_version(rng).await,
        };
        assert!(matches!(status, 200 | 201 | 409 | 422), "write {choice} answered {status}: {body}");
        if status == 201 && body["object"] == "ledger_transaction" {
            if body["status"] == "pending" {
                self.pending.lock().unwrap().push(body["id"].as_str().unwrap().to_owned());
            } else if !self.touches_guarded(&body) {
                self.posted.lock().unwrap().push(body["id"].as_str().unwrap().to_owned());
            }
        }
    }

    /// Whether a transaction writes to the guarded account: such ones are never reversed here,
    /// since a reversal carries no balance condition and may legitimately overdraw it.
    fn touches_guarded(&self, txn: &Value) -> bool {
        txn["ledger_entries"].as_array().into_iter().flatten().any(|e| e["ledger_account_id"] == self.guarded.as_str())
    }

    fn entries(&self, rng: &mut StdRng) -> Vec<Value> {
        let amount = rng.random_range(1..=1_000);
        let from = rng.random_range(0..self.accounts.len());
        let to = (from + rng.random_range(1..self.accounts.len())) % self.accounts.len();
        vec![
            json!({"ledger_account_id": self.accounts[from], "direction": "debit", "amount": amount}),
            json!({"ledger_account_id": self.accounts[to], "direction": "credit", "amount": amount}),
        ]
    }

    fn head(&self, rng: &mut StdRng, entries: Vec<Value>) -> Value {
        let status = if rng.random_bool(0.4) { "pending" } else { "posted" };
        let at = instant(rng.random_range(0..DAYS_BACK), rng.random_range(0..86_400));
        json!({"status": status, "effective_at": at, "ledger_entries": entries})
    }

    async fn transfer(&self, rng: &mut StdRng) -> (u16, Value) {
        let entries = self.entries(rng);
        let body = self.head(rng, entries);
        call(&self.server, &self.key, reqwest::Method::POST, "/api/ledger_transactions", Some(&body)).await
    }

    /// Funds or spends the guarded account; a spend carries `available >= 0`.
    async fn spend_guarded(&self, rng: &mut StdRng) -> (u16, Value) {
        let amount = rng.random_range(1..=800);
        let other = &self.accounts[rng.random_range(0..self.accounts.len())];
        let entries = if rng.random_bool(0.35) {
            vec![
                json!({"ledger_account_id": self.guarded, "direction": "credit", "amount": amount}),
                json!({"ledger_account_id": other, "direction": "debit", "amount": amount}),
            ]
        } else {
            vec![
                json!({"ledger_account_id": self.guarded, "direction": "debit", "amount": amount, "available_balance_amount": {"gte": 0}}),
                json!({"ledger_account_id": other, "direction": "credit", "amount": amount}),
            ]
        };
        let body = self.head(rng, entries);
        call(&self.server, &self.key, reqwest::Method::POST, "/api/ledger_transactions", Some(&body)).await
    }

    async fn settle(&self, rng: &mut StdRng) -> (u16, Value) {
        let picked = {
            let mut pending = self.pending.lock().unwrap();
            if pending.is_empty() {
                None
            } else {
                let at = rng.random_range(0..pending.len());
                Some(pending.swap_remove(at))
            }
        };
        let Some(id) = picked else { return self.transfer(rng).await };
        let to = if rng.random_bool(0.6) { "posted" } else { "archived" };
        let reply =
            call(&self.server, &self.key, reqwest::Method::PATCH, &format!("/api/ledger_transactions/{id}"), Some(&json!({"status": to})))
                .await;
        if reply.0 == 200 && to == "posted" && !self.touches_guarded(&reply.1) {
            self.posted.lock().unwrap().push(id);
        }
        reply
    }

    async fn reverse(&self, rng: &mut StdRng) -> (u16, Value) {
        let picked = {
            let mut posted = self.posted.lock().unwrap();
            if posted.is_empty() {
                None
            } else {
                let at = rng.random_range(0..posted.len());
                Some(posted.swap_remove(at))
            }
        };
        let Some(id) = picked else { return self.transfer(rng).await };
        call(&self.server, &self.key, reqwest::Method::POST, &format!("/api/ledger_transactions/{id}/reversal"), Some(&json!({}))).await
    }

    /// A transfer whose first entry names the account's lock_version as just read: a racing
    /// writer makes it stale (409), otherwise it lands.
    async fn with_lock_version(&self, rng: &mut StdRng) -> (u16, Value) {
        let mut entries = self.entries(rng);
        let account = entries[0]["ledger_account_id"].as_str().unwrap().to_owned();
        let (_, read) = call(&self.server, &self.key, reqwest::Method::GET, &format!("/api/ledger_accounts/{account}"), None).await;
        entries[0]["lock_version"] = read["lock_version"].clone();
        let body = self.head(rng, entries);
        call(&self.server, &self.key, reqwest::Method::POST, "/api/ledger_transactions", Some(&body)).await
    }

    /// Every entry of `account`, all pages.
    async fn entries_of(&self, account: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor = String::new();
        loop {
            let path = format!("/api/ledger_entries?ledger_account_id={account}&per_page=100&after_cursor={cursor}");
            let response = self.server.get(&path, &self.key).send().await.unwrap();
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

    async fn check(&self, rng: &mut StdRng) {
        let mut instants: Vec<String> = (0..3).map(|_| instant(rng.random_range(0..DAYS_BACK), rng.random_range(0..86_400))).collect();
        // The far future: every bucket summed must give the account's current sums.
        instants.push("9999-12-31T23:59:59Z".into());
        let (mut posted_net, mut pending_net) = (0i64, 0i64);
        let mut all = self.accounts.clone();
        all.push(self.guarded.clone());
        for account in &all {
            let entries = self.entries_of(account).await;
            let (_, doc) = call(&self.server, &self.key, reqwest::Method::GET, &format!("/api/ledger_accounts/{account}"), None).await;
            assert_eq!(doc["lock_version"].as_u64().unwrap() as usize, entries.len(), "lock_version counts the entries of {account}");
            let sums = sums(&entries, None);
            let b = &doc["balances"];
            assert_eq!(
                (b["posted_balance"]["credits"].as_i64().unwrap(), b["posted_balance"]["debits"].as_i64().unwrap()),
                (sums.0, sums.1),
                "posted sums of {account}"
            );
            assert_eq!(
                (b["pending_balance"]["credits"].as_i64().unwrap(), b["pending_balance"]["debits"].as_i64().unwrap()),
                (sums.0 + sums.2, sums.1 + sums.3),
                "pending sums of {account}"
            );
            posted_net += sums.0 - sums.1;
            pending_net += sums.0 + sums.2 - sums.1 - sums.3;
            for at in &instants {
                let path = format!("/api/ledger_accounts/{account}?balances%5Beffective_at%5D={}", at.replace('+', "%2B"));
                let (status, as_of) = call(&self.server, &self.key, reqwest::Method::GET, &path, None).await;
                assert_eq!(status, 200, "{as_of}");
                let expected = sums_upto(&entries, at);
                let b = &as_of["balances"];
                assert_eq!(
                    (b["posted_balance"]["credits"].as_i64().unwrap(), b["posted_balance"]["debits"].as_i64().unwrap()),
                    (expected.0, expected.1),
                    "as-of {at} of {account}"
                );
                assert_eq!(b["pending_balance"]["credits"].as_i64().unwrap(), expected.0 + expected.2, "as-of {at} of {account}");
            }
            if *account == self.guarded {
                assert!(b["available_balance"]["amount"].as_i64().unwrap() >= 0, "the guarded account was overrun: {doc}");
            }
        }
        assert_eq!(posted_net, 0, "posted credits equal posted debits across the ledger");
        assert_eq!(pending_net, 0, "pending credits equal pending debits across the ledger");
    }
}

/// (posted credits, posted debits, pending credits, pending debits) of live entries.
fn sums(entries: &[Value], upto: Option<&str>) -> (i64, i64, i64, i64) {
    let mut out = (0, 0, 0, 0);
    for e in entries {
        if let Some(at) = upto
            && payrail::domain::time::Timestamp::parse_rfc3339(e["effective_at"].as_str().unwrap())
                > payrail::domain::time::Timestamp::parse_rfc3339(at)
        {
            continue;
        }
        let amount = e["amount"].as_i64().unwrap();
        match (e["status"].as_str().unwrap(), e["direction"].as_str().unwrap()) {
            ("posted", "credit") => out.0 += amount,
            ("posted", "debit") => out.1 += amount,
            ("pending", "credit") => out.2 += amount,
            ("pending", "debit") => out.3 += amount,
            _ => {}
        }
    }
    out
}

fn sums_upto(entries: &[Value], at: &str) -> (i64, i64, i64, i64) {
    sums(entries, Some(at))
}

on_both_stores! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn g6_random_concurrent_streams_keep_the_books_exact() {
        let seed: u64 = std::env::var("LEDGER_PROPERTY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
        println!("LEDGER_PROPERTY_SEED={seed}");
        let books = Arc::new(Books::open(TestServer::start().await).await);
        let mut rng = StdRng::seed_from_u64(seed);
        for _ in 0..ROUNDS {
            let mut writers = Vec::new();
            for _ in 0..WRITERS {
                let (books, mut writer_rng) = (books.clone(), StdRng::seed_from_u64(rng.random()));
                writers.push(tokio::spawn(async move {
                    for _ in 0..OPS_PER_WRITER {
                        books.random_write(&mut writer_rng).await;
                    }
                }));
            }
            for writer in writers {
                writer.await.expect("a writer panicked (see its message above)");
            }
            books.check(&mut rng).await;
        }
    }
}

on_postgres_only! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn g6_two_instances_never_overrun_a_guarded_hot_account() {
        let a = TestServer::start().await;
        let url = common::test_database_url(a.dir.path()).await.expect("a PostgreSQL database");
        let b = TestServer::start_with(|c| c.database_url = Some(url)).await;
        let books = Books::open(a).await;
        let fund = json!({"status": "posted", "ledger_entries": [
            {"ledger_account_id": books.guarded, "direction": "credit", "amount": 1_000},
            {"ledger_account_id": books.accounts[0], "direction": "debit", "amount": 1_000}
        ]});
        let (status, _) = call(&books.server, &books.key, reqwest::Method::POST, "/api/ledger_transactions", Some(&fund)).await;
        assert_eq!(status, 201);
        // 60 spends of 50 against 1,000, alternating between the two instances: exactly 20 land.
        let mut tasks = Vec::new();
        for i in 0..60 {
            let server = if i % 2 == 0 { &books.server } else { &b };
            let (client, url, secret) = (server.client.clone(), server.url("/api/ledger_transactions"), books.key.secret.clone());
            let body = json!({"status": if i % 3 == 0 { "pending" } else { "posted" }, "ledger_entries": [
                {"ledger_account_id": books.guarded, "direction": "debit", "amount": 50, "available_balance_amount": {"gte": 0}},
                {"ledger_account_id": books.accounts[1 + i % (ACCOUNTS - 1)], "direction": "credit", "amount": 50}
            ]});
            tasks.push(tokio::spawn(async move { client.post(url).basic_auth("x-api-key", Some(secret)).json(&body).send().await.unwrap().status().as_u16() }));
        }
        let mut statuses = Vec::new();
        for task in tasks {
            statuses.push(task.await.unwrap());
        }
        assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 20, "{statuses:?}");
        assert!(statuses.iter().all(|s| *s == 201 || *s == 422), "{statuses:?}");
        let mut rng = StdRng::seed_from_u64(1);
        books.check(&mut rng).await;
    }
}
