//! Typed configuration: defaults here, overridden by flags or `PAYRAIL_*` variables in `main`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::domain::time::{Clock, SystemClock};

/// Where the server's certificate comes from (SPEC T1).
#[derive(Debug, Clone)]
pub enum TlsSource {
    /// Created on first start in the data directory, then reused.
    SelfSigned,
    /// PEM files given by the operator.
    Files { cert: PathBuf, key: PathBuf },
}

#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    /// `sqlite://PATH` or `postgres://...`; `None` means `sqlite://<data_dir>/payrail.db`.
    pub database_url: Option<String>,
    /// Most PostgreSQL connections one instance opens.
    pub database_pool_max: usize,
    pub tls: TlsSource,
    /// Serve plain HTTP instead of TLS (behind a TLS-terminating proxy only, SPEC T3).
    pub plain_http: bool,
    /// The admin listener (`/healthz`, `/metrics`), plain HTTP; `None` turns it off.
    pub admin_listen: Option<SocketAddr>,
    pub body_limit_bytes: usize,
    /// Longest a request may run before it is answered 503 and its work abandoned.
    pub request_timeout_ms: u64,
    /// How long a client has to complete the TLS handshake and send its first bytes.
    pub handshake_timeout_ms: u64,
    pub connections_max: usize,
    /// How long a successful reply is kept for replay (SPEC I3: 24 hours).
    pub idempotency_ttl_secs: i64,
    /// How long an in-flight claim survives an owner that vanished (SPEC I8). A live owner
    /// renews it every third of this, so it is never overtaken however long it runs.
    pub idempotency_lease_ms: u64,
    /// Reject a reused key whose method, path or body differs (SPEC I11).
    pub idempotency_strict: bool,
    /// Time the sandbox bank waits between the steps of a sandbox payment order; 0 moves them
    /// as fast as it can (tests). Live orders are never moved.
    pub sandbox_step_ms: u64,
    pub clock: Arc<dyn Clock>,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8443";
pub const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:9464";
pub const DEFAULT_DATA_DIR: &str = "./payrail-data";

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            database_url: None,
            database_pool_max: 16,
            tls: TlsSource::SelfSigned,
            plain_http: false,
            admin_listen: DEFAULT_ADMIN_LISTEN.parse().ok(),
            body_limit_bytes: 1024 * 1024,
            request_timeout_ms: 30_000,
            handshake_timeout_ms: 10_000,
            connections_max: 4096,
            idempotency_ttl_secs: 24 * 60 * 60,
            idempotency_lease_ms: 10_000,
            idempotency_strict: false,
            sandbox_step_ms: 2_000,
            clock: Arc::new(SystemClock),
        }
    }
}

impl Config {
    /// The database URL in force, with the SQLite default filled in (SPEC K1).
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.clone(),
            None => format!("sqlite://{}", self.data_dir.join("payrail.db").display()),
        }
    }
}
