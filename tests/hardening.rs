//! Hostile and heavy clients: rate limits, deep JSON, oversized heads (SPEC L3, L4).

mod common;

use common::{TestServer, assert_error, json};
use serde_json::json;

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
    let (status, body) = json(server.post("/api/counterparties", &key, &json!({"name": "Deep", "metadata": nested})).send().await.unwrap()).await;
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
