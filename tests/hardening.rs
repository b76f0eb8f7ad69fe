//! Hostile and heavy clients: rate limits, deep JSON, oversized heads (SPEC L3, L4).

mod common;

use std::time::{Duration, Instant};

use common::{TestServer, assert_error, json};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A raw TLS connection to the server, trusting its certificate.
async fn tls(server: &TestServer) -> tokio_rustls::client::TlsStream<TcpStream> {
    common::wire::tls_connect(server).await
}

/// Reads until the peer closes (or 5 s pass); returns what arrived and how long it took.
async fn read_until_closed(stream: &mut (impl AsyncReadExt + Unpin)) -> (String, Duration) {
    let started = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while started.elapsed() < Duration::from_secs(5) {
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
    (String::from_utf8_lossy(&out).into_owned(), started.elapsed())
}

#[tokio::test]
async fn l4_rate_limit_answers_429_with_retry_after_per_key() {
    let server = TestServer::start_with(|c| {
        c.rate_limit_per_sec = 1;
        c.rate_limit_burst = 3;
    })
    .await;
    let key = server.key().await;
    let other = server.key().await;
    for _ in 0..3 {
        assert_eq!(server.get("/api/ping", &key).send().await.unwrap().status(), 200);
    }
    let limited = server.get("/api/ping", &key).send().await.unwrap();
    let retry_after: u64 = limited.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    let (status, body) = json(limited).await;
    assert_error(status, &body, 429, "rate_limit_exceeded");
    assert_eq!(server.get("/api/ping", &other).send().await.unwrap().status(), 200, "another key has its own bucket");
}

#[tokio::test]
async fn l3_deeply_nested_json_is_400() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let mut nested = json!("x");
    for _ in 0..40 {
        nested = json!({ "k": nested });
    }
    let (status, body) =
        json(server.post("/api/counterparties", &key, &json!({"name": "Deep", "metadata": nested})).send().await.unwrap()).await;
    assert_error(status, &body, 400, "malformed_json");
}

#[tokio::test]
async fn l3_too_many_headers_are_refused() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let mut request = server.get("/api/ping", &key);
    for i in 0..100 {
        request = request.header(format!("x-filler-{i}"), "y");
    }
    assert_eq!(request.send().await.unwrap().status(), 431);
    let huge = "z".repeat(128 * 1024);
    let response = server.get("/api/ping", &key).header("x-huge", huge).send().await;
    let status = response.as_ref().map(|r| r.status().as_u16());
    assert!(matches!(status, Ok(431) | Err(_)), "a 128 KiB header is refused or the connection closed: {status:?}");
}

#[tokio::test]
async fn replies_before_the_body_is_read_close_the_connection() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let body = json!({"name": "Unread"});
    let early = server.post("/api/counterparties", &key, &body).header("Idempotency-Key", "has space").send().await.unwrap();
    assert_eq!(early.status(), 400);
    assert_eq!(early.headers()["connection"], "close", "the unread body makes the connection unusable: say so");
    // The same client (and pool) carries on without a broken connection.
    for i in 0..3 {
        let again = server.post("/api/counterparties", &key, &body).header("Idempotency-Key", format!("ok-{i}")).send().await.unwrap();
        assert_eq!(again.status(), 201);
        assert!(again.headers().get("connection").is_none(), "a read body keeps the connection alive");
    }
}

#[tokio::test]
async fn slow_headers_are_cut_off() {
    let server = TestServer::start_with(|c| c.header_read_timeout_ms = 300).await;
    let mut stream = tls(&server).await;
    stream.write_all(b"GET /api/ping HTTP/1.1\r\nHost: localhost\r\nX-Slow: ").await.unwrap();
    stream.flush().await.unwrap();
    let (reply, waited) = read_until_closed(&mut stream).await;
    assert!(waited < Duration::from_secs(4), "the connection was closed after the header timeout, not held: {waited:?}");
    assert!(reply.is_empty() || reply.starts_with("HTTP/1.1 408"), "{reply}");
}

/// T1: an idle keep-alive connection is closed by a TLS `close_notify` after the header read
/// timeout, so the client reads a clean end of stream (rustls reports a close without it as an
/// unexpected EOF, a truncation attack for all it knows).
#[tokio::test]
async fn an_idle_connection_is_closed_with_close_notify() {
    let server = TestServer::start_with(|c| c.header_read_timeout_ms = 300).await;
    let key = server.key().await;
    let mut stream = tls(&server).await;
    let auth = common::wire::basic(&key);
    let request = format!("GET /api/ping HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    stream.flush().await.unwrap();
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await.expect("closed within 5 s") {
            Ok(0) => break Ok(()),
            Ok(n) => reply.extend_from_slice(&buf[..n]),
            Err(err) => break Err(err),
        }
    };
    assert!(reply.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&reply));
    assert!(end.is_ok(), "a clean TLS close after the reply, not {end:?}");
}

#[tokio::test]
async fn the_header_timeout_spares_bodies_and_closes_idle_keep_alive_connections() {
    let server = TestServer::start_with(|c| c.header_read_timeout_ms = 300).await;
    let key = server.key().await;
    let mut stream = tls(&server).await;
    let auth = common::wire::basic(&key);
    let body = br#"{"name":"Patient Upload"}"#;
    let head = format!(
        "POST /api/counterparties HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body[..10]).await.unwrap();
    stream.flush().await.unwrap();
    // Three header timeouts pass while the body trickles in: only heads are timed.
    tokio::time::sleep(Duration::from_millis(900)).await;
    stream.write_all(&body[10..]).await.unwrap();
    stream.flush().await.unwrap();
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&reply).contains("Patient Upload") {
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => reply.extend_from_slice(&buf[..n]),
            other => panic!("no reply ({other:?}): {}", String::from_utf8_lossy(&reply)),
        }
    }
    assert!(reply.starts_with(b"HTTP/1.1 201"), "{}", String::from_utf8_lossy(&reply));
    // Then the connection waits for a next head that never comes, and is closed.
    let (rest, waited) = read_until_closed(&mut stream).await;
    assert!(rest.is_empty(), "{rest}");
    assert!(waited < Duration::from_secs(3), "an idle keep-alive connection is closed after the header timeout: {waited:?}");
}

#[tokio::test]
async fn slow_bodies_time_out_with_503_and_commit_nothing() {
    let server = TestServer::start_with(|c| c.request_timeout_ms = 500).await;
    let key = server.key().await;
    let mut stream = tls(&server).await;
    let auth = common::wire::basic(&key);
    let head = format!(
        "POST /api/counterparties HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"name\":"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.flush().await.unwrap();
    let started = Instant::now();
    let mut reply = Vec::new();
    let mut buf = [0u8; 1024];
    while !reply.windows(4).any(|w| w == b"\r\n\r\n") && started.elapsed() < Duration::from_secs(4) {
        match tokio::time::timeout(Duration::from_secs(4), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => reply.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 503"), "the stalled upload is answered 503 after the request timeout: {reply}");
    let (_, listed) = json(server.get("/api/counterparties", &key).send().await.unwrap()).await;
    assert_eq!(listed, json!([]));
}

#[tokio::test]
async fn silent_connections_are_closed_after_the_handshake_timeout() {
    let server = TestServer::start_with(|c| c.handshake_timeout_ms = 300).await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    let (_, waited) = read_until_closed(&mut tcp).await;
    assert!(waited < Duration::from_secs(4), "a client that never starts TLS is dropped: {waited:?}");
}

#[tokio::test]
async fn connections_over_the_cap_are_closed_at_once() {
    let server = TestServer::start_with(|c| c.connections_max = 3).await;
    let key = server.key().await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(tls(&server).await);
    }
    let mut extra = TcpStream::connect(server.addr).await.unwrap();
    let (_, waited) = read_until_closed(&mut extra).await;
    assert!(waited < Duration::from_secs(2), "the fourth connection is closed, not queued: {waited:?}");
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.get("/api/ping", &key).send().await.unwrap().status(), 200, "capacity comes back");
}
