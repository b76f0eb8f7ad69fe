//! What several suites say to the server below the convenience of `reqwest`: idempotent POSTs
//! kept as raw bytes with their replay headers, Basic credentials, raw TLS connections that
//! trust the server's generated certificate, and one-page id lists.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::Response;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::{Key, TestServer, json};

pub const REPLAYED: &str = "idempotent-replayed";

/// What a test keeps of a reply: status, the replay and retry headers, the raw body bytes.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub replayed: Option<String>,
    pub retry_after: Option<String>,
    pub should_retry: Option<String>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn id(&self) -> String {
        self.json()["id"].as_str().unwrap_or_else(|| panic!("no id in {}", self.text())).to_owned()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub async fn reply(response: Response) -> Reply {
    let header = |name: &str| response.headers().get(name).map(|v| v.to_str().expect("header is text").to_owned());
    let (status, replayed, retry_after, should_retry) =
        (response.status().as_u16(), header(REPLAYED), header("retry-after"), header("x-should-retry"));
    let body = response.bytes().await.expect("body").to_vec();
    Reply { status, replayed, retry_after, should_retry, body }
}

/// `POST path` with `Idempotency-Key: idem`.
pub async fn post_idem(server: &TestServer, path: &str, key: &Key, idem: &str, body: &Value) -> Reply {
    reply(server.post(path, key, body).header("Idempotency-Key", idem).send().await.expect("request")).await
}

/// Every id of a list (one page of up to 100).
pub async fn list_ids(server: &TestServer, path: &str, key: &Key) -> Vec<String> {
    let sep = if path.contains('?') { '&' } else { '?' };
    let (status, body) = json(server.get(&format!("{path}{sep}per_page=100"), key).send().await.unwrap()).await;
    assert_eq!(status, 200, "list {path}: {body}");
    body.as_array().unwrap_or_else(|| panic!("list is an array: {body}")).iter().map(|o| o["id"].as_str().unwrap().to_owned()).collect()
}

/// The `Authorization` value for `key` (user name `x-api-key`).
pub fn basic(key: &Key) -> String {
    format!("Basic {}", STANDARD.encode(format!("x-api-key:{}", key.secret)))
}

/// A TLS client configuration that trusts `cert_pem` alone.
pub fn tls_trusting(cert_pem: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(cert_pem) {
        roots.add(cert.expect("certificate PEM")).expect("root");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// A raw TLS connection over `tcp` to the server, trusting its certificate.
pub async fn tls_over(server: &TestServer, tcp: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
    let name = ServerName::try_from("localhost").expect("server name");
    tokio_rustls::TlsConnector::from(tls_trusting(&server.cert_pem)).connect(name, tcp).await
}

/// A raw TLS connection to the server, trusting its certificate; the handshake within 5 s.
pub async fn tls_connect(server: &TestServer) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(server.addr).await.expect("connect");
    tokio::time::timeout(Duration::from_secs(5), tls_over(server, tcp)).await.expect("handshake in time").expect("handshake")
}
