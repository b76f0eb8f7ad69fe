//! Typed configuration: defaults here, overridden by flags or `PAYRAIL_*` variables in `main`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::base::time::{Clock, SystemClock};
use crate::domain::webhook::{EndpointRules, UrlPolicy};
use crate::domain::webhook_delivery::RetryPolicy;

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
    /// The master key ring secrets at rest are sealed under (SPEC S4); `None` means
    /// `<data_dir>/master.key`, created on first start.
    pub master_key_file: Option<PathBuf>,
    /// `sqlite://PATH` or `postgres://...`; `None` means `sqlite://<data_dir>/payrail.db`.
    pub database_url: Option<String>,
    /// Most PostgreSQL connections one instance opens.
    pub database_pool_max: usize,
    /// How long one PostgreSQL connection's whole set-up (TCP, startup, authentication) may take
    /// on one host before the next host of the URL is tried (SPEC H1, H3).
    pub database_connect_timeout_ms: u64,
    /// How long any one database call (a query, a transaction up to its COMMIT) may take before
    /// the request is answered 503 and the connection dropped; also the server-side
    /// `statement_timeout` (SPEC H3). Keep it well below `request_timeout_ms`.
    pub database_timeout_ms: u64,
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
    /// How long a client has to send a request's headers.
    pub header_read_timeout_ms: u64,
    pub connections_max: usize,
    /// Most connections open at once from one client address (an IPv4 address, or an IPv6 /64)
    /// (SPEC T4). `None`: [`DEFAULT_CONNECTIONS_PER_ADDRESS_MAX`] over TLS, no cap of its own
    /// behind a proxy (plain HTTP, where every connection comes from the proxy); `Some(0)`: none.
    pub connections_per_address_max: Option<usize>,
    /// Requests per second each API key may make (token bucket); 0 turns limiting off.
    pub rate_limit_per_sec: u32,
    /// Requests a key may make at once above its rate.
    pub rate_limit_burst: u32,
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
    /// How often the bank worker looks for connections' cut-off times that came and for failed
    /// uploads due a retry (SPEC B2); 0 turns scheduled cut-offs off (`payrail bank cutoff`
    /// still runs them).
    pub bank_tick_ms: u64,
    /// Send webhooks to private, shared, link-local and unique-local addresses (10/8,
    /// 172.16/12, 192.168/16, 100.64/10, 169.254/16, fc00::/7, fe80::/10), in both modes; off
    /// by default (server-side request forgery guard, SPEC W5). Loopback is for sandbox mode
    /// only, whatever this says.
    pub webhooks_allow_private: bool,
    /// How often the webhook worker looks for new events and due deliveries.
    pub webhook_poll_ms: u64,
    /// How long a receiver has to answer a webhook before the attempt counts as failed (W3: 5 s).
    pub webhook_timeout_ms: u64,
    /// How long a claimed delivery is reserved for the instance sending it (at least the timeout
    /// and 3 s); a crashed sender's deliveries are due again after it.
    pub webhook_lease_ms: u64,
    /// The first retry waits between half of this and this; each next one twice as long.
    pub webhook_retry_base_ms: u64,
    /// Longest wait between two attempts.
    pub webhook_retry_max_ms: u64,
    /// How long a failing delivery is retried before it is marked `failed` (W3: days).
    pub webhook_retry_window_secs: i64,
    /// How long finished (delivered or failed) deliveries stay listable before they are purged.
    pub webhook_delivery_retention_secs: i64,
    /// Webhook endpoints one organization and mode may have (SPEC W4); past it, 422.
    pub webhook_endpoints_max: usize,
    /// Webhook sends in flight in this instance at most.
    pub webhook_in_flight_max: usize,
    /// Webhook sends in flight for one organization and mode at most (in this instance), so
    /// one tenant's hanging receivers hold only its own share (SPEC W4).
    pub webhook_tenant_in_flight_max: usize,
    /// Webhook sends in flight to one endpoint at most (in this instance).
    pub webhook_endpoint_in_flight_max: usize,
    pub clock: Arc<dyn Clock>,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8443";
pub const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:9464";
pub const DEFAULT_DATA_DIR: &str = "./payrail-data";
/// Connections one client address may hold over TLS unless configured: well below the global
/// cap, well above what a pooled client opens (SPEC T4).
pub const DEFAULT_CONNECTIONS_PER_ADDRESS_MAX: usize = 256;

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            master_key_file: None,
            database_url: None,
            database_pool_max: 16,
            database_connect_timeout_ms: 5_000,
            database_timeout_ms: 10_000,
            tls: TlsSource::SelfSigned,
            plain_http: false,
            admin_listen: DEFAULT_ADMIN_LISTEN.parse().ok(),
            body_limit_bytes: 1024 * 1024,
            request_timeout_ms: 30_000,
            handshake_timeout_ms: 10_000,
            header_read_timeout_ms: 10_000,
            connections_max: 4096,
            connections_per_address_max: None,
            rate_limit_per_sec: 0,
            rate_limit_burst: 100,
            idempotency_ttl_secs: 24 * 60 * 60,
            idempotency_lease_ms: 10_000,
            idempotency_strict: false,
            sandbox_step_ms: 2_000,
            bank_tick_ms: 15_000,
            webhooks_allow_private: false,
            webhook_poll_ms: 250,
            webhook_timeout_ms: 5_000,
            webhook_lease_ms: 8_000,
            webhook_retry_base_ms: 5_000,
            webhook_retry_max_ms: 3_600_000,
            webhook_retry_window_secs: 3 * 24 * 60 * 60,
            webhook_delivery_retention_secs: 30 * 24 * 60 * 60,
            webhook_endpoints_max: crate::domain::webhook::ENDPOINTS_MAX_DEFAULT,
            webhook_in_flight_max: 64,
            webhook_tenant_in_flight_max: 8,
            webhook_endpoint_in_flight_max: 4,
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

    /// What webhook endpoints may be (SPEC W4, W5).
    pub fn webhook_endpoint_rules(&self) -> EndpointRules {
        EndpointRules { policy: UrlPolicy { allow_private: self.webhooks_allow_private }, endpoints_max: self.webhook_endpoints_max }
    }

    /// The per-address connection cap in force (SPEC T4), never above the global cap.
    pub fn connections_per_address_cap(&self) -> usize {
        let cap = match self.connections_per_address_max {
            Some(0) => self.connections_max,
            Some(cap) => cap,
            None if self.plain_http => self.connections_max,
            None => DEFAULT_CONNECTIONS_PER_ADDRESS_MAX,
        };
        cap.min(self.connections_max)
    }

    /// The webhook retry schedule these settings ask for (SPEC W3).
    pub fn webhook_retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            base_ms: self.webhook_retry_base_ms.max(1),
            max_ms: self.webhook_retry_max_ms.max(self.webhook_retry_base_ms).max(1),
            window_secs: self.webhook_retry_window_secs.max(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t4_per_address_cap_defaults_by_mode_and_never_exceeds_the_global_cap() {
        let tls = Config::default();
        assert_eq!(tls.connections_per_address_cap(), DEFAULT_CONNECTIONS_PER_ADDRESS_MAX);
        let proxied = Config { plain_http: true, ..Config::default() };
        assert_eq!(proxied.connections_per_address_cap(), proxied.connections_max, "behind a proxy, the proxy is every client");
        let off = Config { connections_per_address_max: Some(0), ..Config::default() };
        assert_eq!(off.connections_per_address_cap(), off.connections_max);
        let small = Config { connections_max: 64, connections_per_address_max: Some(1000), ..Config::default() };
        assert_eq!(small.connections_per_address_cap(), 64);
        let set = Config { plain_http: true, connections_per_address_max: Some(8), ..Config::default() };
        assert_eq!(set.connections_per_address_cap(), 8, "an explicit cap holds behind a proxy too");
    }
}
