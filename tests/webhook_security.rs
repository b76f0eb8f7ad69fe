//! Webhook abuse resistance (SPEC W4, W5; issue 18 items 1 and 3) over HTTPS against the real
//! server: the endpoint cap and its atomicity, linear fan-out, fair delivery capacity between
//! tenants, the live-mode request forgery guard in every address spelling, and failure texts
//! that say nothing about the receiver's network. Runs on SQLite and, with
//! `PAYRAIL_TEST_DATABASE_URL`, on PostgreSQL.

#[macro_use]
mod common;

use std::net::{IpAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use common::{Key, TestServer, assert_error, json};
use payrail::config::Config;
use payrail::domain::api_key::Mode;
use serde_json::{Value, json};

/// The documented default of `--webhook-endpoints-max`.
const ENDPOINTS_MAX: usize = 20;

fn fast(c: &mut Config) {
    c.webhook_poll_ms = 25;
    c.webhook_timeout_ms = 1_000;
    c.webhook_retry_base_ms = 200;
    c.webhook_retry_max_ms = 800;
}

/// A receiver on 127.0.0.1 that answers `status` and counts what it got, with arrival times.
struct Receiver {
    port: u16,
    hits: Arc<Mutex<Vec<(Instant, Value)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    async fn start(status: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits: Arc<Mutex<Vec<(Instant, Value)>>> = Arc::default();
        let seen = hits.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |body: axum::body::Bytes| {
                let seen = seen.clone();
                async move {
                    let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    seen.lock().unwrap().push((Instant::now(), value));
                    StatusCode::from_u16(status).unwrap()
                }
            }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { port, hits, task }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    fn count(&self) -> usize {
        self.hits.lock().unwrap().len()
    }

    /// When the first hit whose data has `id` arrived, waiting (bounded) for it.
    async fn arrival_of(&self, id: &str, limit: Duration) -> Instant {
        let start = Instant::now();
        loop {
            if let Some((at, _)) = self.hits.lock().unwrap().iter().find(|(_, v)| v["data"]["id"] == id) {
                return *at;
            }
            assert!(start.elapsed() < limit, "no delivery of {id} within {limit:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A receiver that accepts connections and never answers (until the test ends).
struct Hanging {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Hanging {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        Hanging { port, task }
    }
}

impl Drop for Hanging {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A TCP port that speaks no TLS: it closes every connection at once.
async fn closing_port() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            drop(socket);
        }
    });
    (port, task)
}

async fn create_endpoint(server: &TestServer, key: &Key, url: &str) -> (u16, Value, Option<String>) {
    let response = server.post("/api/webhook_endpoints", key, &json!({"url": url})).send().await.unwrap();
    let retry = response.headers().get("x-should-retry").map(|v| v.to_str().unwrap().to_owned());
    let (status, body) = json(response).await;
    (status, body, retry)
}

async fn counterparty(server: &TestServer, key: &Key, name: &str) -> String {
    let (status, body) = json(server.post("/api/counterparties", key, &json!({"name": name})).send().await.unwrap()).await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

async fn endpoint_ids(server: &TestServer, key: &Key) -> Vec<String> {
    let (status, list) = json(server.get("/api/webhook_endpoints?per_page=100", key).send().await.unwrap()).await;
    assert_eq!(status, 200, "{list}");
    list.as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect()
}

/// Every delivery of every endpoint of the key's tenant.
async fn all_deliveries(server: &TestServer, key: &Key) -> Vec<Value> {
    let mut all = Vec::new();
    for id in endpoint_ids(server, key).await {
        let mut path = format!("/api/webhook_endpoints/{id}/deliveries?per_page=100");
        loop {
            let response = server.get(&path, key).send().await.unwrap();
            let cursor = response.headers().get("x-after-cursor").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
            let (status, page) = json(response).await;
            assert_eq!(status, 200, "{page}");
            all.extend(page.as_array().unwrap().iter().cloned());
            if cursor.is_empty() {
                break;
            }
            path = format!("/api/webhook_endpoints/{id}/deliveries?per_page=100&after_cursor={cursor}");
        }
    }
    all
}

/// No endpoint has two deliveries of one event.
fn assert_once_per_endpoint_and_event(deliveries: &[Value]) {
    let mut pairs: Vec<(String, String)> =
        deliveries.iter().map(|d| (d["webhook_endpoint_id"].to_string(), d["event_id"].to_string())).collect();
    pairs.sort();
    let total = pairs.len();
    pairs.dedup();
    assert_eq!(pairs.len(), total, "an endpoint got one event twice");
}

async fn wait_until<F: std::future::Future<Output = bool>>(what: &str, limit: Duration, mut check: impl FnMut() -> F) {
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

on_both_stores! {
#[tokio::test]
async fn w4_endpoints_per_tenant_are_capped_and_an_event_fans_out_once_per_endpoint() {
    let server = TestServer::start_with(fast).await;
    let key = server.key().await;
    let receiver = Receiver::start(200).await;
    let extra = 5;
    let mut accepted = 0;
    let mut refusal = None;
    for _ in 0..ENDPOINTS_MAX + extra {
        match create_endpoint(&server, &key, &receiver.url()).await {
            (201, _, _) => accepted += 1,
            (status, body, retry) => refusal = Some((status, body, retry)),
        }
    }
    eprintln!("w4: {accepted} of {} endpoints accepted", ENDPOINTS_MAX + extra);
    assert_eq!(accepted, ENDPOINTS_MAX, "the cap holds");
    let (status, body, retry) = refusal.expect("a refusal past the cap");
    assert_error(status, &body, 422, "parameter_invalid");
    assert_eq!(body["errors"]["parameter"], "url", "{body}");
    assert_eq!(retry.as_deref(), Some("false"), "retrying cannot fix it");
    // The cap is per organization and mode: another tenant, and the live mode, still have room.
    let other = server.key_for("org-other", Mode::Sandbox).await;
    assert_eq!(create_endpoint(&server, &other, &receiver.url()).await.0, 201);
    // Creation events (E4: endpoints are resources too) go to the other endpoints, each once.
    // An endpoint is sent what commits after it: on PostgreSQL its cursor starts at the outbox
    // horizon, so it may also get a few events that committed just before it.
    let pairs = ENDPOINTS_MAX * (ENDPOINTS_MAX - 1);
    wait_until("the creation events", Duration::from_secs(20), || async { receiver.count() >= pairs / 2 }).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = all_deliveries(&server, &key).await;
    assert_once_per_endpoint_and_event(&before);
    assert!((pairs / 2..=pairs).contains(&before.len()), "{} deliveries of {ENDPOINTS_MAX} creations", before.len());
    counterparty(&server, &key, "Fan-out").await;
    let expected = before.len() + ENDPOINTS_MAX;
    wait_until("one event's deliveries", Duration::from_secs(20), || async { receiver.count() >= expected }).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = all_deliveries(&server, &key).await;
    assert_once_per_endpoint_and_event(&after);
    eprintln!(
        "w4: {} endpoints' creations made {} deliveries; one create then made {}",
        ENDPOINTS_MAX,
        before.len(),
        after.len() - before.len()
    );
    assert_eq!(after.len() - before.len(), ENDPOINTS_MAX, "one event: exactly one delivery per subscribed endpoint");
    assert_eq!(receiver.count(), after.len(), "nothing sent twice");
    // Deleting one makes room for one.
    let victim = endpoint_ids(&server, &key).await.remove(0);
    assert_eq!(server.delete(&format!("/api/webhook_endpoints/{victim}"), &key).send().await.unwrap().status(), 204);
    assert_eq!(create_endpoint(&server, &key, &receiver.url()).await.0, 201);
    assert_eq!(create_endpoint(&server, &key, &receiver.url()).await.0, 422);
}
}

on_both_stores! {
#[tokio::test]
async fn w4_concurrent_creates_never_pass_the_cap() {
    let first = TestServer::start_with(fast).await;
    // On PostgreSQL, half the creates go through a second instance on the same database.
    let second = match common::on_postgres() {
        true => {
            let url = common::test_database_url(first.dir.path()).await.expect("a PostgreSQL database");
            Some(
                TestServer::start_with(|c| {
                    fast(c);
                    c.database_url = Some(url);
                })
                .await,
            )
        }
        false => None,
    };
    let key = first.key().await;
    let tries = 2 * ENDPOINTS_MAX + 8;
    let mut creates = tokio::task::JoinSet::new();
    for i in 0..tries {
        let server = if i % 2 == 1 { second.as_ref().unwrap_or(&first) } else { &first };
        let (client, url, secret) = (server.client.clone(), server.url("/api/webhook_endpoints"), key.secret.clone());
        creates.spawn(async move {
            let body = json!({"url": format!("https://hooks{i}.example.com/payrail")});
            client.post(url).basic_auth("x-api-key", Some(secret)).json(&body).send().await.unwrap().status().as_u16()
        });
    }
    let statuses: Vec<u16> = creates.join_all().await;
    let created = statuses.iter().filter(|s| **s == 201).count();
    eprintln!("w4: {created} of {tries} concurrent creates succeeded; statuses {statuses:?}");
    assert!(statuses.iter().all(|s| *s == 201 || *s == 422), "{statuses:?}");
    assert_eq!(created, ENDPOINTS_MAX, "exactly the cap, never more");
    assert_eq!(endpoint_ids(&first, &key).await.len(), ENDPOINTS_MAX);
}
}

on_both_stores! {
/// Tenant A has endpoints whose receivers never answer and a backlog of events; tenant B's one
/// healthy receiver must still get its event promptly (SPEC W4).
#[tokio::test]
async fn w4_hanging_receivers_of_one_tenant_do_not_delay_another() {
    let server = TestServer::start_with(|c| {
        fast(c);
        c.webhook_timeout_ms = 4_000;
    })
    .await;
    let a = server.key_for("org-a", Mode::Sandbox).await;
    let b = server.key_for("org-b", Mode::Sandbox).await;
    let hanging = Hanging::start().await;
    for _ in 0..12 {
        let (status, body, _) = create_endpoint(&server, &a, &format!("http://127.0.0.1:{}/hook", hanging.port)).await;
        assert_eq!(status, 201, "{body}");
    }
    let healthy = Receiver::start(200).await;
    assert_eq!(create_endpoint(&server, &b, &healthy.url()).await.0, 201);
    for i in 0..6 {
        counterparty(&server, &a, &format!("Backlog {i}")).await;
    }
    // Let A's sends take every slot they can.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut worst = Duration::ZERO;
    for i in 0..3 {
        let sent = Instant::now();
        let id = counterparty(&server, &b, &format!("Prompt {i}")).await;
        let latency = healthy.arrival_of(&id, Duration::from_secs(30)).await.duration_since(sent);
        eprintln!("w4: tenant B's delivery {i} arrived after {latency:?} while tenant A's receivers hang");
        worst = worst.max(latency);
    }
    assert!(worst < Duration::from_millis(1_500), "tenant B waited {worst:?} behind tenant A's hanging receivers");
}
}

on_both_stores! {
/// W4 with more hanging tenants than the instance's sends in flight can hold: three tenants
/// whose receivers never answer fill a pool of 4 sends (2 each at most); a fourth tenant's
/// healthy receiver still gets its events promptly, since a tenant with nothing in flight always
/// gets a send of its own.
#[tokio::test]
async fn w4_a_full_pool_of_hanging_sends_does_not_delay_a_tenant_with_none() {
    let server = TestServer::start_with(|c| {
        fast(c);
        c.webhook_timeout_ms = 20_000;
        c.webhook_in_flight_max = 4;
        c.webhook_tenant_in_flight_max = 2;
    })
    .await;
    let hanging = Hanging::start().await;
    for org in ["org-a", "org-b", "org-c"] {
        let key = server.key_for(org, Mode::Sandbox).await;
        for _ in 0..2 {
            assert_eq!(create_endpoint(&server, &key, &format!("http://127.0.0.1:{}/hook", hanging.port)).await.0, 201);
        }
        for i in 0..3 {
            counterparty(&server, &key, &format!("Backlog {org} {i}")).await;
        }
    }
    let healthy_key = server.key_for("org-d", Mode::Sandbox).await;
    let healthy = Receiver::start(200).await;
    assert_eq!(create_endpoint(&server, &healthy_key, &healthy.url()).await.0, 201);
    // Let the hanging tenants take every send the pool has.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut worst = Duration::ZERO;
    for i in 0..3 {
        let sent = Instant::now();
        let id = counterparty(&server, &healthy_key, &format!("Prompt {i}")).await;
        let latency = healthy.arrival_of(&id, Duration::from_secs(40)).await.duration_since(sent);
        eprintln!("w4: the fourth tenant's delivery {i} arrived after {latency:?} with the pool full of hanging sends");
        worst = worst.max(latency);
    }
    assert!(worst < Duration::from_millis(2_000), "a tenant with nothing in flight waited {worst:?} behind a full pool");

    // A burst to a receiver that answers in 300 ms goes out with the tenant's own share in
    // parallel (2 here), not one send at a time, though the pool is still full.
    let (slow_port, most_at_once) = counting_receiver(Duration::from_millis(300)).await;
    let burst_key = server.key_for("org-e", Mode::Sandbox).await;
    assert_eq!(create_endpoint(&server, &burst_key, &format!("http://127.0.0.1:{slow_port}/hook")).await.0, 201);
    for i in 0..6 {
        counterparty(&server, &burst_key, &format!("Burst {i}")).await;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while most_at_once.load(std::sync::atomic::Ordering::SeqCst) < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(most_at_once.load(std::sync::atomic::Ordering::SeqCst), 2, "the burst went out one send at a time behind the full pool");
}
}

/// A receiver that answers 200 after `delay`; the most requests it held at once.
async fn counting_receiver(delay: Duration) -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let seen = most.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let (now, most) = (now.clone(), most.clone());
            async move {
                most.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                now.fetch_sub(1, Ordering::SeqCst);
                StatusCode::OK
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (port, seen)
}

/// The spellings of non-public addresses a live endpoint must refuse (SPEC W5).
const LIVE_REFUSED: &[&str] = &[
    "https://127.0.0.1/hook",
    "https://127.0.0.1:8443/hook",
    "https://127.9.9.9/hook",
    "https://localhost/hook",
    "https://LOCALHOST./hook",
    "https://app.localhost/hook",
    "https://[::1]/hook",
    "https://[::ffff:127.0.0.1]/hook",
    "https://[::ffff:7f00:1]/hook",
    "https://[0:0:0:0:0:ffff:7f00:1]/hook",
    "https://[64:ff9b::7f00:1]/hook",
    "https://[2002:7f00:1::]/hook",
    "https://[::127.0.0.1]/hook",
    "https://2130706433/hook",
    "https://0x7f.1/hook",
    "https://0x7f000001/hook",
    "https://017700000001/hook",
    "https://0177.0.0.1/hook",
    "https://127.1/hook",
    "https://127.000.000.001/hook",
    "https://127.0.0.1./hook",
    "https://%31%32%37.0.0.1/hook",
    "https://0/hook",
    "https://0.0.0.0/hook",
    "https://[::]/hook",
    "https://10.1/hook",
    "https://10.0.0.1/hook",
    "https://172.16.0.1/hook",
    "https://192.168.1.1/hook",
    "https://100.64.0.1/hook",
    "https://169.254.169.254/latest/meta-data",
    "https://0xa9.0xfe.0xa9fe/hook",
    "https://0xa9fe.0xa9fe/hook",
    "https://[fd00::1]/hook",
    "https://[fe80::1]/hook",
    "https://[::ffff:10.0.0.1]/hook",
    "https://[64:ff9b::a9fe:a9fe]/hook",
    "https://[64:ff9b:1::a00:1]/hook",
    "https://[2002:a9fe:a9fe::]/hook",
    "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",
    "https://224.0.0.1/hook",
    "https://255.255.255.255/hook",
    "https://192.0.2.1/hook",
    "https://198.18.0.1/hook",
    "https://240.0.0.1/hook",
    "https://[ff02::1]/hook",
    "https://[2001:db8::1]/hook",
];

on_both_stores! {
#[tokio::test]
async fn w5_live_refuses_loopback_and_private_hosts_in_every_spelling() {
    let server = TestServer::start().await;
    let live = server.key_for("org-ssrf", Mode::Live).await;
    let mut accepted = Vec::new();
    for url in LIVE_REFUSED {
        let (status, body, _) = create_endpoint(&server, &live, url).await;
        if status == 201 {
            accepted.push(*url);
            continue;
        }
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "url", "{url}: {body}");
    }
    eprintln!("w5: live mode accepted {} of {} non-public spellings: {accepted:?}", accepted.len(), LIVE_REFUSED.len());
    assert!(accepted.is_empty(), "accepted in live mode: {accepted:?}");
    // A public https URL is still fine.
    assert_eq!(create_endpoint(&server, &live, "https://hooks.example.com/payrail").await.0, 201);
}
}

/// A name on this machine (its host name, from /etc/hosts) that resolves to loopback without
/// being a `localhost` name, if there is one.
fn name_resolving_to_loopback() -> Option<String> {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?.trim().to_owned();
    let addrs: Vec<IpAddr> = (hostname.as_str(), 443).to_socket_addrs().ok()?.map(|a| a.ip()).collect();
    (!addrs.is_empty() && addrs.iter().all(IpAddr::is_loopback) && !hostname.contains("localhost")).then_some(hostname)
}

on_both_stores! {
#[tokio::test]
async fn w5_live_refuses_names_that_resolve_to_loopback() {
    let server = TestServer::start().await;
    let live = server.key_for("org-dns", Mode::Live).await;
    let mut names = vec!["localhost".to_owned(), "LOCALHOST.".to_owned(), "LocalHost".to_owned()];
    match name_resolving_to_loopback() {
        Some(name) => names.push(name),
        None => eprintln!("w5: this machine's host name does not resolve to loopback; only localhost names checked"),
    }
    for name in &names {
        let (status, body, _) = create_endpoint(&server, &live, &format!("https://{name}/hook")).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "url", "{name}: {body}");
        let message = body["errors"]["message"].as_str().unwrap();
        assert!(!message.contains("127.0.0.1"), "the reply does not show what a name resolves to: {message}");
    }
    // Sandbox keeps loopback for local development.
    let sandbox = server.key_for("org-dns", Mode::Sandbox).await;
    for name in &names {
        assert_eq!(create_endpoint(&server, &sandbox, &format!("https://{name}:9/hook")).await.0, 201, "{name}");
    }
}
}

on_both_stores! {
/// Stored failures say one of four things, never the operating system's words (SPEC W5).
#[tokio::test]
async fn w5_delivery_failures_say_only_timeout_connection_tls_or_status() {
    let server = TestServer::start_with(fast).await;
    let key = server.key().await;
    // Bound but never listening: the port stays ours (no other test can take it meanwhile) and
    // a connection to it is refused.
    let closed_socket = tokio::net::TcpSocket::new_v4().unwrap();
    closed_socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let closed = closed_socket.local_addr().unwrap().port();
    let (open, _closer) = closing_port().await;
    let plain = Receiver::start(200).await;
    let failing = Receiver::start(503).await;
    let hanging = Hanging::start().await;
    let cases = [
        (format!("https://127.0.0.1:{closed}/hook"), "connection failed"),
        (format!("http://127.0.0.1:{closed}/hook"), "connection failed"),
        (format!("https://127.0.0.1:{open}/hook"), "TLS failed"),
        (format!("https://127.0.0.1:{}/hook", plain.port), "TLS failed"),
        (failing.url(), "HTTP 503"),
        (format!("http://127.0.0.1:{}/hook", hanging.port), "timeout"),
    ];
    let mut ids = Vec::new();
    for (url, _) in &cases {
        let (status, body, _) = create_endpoint(&server, &key, url).await;
        assert_eq!(status, 201, "{url}: {body}");
        ids.push(body["id"].as_str().unwrap().to_owned());
    }
    counterparty(&server, &key, "Failing").await;
    for ((url, expected), id) in cases.iter().zip(&ids) {
        let error = first_failure(&server, &key, id, url).await;
        eprintln!("w5: {url} -> {error:?}");
        assert_eq!(error, *expected, "{url}");
    }
}
}

/// The `last_error` of the endpoint's first attempted delivery, waiting (bounded) for one.
async fn first_failure(server: &TestServer, key: &Key, id: &str, url: &str) -> String {
    let path = format!("/api/webhook_endpoints/{id}/deliveries?per_page=100");
    let start = Instant::now();
    loop {
        let (status, list) = json(server.get(&path, key).send().await.unwrap()).await;
        assert_eq!(status, 200, "{list}");
        if let Some(tried) = list.as_array().unwrap().iter().find(|d| d["attempts"].as_u64() >= Some(1)) {
            return tried["last_error"].as_str().unwrap_or("<none>").to_owned();
        }
        assert!(start.elapsed() < Duration::from_secs(15), "{url}: no attempt yet: {list}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
