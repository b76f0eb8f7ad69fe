//! SPEC I1-I8, I10, I11 and L4: the idempotency engine, over HTTPS against the real server.
//!
//! Requests still uploading their body are driven over a raw TLS connection (headers and part of
//! the body sent, the rest held back), so "in flight" is a fact of the wire, not of timing.

#[macro_use]
mod common;

use std::time::Duration;

use common::wire::{REPLAYED, Reply, basic, list_ids, post_idem, reply, tls_connect};
use common::{Key, TestServer, assert_error, json};
use payrail::domain::api_key::Mode;
use payrail::domain::time::Clock;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

const DAY_SECS: i64 = 24 * 60 * 60;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A POST whose headers and first bytes of body are sent, the rest held back.
struct SlowUpload {
    stream: TlsStream<TcpStream>,
    rest: Vec<u8>,
}

/// The body of a counterparty named `name`, padded with JSON whitespace to exactly `len` bytes.
fn padded_body(name: &str, len: usize) -> Vec<u8> {
    let mut body = serde_json::to_vec(&json!({ "name": name })).unwrap();
    assert!(body.len() <= len);
    body.resize(len, b' ');
    body
}

impl SlowUpload {
    /// Sends the headers of `POST /api/counterparties` (Content-Length 200) and `sent` bytes of
    /// the body, then waits a little so the server has certainly taken in the headers.
    async fn start(server: &TestServer, key: &Key, idem: &str, name: &str, sent: usize) -> SlowUpload {
        let body = padded_body(name, 200);
        let head = format!(
            "POST /api/counterparties HTTP/1.1\r\nHost: localhost\r\nAuthorization: {}\r\nContent-Type: application/json\r\n\
             Idempotency-Key: {idem}\r\nContent-Length: {}\r\n\r\n",
            basic(key),
            body.len()
        );
        let mut stream = tls_connect(server).await;
        stream.write_all(head.as_bytes()).await.expect("write head");
        stream.write_all(&body[..sent]).await.expect("write part of the body");
        stream.flush().await.expect("flush");
        tokio::time::sleep(Duration::from_millis(300)).await;
        SlowUpload { stream, rest: body[sent..].to_vec() }
    }

    /// Reads a reply without sending the rest of the body (the server answered early).
    async fn early_reply(&mut self, within: Duration) -> RawReply {
        tokio::time::timeout(within, read_reply(&mut self.stream)).await.expect("an early reply in time")
    }

    /// Sends the rest of the body and reads the reply.
    async fn finish(mut self) -> RawReply {
        self.stream.write_all(&self.rest).await.expect("write the rest");
        self.stream.flush().await.expect("flush");
        tokio::time::timeout(Duration::from_secs(10), read_reply(&mut self.stream)).await.expect("a reply within 10 s")
    }
}

#[derive(Debug)]
struct RawReply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawReply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Reads one HTTP/1.1 reply with a Content-Length body.
async fn read_reply(stream: &mut TlsStream<TcpStream>) -> RawReply {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut chunk).await.expect("read");
        assert!(n > 0, "connection closed before a full reply head: {}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).expect("status line");
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned())).collect();
    let len: usize = headers.iter().find(|(k, _)| k == "content-length").map_or(0, |(_, v)| v.parse().expect("content-length"));
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = stream.read(&mut chunk).await.expect("read body");
        assert!(n > 0, "connection closed mid-body");
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(len);
    RawReply { status, headers, body }
}

fn assert_in_flight_409(r: &Reply) {
    assert_error(r.status, &r.json(), 409, "conflict");
    assert_eq!(r.json()["errors"]["parameter"], "Idempotency-Key", "409 names the header: {}", r.text());
    assert!(r.retry_after.is_some(), "an in-flight 409 carries Retry-After (I6, L4): {r:?}");
    assert_ne!(r.should_retry.as_deref(), Some("false"), "an in-flight 409 is retryable: it must not say x-should-retry: false");
    assert!(r.replayed.is_none(), "a 409 is not a replay");
}

// ---------------------------------------------------------------------------------------------
// I1: key syntax
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn i1_malformed_key_is_400() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let long = "k".repeat(256);
    let cases: Vec<(&str, reqwest::header::HeaderValue)> = vec![
        ("empty", reqwest::header::HeaderValue::from_static("")),
        ("256 characters", reqwest::header::HeaderValue::from_str(&long).unwrap()),
        ("non-ASCII", reqwest::header::HeaderValue::from_bytes("café".as_bytes()).unwrap()),
        ("inner space", reqwest::header::HeaderValue::from_static("has space")),
        ("tab", reqwest::header::HeaderValue::from_bytes(b"a\tb").unwrap()),
    ];
    for (case, value) in cases {
        let response =
            server.post("/api/counterparties", &key, &json!({"name": "Never"})).header("Idempotency-Key", value).send().await.unwrap();
        let r = reply(response).await;
        assert_error(r.status, &r.json(), 400, "invalid_idempotency_key");
        assert_eq!(r.json()["errors"]["parameter"], "Idempotency-Key", "{case}: {}", r.text());
    }
    assert!(list_ids(&server, "/api/counterparties", &key).await.is_empty(), "a request with a malformed key is not executed");

    // 255 visible characters (every visible ASCII character is allowed) work, and replay.
    let visible: String = (0x21u8..=0x7e).map(char::from).collect();
    let max = format!("{visible}{}", "x".repeat(255 - visible.len()));
    assert_eq!(max.len(), 255);
    let first = post_idem(&server, "/api/counterparties", &key, &max, &json!({"name": "Max"})).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let again = post_idem(&server, "/api/counterparties", &key, &max, &json!({"name": "Max"})).await;
    assert_eq!((again.status, again.body, again.replayed.as_deref()), (201, first.body, Some("true")));
    // A one-character key is fine too.
    assert_eq!(post_idem(&server, "/api/counterparties", &key, "1", &json!({"name": "One"})).await.status, 201);
}
}

// ---------------------------------------------------------------------------------------------
// I3, I4: replay
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn i3_i4_replay_is_byte_identical_with_header() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let body =
        json!({"name": "Replayed Ltd", "metadata": {"a": "1"}, "accounts": [{"account_details": [{"account_number": "123456789"}]}]});
    let first = post_idem(&server, "/api/counterparties", &key, "replay-1", &body).await;
    assert_eq!(first.status, 201, "{}", first.text());
    assert!(first.replayed.is_none(), "the original carries no Idempotent-Replayed header");
    for _ in 0..2 {
        let response = server.post("/api/counterparties", &key, &body).header("Idempotency-Key", "replay-1").send().await.unwrap();
        assert_eq!(response.headers().get("content-type").map(|v| v.to_str().unwrap()), Some("application/json"));
        let again = reply(response).await;
        assert_eq!(again.status, first.status);
        assert_eq!(again.body, first.body, "the replay is byte for byte the original");
        assert_eq!(again.replayed.as_deref(), Some("true"));
    }
    assert_eq!(list_ids(&server, "/api/counterparties", &key).await, vec![first.id()], "exactly one counterparty");
    assert_eq!(list_ids(&server, "/api/external_accounts", &key).await.len(), 1, "its one inline account, once");
    // The reply was stored with its effects: one `created` event only.
    let (_, events) = json(server.get(&format!("/api/events?entity_id={}", first.id()), &key).send().await.unwrap()).await;
    assert_eq!(events.as_array().unwrap().len(), 1, "one event: {events}");
}
}

on_both_stores! {
#[tokio::test]
async fn i4_replay_ignores_route_and_body() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let first = post_idem(&server, "/api/counterparties", &key, "cross", &json!({"name": "Route One"})).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let other = post_idem(&server, "/api/internal_accounts", &key, "cross", &json!({"name": "Ops", "currency": "USD"})).await;
    assert_eq!((other.status, other.replayed.as_deref()), (201, Some("true")));
    assert_eq!(other.body, first.body, "the counterparty's reply, whatever the path and body");
    assert_eq!(other.json()["object"], "counterparty");
    assert!(list_ids(&server, "/api/internal_accounts", &key).await.is_empty(), "no internal account was created");
    // Even an invalid body on an unknown-to-the-original route replays.
    let invalid = post_idem(&server, "/api/external_accounts", &key, "cross", &json!({"account_type": "nonsense"})).await;
    assert_eq!((invalid.status, &invalid.body, invalid.replayed.as_deref()), (201, &first.body, Some("true")));
    assert_eq!(list_ids(&server, "/api/counterparties", &key).await, vec![first.id()]);
    // Whatever its path: one that takes no POST, or none at all.
    for path in ["/api/ping", "/api/no_such_resource", "/api/counterparties/01a2274c-8c27-7000-8000-000000000000"] {
        let replayed = post_idem(&server, path, &key, "cross", &json!({})).await;
        assert_eq!((replayed.status, &replayed.body, replayed.replayed.as_deref()), (201, &first.body, Some("true")), "{path}");
    }
    // A fresh key there answers 404 or 405 and stores nothing: the key then runs a real POST.
    let missing = post_idem(&server, "/api/no_such_resource", &key, "fresh", &json!({})).await;
    assert_eq!((missing.status, missing.replayed.as_deref()), (404, None), "{}", missing.text());
    let ping = post_idem(&server, "/api/ping", &key, "fresh", &json!({})).await;
    assert_eq!((ping.status, ping.replayed.as_deref()), (405, None), "{}", ping.text());
    let runs = post_idem(&server, "/api/counterparties", &key, "fresh", &json!({"name": "Fresh"})).await;
    assert_eq!((runs.status, runs.replayed.as_deref()), (201, None), "{}", runs.text());
    // Outside /api nothing is authenticated or idempotent: a plain 404.
    let outside = server.client.post(server.url("/elsewhere")).header("Idempotency-Key", "cross").send().await.unwrap();
    assert_eq!(outside.status().as_u16(), 404);
}
}

// ---------------------------------------------------------------------------------------------
// I2: scope
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn i2_keys_scoped_by_api_key() {
    let server = TestServer::start().await;
    let a = server.key().await;
    let b = server.key().await; // same organization and mode as `a`
    let other_org = server.key_for("org2", Mode::Sandbox).await;
    let ra = post_idem(&server, "/api/counterparties", &a, "shared", &json!({"name": "From A"})).await;
    let rb = post_idem(&server, "/api/counterparties", &b, "shared", &json!({"name": "From B"})).await;
    let rc = post_idem(&server, "/api/counterparties", &other_org, "shared", &json!({"name": "From org2"})).await;
    for (who, r, name) in [("a", &ra, "From A"), ("b", &rb, "From B"), ("org2", &rc, "From org2")] {
        assert_eq!(r.status, 201, "{who}: {}", r.text());
        assert!(r.replayed.is_none(), "{who} executed, not replayed");
        assert_eq!(r.json()["name"], name, "{who}");
    }
    assert_ne!(ra.id(), rb.id());
    let mut same_org = list_ids(&server, "/api/counterparties", &a).await;
    same_org.sort();
    let mut expected = vec![ra.id(), rb.id()];
    expected.sort();
    assert_eq!(same_org, expected, "both keys of the organization created their own counterparty");
    assert_eq!(list_ids(&server, "/api/counterparties", &other_org).await, vec![rc.id()]);
    // Each API key replays its own reply.
    for (key, original) in [(&a, &ra), (&b, &rb), (&other_org, &rc)] {
        let again = post_idem(&server, "/api/counterparties", key, "shared", &json!({"name": "ignored"})).await;
        assert_eq!((again.status, &again.body, again.replayed.as_deref()), (201, &original.body, Some("true")));
    }
}
}

// ---------------------------------------------------------------------------------------------
// I5: only successes are stored
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn i5_failed_original_runs_again() {
    let server = TestServer::start().await;
    let key = server.key().await;
    // A 422 original.
    let failed = post_idem(&server, "/api/counterparties", &key, "k5", &json!({"email": "no-name@example.com"})).await;
    assert_error(failed.status, &failed.json(), 422, "parameter_missing");
    // A 400 (malformed JSON) with the same key stores nothing either.
    let response = server
        .req(reqwest::Method::POST, "/api/counterparties", &key)
        .header("Idempotency-Key", "k5")
        .header("content-type", "application/json")
        .body("{\"name\":")
        .send()
        .await
        .unwrap();
    let malformed = reply(response).await;
    assert_error(malformed.status, &malformed.json(), 400, "malformed_json");
    assert!(malformed.replayed.is_none());
    assert!(list_ids(&server, "/api/counterparties", &key).await.is_empty());

    let ok = post_idem(&server, "/api/counterparties", &key, "k5", &json!({"name": "Second Try"})).await;
    assert_eq!(ok.status, 201, "{}", ok.text());
    assert!(ok.replayed.is_none(), "executed afresh, not a replay of the failure");
    assert_eq!(ok.json()["name"], "Second Try");
    let again = post_idem(&server, "/api/counterparties", &key, "k5", &json!({"email": "no-name@example.com"})).await;
    assert_eq!((again.status, &again.body, again.replayed.as_deref()), (201, &ok.body, Some("true")));
    assert_eq!(list_ids(&server, "/api/counterparties", &key).await, vec![ok.id()]);
}
}

on_both_stores! {
#[tokio::test]
async fn i5_dropped_upload_frees_key() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let upload = SlowUpload::start(&server, &key, "dropped", "Dropped", 20).await;
    assert_in_flight_409(&post_idem(&server, "/api/counterparties", &key, "dropped", &json!({"name": "Meanwhile"})).await);
    drop(upload); // the client goes away mid-body
    // The key is freed once the server notices; a retry then executes afresh.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let ok = loop {
        let r = post_idem(&server, "/api/counterparties", &key, "dropped", &json!({"name": "After Drop"})).await;
        if r.status != 409 || tokio::time::Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(ok.status, 201, "the key is usable after the client dropped: {}", ok.text());
    assert!(ok.replayed.is_none());
    assert_eq!(ok.json()["name"], "After Drop");
    assert_eq!(list_ids(&server, "/api/counterparties", &key).await, vec![ok.id()], "the dropped upload left no effect");
}
}

on_both_stores! {
/// I5: a request dropped while its key is being claimed (its client hung up) leaves the key
/// free: the claim it was waiting for is given back when nobody is left to receive it, instead
/// of holding the key (409 to every retry) for the claim's lease.
#[tokio::test]
async fn i5_a_claim_whose_request_was_dropped_leaves_the_key_free() {
    use payrail::store::Claim;
    let server = TestServer::start().await;
    let store = server.store.clone();
    let now = server.clock.now();
    let keys: Vec<String> = (0..64).map(|i| format!("hung-up-{i}")).collect();
    for key in &keys {
        // Polled once, then dropped: on PostgreSQL the claim is queued for a claimer by then.
        // One answered at once (SQLite) is held by this caller, as by a request, which lets go.
        if let Ok(Ok(Claim::Acquired(token))) = tokio::time::timeout(Duration::ZERO, store.claim("scope", key, now, 10_000)).await {
            store.release(&token).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut held = Vec::new();
    for key in &keys {
        match store.claim("scope", key, now, 10_000).await.expect("claim") {
            Claim::Acquired(token) => store.release(&token).await,
            other => held.push(format!("{key}: {other:?}")),
        }
    }
    assert!(held.is_empty(), "keys held by claims nobody received: {held:?}");
}
}

on_both_stores! {
/// I5: the same when the claim was taken and its answer delivered, but the request was dropped
/// before reading it: the key is given back, not held for the lease.
#[tokio::test]
async fn i5_a_claim_answered_to_a_dropped_request_leaves_the_key_free() {
    use futures_util::FutureExt;
    use payrail::store::Claim;
    let server = TestServer::start().await;
    let store = server.store.clone();
    let now = server.clock.now();
    let mut pending = Box::pin(store.claim("scope", "answered-unread", now, 10_000));
    // Answered at once (SQLite): nothing waits in a queue, so nothing can be left unread.
    if let Some(claim) = (&mut pending).now_or_never() {
        if let Ok(Claim::Acquired(token)) = claim {
            store.release(&token).await;
        }
        return;
    }
    // Queued (PostgreSQL): wait until a claimer has taken the key for it, and so answered it.
    loop {
        match store.claim("scope", "answered-unread", now, 10_000).await.expect("claim") {
            Claim::InFlight => break,
            Claim::Acquired(token) => store.release(&token).await,
            Claim::Replay(_) => unreachable!("nothing was stored"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(pending); // answered, never read
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again = store.claim("scope", "answered-unread", now, 10_000).await.expect("claim");
    assert!(matches!(again, Claim::Acquired(_)), "the key is still held by a claim nobody read: {again:?}");
}
}

on_both_stores! {
#[tokio::test]
async fn i5_timed_out_original_frees_key() {
    let server = TestServer::start_with(|c| c.request_timeout_ms = 1000).await;
    let key = server.key().await;
    let mut upload = SlowUpload::start(&server, &key, "timed-out", "Too Slow", 20).await;
    // The server gives up on the stalled upload: 503, and the request was not carried out.
    let timed_out = upload.early_reply(Duration::from_secs(5)).await;
    assert_eq!(timed_out.status, 503, "the stalled request times out: {}", String::from_utf8_lossy(&timed_out.body));
    // I5: a timed-out original leaves no record; the client's retry executes afresh, at once.
    let retry = post_idem(&server, "/api/counterparties", &key, "timed-out", &json!({"name": "Retry"})).await;
    assert_eq!(retry.status, 201, "the retry after a 503 timeout executes (SPEC I5), got: {}", retry.text());
    assert!(retry.replayed.is_none());
    // The late rest of the timed-out body changes nothing.
    let _ = upload.stream.write_all(&upload.rest).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(upload);
    assert_eq!(list_ids(&server, "/api/counterparties", &key).await, vec![retry.id()]);
}
}

// ---------------------------------------------------------------------------------------------
// I6: in flight
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn i6_in_flight_upload_gets_409() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let upload = SlowUpload::start(&server, &key, "uploading", "Slow Upload", 60).await;

    let second = post_idem(&server, "/api/counterparties", &key, "uploading", &json!({"name": "Impatient"})).await;
    assert_in_flight_409(&second);
    assert!(list_ids(&server, "/api/counterparties", &key).await.is_empty(), "nothing ran yet");
    // Any path: the key is what is in flight (I4, I6).
    assert_in_flight_409(
        &post_idem(&server, "/api/internal_accounts", &key, "uploading", &json!({"name": "Ops", "currency": "USD"})).await,
    );
    // Another API key is not blocked by it (I2).
    let other = server.key().await;
    assert_eq!(post_idem(&server, "/api/counterparties", &other, "uploading", &json!({"name": "Other Key"})).await.status, 201);

    let first = upload.finish().await;
    assert_eq!(first.status, 201, "the slow upload completes: {}", String::from_utf8_lossy(&first.body));
    assert!(first.header(REPLAYED).is_none());
    let created: Value = serde_json::from_slice(&first.body).unwrap();
    assert_eq!(created["name"], "Slow Upload");

    let third = post_idem(&server, "/api/counterparties", &key, "uploading", &json!({"name": "Late"})).await;
    assert_eq!((third.status, third.replayed.as_deref()), (201, Some("true")));
    assert_eq!(third.body, first.body, "the third request replays the slow upload's reply");
    let ids = list_ids(&server, "/api/counterparties", &key).await;
    assert_eq!(ids.len(), 2, "the slow upload and the other key's request: {ids:?}");
    assert!(ids.contains(&created["id"].as_str().unwrap().to_owned()));
}
}

on_both_stores! {
#[tokio::test]
async fn i6_concurrent_duplicates_create_one() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let body = json!({"name": "Racing", "accounts": [{"account_details": [{"account_number": "987654321"}]}]});
    let mut tasks = Vec::new();
    for _ in 0..48 {
        let request = server.post("/api/counterparties", &key, &body).header("Idempotency-Key", "race");
        tasks.push(tokio::spawn(async move { reply(request.send().await.expect("request")).await }));
    }
    let mut replies = Vec::new();
    for task in tasks {
        replies.push(tokio::time::timeout(Duration::from_secs(30), task).await.expect("bounded").expect("task"));
    }
    let executed: Vec<&Reply> = replies.iter().filter(|r| r.status == 201 && r.replayed.is_none()).collect();
    assert_eq!(
        executed.len(),
        1,
        "exactly one request executed: {:?}",
        replies.iter().map(|r| (r.status, r.replayed.clone())).collect::<Vec<_>>()
    );
    let original = executed[0].body.clone();
    for r in &replies {
        match r.status {
            201 => assert_eq!(r.body, original, "every 201 is the same reply"),
            409 => assert_in_flight_409(r),
            other => panic!("unexpected status {other}: {}", r.text()),
        }
    }
    assert_eq!(list_ids(&server, "/api/counterparties", &key).await.len(), 1, "exactly one counterparty");
    assert_eq!(list_ids(&server, "/api/external_accounts", &key).await.len(), 1, "exactly one account");
    let after = post_idem(&server, "/api/counterparties", &key, "race", &body).await;
    assert_eq!((after.status, &after.body, after.replayed.as_deref()), (201, &original, Some("true")));
}
}

on_both_stores! {
/// Concurrent claims are taken together on PostgreSQL (src/store/postgres/claims.rs): in one
/// crowd of stored keys, fresh keys and duplicated keys, every request still gets its own answer.
#[tokio::test]
async fn i4_i6_a_crowd_of_claims_each_gets_its_own_answer() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let mut stored = Vec::new();
    for i in 0..8 {
        let first = post_idem(&server, "/api/counterparties", &key, &format!("stored-{i}"), &json!({"name": format!("Stored {i}")})).await;
        assert_eq!(first.status, 201);
        stored.push(first.body);
    }
    let mut tasks = Vec::new();
    let mut spawn = |idem: String, name: String| {
        let request = server.post("/api/counterparties", &key, &json!({"name": name})).header("Idempotency-Key", idem.as_str());
        tasks.push((idem, tokio::spawn(async move { reply(request.send().await.expect("request")).await })));
    };
    for round in 0..3 {
        for i in 0..8 {
            spawn(format!("stored-{i}"), format!("Replay {round}"));
            spawn(format!("fresh-{round}-{i}"), format!("Fresh {round}-{i}"));
        }
        for i in 0..4 {
            spawn(format!("twice-{i}"), format!("Twice {i}"));
        }
    }
    let mut executed: std::collections::HashMap<String, Vec<Reply>> = std::collections::HashMap::new();
    for (idem, task) in tasks {
        let r = tokio::time::timeout(Duration::from_secs(30), task).await.expect("bounded").expect("task");
        if let Some(i) = idem.strip_prefix("stored-") {
            assert_eq!((r.status, r.replayed.as_deref()), (201, Some("true")), "{idem} replays");
            assert_eq!(r.body, stored[i.parse::<usize>().unwrap()], "{idem} replays its own reply");
        } else {
            executed.entry(idem).or_default().push(r);
        }
    }
    for (idem, replies) in &executed {
        let ran: Vec<&Reply> = replies.iter().filter(|r| r.status == 201 && r.replayed.is_none()).collect();
        assert_eq!(
            ran.len(),
            1,
            "{idem} ran exactly once: {:?}",
            replies.iter().map(|r| (r.status, r.replayed.clone())).collect::<Vec<_>>()
        );
        for r in replies.iter().filter(|r| r.replayed.is_some() || r.status != 201) {
            match r.status {
                201 => assert_eq!(r.body, ran[0].body, "{idem}: a replay is of its own original"),
                409 => assert_in_flight_409(r),
                other => panic!("{idem}: unexpected status {other}: {}", r.text()),
            }
        }
    }
    assert_eq!(executed.len(), 3 * 8 + 4);
    assert_eq!(list_ids(&server, "/api/counterparties", &key).await.len(), 8 + 3 * 8 + 4, "nothing created twice");
}
}

// ---------------------------------------------------------------------------------------------
// I7: other methods ignore the header
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn i7_header_ignored_on_get_patch_delete() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let created = post_idem(&server, "/api/counterparties", &key, "post-key", &json!({"name": "Original"})).await;
    assert_eq!(created.status, 201);
    let id = created.id();
    let path = format!("/api/counterparties/{id}");
    let bad = reqwest::header::HeaderValue::from_bytes("bad key é".as_bytes()).unwrap();

    let r = reply(server.get(&path, &key).header("Idempotency-Key", bad.clone()).send().await.unwrap()).await;
    assert_eq!(r.status, 200, "GET ignores a malformed key: {}", r.text());
    let r = reply(server.get("/api/counterparties", &key).header("Idempotency-Key", "").send().await.unwrap()).await;
    assert_eq!(r.status, 200, "list ignores an empty key: {}", r.text());
    let r =
        reply(server.patch(&path, &key, &json!({"name": "Patched"})).header("Idempotency-Key", bad.clone()).send().await.unwrap()).await;
    assert_eq!(r.status, 200, "PATCH ignores a malformed key: {}", r.text());
    assert_eq!(r.json()["name"], "Patched");

    // Reusing the POST's key on PATCH does not replay the POST, and executes every time.
    for name in ["Patched Again", "Patched Thrice"] {
        let r = reply(server.patch(&path, &key, &json!({"name": name})).header("Idempotency-Key", "post-key").send().await.unwrap()).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r.replayed.is_none(), "a PATCH is never a replay");
        assert_eq!(r.json()["name"], name);
    }
    // A key first seen on a PATCH was not stored: a POST with it executes.
    let r = reply(server.patch(&path, &key, &json!({"name": "Via Patch"})).header("Idempotency-Key", "patch-first").send().await.unwrap())
        .await;
    assert_eq!(r.status, 200);
    let fresh = post_idem(&server, "/api/counterparties", &key, "patch-first", &json!({"name": "Fresh"})).await;
    assert_eq!((fresh.status, fresh.replayed.as_deref()), (201, None), "{}", fresh.text());
    assert_eq!(fresh.json()["name"], "Fresh");
    // The POST's key still replays the original creation.
    let again = post_idem(&server, "/api/counterparties", &key, "post-key", &json!({"name": "x"})).await;
    assert_eq!((again.status, &again.body, again.replayed.as_deref()), (201, &created.body, Some("true")));

    // PUT (no such route here): the header is not validated either, so the answer is 405, not 400.
    let r =
        reply(server.req(reqwest::Method::PUT, &path, &key).json(&json!({})).header("Idempotency-Key", bad.clone()).send().await.unwrap())
            .await;
    assert_eq!(r.status, 405, "PUT ignores a malformed key: {}", r.text());

    let r = reply(server.delete(&path, &key).header("Idempotency-Key", bad).send().await.unwrap()).await;
    assert_eq!(r.status, 204, "DELETE ignores a malformed key: {}", r.text());
    let r = reply(
        server.delete(&format!("/api/counterparties/{}", fresh.id()), &key).header("Idempotency-Key", "post-key").send().await.unwrap(),
    )
    .await;
    assert_eq!((r.status, r.replayed), (204, None), "DELETE with a stored key executes");
    assert!(list_ids(&server, "/api/counterparties", &key).await.is_empty());
}
}

// ---------------------------------------------------------------------------------------------
// I10: 24 hours
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn i10_replay_expires_after_24h() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let first = post_idem(&server, "/api/counterparties", &key, "daily", &json!({"name": "Day One"})).await;
    assert_eq!(first.status, 201);

    server.clock.advance_secs(DAY_SECS - 30);
    let before = post_idem(&server, "/api/counterparties", &key, "daily", &json!({"name": "Day One"})).await;
    assert_eq!(
        (before.status, &before.body, before.replayed.as_deref()),
        (201, &first.body, Some("true")),
        "still replayed just before 24 h"
    );

    server.clock.advance_secs(31);
    // The background purge removes the expired record (run one pass now rather than wait).
    let purged = server.store.purge_replies(server.clock.now(), 500).await.expect("purge");
    assert!(purged >= 1, "the expired reply is purgeable");
    let after = post_idem(&server, "/api/counterparties", &key, "daily", &json!({"name": "Day Two"})).await;
    assert_eq!(after.status, 201, "{}", after.text());
    assert!(after.replayed.is_none(), "after 24 h the key executes afresh");
    assert_ne!(after.id(), first.id(), "a new counterparty");
    assert_eq!(after.json()["name"], "Day Two");
    let again = post_idem(&server, "/api/counterparties", &key, "daily", &json!({"name": "x"})).await;
    assert_eq!((again.status, &again.body, again.replayed.as_deref()), (201, &after.body, Some("true")));
    assert_eq!(list_ids(&server, "/api/counterparties", &key).await.len(), 2);
}
}

on_both_stores! {
#[tokio::test]
async fn i10_expired_without_purge_executes_afresh() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let first = post_idem(&server, "/api/counterparties", &key, "nopurge", &json!({"name": "Old"})).await;
    assert_eq!(first.status, 201);
    server.clock.advance_secs(DAY_SECS + 1);
    // No purge has run: an expired record must not replay anyway.
    let after = post_idem(&server, "/api/counterparties", &key, "nopurge", &json!({"name": "New"})).await;
    assert_eq!((after.status, after.replayed.as_deref()), (201, None), "{}", after.text());
    assert_ne!(after.id(), first.id());
    let again = post_idem(&server, "/api/counterparties", &key, "nopurge", &json!({"name": "x"})).await;
    assert_eq!((again.status, &again.body, again.replayed.as_deref()), (201, &after.body, Some("true")));
}
}

// ---------------------------------------------------------------------------------------------
// I8: no stuck key after a restart
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn i8_restart_leaves_no_stuck_key() {
    let server = TestServer::start_with(|c| c.request_timeout_ms = 2000).await;
    let key = server.key().await;
    let upload = SlowUpload::start(&server, &key, "stuck?", "Half Uploaded", 40).await;
    assert_in_flight_409(&post_idem(&server, "/api/counterparties", &key, "stuck?", &json!({"name": "x"})).await);

    // The server goes away while the request is still uploading: shutdown begins with the
    // request in flight, then its connection dies as it would with the process.
    let stopping = tokio::spawn(server.stop());
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(upload);
    let dir = tokio::time::timeout(Duration::from_secs(10), stopping).await.expect("the server stops within 10 s").expect("stop");
    let server = TestServer::start_in(dir, |_| {}).await;
    let ok = post_idem(&server, "/api/counterparties", &key, "stuck?", &json!({"name": "After Restart"})).await;
    assert_eq!(ok.status, 201, "the key executes normally after a restart: {}", ok.text());
    assert!(ok.replayed.is_none());
    assert_eq!(ok.json()["name"], "After Restart");
    assert_eq!(list_ids(&server, "/api/counterparties", &key).await, vec![ok.id()], "the interrupted request left no effect");
    let again = post_idem(&server, "/api/counterparties", &key, "stuck?", &json!({"name": "x"})).await;
    assert_eq!((again.status, &again.body, again.replayed.as_deref()), (201, &ok.body, Some("true")));
}
}

on_both_stores! {
#[tokio::test]
async fn i3_stored_reply_survives_restart() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let first = post_idem(&server, "/api/counterparties", &key, "durable", &json!({"name": "Durable"})).await;
    assert_eq!(first.status, 201);
    let dir = server.stop().await;
    let server = TestServer::start_in(dir, |_| {}).await;
    let again = post_idem(&server, "/api/counterparties", &key, "durable", &json!({"name": "Durable"})).await;
    assert_eq!((again.status, &again.body, again.replayed.as_deref()), (201, &first.body, Some("true")));
    assert_eq!(list_ids(&server, "/api/counterparties", &key).await.len(), 1);
}
}

on_both_stores! {
#[tokio::test]
async fn i4_replies_from_before_a_restart_replay_and_new_keys_run_once() {
    // After a restart no reply is in memory: each of these is found through the index of stored
    // replies the server builds before serving (SQLite), or the database (PostgreSQL).
    let server = TestServer::start().await;
    let key = server.key().await;
    let mut firsts = Vec::new();
    for i in 0..5 {
        let first = post_idem(&server, "/api/counterparties", &key, &format!("before-{i}"), &json!({"name": format!("Before {i}")})).await;
        assert_eq!(first.status, 201);
        firsts.push(first);
    }
    let dir = server.stop().await;
    let server = TestServer::start_in(dir, |_| {}).await;
    for (i, first) in firsts.iter().enumerate() {
        let again =
            post_idem(&server, "/api/internal_accounts", &key, &format!("before-{i}"), &json!({"name": "x", "currency": "USD"})).await;
        assert_eq!((again.status, &again.body, again.replayed.as_deref()), (201, &first.body, Some("true")), "key before-{i}");
    }
    for i in 0..5 {
        let fresh = post_idem(&server, "/api/counterparties", &key, &format!("after-{i}"), &json!({"name": format!("After {i}")})).await;
        assert_eq!((fresh.status, fresh.replayed.as_deref()), (201, None), "{}", fresh.text());
    }
    assert_eq!(list_ids(&server, "/api/counterparties", &key).await.len(), 10, "five before, five after, none twice");
    assert!(list_ids(&server, "/api/internal_accounts", &key).await.is_empty(), "the replays ran nothing");
}
}

// ---------------------------------------------------------------------------------------------
// I11: strict mode
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn i11_strict_mode_rejects_changed_request() {
    let server = TestServer::start_with(|c| c.idempotency_strict = true).await;
    let key = server.key().await;
    let body = json!({"name": "Strict"});
    let first = post_idem(&server, "/api/counterparties", &key, "strict", &body).await;
    assert_eq!(first.status, 201);

    let changed_body = post_idem(&server, "/api/counterparties", &key, "strict", &json!({"name": "Changed"})).await;
    let changed_path = post_idem(&server, "/api/internal_accounts", &key, "strict", &body).await;
    for (case, r) in [("body", &changed_body), ("path", &changed_path)] {
        assert_eq!(r.status, 422, "{case}: {}", r.text());
        assert_eq!(r.json()["errors"]["parameter"], "Idempotency-Key", "{case}: {}", r.text());
        assert!(r.json()["errors"]["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert_eq!(r.should_retry.as_deref(), Some("false"), "{case}: x-should-retry: false (I11, L4)");
        assert!(r.replayed.is_none());
    }
    let same = post_idem(&server, "/api/counterparties", &key, "strict", &body).await;
    assert_eq!((same.status, &same.body, same.replayed.as_deref()), (201, &first.body, Some("true")), "the identical request replays");
    assert_eq!(list_ids(&server, "/api/counterparties", &key).await.len(), 1);
    assert!(list_ids(&server, "/api/internal_accounts", &key).await.is_empty());
}
}

on_both_stores! {
#[tokio::test]
async fn i11_default_mode_is_not_strict() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let first = post_idem(&server, "/api/counterparties", &key, "lenient", &json!({"name": "A"})).await;
    let second = post_idem(&server, "/api/counterparties", &key, "lenient", &json!({"name": "B"})).await;
    assert_eq!((second.status, &second.body, second.replayed.as_deref()), (201, &first.body, Some("true")));
}
}

// ---------------------------------------------------------------------------------------------
// L4: retry hints
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn l4_conflict_and_422_headers() {
    let server = TestServer::start().await;
    let key = server.key().await;
    // A 422, with or without an idempotency key: retrying cannot fix it.
    let plain = reply(server.post("/api/counterparties", &key, &json!({"name": ""})).send().await.unwrap()).await;
    let keyed = post_idem(&server, "/api/counterparties", &key, "l4", &json!({"name": ""})).await;
    for r in [&plain, &keyed] {
        assert_error(r.status, &r.json(), 422, "parameter_invalid");
        assert_eq!(r.should_retry.as_deref(), Some("false"), "a 422 carries x-should-retry: false");
    }
    let patch =
        reply(server.patch("/api/counterparties/00000000-0000-4000-8000-000000000000", &key, &json!({})).send().await.unwrap()).await;
    assert_eq!(patch.status, 404);

    // A 409 for a key in flight carries Retry-After, and is retryable.
    let upload = SlowUpload::start(&server, &key, "l4-flight", "In Flight", 30).await;
    let conflict = post_idem(&server, "/api/counterparties", &key, "l4-flight", &json!({"name": "x"})).await;
    assert_in_flight_409(&conflict);
    let seconds: u64 = conflict.retry_after.as_deref().unwrap().parse().expect("Retry-After is a number of seconds");
    assert!((1..=60).contains(&seconds), "Retry-After {seconds}");
    assert_eq!(upload.finish().await.status, 201);
}
}
