//! SPEC T, A, K and L3 over HTTPS against the real server.

mod common;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::{TestServer, assert_error, client_trusting, json};
use payrail::domain::api_key::Mode;
use payrail::domain::keys;
use reqwest::Response;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CHALLENGE: &str = "Basic realm=\"payrail\"";

/// Sends `GET path` with a raw `Authorization` header value (or none).
async fn get_with_authorization(server: &TestServer, path: &str, authorization: Option<&str>) -> Response {
    let mut request = server.client.get(server.url(path));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    request.send().await.expect("request")
}

/// Basic credentials, encoded as a client would.
fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{user}:{password}")))
}

/// Asserts a 401 of SPEC A2: the challenge header, the L3 body, `code`, and that the body does
/// not echo any of `secrets` back.
async fn assert_401(response: Response, code: &str, secrets: &[&str], case: &str) {
    assert_eq!(
        response.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_owned()),
        Some(CHALLENGE.to_owned()),
        "WWW-Authenticate for {case}"
    );
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        assert!(!text.contains(secret), "{case}: the 401 body reveals the credential: {text}");
    }
    let body: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{case}: not JSON: {text}"));
    assert_eq!(status, 401, "{case}: status; body {body}");
    assert_error(status, &body, 401, code);
}

// ---------------------------------------------------------------------------------------------
// A1, A2: authentication
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a1_ping_with_basic_key() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let (status, body) = json(server.get("/api/ping", &key).send().await.unwrap()).await;
    assert_eq!((status, body), (200, serde_json::json!({"ping": "pong"})));
}

#[tokio::test]
async fn a2_missing_credentials_answer_401_with_challenge() {
    let server = TestServer::start().await;
    let response = server.client.get(server.url("/api/ping")).send().await.unwrap();
    assert_eq!(response.headers()["www-authenticate"], "Basic realm=\"payrail\"");
    let (status, body) = json(response).await;
    assert_error(status, &body, 401, "invalid_key");
}

#[tokio::test]
async fn a1_organization_id_as_user_name_is_accepted() {
    let server = TestServer::start().await;
    let default_key = server.key().await;
    let acme_key = server.key_for("acme", Mode::Live).await;
    for key in [&default_key, &acme_key] {
        let response = get_with_authorization(&server, "/api/ping", Some(&basic(&key.org, &key.secret))).await;
        let (status, body) = json(response).await;
        assert_eq!((status, body), (200, json!({"ping": "pong"})), "user name {}", key.org);
    }
    // The user name is matched exactly (lower-case "basic" scheme is fine, RFC 7617).
    let lower = format!("basic {}", STANDARD.encode(format!("x-api-key:{}", default_key.secret)));
    let (status, _) = json(get_with_authorization(&server, "/api/ping", Some(&lower)).await).await;
    assert_eq!(status, 200, "the scheme name is case-insensitive");
}

#[tokio::test]
async fn a2_no_header_is_401() {
    let server = TestServer::start().await;
    server.key().await;
    for path in ["/api/ping", "/api/api_keys/current"] {
        let response = get_with_authorization(&server, path, None).await;
        assert_401(response, "invalid_key", &[], &format!("no header on {path}")).await;
    }
    let empty = get_with_authorization(&server, "/api/ping", Some("")).await;
    assert_401(empty, "invalid_key", &[], "empty header").await;
}

#[tokio::test]
async fn a2_other_schemes_are_401() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let encoded = STANDARD.encode(format!("x-api-key:{}", key.secret));
    let cases = [
        format!("Bearer {}", key.secret),
        format!("Bearer {encoded}"),
        format!("Digest username=\"x-api-key\", realm=\"payrail\", response=\"{}\"", key.secret),
        format!("Token {encoded}"),
        key.secret.clone(),
        encoded.clone(),
        "Basic".to_owned(),
        "Basic ".to_owned(),
    ];
    for case in &cases {
        let response = get_with_authorization(&server, "/api/ping", Some(case)).await;
        assert_401(response, "invalid_key", &[&key.secret], case).await;
    }
}

#[tokio::test]
async fn a2_broken_base64_is_401() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let encoded = STANDARD.encode(format!("x-api-key:{}", key.secret));
    let cases = [
        "Basic !!!not-base64!!!".to_owned(),
        format!("Basic {}", &encoded[..encoded.len() - 1]),
        format!("Basic {encoded}%%"),
        format!("Basic {}*{}", &encoded[..10], &encoded[10..]),
        format!("Basic {}", encoded.replace('=', "")),
        format!("Basic {}", STANDARD.encode([0xff, 0xfe, b':', 0xfd])),
    ];
    for case in &cases {
        let response = get_with_authorization(&server, "/api/ping", Some(case)).await;
        assert_401(response, "invalid_key", &[&key.secret], case).await;
    }
}

#[tokio::test]
async fn a2_missing_colon_is_401() {
    let server = TestServer::start().await;
    let key = server.key().await;
    for raw in [format!("x-api-key{}", key.secret), key.secret.clone(), "x-api-key".to_owned()] {
        let case = format!("Basic {}", STANDARD.encode(&raw));
        let response = get_with_authorization(&server, "/api/ping", Some(&case)).await;
        assert_401(response, "invalid_key", &[&key.secret], &raw).await;
    }
}

#[tokio::test]
async fn a2_wrong_user_name_is_401() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let acme = server.key_for("acme", Mode::Sandbox).await;
    let cases = [
        ("", key.secret.as_str()),
        ("admin", key.secret.as_str()),
        ("X-API-KEY", key.secret.as_str()),
        ("x-api-key ", key.secret.as_str()),
        // Another organization's id is not a valid user name for this key.
        ("acme", key.secret.as_str()),
        ("default", acme.secret.as_str()),
    ];
    for (user, password) in cases {
        let response = get_with_authorization(&server, "/api/ping", Some(&basic(user, password))).await;
        assert_401(response, "invalid_key", &[password], &format!("user {user:?}")).await;
    }
}

#[tokio::test]
async fn a2_wrong_key_is_401() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let last = key.secret.chars().last().unwrap();
    let flipped = format!("{}{}", &key.secret[..key.secret.len() - 1], if last == 'a' { 'b' } else { 'a' });
    let live_prefix = key.secret.replacen("pr_sandbox_", "pr_live_", 1);
    let cases = [
        String::new(),
        "password".to_owned(),
        key.secret[..key.secret.len() - 1].to_owned(),
        format!("{}x", key.secret),
        format!(" {}", key.secret),
        key.secret.to_uppercase(),
        flipped,
        live_prefix,
        "x".repeat(2000),
    ];
    for case in &cases {
        let response = get_with_authorization(&server, "/api/ping", Some(&basic("x-api-key", case))).await;
        // A long wrong key must not be echoed either (short ones are ordinary words).
        let echoed: &str = if case.len() > 20 { case } else { "" };
        assert_401(response, "invalid_key", &[echoed, &key.secret], &format!("password {:?}", &case[..case.len().min(60)])).await;
    }
}

#[tokio::test]
async fn a2_well_formed_unknown_key_is_401() {
    let server = TestServer::start().await;
    server.key().await;
    for unknown in [format!("pr_sandbox_{}", "A".repeat(43)), format!("pr_live_{}", "z9".repeat(21) + "q")] {
        assert_eq!(unknown.rsplit('_').next().unwrap().len(), 43, "well-formed: prefix and 43 base62 characters");
        let response = get_with_authorization(&server, "/api/ping", Some(&basic("x-api-key", &unknown))).await;
        assert_401(response, "invalid_key", &[&unknown], &unknown).await;
    }
    // A real key from another server's database is unknown here.
    let other = TestServer::start().await;
    let foreign = other.key().await;
    let response = server.get("/api/ping", &foreign).send().await.unwrap();
    assert_401(response, "invalid_key", &[&foreign.secret], "key of another database").await;
}

#[tokio::test]
async fn a2_revoked_key_is_401_at_once() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let bystander = server.key().await;
    assert_eq!(server.get("/api/ping", &key).send().await.unwrap().status(), 200);
    keys::revoke(server.store.as_ref(), server.clock.as_ref(), &key.id).await.expect("revoke");
    for path in ["/api/ping", "/api/api_keys/current", "/api/nowhere"] {
        let response = server.get(path, &key).send().await.unwrap();
        assert_401(response, "invalid_key", &[&key.secret], &format!("revoked key on {path}")).await;
    }
    // Also when the organization id is the user name.
    let response = get_with_authorization(&server, "/api/ping", Some(&basic(&key.org, &key.secret))).await;
    assert_401(response, "invalid_key", &[&key.secret], "revoked key, org as user").await;
    // Revoking one key leaves the others working.
    assert_eq!(server.get("/api/ping", &bystander).send().await.unwrap().status(), 200);
    // Revoking again changes nothing, and the key stays refused after a restart.
    keys::revoke(server.store.as_ref(), server.clock.as_ref(), &key.id).await.expect("revoke twice");
    let dir = server.stop().await;
    let server = TestServer::start_in(dir, |_| {}).await;
    let response = server.get("/api/ping", &key).send().await.unwrap();
    assert_401(response, "invalid_key", &[&key.secret], "revoked key after restart").await;
    assert_eq!(server.get("/api/ping", &bystander).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn a2_rolled_key_works_during_grace_then_is_expired_key() {
    let server = TestServer::start().await;
    let old = server.key().await;
    let (issued, expiring) = keys::roll(server.store.as_ref(), server.clock.as_ref(), &old.id, 3600).await.expect("roll");
    let new = common::Key { id: issued.key.id.clone(), secret: issued.secret.expose().to_owned(), org: old.org.clone() };
    assert_eq!(expiring.id, old.id);
    assert_ne!(new.secret, old.secret);
    assert!(new.secret.starts_with("pr_sandbox_"), "the successor keeps the mode");

    // Within the grace period both keys work.
    server.clock.advance_secs(3500);
    for key in [&old, &new] {
        let (status, body) = json(server.get("/api/ping", key).send().await.unwrap()).await;
        assert_eq!((status, body), (200, json!({"ping": "pong"})));
    }
    let (_, current) = json(server.get("/api/api_keys/current", &old).send().await.unwrap()).await;
    assert!(current["expires_at"].is_string(), "the rolled key shows its expiry: {current}");

    // After it, the old key answers expired_key; the new one keeps working.
    server.clock.advance_secs(200);
    for path in ["/api/ping", "/api/api_keys/current", "/api/nowhere"] {
        let response = server.get(path, &old).send().await.unwrap();
        assert_401(response, "expired_key", &[&old.secret], &format!("expired key on {path}")).await;
    }
    let (status, current) = json(server.get("/api/api_keys/current", &new).send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(current["id"], new.id.as_str());
    assert_eq!(current["expires_at"], Value::Null);

    // An expired key cannot be rolled again; the new one can.
    assert!(keys::roll(server.store.as_ref(), server.clock.as_ref(), &old.id, 60).await.is_err());
    // Revoking the successor makes it fail at once, with invalid_key.
    keys::revoke(server.store.as_ref(), server.clock.as_ref(), &new.id).await.expect("revoke");
    let response = server.get("/api/ping", &new).send().await.unwrap();
    assert_401(response, "invalid_key", &[&new.secret], "revoked successor").await;
}

#[tokio::test]
async fn a2_every_invalid_key_refusal_is_the_same_reply() {
    // Nothing about the key is revealed: a missing header, garbage, an unknown key, a real key
    // with the wrong user name and a revoked key are indistinguishable from outside.
    let server = TestServer::start().await;
    let key = server.key().await;
    let revoked = server.key().await;
    keys::revoke(server.store.as_ref(), server.clock.as_ref(), &revoked.id).await.expect("revoke");
    let unknown = format!("pr_sandbox_{}", "A".repeat(43));
    let cases = [
        None,
        Some("Bearer x".to_owned()),
        Some("Basic !!!".to_owned()),
        Some(basic("x-api-key", &unknown)),
        Some(basic("admin", &key.secret)),
        Some(basic("x-api-key", &revoked.secret)),
    ];
    let mut replies = Vec::new();
    for case in &cases {
        let response = get_with_authorization(&server, "/api/ping", case.as_deref()).await;
        let status = response.status().as_u16();
        let challenge = response.headers().get("www-authenticate").cloned();
        replies.push((status, challenge, response.text().await.unwrap()));
    }
    for (reply, case) in replies.iter().zip(&cases) {
        assert_eq!(reply, &replies[0], "the refusal for {case:?} differs from the one for no header");
    }
}

#[tokio::test]
async fn a2_unknown_api_path_is_401_without_auth_and_404_with() {
    let server = TestServer::start().await;
    let key = server.key().await;
    for path in ["/api", "/api/nowhere", "/api/no_such_resource", "/api/api_keys", "/api/ping/extra", "/api/ping/", "/api//ping"] {
        let response = get_with_authorization(&server, path, None).await;
        assert_401(response, "invalid_key", &[], &format!("unauthenticated {path}")).await;
        let response = get_with_authorization(&server, path, Some("Bearer nope")).await;
        assert_401(response, "invalid_key", &[], &format!("bad scheme on {path}")).await;
        let (status, body) = json(server.get(path, &key).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
    }
}

#[tokio::test]
async fn a2_api_root_with_trailing_slash_is_401_before_404() {
    // `/api/` is an `/api/*` path like any other: 401 comes before 404 (issue 2).
    let server = TestServer::start().await;
    let key = server.key().await;
    let response = get_with_authorization(&server, "/api/", None).await;
    assert_401(response, "invalid_key", &[], "unauthenticated /api/").await;
    let (status, body) = json(server.get("/api/", &key).send().await.unwrap()).await;
    assert_error(status, &body, 404, "resource_not_found");
}

// ---------------------------------------------------------------------------------------------
// A3: the key in use, organizations and modes
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a3_current_key_has_exactly_the_spec_fields_and_no_secret() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let response = server.get("/api/api_keys/current", &key).send().await.unwrap();
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("application/json"), "content type");
    let text = response.text().await.unwrap();
    assert!(!text.contains(&key.secret), "the secret leaks: {text}");
    assert!(!text.to_lowercase().contains("hash"), "a hash leaks: {text}");
    assert!(!text.to_lowercase().contains("pepper"), "the pepper leaks: {text}");
    assert!(!text.contains("pr_sandbox_"), "something key-shaped leaks: {text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    let object = body.as_object().expect("an object");
    let mut fields: Vec<&str> = object.keys().map(String::as_str).collect();
    fields.sort_unstable();
    let mut expected = vec![
        "id",
        "object",
        "name",
        "live_mode",
        "organization_id",
        "created_at",
        "updated_at",
        "expires_at",
        "decommissioned",
        "decommissioned_at",
    ];
    expected.sort_unstable();
    assert_eq!(fields, expected, "fields of {body}");
    assert_eq!(body["id"], key.id.as_str());
    assert_eq!(body["object"], "api_key");
    assert_eq!(body["name"], "test");
    assert_eq!(body["live_mode"], false);
    assert_eq!(body["organization_id"], "default");
    assert_eq!(body["expires_at"], Value::Null);
    assert_eq!(body["decommissioned"], false);
    assert_eq!(body["decommissioned_at"], Value::Null);
    for field in ["created_at", "updated_at"] {
        let stamp = body[field].as_str().unwrap_or_else(|| panic!("{field} is a string in {body}"));
        assert!(stamp.ends_with('Z') && stamp.contains('T'), "{field} is RFC 3339 UTC: {stamp}");
    }
}

#[tokio::test]
async fn a3_each_key_sees_its_own_organization_and_mode() {
    let server = TestServer::start().await;
    let sandbox = server.key().await;
    let live = server.key_for("acme", Mode::Live).await;
    let acme_sandbox = server.key_for("acme", Mode::Sandbox).await;
    let cases = [(&sandbox, "default", false), (&live, "acme", true), (&acme_sandbox, "acme", false)];
    for (key, org, live_mode) in cases {
        assert!(key.secret.starts_with(if live_mode { "pr_live_" } else { "pr_sandbox_" }), "prefix of {}", key.id);
        let (status, body) = json(server.get("/api/api_keys/current", key).send().await.unwrap()).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["id"], key.id.as_str());
        assert_eq!(body["organization_id"], org);
        assert_eq!(body["live_mode"], live_mode);
    }
}

#[tokio::test]
async fn a3_resources_of_another_organization_or_mode_answer_404() {
    let server = TestServer::start().await;
    let owner = server.key().await;
    let same_scope = server.key().await;
    let other_mode = server.key_for("default", Mode::Live).await;
    let other_org = server.key_for("acme", Mode::Sandbox).await;
    let (status, created) = json(server.post("/api/counterparties", &owner, &json!({"name": "Owned"})).send().await.unwrap()).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["live_mode"], false, "every object carries live_mode: {created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let path = format!("/api/counterparties/{id}");

    // Another key of the same organization and mode sees it.
    let (status, _) = json(server.get(&path, &same_scope).send().await.unwrap()).await;
    assert_eq!(status, 200);
    for (stranger, who) in [(&other_mode, "live key of the same organization"), (&other_org, "sandbox key of another organization")] {
        let (status, body) = json(server.get(&path, stranger).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
        let (status, body) = json(server.patch(&path, stranger, &json!({"name": "Stolen"})).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
        let (status, body) = json(server.delete(&path, stranger).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
        let (status, listed) = json(server.get("/api/counterparties", stranger).send().await.unwrap()).await;
        assert_eq!((status, listed), (200, json!([])), "{who} lists nothing");
    }
    // Untouched by all of that.
    let (status, body) = json(server.get(&path, &owner).send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(body["name"], "Owned");
    // An id that names nothing at all answers the same 404.
    let (status, body) = json(server.get("/api/counterparties/00000000-0000-4000-8000-000000000000", &owner).send().await.unwrap()).await;
    assert_error(status, &body, 404, "resource_not_found");
}

// ---------------------------------------------------------------------------------------------
// T1-T3: transport
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn t1_certificate_verifies_for_127_0_0_1_and_localhost() {
    let server = TestServer::start().await;
    let key = server.key().await;
    assert!(server.base.starts_with("https://127.0.0.1:"), "served over HTTPS: {}", server.base);
    let (status, _) = json(server.get("/api/ping", &key).send().await.unwrap()).await;
    assert_eq!(status, 200, "verified for 127.0.0.1");

    let cert = reqwest::Certificate::from_pem(&server.cert_pem).unwrap();
    let by_name = reqwest::Client::builder()
        .add_root_certificate(cert)
        .tls_built_in_root_certs(false)
        .resolve("localhost", server.addr)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let url = format!("https://localhost:{}/api/ping", server.addr.port());
    let response = by_name.get(&url).basic_auth("x-api-key", Some(&key.secret)).send().await.expect("verified for localhost");
    let (status, body) = json(response).await;
    assert_eq!((status, body), (200, json!({"ping": "pong"})));

    // A name the certificate does not cover fails verification.
    let cert = reqwest::Certificate::from_pem(&server.cert_pem).unwrap();
    let wrong_name = reqwest::Client::builder()
        .add_root_certificate(cert)
        .tls_built_in_root_certs(false)
        .resolve("payrail.example", server.addr)
        .build()
        .unwrap();
    let url = format!("https://payrail.example:{}/api/ping", server.addr.port());
    assert!(wrong_name.get(&url).send().await.is_err(), "a name outside the certificate must not verify");
}

#[tokio::test]
async fn t1_client_that_does_not_trust_the_certificate_fails() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let untrusting = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let result = untrusting.get(server.url("/api/ping")).basic_auth("x-api-key", Some(&key.secret)).send().await;
    let err = result.expect_err("an untrusted self-signed certificate must fail verification");
    assert!(err.is_connect() || err.is_request(), "a TLS failure, not an HTTP answer: {err:?}");
}

#[tokio::test]
async fn t1_tls_1_2_and_1_3_clients_connect() {
    use reqwest::tls::Version;
    let server = TestServer::start().await;
    let key = server.key().await;
    for version in [Version::TLS_1_2, Version::TLS_1_3] {
        let client = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&server.cert_pem).unwrap())
            .tls_built_in_root_certs(false)
            .min_tls_version(version)
            .max_tls_version(version)
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let response = client
            .get(server.url("/api/ping"))
            .basic_auth("x-api-key", Some(&key.secret))
            .send()
            .await
            .unwrap_or_else(|err| panic!("{version:?} client: {err:?}"));
        let (status, body) = json(response).await;
        assert_eq!((status, body), (200, json!({"ping": "pong"})), "{version:?}");
    }
}

#[tokio::test]
async fn t1_self_signed_certificate_is_kept_in_the_data_dir_across_restarts() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let cert_file = server.dir.path().join("tls-cert.pem");
    assert_eq!(std::fs::read(&cert_file).expect("tls-cert.pem in the data dir"), server.cert_pem);
    let first = server.cert_pem.clone();
    let dir = server.stop().await;
    let server = TestServer::start_in(dir, |_| {}).await;
    assert_eq!(server.cert_pem, first, "the same certificate after a restart");
    // A client that trusted the first run's certificate still verifies, and the key survived.
    let client = client_trusting(&first);
    let response = client.get(server.url("/api/ping")).basic_auth("x-api-key", Some(&key.secret)).send().await.unwrap();
    assert_eq!(response.status(), 200);
}

/// Writes `request` to the server's port in plain text and reads the whole answer.
async fn raw_exchange(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request).await.expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("the server answers and closes within 10 s")
        .expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn t2_plain_http_on_the_tls_port_is_400_https_required() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let answer = raw_exchange(server.addr, b"GET /api/ping HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "answer: {answer}");
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("");
    assert!(body.contains("HTTPS"), "the body says HTTPS is required: {answer}");
    assert!(!answer.contains("pong"), "never served: {answer}");

    // With valid credentials it is still refused, never served.
    let authorization = basic("x-api-key", &key.secret);
    let request = format!("GET /api/ping HTTP/1.1\r\nHost: x\r\nAuthorization: {authorization}\r\n\r\n");
    let answer = raw_exchange(server.addr, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "answer: {answer}");
    assert!(!answer.contains("pong"), "never served: {answer}");

    // The listener keeps serving HTTPS afterwards.
    assert_eq!(server.get("/api/ping", &key).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn t3_plain_http_only_behind_the_flag() {
    let server = TestServer::start_with(|config| config.plain_http = true).await;
    assert!(server.base.starts_with("http://"), "base {}", server.base);
    let key = server.key().await;
    let (status, body) = json(server.get("/api/ping", &key).send().await.unwrap()).await;
    assert_eq!((status, body), (200, json!({"ping": "pong"})));
    // Authentication still applies.
    let response = server.client.get(server.url("/api/ping")).send().await.unwrap();
    assert_401(response, "invalid_key", &[], "plain http without a key").await;
    // And the default, without the flag, is HTTPS.
    let tls = TestServer::start().await;
    assert!(tls.base.starts_with("https://"), "base {}", tls.base);
}

// ---------------------------------------------------------------------------------------------
// L3: the framework's own errors in the contract's body
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn l3_wrong_method_is_405_with_error_body() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let cases = [
        server.post("/api/ping", &key, &json!({})),
        server.patch("/api/ping", &key, &json!({})),
        server.delete("/api/ping", &key),
        server.req(reqwest::Method::PUT, "/api/api_keys/current", &key),
        server.delete("/api/api_keys/current", &key),
    ];
    for request in cases {
        let (status, body) = json(request.send().await.unwrap()).await;
        assert_error(status, &body, 405, "method_not_allowed");
    }
    // Without credentials, a wrong method is still a 401 first.
    let response = server.client.post(server.url("/api/ping")).send().await.unwrap();
    assert_401(response, "invalid_key", &[], "POST without a key").await;
}

#[tokio::test]
async fn l3_unknown_route_is_404_with_error_body() {
    let server = TestServer::start().await;
    let key = server.key().await;
    for path in ["/api/nowhere", "/api/pings", "/api/api_keys/other", "/api/ping/1"] {
        let (status, body) = json(server.get(path, &key).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
        let (status, body) = json(server.post(path, &key, &json!({})).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
    }
    // Outside /api nothing is served, with or without a key.
    for path in ["/", "/ping", "/favicon.ico", "/apifoo"] {
        let (status, body) = json(server.client.get(server.url(path)).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
        let (status, body) = json(server.get(path, &key).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
    }
}

/// A POST to a route that reads a JSON body, with a raw body and content type.
async fn post_raw(server: &TestServer, key: &common::Key, path: &str, content_type: Option<&str>, body: Vec<u8>) -> (u16, Value) {
    let mut request = server.req(reqwest::Method::POST, path, key).body(body);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    json(request.send().await.unwrap()).await
}

#[tokio::test]
async fn l3_oversized_body_is_413_request_too_large() {
    let server = TestServer::start_with(|config| config.body_limit_bytes = 1024).await;
    let key = server.key().await;
    let big = serde_json::to_vec(&json!({ "name": "x".repeat(4096) })).unwrap();
    let (status, body) = post_raw(&server, &key, "/api/counterparties", Some("application/json"), big.clone()).await;
    assert_error(status, &body, 413, "request_too_large");
    // Nothing was created.
    let (status, listed) = json(server.get("/api/counterparties", &key).send().await.unwrap()).await;
    assert_eq!((status, listed), (200, json!([])));
    // Just under the limit is judged on its merits.
    let small = serde_json::to_vec(&json!({ "name": "x".repeat(900) })).unwrap();
    let (status, body) = post_raw(&server, &key, "/api/counterparties", Some("application/json"), small).await;
    assert_ne!(status, 413, "{body}");
    // Without a key the answer is 401, whatever the body.
    let response =
        server.client.post(server.url("/api/counterparties")).header("content-type", "application/json").body(big).send().await.unwrap();
    assert_401(response, "invalid_key", &[], "oversized body without a key").await;
}

#[tokio::test]
async fn l3_malformed_json_is_400() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let cases: [&[u8]; 6] = [b"{\"name\": ", b"not json", b"{\"name\": \"a\",}", b"[1, 2]", b"\"a string\"", b"{\"name\": \"\xff\"}"];
    for case in cases {
        let (status, body) = post_raw(&server, &key, "/api/counterparties", Some("application/json"), case.to_vec()).await;
        assert_error(status, &body, 400, "malformed_json");
        let message = body["errors"]["message"].as_str().unwrap();
        assert!(!message.contains("serde") && !message.contains("src/"), "no internals: {message}");
    }
    let (status, listed) = json(server.get("/api/counterparties", &key).send().await.unwrap()).await;
    assert_eq!((status, listed), (200, json!([])), "nothing was created");
}

#[tokio::test]
async fn l3_wrong_content_type_is_415() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let body = br#"{"name": "Acme"}"#.to_vec();
    for content_type in [Some("text/plain"), Some("application/x-www-form-urlencoded"), Some("multipart/form-data; boundary=x"), None] {
        let (status, reply) = post_raw(&server, &key, "/api/counterparties", content_type, body.clone()).await;
        assert_error(status, &reply, 415, "unsupported_media_type");
    }
    // A content coding Payrail does not decode is refused as such, not read as broken JSON.
    let gzipped =
        server.post("/api/counterparties", &key, &json!({"name": "Acme"})).header("Content-Encoding", "gzip").send().await.unwrap();
    let (status, reply) = common::json(gzipped).await;
    assert_error(status, &reply, 415, "unsupported_media_type");
    assert!(reply["errors"]["message"].as_str().unwrap().contains("gzip"), "{reply}");
    // application/json with a charset is JSON, and `identity` is no coding.
    let (status, reply) = post_raw(&server, &key, "/api/counterparties", Some("application/json; charset=utf-8"), body).await;
    assert_eq!(status, 201, "{reply}");
    let identity =
        server.post("/api/counterparties", &key, &json!({"name": "Plain"})).header("Content-Encoding", "identity").send().await.unwrap();
    assert_eq!(identity.status().as_u16(), 201);
    let (_, listed) = common::json(server.get("/api/counterparties", &key).send().await.unwrap()).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "the refused one created nothing: {listed}");
}

// ---------------------------------------------------------------------------------------------
// K3: the admin listener
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn k3_admin_serves_healthz_and_metrics_by_route() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let admin = server.admin.clone().expect("the admin listener is on");
    assert!(admin.starts_with("http://127.0.0.1:"), "plain HTTP on loopback: {admin}");
    let plain = reqwest::Client::new();
    let health = plain.get(format!("{admin}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);

    assert_eq!(server.get("/api/ping", &key).send().await.unwrap().status(), 200);
    assert_eq!(server.client.get(server.url("/api/ping")).send().await.unwrap().status(), 401);
    let metrics = plain.get(format!("{admin}/metrics")).send().await.unwrap();
    assert_eq!(metrics.status(), 200);
    let text = metrics.text().await.unwrap();
    let ping_200 = text
        .lines()
        .find(|l| l.starts_with("payrail_http_requests_total{") && l.contains("route=\"/api/ping\"") && l.contains("status=\"200\""))
        .unwrap_or_else(|| panic!("no ping counter in metrics:\n{text}"));
    let count: u64 = ping_200.rsplit(' ').next().unwrap().parse().expect("a count");
    assert!(count >= 1, "{ping_200}");
    assert!(text.contains("payrail_http_request_duration_seconds_bucket{"), "a latency histogram:\n{text}");
    assert!(text.contains("status=\"401\""), "refusals are counted too:\n{text}");
    assert!(!text.contains(&key.secret), "metrics leak a key");

    // Metrics label routes, never raw paths (ids must not explode the series).
    let (status, _) = json(server.get("/api/no-such-thing-123", &key).send().await.unwrap()).await;
    assert_eq!(status, 404);
    let text = plain.get(format!("{admin}/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(!text.contains("no-such-thing-123"), "a raw path became a label:\n{text}");
}

#[tokio::test]
async fn k3_api_port_serves_no_admin_paths() {
    let server = TestServer::start().await;
    let key = server.key().await;
    for path in ["/healthz", "/metrics", "/api/healthz", "/api/metrics"] {
        let response = server.client.get(server.url(path)).send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert!(status == 404 || status == 401, "{path} without a key: {status} {text}");
        assert!(!text.contains("payrail_http"), "{path} leaks metrics: {text}");
        assert!(!text.contains("ok\n") || text.contains("errors"), "{path} answers health: {text}");
        let body: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{path}: not JSON: {text}"));
        assert!(body["errors"].is_object(), "{path}: L3 body: {text}");
        if path.starts_with("/api/") {
            assert_error(status, &body, 401, "invalid_key");
        } else {
            assert_error(status, &body, 404, "resource_not_found");
        }
        let (status, body) = json(server.get(path, &key).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
    }
}

#[tokio::test]
async fn k3_admin_listener_can_be_turned_off() {
    let server = TestServer::start_with(|config| config.admin_listen = None).await;
    assert!(server.admin.is_none());
    let key = server.key().await;
    assert_eq!(server.get("/api/ping", &key).send().await.unwrap().status(), 200);
}
