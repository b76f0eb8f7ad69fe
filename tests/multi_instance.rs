//! Several Payrail instances on one PostgreSQL database (SPEC I9, S2, A5): the guarantees hold
//! across servers because the database decides them.
//!
//! These tests need PostgreSQL and run once, on it (`NAME::postgres`): the server is
//! `PAYRAIL_TEST_DATABASE_URL`, which `scripts/test` sets; without it they fail, loudly.

#[macro_use]
mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use common::{TestServer, json, test_database_url};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Two servers on one database.
async fn pair() -> (TestServer, TestServer) {
    let a = TestServer::start().await;
    let url = test_database_url(a.dir.path()).await.expect("a PostgreSQL database");
    let b = TestServer::start_with(|c| c.database_url = Some(url)).await;
    (a, b)
}

/// Opens a TLS connection and sends a POST's headers and half its body, holding the rest.
async fn slow_upload(server: &TestServer, secret: &str, idempotency_key: &str, body: &str) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&server.cert_pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let mut tls = connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
    let auth = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, format!("x-api-key:{secret}"));
    let head = format!(
        "POST /api/counterparties HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic {auth}\r\nContent-Type: application/json\r\nIdempotency-Key: {idempotency_key}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(&body.as_bytes()[..body.len() / 2]).await.unwrap();
    tls.flush().await.unwrap();
    tls
}

on_postgres_only! {
#[tokio::test]
async fn i9_duplicates_across_instances_create_exactly_one() {
    let (a, b) = pair().await;
    let key = a.key().await;
    let body = json!({"name": "Once Only"});
    let requests = (0..64).map(|i| {
        let server = if i % 2 == 0 { &a } else { &b };
        let request = server.post("/api/counterparties", &key, &body).header("Idempotency-Key", "across-instances");
        tokio::spawn(async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.bytes().await.unwrap())
        })
    });
    let mut created = HashSet::new();
    let (mut ok, mut conflicts) = (0, 0);
    for request in requests.collect::<Vec<_>>() {
        let (status, bytes) = request.await.unwrap();
        match status {
            201 => {
                ok += 1;
                created.insert(bytes);
            }
            409 => conflicts += 1,
            other => panic!("unexpected {other}: {}", String::from_utf8_lossy(&bytes)),
        }
    }
    eprintln!("64 duplicates over 2 instances: {ok} answered 201 (one body), {conflicts} answered 409");
    assert_eq!(created.len(), 1, "every 201 carries the same body");
    let (_, listed) = json(a.get("/api/counterparties", &key).send().await.unwrap()).await;
    assert_eq!(listed.as_array().unwrap().len(), 1, "exactly one counterparty was created");
    let original = created.into_iter().next().unwrap();
    for server in [&a, &b] {
        let replay = server.post("/api/counterparties", &key, &body).header("Idempotency-Key", "across-instances").send().await.unwrap();
        assert_eq!(replay.headers()["idempotent-replayed"], "true");
        assert_eq!(replay.bytes().await.unwrap(), original, "the replay is byte-identical on either instance");
    }
}
}

on_postgres_only! {
#[tokio::test]
async fn i9_in_flight_on_one_instance_is_409_on_the_other() {
    let (a, b) = pair().await;
    let key = a.key().await;
    let body = r#"{"name":"Slow Upload Ltd"}"#;
    let mut upload = slow_upload(&a, &key.secret, "slow-key", body).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let response =
        b.post("/api/counterparties", &key, &json!({"name": "Other"})).header("Idempotency-Key", "slow-key").send().await.unwrap();
    assert_eq!(response.status(), 409);
    assert!(response.headers().contains_key("retry-after"));
    let (_, error) = json(response).await;
    assert_eq!(error["errors"]["parameter"], "Idempotency-Key");
    upload.write_all(&body.as_bytes()[body.len() / 2..]).await.unwrap();
    upload.flush().await.unwrap();
    // Once A has answered, B replays A's reply.
    let mut replayed = None;
    for _ in 0..100 {
        let response =
            b.post("/api/counterparties", &key, &json!({"name": "Other"})).header("Idempotency-Key", "slow-key").send().await.unwrap();
        if response.status() == 201 {
            replayed = Some(json(response).await.1);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(replayed.expect("B eventually replays A's reply")["name"], "Slow Upload Ltd");
}
}

/// Reads one HTTP/1.1 reply (head and a Content-Length body) off a raw connection.
async fn read_reply(stream: &mut tokio_rustls::client::TlsStream<TcpStream>) -> String {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap()))
                .unwrap_or(0);
            if body.len() >= length {
                return text;
            }
        }
        match tokio::time::timeout(Duration::from_secs(10), tokio::io::AsyncReadExt::read(stream, &mut chunk)).await {
            Ok(Ok(n)) if n > 0 => bytes.extend_from_slice(&chunk[..n]),
            other => panic!("no complete reply ({other:?}): {text}"),
        }
    }
}

on_postgres_only! {
/// Claims live in an unlogged table (migration 0004): a PostgreSQL crash empties it while an
/// owner may still be working. Wiping it by hand stands in for that crash: a second request then
/// takes the key and commits, and the first owner, whose claim is gone, must not commit too.
#[tokio::test]
async fn i8_an_owner_whose_claim_vanished_cannot_commit() {
    let (a, b) = pair().await;
    let key = a.key().await;
    let body = r#"{"name":"First Owner"}"#;
    let mut upload = slow_upload(&a, &key.secret, "vanishing-claim", body).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let url = test_database_url(a.dir.path()).await.unwrap();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let wiped = client.execute("DELETE FROM idempotency_claims", &[]).await.unwrap();
    assert_eq!(wiped, 1, "the slow upload held one claim");
    let second = b.post("/api/counterparties", &key, &json!({"name": "Second Owner"})).header("Idempotency-Key", "vanishing-claim");
    let (status, created) = json(second.send().await.unwrap()).await;
    assert_eq!(status, 201, "{created}");
    upload.write_all(&body.as_bytes()[body.len() / 2..]).await.unwrap();
    upload.flush().await.unwrap();
    let reply = read_reply(&mut upload).await;
    assert!(reply.starts_with("HTTP/1.1 409"), "the first owner lost its claim, so it must not commit: {reply}");
    assert!(reply.contains("Idempotency-Key"), "{reply}");
    let (_, listed) = json(a.get("/api/counterparties", &key).send().await.unwrap()).await;
    let names: Vec<&str> = listed.as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Second Owner"], "exactly one request with the key took effect");
    let replay =
        a.post("/api/counterparties", &key, &json!({"name": "x"})).header("Idempotency-Key", "vanishing-claim").send().await.unwrap();
    assert_eq!(json(replay).await.1, created, "the key now replays the one that committed");
}
}

on_postgres_only! {
#[tokio::test]
async fn a5_revocation_is_seen_by_every_instance_at_once() {
    let (a, b) = pair().await;
    let key = a.key().await;
    // Long enough for both instances to trust their key caches and hold the key in them.
    for _ in 0..5 {
        for server in [&a, &b] {
            assert_eq!(server.get("/api/ping", &key).send().await.unwrap().status(), 200);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    payrail::domain::keys::revoke(a.store.as_ref(), a.clock.as_ref(), &key.id).await.unwrap();
    for server in [&a, &b] {
        assert_eq!(server.get("/api/ping", &key).send().await.unwrap().status(), 401);
    }
}
}

on_postgres_only! {
#[tokio::test]
async fn e3_concurrent_cancels_from_two_instances_make_one_transition() {
    let (a, b) = pair().await;
    let key = a.key().await;
    let (_, account) = json(a.post("/api/internal_accounts", &key, &json!({"name": "Ops", "currency": "USD"})).send().await.unwrap()).await;
    let (_, counterparty) = json(
        a.post("/api/counterparties", &key, &json!({"name": "V", "accounts": [{"account_details": [{"account_number": "1234"}],
            "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}]}]}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let order = json!({"type": "ach", "amount": 10, "direction": "credit", "originating_account_id": account["id"],
        "receiving_account_id": counterparty["accounts"][0]["id"]});
    let (_, created) = json(a.post("/api/payment_orders", &key, &order).send().await.unwrap()).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let patches = (0..16).map(|i| {
        let server = if i % 2 == 0 { &a } else { &b };
        let body = if i % 4 == 0 { json!({"status": "cancelled"}) } else { json!({"metadata": {"n": i.to_string()}}) };
        let request = server.patch(&format!("/api/payment_orders/{id}"), &key, &body);
        tokio::spawn(async move { request.send().await.unwrap().status().as_u16() })
    });
    for patch in patches.collect::<Vec<_>>() {
        let status = patch.await.unwrap();
        assert!(status == 200 || status == 422, "an edit after the cancel is refused, never lost or 500: {status}");
    }
    let (_, events) = json(a.get(&format!("/api/events?entity_id={id}&event_name=cancelled"), &key).send().await.unwrap()).await;
    assert_eq!(events.as_array().unwrap().len(), 1);
}
}

on_postgres_only! {
/// SPEC S3, the other side of the storage layout's fence: an instance of the release whose
/// migration raised the level serves only once the check interval and the request deadline
/// have passed since the raise (by then every older instance has stopped and finished its
/// requests), while the instances already serving go on; a database raised while empty holds
/// nobody off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_a_release_that_raised_the_layout_serves_only_once_older_instances_have_stopped() {
    use payrail::store::layout;
    let a = TestServer::start().await;
    let key = a.key().await;
    let raised_at = a.store.setting(layout::RAISED_AT).await.unwrap();
    assert_eq!(raised_at.as_deref(), Some(&b"0"[..]), "a new database was raised while empty");
    // What the migration records when it raises the level of a database older instances serve.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros().to_string();
    assert!(a.store.replace_setting(layout::RAISED_AT, b"0", now.as_bytes()).await.unwrap());
    let raised = std::time::Instant::now();
    let url = test_database_url(a.dir.path()).await.expect("a PostgreSQL database");
    let deadline = Duration::from_secs(1);
    let deadline_ms = u64::try_from(deadline.as_millis()).unwrap();
    let b = TestServer::start_with(|c| {
        c.database_url = Some(url);
        c.request_timeout_ms = deadline_ms;
    })
    .await;
    let held = raised.elapsed();
    println!("the second instance served {held:?} after the raise");
    assert!(held >= layout::CHECK_INTERVAL + deadline - Duration::from_millis(50), "held off only {held:?}");
    assert_eq!(a.get("/api/ping", &key).send().await.unwrap().status(), 200, "the first one serves on");
    assert_eq!(b.get("/api/ping", &key).send().await.unwrap().status(), 200, "then the second serves");
}
}
