//! Transport limits: one client address cannot take the server's connections (SPEC T4), and
//! requests are refused early and in the contract's words (SPEC L5): an announced body over the
//! limit, repeated credentials or idempotency keys, and the heads hyper's parser refuses.
//!
//! Everything here talks over real sockets: raw TLS (trusting the server's generated
//! certificate) so that malformed and repeated headers reach the server as written, and client
//! sockets bound to other loopback addresses (Linux routes all of 127/8 to `lo`) to play a
//! second client.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::wire::basic;
use common::{TestServer, assert_error};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

/// A TCP connection to the server from `from` (a loopback address).
async fn tcp_from(server: &TestServer, from: [u8; 4]) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((from, 0))).unwrap();
    socket.connect(server.addr).await.unwrap()
}

/// A TLS connection to the server from `from`, trusting its certificate.
async fn tls_from(server: &TestServer, from: [u8; 4]) -> std::io::Result<Tls> {
    common::wire::tls_over(server, tcp_from(server, from).await).await
}

async fn tls(server: &TestServer) -> Tls {
    tls_from(server, [127, 0, 0, 1]).await.expect("TLS handshake")
}

/// One response read off a raw connection.
#[derive(Debug)]
struct Reply {
    status: u16,
    /// Header lines, names lower-cased.
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {self:?}"))
    }

    /// Asserts the contract's error body (SPEC L3), served as JSON.
    fn assert_error(&self, status: u16, code: &str) {
        assert_error(self.status, &self.json(), status, code);
        assert_eq!(self.header("content-type"), Some("application/json"), "{self:?}");
    }
}

/// Reads one response (head, then `content-length` bytes of body) from `stream`; `None` if the
/// connection ends first or nothing complete arrives within 10 s. `pending` carries bytes read
/// past the response (pipelining).
async fn read_reply(stream: &mut (impl AsyncRead + Unpin), pending: &mut Vec<u8>) -> Option<Reply> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 8192];
    loop {
        if let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&pending[..end]).into_owned();
            let mut lines = head.split("\r\n");
            let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
            let headers: Vec<(String, String)> =
                lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned())).collect();
            let length: usize = headers.iter().find(|(n, _)| n == "content-length").map_or(0, |(_, v)| v.parse().unwrap());
            if pending.len() >= end + 4 + length {
                let body = String::from_utf8_lossy(&pending[end + 4..end + 4 + length]).into_owned();
                pending.drain(..end + 4 + length);
                return Some(Reply { status, headers, body });
            }
        }
        let left = deadline.checked_duration_since(Instant::now())?;
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => pending.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    }
}

/// Sends `request` on a fresh TLS connection and reads the reply.
async fn exchange(server: &TestServer, request: &[u8]) -> Reply {
    let mut stream = tls(server).await;
    stream.write_all(request).await.unwrap();
    stream.flush().await.unwrap();
    read_reply(&mut stream, &mut Vec::new()).await.unwrap_or_else(|| panic!("no reply to {}", String::from_utf8_lossy(request)))
}

/// Whether the peer closes `stream` within `within` (end of stream or reset).
async fn closed_within(stream: &mut (impl AsyncRead + Unpin), within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let started = Instant::now();
    while let Some(left) = within.checked_sub(started.elapsed()) {
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
    false
}

/// The admin listener's Prometheus text.
async fn metrics(server: &TestServer) -> String {
    let admin = server.admin.as_ref().expect("admin listener");
    reqwest::get(format!("{admin}/metrics")).await.unwrap().text().await.unwrap()
}

/// The value of one metric line (`name{labels}`), 0 if absent.
fn metric(text: &str, series: &str) -> u64 {
    text.lines().find_map(|l| l.strip_prefix(series)?.trim().parse().ok()).unwrap_or(0)
}

/// A client that opens a new connection for every request (no pooling), as a fleet of
/// independent clients would.
fn fresh_connection_client(server: &TestServer) -> reqwest::Client {
    let cert = reqwest::Certificate::from_pem(&server.cert_pem).unwrap();
    reqwest::Client::builder()
        .add_root_certificate(cert)
        .tls_built_in_root_certs(false)
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// T4: connection limits
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn t4_an_idle_flood_from_one_address_leaves_other_clients_served() {
    const GLOBAL: usize = 16;
    const PER_ADDRESS: usize = 4;
    let server = TestServer::start_with(|c| {
        c.connections_max = GLOBAL;
        c.connections_per_address_max = Some(PER_ADDRESS);
        c.handshake_timeout_ms = 60_000;
    })
    .await;
    let key = server.key().await;
    // The flood: as many idle sockets as the whole server allows, from 127.0.0.2, none of
    // which ever sends a ClientHello.
    let mut flood = Vec::new();
    for _ in 0..GLOBAL {
        flood.push(tcp_from(&server, [127, 0, 0, 2]).await);
    }
    // Time for the server to accept them all (it closes the refused ones as it accepts them).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut refused = 0;
    for socket in &mut flood {
        if closed_within(socket, Duration::from_millis(300)).await {
            refused += 1;
        }
    }
    assert_eq!(refused, GLOBAL - PER_ADDRESS, "the flood's connections past its per-address cap are closed at once");
    // A well-behaved client on another address, one new connection per request.
    let client = fresh_connection_client(&server);
    let mut failed = 0;
    for _ in 0..40 {
        let sent = client.get(server.url("/api/ping")).basic_auth("x-api-key", Some(&key.secret)).send().await;
        if !sent.is_ok_and(|r| r.status() == 200) {
            failed += 1;
        }
    }
    println!("T4 idle flood: the other client's failed requests: {failed}/40");
    assert_eq!(failed, 0, "the other client is served while the flood holds its connections");
    // The flooding address gets nothing more, and each refusal is counted.
    let mut extra = tcp_from(&server, [127, 0, 0, 2]).await;
    assert!(closed_within(&mut extra, Duration::from_secs(2)).await, "the flood's next connection is closed at once");
    let text = metrics(&server).await;
    let per_address = metric(&text, "payrail_connections_refused_total{reason=\"per_address_cap\"}");
    assert_eq!(per_address, (GLOBAL - PER_ADDRESS + 1) as u64, "{text}");
    assert_eq!(metric(&text, "payrail_connections_refused_total{reason=\"global_cap\"}"), 0, "{text}");
    drop(flood);
}

#[tokio::test]
async fn t4_the_global_cap_still_holds_and_is_counted() {
    let server = TestServer::start_with(|c| {
        c.connections_max = 3;
        c.connections_per_address_max = Some(2);
        c.handshake_timeout_ms = 60_000;
    })
    .await;
    let mut held = Vec::new();
    for from in [[127, 0, 0, 3], [127, 0, 0, 4], [127, 0, 0, 5]] {
        held.push(tcp_from(&server, from).await);
    }
    for socket in &mut held {
        assert!(!closed_within(socket, Duration::from_millis(200)).await, "three addresses fill the global cap");
    }
    let mut extra = tcp_from(&server, [127, 0, 0, 6]).await;
    assert!(closed_within(&mut extra, Duration::from_secs(2)).await, "the fourth connection is over the global cap");
    let text = metrics(&server).await;
    assert_eq!(metric(&text, "payrail_connections_refused_total{reason=\"global_cap\"}"), 1, "{text}");
    drop(held);
}

#[tokio::test]
async fn t4_idle_sockets_that_never_start_tls_are_closed_and_free_their_slots() {
    let server = TestServer::start_with(|c| {
        c.connections_per_address_max = Some(2);
        c.handshake_timeout_ms = 300;
    })
    .await;
    let key = server.key().await;
    let mut idle = vec![tcp_from(&server, [127, 0, 0, 7]).await, tcp_from(&server, [127, 0, 0, 7]).await];
    for socket in &mut idle {
        assert!(closed_within(socket, Duration::from_secs(3)).await, "an idle socket is closed by the handshake timeout");
    }
    // Their slots are free again: the same address is served.
    let mut stream = tls_from(&server, [127, 0, 0, 7]).await.expect("served after the idle sockets were closed");
    let request = format!("GET /api/ping HTTP/1.1\r\nHost: localhost\r\nAuthorization: {}\r\n\r\n", basic(&key));
    stream.write_all(request.as_bytes()).await.unwrap();
    let reply = read_reply(&mut stream, &mut Vec::new()).await.expect("a reply");
    assert_eq!(reply.status, 200, "{reply:?}");
    let text = metrics(&server).await;
    assert!(metric(&text, "payrail_tls_handshake_timeouts_total") >= 2, "{text}");
}

// ---------------------------------------------------------------------------------------------
// L5: early refusals
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn l5_an_announced_body_over_the_limit_is_413_at_once_and_claims_no_key() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let mut stream = tls(&server).await;
    let head = format!(
        "POST /api/counterparties HTTP/1.1\r\nHost: localhost\r\nAuthorization: {}\r\nIdempotency-Key: huge-1\r\n\
         Content-Type: application/json\r\nContent-Length: 10737418240\r\n\r\n{{\"name\":",
        basic(&key)
    );
    let started = Instant::now();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.flush().await.unwrap();
    let reply = read_reply(&mut stream, &mut Vec::new()).await.expect("a reply");
    let waited = started.elapsed();
    println!("L5 10 GB Content-Length: {} after {waited:?}", reply.status);
    reply.assert_error(413, "request_too_large");
    assert!(waited < Duration::from_secs(5), "refused at once, not after the request timeout: {waited:?}");
    // The key was never claimed: the same key with a small body runs now.
    let (status, body) = common::json(
        server.post("/api/counterparties", &key, &json!({"name": "Small"})).header("Idempotency-Key", "huge-1").send().await.unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test]
async fn l5_a_chunked_body_over_the_limit_is_413() {
    let server = TestServer::start_with(|c| c.body_limit_bytes = 1024).await;
    let key = server.key().await;
    let chunk = format!("{{\"name\":\"{}\"}}", "x".repeat(4096));
    let request = format!(
        "POST /api/counterparties HTTP/1.1\r\nHost: localhost\r\nAuthorization: {}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
        basic(&key),
        chunk.len()
    );
    exchange(&server, request.as_bytes()).await.assert_error(413, "request_too_large");
}

#[tokio::test]
async fn l5_repeated_authorization_headers_are_401() {
    let server = TestServer::start().await;
    let first = server.key_for("org-one", payrail::domain::api_key::Mode::Sandbox).await;
    let second = server.key_for("org-two", payrail::domain::api_key::Mode::Sandbox).await;
    let body = r#"{"name":"Twice"}"#;
    let request = format!(
        "POST /api/counterparties HTTP/1.1\r\nHost: localhost\r\nAuthorization: {}\r\nAuthorization: {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        basic(&first),
        basic(&second),
        body.len()
    );
    let reply = exchange(&server, request.as_bytes()).await;
    reply.assert_error(401, "invalid_key");
    assert_eq!(reply.header("www-authenticate"), Some("Basic realm=\"payrail\""), "{reply:?}");
    // The same key twice is just as ambiguous.
    let request = format!("GET /api/ping HTTP/1.1\r\nHost: localhost\r\nAuthorization: {0}\r\nAuthorization: {0}\r\n\r\n", basic(&first));
    exchange(&server, request.as_bytes()).await.assert_error(401, "invalid_key");
}

#[tokio::test]
async fn l5_repeated_idempotency_keys_are_400() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let body = r#"{"name":"Twice"}"#;
    let request = format!(
        "POST /api/counterparties HTTP/1.1\r\nHost: localhost\r\nAuthorization: {}\r\nIdempotency-Key: a\r\n\
         Idempotency-Key: b\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        basic(&key),
        body.len()
    );
    let reply = exchange(&server, request.as_bytes()).await;
    reply.assert_error(400, "invalid_idempotency_key");
    assert_eq!(reply.json()["errors"]["parameter"], "Idempotency-Key");
    let (_, listed) = common::json(server.get("/api/counterparties", &key).send().await.unwrap()).await;
    assert_eq!(listed, json!([]), "nothing was created");
}

/// Heads hyper's parser refuses before the service runs, and the error each must get.
fn unparsable_heads(auth: &str) -> Vec<(&'static str, String, u16, &'static str)> {
    let ok = format!("Host: localhost\r\nAuthorization: {auth}\r\n");
    let many: String = (0..150).map(|i| format!("X-Filler-{i}: y\r\n")).collect();
    vec![
        (
            "a 20 KiB header",
            format!("GET /api/ping HTTP/1.1\r\n{ok}X-Big: {}\r\n\r\n", "z".repeat(20 * 1024)),
            431,
            "request_headers_too_large",
        ),
        ("150 header lines", format!("GET /api/ping HTTP/1.1\r\n{ok}{many}\r\n"), 431, "request_headers_too_large"),
        ("a long request line", format!("GET /api/ping?{} HTTP/1.1\r\n{ok}\r\n", "q".repeat(20 * 1024)), 431, "request_headers_too_large"),
        ("Content-Length: abc", format!("POST /api/counterparties HTTP/1.1\r\n{ok}Content-Length: abc\r\n\r\n"), 400, "invalid_request"),
        ("a control character in a header", format!("GET /api/ping HTTP/1.1\r\n{ok}X-Bad: a\x01b\r\n\r\n"), 400, "invalid_request"),
        ("a malformed request line", format!("GET/api/ping HTTP/1.1 extra\r\n{ok}\r\n"), 400, "invalid_request"),
    ]
}

#[tokio::test]
async fn l5_heads_the_parser_refuses_get_the_error_body_over_tls() {
    let server = TestServer::start().await;
    let key = server.key().await;
    for (what, request, status, code) in unparsable_heads(&basic(&key)) {
        let reply = exchange(&server, request.as_bytes()).await;
        println!("L5 {what}: {} {}", reply.status, reply.body);
        assert_eq!(reply.status, status, "{what}: {reply:?}");
        reply.assert_error(status, code);
        assert_eq!(reply.header("connection"), Some("close"), "{what}: {reply:?}");
    }
}

/// Sends `head`, then `body` in 64 KiB writes 10 ms apart (a client's pace, not a burst into
/// the kernel's buffers), then reads the reply; every write must be taken.
async fn send_paced(server: &TestServer, head: &str, body: &[u8]) -> Reply {
    let mut stream = tls(server).await;
    stream.write_all(head.as_bytes()).await.unwrap();
    for (i, chunk) in body.chunks(64 * 1024).enumerate() {
        let sent = async {
            stream.write_all(chunk).await?;
            stream.flush().await
        };
        sent.await.unwrap_or_else(|e| panic!("chunk {i} of the body was refused by a closed connection: {e}"));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    read_reply(&mut stream, &mut Vec::new()).await.expect("the reply arrives")
}

/// L3, L5: a body of 3 MB, over the 1 MiB limit, sent whole at a client's pace before the
/// reply is read: the client gets its 413, not a reset connection.
#[tokio::test]
async fn l5_a_body_a_few_times_the_limit_still_gets_its_413() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let body = format!(r#"{{"name":"{}"}}"#, "n".repeat(3_000_000));
    let head = format!(
        "POST /api/counterparties HTTP/1.1\r\nHost: localhost\r\nAuthorization: {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        basic(&key),
        body.len()
    );
    send_paced(&server, &head, body.as_bytes()).await.assert_error(413, "request_too_large");
}

/// L5: a head the parser refuses followed by a body of 900 KB, within the body limit, sent
/// whole before the reply is read (as most clients do) and at a client's pace: every byte is
/// taken and the reply arrives, since the server reads the rest away before it closes instead
/// of resetting the connection under the client's writes and its reply.
#[tokio::test]
async fn l5_a_refused_head_before_a_large_body_still_gets_its_reply() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let body = format!(r#"{{"name":"{}"}}"#, "n".repeat(900 * 1024));
    let head = format!(
        "POST /api/counterparties HTTP/1.1\r\nHost: localhost\r\nAuthorization: {}\r\nX-Bad: a\x01b\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        basic(&key),
        body.len()
    );
    send_paced(&server, &head, body.as_bytes()).await.assert_error(400, "invalid_request");
    let (_, listed) = common::json(server.get("/api/counterparties", &key).send().await.unwrap()).await;
    assert_eq!(listed, json!([]), "nothing was created");
}

#[tokio::test]
async fn l5_heads_the_parser_refuses_get_the_error_body_over_plain_http() {
    let server = TestServer::start_with(|c| c.plain_http = true).await;
    let key = server.key().await;
    for (what, request, status, code) in unparsable_heads(&basic(&key)) {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let reply = read_reply(&mut stream, &mut Vec::new()).await.unwrap_or_else(|| panic!("{what}: no reply"));
        assert_eq!(reply.status, status, "{what}: {reply:?}");
        reply.assert_error(status, code);
    }
    // And a good request on plain HTTP is served as before.
    let request = format!("GET /api/ping HTTP/1.1\r\nHost: localhost\r\nAuthorization: {}\r\n\r\n", basic(&key));
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    assert_eq!(read_reply(&mut stream, &mut Vec::new()).await.expect("a reply").status, 200);
}

// ---------------------------------------------------------------------------------------------
// What must not change
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn l5_keep_alive_pipelining_and_large_bodies_still_work() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let auth = basic(&key);
    let mut stream = tls(&server).await;
    let mut pending = Vec::new();
    // Three pipelined requests in one write, then a large body, all on one connection.
    let ping = format!("GET /api/ping HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\n\r\n");
    stream.write_all(ping.repeat(3).as_bytes()).await.unwrap();
    for _ in 0..3 {
        let reply = read_reply(&mut stream, &mut pending).await.expect("a pipelined reply");
        assert_eq!((reply.status, reply.json()), (200, json!({"ping": "pong"})));
    }
    let body = format!("{{\"name\":\"Large\",\"ignored\":\"{}\"}}", "p".repeat(900 * 1024));
    let post = format!(
        "POST /api/counterparties HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(post.as_bytes()).await.unwrap();
    let reply = read_reply(&mut stream, &mut pending).await.expect("a reply to the large body");
    assert_eq!(reply.status, 201, "{reply:?}");
    assert_eq!(reply.header("connection"), None, "the connection stays open");
    // A chunked upload within the limit, still on the same connection.
    let chunked = format!(
        "POST /api/counterparties HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n5\r\n{{\"nam\r\n9\r\ne\":\"Chu\"}}\r\n0\r\n\r\n"
    );
    stream.write_all(chunked.as_bytes()).await.unwrap();
    let reply = read_reply(&mut stream, &mut pending).await.expect("a reply to the chunked body");
    assert_eq!((reply.status, &reply.json()["name"]), (201, &json!("Chu")), "{reply:?}");
}

#[tokio::test]
async fn t2_plain_http_on_the_tls_port_keeps_its_error_body() {
    let server = TestServer::start().await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(b"GET /api/ping HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
    let reply = read_reply(&mut stream, &mut Vec::new()).await.expect("a reply");
    reply.assert_error(400, "https_required");
}
