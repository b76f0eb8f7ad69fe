//! Webhooks (SPEC W1-W3, A3) over HTTPS against the real server, with receivers on 127.0.0.1.

#[macro_use]
mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use common::{Key, TestServer, assert_error, json};
use hmac::{Hmac, Mac};
use payrail::config::Config;
use payrail::domain::api_key::Mode;
use serde_json::{Value, json};
use sha2::Sha256;

/// Fast schedules so retries take milliseconds, not minutes.
fn fast(c: &mut Config) {
    c.webhook_poll_ms = 25;
    c.webhook_timeout_ms = 1_000;
    c.webhook_retry_base_ms = 200;
    c.webhook_retry_max_ms = 800;
}

/// What a receiver does with one request.
#[derive(Clone, Copy, Debug)]
enum Reply {
    Status(u16),
    /// Waits this long, then answers 200 (too late if past the server's timeout).
    SleepThenOk(Duration),
}

#[derive(Clone, Debug)]
struct Hit {
    webhook_id: String,
    signature: String,
    timestamped: String,
    topic: String,
    content_type: String,
    body: Bytes,
    at: Instant,
}

impl Hit {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("webhook body is JSON")
    }
}

#[derive(Default)]
struct Plan {
    /// Replies used in order; then `otherwise`.
    script: VecDeque<Reply>,
    otherwise: Option<Reply>,
    hits: Vec<Hit>,
}

/// A webhook receiver: a tiny axum server on 127.0.0.1.
struct Receiver {
    port: u16,
    plan: Arc<Mutex<Plan>>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    async fn start() -> Self {
        Self::start_on(0).await
    }

    async fn start_on(port: u16) -> Self {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind receiver");
        let port = listener.local_addr().unwrap().port();
        let plan = Arc::new(Mutex::new(Plan::default()));
        let app = axum::Router::new().route("/hook", axum::routing::post(receive)).with_state(plan.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { port, plan, task }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    fn script(&self, replies: &[Reply], otherwise: Reply) {
        let mut plan = self.plan.lock().unwrap();
        plan.script = replies.iter().copied().collect();
        plan.otherwise = Some(otherwise);
    }

    fn hits(&self) -> Vec<Hit> {
        self.plan.lock().unwrap().hits.clone()
    }

    /// Waits (bounded) until `done` holds over the hits received so far.
    async fn wait_for(&self, what: &str, limit: Duration, done: impl Fn(&[Hit]) -> bool) -> Vec<Hit> {
        let start = Instant::now();
        loop {
            let hits = self.hits();
            if done(&hits) {
                return hits;
            }
            assert!(start.elapsed() < limit, "{what}: not after {limit:?}; got {} hits", hits.len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Distinct events received (a retried delivery counts once), in arrival order.
    fn distinct(&self) -> Vec<Hit> {
        let mut seen = Vec::new();
        let mut out = Vec::new();
        for hit in self.hits() {
            if !seen.contains(&hit.webhook_id) {
                seen.push(hit.webhook_id.clone());
                out.push(hit);
            }
        }
        out
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(State(plan): State<Arc<Mutex<Plan>>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let reply = {
        let mut plan = plan.lock().unwrap();
        plan.hits.push(Hit {
            webhook_id: header("x-webhook-id"),
            signature: header("x-signature"),
            timestamped: header("x-payrail-signature"),
            topic: header("x-topic"),
            content_type: header("content-type"),
            body,
            at: Instant::now(),
        });
        plan.script.pop_front().or(plan.otherwise).unwrap_or(Reply::Status(200))
    };
    match reply {
        Reply::Status(code) => StatusCode::from_u16(code).unwrap(),
        Reply::SleepThenOk(pause) => {
            tokio::time::sleep(pause).await;
            StatusCode::OK
        }
    }
}

fn hmac_hex(secret: &str, message: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(message);
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates an endpoint; returns (id, secret).
async fn endpoint(server: &TestServer, key: &Key, body: Value) -> (String, String) {
    let (status, created) = json(server.post("/api/webhook_endpoints", key, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "{created}");
    (created["id"].as_str().unwrap().to_owned(), created["secret"].as_str().unwrap().to_owned())
}

async fn counterparty(server: &TestServer, key: &Key, name: &str) -> Value {
    let (status, body) = json(server.post("/api/counterparties", key, &json!({"name": name})).send().await.unwrap()).await;
    assert_eq!(status, 201, "{body}");
    body
}

async fn deliveries(server: &TestServer, key: &Key, endpoint_id: &str, query: &str) -> Vec<Value> {
    let path = format!("/api/webhook_endpoints/{endpoint_id}/deliveries?per_page=100{query}");
    let (status, body) = json(server.get(&path, key).send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    body.as_array().unwrap().clone()
}

/// Waits (bounded) until the endpoint's deliveries satisfy `done`.
async fn wait_deliveries(
    server: &TestServer,
    key: &Key,
    endpoint_id: &str,
    limit: Duration,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let list = deliveries(server, key, endpoint_id, "").await;
        if done(&list) {
            return list;
        }
        assert!(start.elapsed() < limit, "deliveries never reached the expected state: {list:#?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

on_both_stores! {
#[tokio::test]
async fn w1_secret_only_in_the_create_reply_and_w2_signed_body() {
    let server = TestServer::start_with(fast).await;
    let key = server.key().await;
    let receiver = Receiver::start().await;
    let (status, created) = json(
        server
            .post("/api/webhook_endpoints", &key, &json!({"url": receiver.url()}))
            .header("Idempotency-Key", "make-hook-1")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    for field in ["id", "object", "url", "event_names", "live_mode", "created_at", "updated_at", "secret"] {
        assert!(created.get(field).is_some(), "{field} missing in {created}");
    }
    assert_eq!(created["object"], "webhook_endpoint");
    assert_eq!(created["event_names"], json!([]));
    assert_eq!(created["live_mode"], false);
    let id = created["id"].as_str().unwrap().to_owned();
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert!(secret.len() >= 40, "a long random secret: {secret}");

    // An idempotent replay is the same reply, byte for byte (the same secret, no new endpoint).
    let replay = server
        .post("/api/webhook_endpoints", &key, &json!({"url": receiver.url()}))
        .header("Idempotency-Key", "make-hook-1")
        .send()
        .await
        .unwrap();
    assert_eq!(replay.headers().get("idempotent-replayed").map(|v| v.to_str().unwrap()), Some("true"));
    assert_eq!(json(replay).await.1, created);

    // Never again: not in GET, not in the list, not in events.
    let (_, got) = json(server.get(&format!("/api/webhook_endpoints/{id}"), &key).send().await.unwrap()).await;
    assert!(got.get("secret").is_none(), "{got}");
    assert_eq!(got["url"], created["url"]);
    for path in ["/api/webhook_endpoints", "/api/events?per_page=100"] {
        let text = server.get(path, &key).send().await.unwrap().text().await.unwrap();
        assert!(!text.contains(&secret), "{path} shows the secret: {text}");
    }
    let (_, list) = json(server.get("/api/webhook_endpoints", &key).send().await.unwrap()).await;
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");

    let made = counterparty(&server, &key, "Signed Vendor").await;
    let hits = receiver.wait_for("the counterparty event", Duration::from_secs(10), |h| !h.is_empty()).await;
    let hit = &hits[0];
    assert_eq!(hit.body, Bytes::from(format!(r#"{{"event":"created","data":{made}}}"#)), "exact body");
    assert_eq!(hit.json(), json!({"event": "created", "data": made}));
    assert_eq!(hit.content_type, "application/json");
    assert_eq!(hit.topic, "counterparty");
    assert_eq!(hit.signature, hmac_hex(&secret, &hit.body), "X-Signature is hex HMAC-SHA256 of the body");
    let (t, v1) = hit.timestamped.split_once(",v1=").expect("t=...,v1=...");
    let t = t.strip_prefix("t=").unwrap();
    assert_eq!(v1, hmac_hex(&secret, format!("{t}.{}", std::str::from_utf8(&hit.body).unwrap()).as_bytes()));
    assert!(payrail::webhooks::signer::verify_timestamped(secret.as_bytes(), &hit.timestamped, &hit.body, t.parse().unwrap(), 300));

    let list = wait_deliveries(&server, &key, &id, Duration::from_secs(5), |l| l.first().is_some_and(|d| d["status"] == "delivered")).await;
    assert_eq!(list.len(), 1, "the endpoint is not sent its own creation: {list:#?}");
    let delivery = &list[0];
    assert_eq!(delivery["id"].as_str().unwrap(), hit.webhook_id, "X-Webhook-ID is the delivery id");
    assert_eq!(delivery["object"], "webhook_delivery");
    assert_eq!(delivery["attempts"], 1);
    assert_eq!(delivery["last_status_code"], 200);
    assert_eq!(delivery["event_name"], "created");
    assert!(delivery.get("body").is_none());
    // Nor is the body stored: it is built from the event at each attempt (the copy made an
    // event for twenty endpoints take twenty-one times its size; storage layout level 6).
    let scope = payrail::base::api_key::Scope { organization_id: key.org.clone(), live_mode: false };
    let stored = server.store.get("webhook_delivery", &scope, &hit.webhook_id).await.unwrap().expect("the delivery is stored");
    assert!(!stored.doc.contains("Signed Vendor"), "a delivery keeps no copy of the resource: {}", stored.doc);

    // Delete: 204, then 404, and nothing more is sent.
    let response = server.delete(&format!("/api/webhook_endpoints/{id}"), &key).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 204);
    let (status, body) = json(server.get(&format!("/api/webhook_endpoints/{id}"), &key).send().await.unwrap()).await;
    assert_error(status, &body, 404, "resource_not_found");
    counterparty(&server, &key, "After delete").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.hits().len(), 1);
}
}

on_both_stores! {
#[tokio::test]
async fn w3_retries_after_500s_and_a_timeout_with_the_same_webhook_id() {
    let server = TestServer::start_with(fast).await;
    let key = server.key().await;
    let receiver = Receiver::start().await;
    receiver.script(&[Reply::Status(500), Reply::Status(503), Reply::SleepThenOk(Duration::from_millis(1_500))], Reply::Status(200));
    let (id, _) = endpoint(&server, &key, json!({"url": receiver.url()})).await;
    let made = counterparty(&server, &key, "Retried").await;
    let list =
        wait_deliveries(&server, &key, &id, Duration::from_secs(20), |l| l.first().is_some_and(|d| d["status"] == "delivered")).await;
    let hits = receiver.hits();
    assert_eq!(hits.len(), 4, "500, 503, timeout, 200");
    assert!(hits.iter().all(|h| h.webhook_id == hits[0].webhook_id), "the same X-Webhook-ID on every retry");
    assert!(hits.iter().all(|h| h.body == hits[0].body), "the same body on every retry");
    assert_eq!(hits[0].json()["data"]["id"], made["id"]);
    assert!(hits[1].at - hits[0].at < Duration::from_secs(10), "first retry within 10 s");
    assert!(hits[1].at - hits[0].at >= Duration::from_millis(100), "a retry waits (backoff)");
    assert_eq!(list[0]["attempts"], 4);
    assert_eq!(list[0]["last_status_code"], 200);
    assert_eq!(list[0]["last_error"], Value::Null);
}
}

on_both_stores! {
#[tokio::test]
async fn w3_a_receiver_down_across_a_restart_still_gets_every_event() {
    let server = TestServer::start_with(fast).await;
    let key = server.key().await;
    // A port nobody listens on yet: deliveries fail (connection refused) until it is up.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (id, secret) = endpoint(&server, &key, json!({"url": format!("http://127.0.0.1:{port}/hook")})).await;
    let mut names = Vec::new();
    for i in 0..5 {
        let made = counterparty(&server, &key, &format!("Down {i}")).await;
        names.push(made["id"].as_str().unwrap().to_owned());
    }
    let failed = wait_deliveries(&server, &key, &id, Duration::from_secs(10), |l| {
        l.len() == 5 && l.iter().all(|d| d["attempts"].as_u64() >= Some(1))
    })
    .await;
    assert!(failed.iter().all(|d| d["status"] == "pending" && d["last_error"].is_string()), "{failed:#?}");
    let dir = server.stop().await;
    let receiver = Receiver::start_on(port).await;
    let server = TestServer::start_in(dir, fast).await;
    receiver.wait_for("every event after the restart", Duration::from_secs(20), |_| receiver.distinct().len() == 5).await;
    let mut got: Vec<String> = receiver.distinct().iter().map(|h| h.json()["data"]["id"].as_str().unwrap().to_owned()).collect();
    got.sort();
    names.sort();
    assert_eq!(got, names);
    for hit in receiver.hits() {
        assert_eq!(hit.signature, hmac_hex(&secret, &hit.body));
    }
    wait_deliveries(&server, &key, &id, Duration::from_secs(5), |l| l.iter().all(|d| d["status"] == "delivered")).await;
}
}

on_both_stores! {
#[tokio::test]
async fn a_slow_receiver_does_not_delay_a_fast_one() {
    let server = TestServer::start_with(|c| {
        fast(c);
        c.webhook_timeout_ms = 5_000;
    })
    .await;
    let key = server.key().await;
    let slow = Receiver::start().await;
    slow.script(&[], Reply::SleepThenOk(Duration::from_millis(2_500)));
    let quick = Receiver::start().await;
    endpoint(&server, &key, json!({"url": slow.url()})).await;
    endpoint(&server, &key, json!({"url": quick.url()})).await;
    let start = Instant::now();
    for i in 0..12 {
        counterparty(&server, &key, &format!("Busy {i}")).await;
    }
    quick.wait_for("the fast receiver", Duration::from_secs(10), |h| h.len() == 12).await;
    // An order, not a stopwatch: the slow receiver holds 4 deliveries for 2.5 s at a time, so it
    // cannot have all 12 before 5 s; the fast one has all of its own long before that.
    eprintln!("the fast receiver had all 12 after {:?}", start.elapsed());
    assert!(slow.hits().len() < 12, "the fast endpoint waited for the slow one");
    slow.wait_for("the slow receiver, eventually", Duration::from_secs(20), |h| h.len() >= 12).await;
}
}

on_both_stores! {
#[tokio::test]
async fn event_names_filter_what_an_endpoint_is_sent() {
    let server = TestServer::start_with(fast).await;
    let key = server.key().await;
    let all = Receiver::start().await;
    let some = Receiver::start().await;
    endpoint(&server, &key, json!({"url": all.url()})).await;
    let (status, created) = json(
        server
            .post("/api/webhook_endpoints", &key, &json!({"url": some.url(), "event_names": ["updated", "counterparty.deleted"]}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(created["event_names"], json!(["updated", "counterparty.deleted"]));
    let made = counterparty(&server, &key, "Filtered").await;
    let id = made["id"].as_str().unwrap();
    let (status, _) =
        json(server.patch(&format!("/api/counterparties/{id}"), &key, &json!({"name": "Renamed"})).send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(server.delete(&format!("/api/counterparties/{id}"), &key).send().await.unwrap().status().as_u16(), 204);
    // Every event: the other endpoint's creation (E4: endpoints are resources too) and three.
    let hits = all.wait_for("every event", Duration::from_secs(10), |h| h.len() == 4).await;
    // Sends to one endpoint may overlap (a few in flight), so order is not part of the contract.
    let mut topics: Vec<String> = hits.iter().map(|h| format!("{}.{}", h.topic, h.json()["event"].as_str().unwrap())).collect();
    topics.sort();
    assert_eq!(topics, ["counterparty.created", "counterparty.deleted", "counterparty.updated", "webhook_endpoint.created"]);
    some.wait_for("the wanted events", Duration::from_secs(10), |h| h.len() == 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut names: Vec<String> = some.hits().iter().map(|h| h.json()["event"].as_str().unwrap().to_owned()).collect();
    names.sort();
    assert_eq!(names, ["deleted", "updated"]);

    let (status, body) =
        json(server.post("/api/webhook_endpoints", &key, &json!({"url": some.url(), "event_names": ["Not Valid"]})).send().await.unwrap())
            .await;
    assert_error(status, &body, 422, "parameter_invalid");
    assert_eq!(body["errors"]["parameter"], "event_names[0]");
}
}

on_both_stores! {
#[tokio::test]
async fn a3_an_endpoint_gets_only_its_own_organization_and_mode() {
    let server = TestServer::start_with(fast).await;
    let a = server.key_for("org-a", Mode::Sandbox).await;
    let a_live = server.key_for("org-a", Mode::Live).await;
    let b = server.key_for("org-b", Mode::Sandbox).await;
    let receiver = Receiver::start().await;
    let (id, _) = endpoint(&server, &a, json!({"url": receiver.url()})).await;
    counterparty(&server, &b, "Other org").await;
    counterparty(&server, &a_live, "Other mode").await;
    let mine = counterparty(&server, &a, "Mine").await;
    let hits = receiver.wait_for("org A's event", Duration::from_secs(10), |h| !h.is_empty()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let hits_now = receiver.hits();
    assert_eq!(hits_now.len(), 1, "only org A sandbox events: {:?}", hits_now.iter().map(Hit::json).collect::<Vec<_>>());
    assert_eq!(hits[0].json()["data"]["id"], mine["id"]);
    for other in [&b, &a_live] {
        for path in [format!("/api/webhook_endpoints/{id}"), format!("/api/webhook_endpoints/{id}/deliveries")] {
            let (status, body) = json(server.get(&path, other).send().await.unwrap()).await;
            assert_error(status, &body, 404, "resource_not_found");
        }
        let (_, list) = json(server.get("/api/webhook_endpoints", other).send().await.unwrap()).await;
        assert_eq!(list, json!([]));
        let status = server.delete(&format!("/api/webhook_endpoints/{id}"), other).send().await.unwrap().status().as_u16();
        assert_eq!(status, 404);
    }
}
}

on_both_stores! {
#[tokio::test]
async fn w1_url_rules_refuse_private_addresses_and_plain_http() {
    let server = TestServer::start_with(fast).await;
    let sandbox = server.key().await;
    let live = server.key_for("default", Mode::Live).await;
    let refused = [
        (&sandbox, "https://10.0.0.1/hook"),
        (&sandbox, "https://192.168.1.10/hook"),
        (&sandbox, "https://172.16.5.4/hook"),
        (&sandbox, "https://169.254.169.254/latest/meta-data"),
        (&sandbox, "https://[fd00::1]/hook"),
        (&sandbox, "https://[fe80::1]/hook"),
        (&sandbox, "https://0.0.0.0/hook"),
        (&sandbox, "https://[::ffff:10.0.0.1]/hook"),
        (&sandbox, "http://hooks.example.com/hook"),
        (&live, "http://hooks.example.com/hook"),
        (&sandbox, "ftp://hooks.example.com/hook"),
        (&sandbox, "https://user:pass@hooks.example.com/hook"),
        (&sandbox, "not a url"),
    ];
    for (key, url) in refused {
        let (status, body) = json(server.post("/api/webhook_endpoints", key, &json!({"url": url})).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "url", "{url}: {body}");
    }
    let (status, body) =
        json(server.post("/api/webhook_endpoints", &live, &json!({"url": "http://hooks.example.com/hook"})).send().await.unwrap()).await;
    assert_eq!(status, 422);
    assert!(body["errors"]["message"].as_str().unwrap().contains("https in live mode"), "{body}");
    let (status, body) = json(server.post("/api/webhook_endpoints", &sandbox, &json!({})).send().await.unwrap()).await;
    assert_error(status, &body, 422, "parameter_missing");
    assert_eq!(body["errors"]["parameter"], "url");
    // Live mode refuses loopback altogether, in any scheme (SPEC W5; webhook_security.rs has
    // every spelling).
    for url in ["http://localhost:9/hook", "https://127.0.0.1:9/hook"] {
        let (status, body) = json(server.post("/api/webhook_endpoints", &live, &json!({"url": url})).send().await.unwrap()).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "url", "{url}: {body}");
    }
    // Accepted: https to a public name (live or not), and http to loopback in sandbox mode.
    for (key, url) in [
        (&live, "https://hooks.example.com/payrail"),
        (&sandbox, "http://127.0.0.1:9/hook"),
        (&sandbox, "http://localhost:9/hook"),
        (&sandbox, "http://[::1]:9/hook"),
    ] {
        let (status, body) = json(server.post("/api/webhook_endpoints", key, &json!({"url": url})).send().await.unwrap()).await;
        assert_eq!(status, 201, "{url}: {body}");
        assert_eq!(body["live_mode"], key.secret.starts_with("pr_live_"));
    }
}
}

on_both_stores! {
#[tokio::test]
async fn ssrf_is_checked_again_at_delivery_time() {
    // Made while private addresses were allowed; sent after a restart without the flag: the
    // attempt is refused before any connection and recorded as a failed attempt.
    let server = TestServer::start_with(|c| {
        fast(c);
        c.webhooks_allow_private = true;
    })
    .await;
    let key = server.key().await;
    let (id, _) = endpoint(&server, &key, json!({"url": "https://10.255.255.1/hook"})).await;
    let dir = server.stop().await;
    let server = TestServer::start_in(dir, fast).await;
    counterparty(&server, &key, "Refused").await;
    let list =
        wait_deliveries(&server, &key, &id, Duration::from_secs(10), |l| l.first().is_some_and(|d| d["attempts"].as_u64() >= Some(1)))
            .await;
    // Refused before any connection; stored as the one word a failed connection gets (W5).
    assert_eq!(list[0]["last_error"], "connection failed");
    assert_eq!(list[0]["last_status_code"], Value::Null);
    assert_eq!(list[0]["status"], "pending");
}
}

on_both_stores! {
#[tokio::test]
async fn deliveries_are_listed_paged_and_a_failed_one_can_be_resent() {
    let server = TestServer::start_with(|c| {
        fast(c);
        c.webhook_retry_window_secs = 1;
    })
    .await;
    let key = server.key().await;
    let receiver = Receiver::start().await;
    receiver.script(&[], Reply::Status(500));
    let (id, _) = endpoint(&server, &key, json!({"url": receiver.url()})).await;
    counterparty(&server, &key, "First").await;
    counterparty(&server, &key, "Second").await;
    let list =
        wait_deliveries(&server, &key, &id, Duration::from_secs(15), |l| l.len() == 2 && l.iter().all(|d| d["status"] == "failed")).await;
    assert!(list.iter().all(|d| d["attempts"].as_u64() >= Some(2) && d["last_status_code"] == 500), "{list:#?}");
    assert!(list.iter().all(|d| d["next_attempt_at"].is_null()));

    // Paged like every list: newest first, X-After-Cursor.
    let first_page = server.get(&format!("/api/webhook_endpoints/{id}/deliveries?per_page=1"), &key).send().await.unwrap();
    let cursor = first_page.headers().get("x-after-cursor").unwrap().to_str().unwrap().to_owned();
    assert!(!cursor.is_empty());
    let (_, page1) = json(first_page).await;
    assert_eq!(page1[0]["id"], list[0]["id"]);
    let second =
        server.get(&format!("/api/webhook_endpoints/{id}/deliveries?per_page=1&after_cursor={cursor}"), &key).send().await.unwrap();
    assert_eq!(second.headers().get("x-after-cursor").unwrap().to_str().unwrap(), "");
    assert_eq!(json(second).await.1[0]["id"], list[1]["id"]);
    assert_eq!(deliveries(&server, &key, &id, "&status=failed").await.len(), 2);
    assert_eq!(deliveries(&server, &key, &id, "&status=delivered").await.len(), 0);
    let (status, body) = json(server.get(&format!("/api/webhook_endpoints/{id}/deliveries?status=bogus"), &key).send().await.unwrap()).await;
    assert_error(status, &body, 422, "parameter_invalid");
    assert_eq!(body["errors"]["parameter"], "status", "a status outside the list is refused, not matched by nothing: {body}");

    let target = list[1]["id"].as_str().unwrap().to_owned();
    let (status, one) = json(server.get(&format!("/api/webhook_endpoints/{id}/deliveries/{target}"), &key).send().await.unwrap()).await;
    assert_eq!((status, &one["status"]), (200, &json!("failed")));
    receiver.script(&[], Reply::Status(200));
    let before = receiver.hits().len();
    let resend = format!("/api/webhook_endpoints/{id}/deliveries/{target}/resend");
    let (status, body) = json(server.post(&resend, &key, &json!({})).send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "pending");
    let hits = receiver.wait_for("the resent delivery", Duration::from_secs(10), |h| h.len() > before).await;
    assert_eq!(hits.last().unwrap().webhook_id, target, "a resend keeps the X-Webhook-ID");
    let delivered = wait_deliveries(&server, &key, &id, Duration::from_secs(5), |l| {
        l.iter().any(|d| d["id"] == target.as_str() && d["status"] == "delivered")
    })
    .await;
    assert!(delivered.iter().any(|d| d["id"] == list[0]["id"] && d["status"] == "failed"), "the other stays failed");
    let (status, body) = json(server.post(&resend, &key, &json!({})).send().await.unwrap()).await;
    assert_error(status, &body, 409, "conflict");
    let other = server.key_for("org-b", Mode::Sandbox).await;
    let (status, body) = json(server.post(&resend, &other, &json!({})).send().await.unwrap()).await;
    assert_error(status, &body, 404, "resource_not_found");

    // Finished deliveries are purged once past their retention (the worker checks every minute).
    let later = payrail::domain::time::Clock::now(server.clock.as_ref()).plus_secs(86_400);
    let purged = payrail::domain::webhook_delivery::purge(server.store.as_ref(), later, 500).await.unwrap();
    assert_eq!(purged, 2);
    assert!(deliveries(&server, &key, &id, "").await.is_empty());
}
}

on_both_stores! {
#[tokio::test]
async fn cli_operations_create_list_and_delete_endpoints() {
    use payrail::domain::webhook::{self, EndpointInput, EndpointRules};
    let server = TestServer::start_with(fast).await;
    let key = server.key_for("cli-org", Mode::Sandbox).await;
    let receiver = Receiver::start().await;
    let input = EndpointInput { url: Some(receiver.url()), event_names: Some(vec!["created".into()]) };
    let now = server.clock.as_ref();
    let reply = webhook::create_for(
        server.store.as_ref(),
        &server.secrets,
        payrail::domain::time::Clock::now(now),
        "cli-org",
        Mode::Sandbox,
        &input,
        &EndpointRules::default(),
    )
    .await
    .unwrap();
    let created: Value = serde_json::from_str(&reply).unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(created["secret"].is_string());
    let listed = webhook::list_all(server.store.as_ref()).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].id.as_str(), listed[0].organization_id.as_str()), (id.as_str(), "cli-org"));
    assert!(!serde_json::to_string(&listed).unwrap().contains(created["secret"].as_str().unwrap()));
    counterparty(&server, &key, "From the CLI's endpoint").await;
    receiver.wait_for("a delivery to the CLI-made endpoint", Duration::from_secs(10), |h| h.len() == 1).await;
    webhook::delete_by_id(server.store.as_ref(), &server.secrets, payrail::domain::time::Clock::now(now), &id).await.unwrap();
    assert!(webhook::list_all(server.store.as_ref()).await.unwrap().is_empty());
    let (status, _) = json(server.get(&format!("/api/webhook_endpoints/{id}"), &key).send().await.unwrap()).await;
    assert_eq!(status, 404);
}
}

on_postgres_only! {
/// Two servers on one PostgreSQL database (SPEC S2): each delivery is sent by one instance at
/// a time, so a receiver that always answers 200 sees every event exactly once. PostgreSQL
/// only: on SQLite one server owns the file.
#[tokio::test]
async fn w3_two_instances_send_each_delivery_once() {
    let a = TestServer::start_with(fast).await;
    let url = common::test_database_url(a.dir.path()).await.expect("a PostgreSQL database");
    let b = TestServer::start_with(|c| {
        fast(c);
        c.database_url = Some(url);
    })
    .await;
    let key = a.key().await;
    let receiver = Receiver::start().await;
    endpoint(&a, &key, json!({"url": receiver.url()})).await;
    for i in 0..20 {
        let server = if i % 2 == 0 { &a } else { &b };
        counterparty(server, &key, &format!("Twice {i}")).await;
    }
    receiver.wait_for("every event", Duration::from_secs(20), |_| receiver.distinct().len() == 20).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.hits().len(), 20, "no delivery sent twice");
}
}
