//! Connecting to PostgreSQL through a libpq-style URL, one or several hosts (SPEC H1, H3).
//!
//! tokio-postgres tries a multi-host URL's hosts in turn, but its `connect_timeout` covers only
//! the TCP connect: a hung host (its kernel still accepts connections, its server never
//! answers the startup message) holds the attempt forever and the next host is never tried. So
//! the URL is split into one configuration per host, and each attempt (TCP, startup,
//! authentication, the `target_session_attrs` check) runs under the connect timeout before the
//! next host is tried. The host that answered last is tried first next time, so a pool that
//! moved on after a failover does not pay the hung host's timeout for every new connection. A
//! host whose set-up took the whole timeout (hung, or unreachable) is passed over for one more
//! timeout's length while another host remains: until the old primary's successor is promoted,
//! attempts fail fast on the standby (read-only) instead of waiting on the hung host each time,
//! and the first attempt after the promotion finds the new primary at once.
//!
//! Every connection also gets TCP keepalives and a TCP user timeout (a host that vanishes is
//! noticed by the kernel), and pooled connections get server-side `statement_timeout` and
//! `idle_in_transaction_session_timeout` equal to the call deadline. A pooled connection's
//! notices are read as it runs: one saying a COMMIT's synchronous-standby wait was cut short
//! drops the connection, so that commit is never acknowledged (SPEC H2).

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use deadpool_postgres::Connect;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use rand::Rng;
use tokio_postgres::config::{Host, LoadBalanceHosts};
use tokio_postgres::error::DbError;
use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::{AsyncMessage, Client, Config, Connection, NoTls, Socket};

use super::redact;

/// Idle time before the first keepalive probe, between probes, and probes before giving up.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2);
const KEEPALIVE_RETRIES: u32 = 3;

/// How an instance uses PostgreSQL: pool size and time limits (SPEC H3).
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Most pooled connections.
    pub pool_max: usize,
    /// The whole set-up of one connection to one host: TCP, startup, authentication.
    pub connect_timeout: Duration,
    /// Every call on a connection (a query, a transaction up to its COMMIT); also the
    /// server-side `statement_timeout` and `idle_in_transaction_session_timeout`.
    pub call_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options { pool_max: 16, connect_timeout: Duration::from_secs(5), call_timeout: Duration::from_secs(10) }
    }
}

/// The URL's configuration with durable commits, keepalives and a TCP user timeout.
/// `server_timeouts` adds the server-side statement and idle-transaction timeouts (left out for
/// migrations, which may rightly take longer than a request).
pub fn config(url: &str, options: &Options, server_timeouts: bool) -> anyhow::Result<Config> {
    let mut config = Config::from_str(url).map_err(|e| anyhow::anyhow!("invalid database URL {}: {e}", redact(url)))?;
    if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
        anyhow::bail!("sslmode=require is not supported by this build: reach PostgreSQL over a private network or a local TLS tunnel");
    }
    // Durable commits whatever the server's default (SPEC S3).
    let mut settings = format!("{} -c synchronous_commit=on", config.get_options().unwrap_or(""));
    if server_timeouts {
        let ms = options.call_timeout.as_millis();
        settings.push_str(&format!(" -c statement_timeout={ms} -c idle_in_transaction_session_timeout={ms}"));
    }
    config.options(settings.trim_start());
    config.connect_timeout(options.connect_timeout);
    config.keepalives(true).keepalives_idle(KEEPALIVE_IDLE).keepalives_interval(KEEPALIVE_INTERVAL).keepalives_retries(KEEPALIVE_RETRIES);
    // Data the server's kernel leaves unacknowledged this long breaks the connection.
    config.tcp_user_timeout(options.call_timeout.max(Duration::from_secs(1)));
    Ok(config)
}

/// Connects to the first host of the URL that answers in time (see the module header).
pub struct Connector {
    hosts: Vec<(String, Config)>,
    /// The host to try first: the one that answered last (shared by connectors of one URL).
    preferred: Arc<AtomicUsize>,
    /// Hosts passed over for now (shared likewise).
    suspects: Arc<Suspects>,
    timeout: Duration,
    random: bool,
}

/// Per host, until when it is passed over (milliseconds after `epoch`; 0: not).
struct Suspects {
    epoch: Instant,
    until_ms: Vec<AtomicU64>,
}

impl Suspects {
    fn new(hosts: usize) -> Self {
        Suspects { epoch: Instant::now(), until_ms: (0..hosts).map(|_| AtomicU64::new(0)).collect() }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn passed_over(&self, host: usize) -> bool {
        self.until_ms[host].load(Ordering::Relaxed) > self.now_ms()
    }

    fn suspect(&self, host: usize, for_: Duration) {
        let until = self.now_ms().saturating_add(u64::try_from(for_.as_millis()).unwrap_or(u64::MAX));
        self.until_ms[host].store(until, Ordering::Relaxed);
    }
}

impl Connector {
    pub fn new(config: &Config, timeout: Duration) -> Self {
        let random = config.get_load_balance_hosts() == LoadBalanceHosts::Random;
        let hosts = one_per_host(config);
        let suspects = Arc::new(Suspects::new(hosts.len()));
        Connector { hosts, preferred: Arc::new(AtomicUsize::new(0)), suspects, timeout, random }
    }

    /// A connector for the same hosts with other settings (`config`, from the same URL) that
    /// shares this one's preferred and passed-over hosts: where the migrations found the
    /// primary, the pool looks first.
    pub fn sibling(&self, config: &Config) -> Self {
        Connector {
            hosts: one_per_host(config),
            preferred: self.preferred.clone(),
            suspects: self.suspects.clone(),
            timeout: self.timeout,
            random: self.random,
        }
    }

    /// The hosts to try, in order: from `first` round the list, without those passed over
    /// unless every host is.
    fn order(&self, first: usize) -> Vec<usize> {
        let n = self.hosts.len();
        let all: Vec<usize> = (0..n).map(|step| (first + step) % n).collect();
        let fresh: Vec<usize> = all.iter().copied().filter(|&i| !self.suspects.passed_over(i)).collect();
        if fresh.is_empty() { all } else { fresh }
    }

    pub fn hosts(&self) -> usize {
        self.hosts.len()
    }

    /// A connection to the first host that completes the whole set-up within the timeout.
    pub async fn connect(&self) -> Result<(Client, Connection<Socket, NoTlsStream>), tokio_postgres::Error> {
        let n = self.hosts.len();
        let first = if self.random { rand::rng().random_range(0..n) } else { self.preferred.load(Ordering::Relaxed) % n };
        let mut failure = None;
        for i in self.order(first) {
            let (name, config) = &self.hosts[i];
            let started = Instant::now();
            let outcome = tokio::time::timeout(self.timeout, config.connect(NoTls)).await;
            // The whole timeout spent (hung, or no answer to the TCP connect): pass it over.
            if n > 1 && started.elapsed() >= self.timeout && !matches!(outcome, Ok(Ok(_))) {
                self.suspects.suspect(i, self.timeout);
            }
            let error = match outcome {
                Ok(Ok(pair)) => {
                    if i != first {
                        tracing::warn!(host = %name, "connected to another host of the database URL");
                    }
                    self.preferred.store(i, Ordering::Relaxed);
                    return Ok(pair);
                }
                Ok(Err(err)) => err,
                // tokio-postgres's own timeout error: the one value of its error type that says so.
                Err(_) => tokio_postgres::Error::__private_api_timeout(),
            };
            if n > 1 {
                let code = error.code().map_or("-", |c| c.code());
                super::faults::warn_unavailable(code, &format!("host {name} failed, trying the next: {}", crate::error::chain(&error)));
            }
            failure = Some(error);
        }
        Err(failure.unwrap_or_else(tokio_postgres::Error::__private_api_timeout))
    }
}

/// The pool's way of connecting: the connector, its connection driven by a task of its own.
pub struct PoolConnect(pub Arc<Connector>);

impl Connect for PoolConnect {
    fn connect(&self, _: &Config) -> BoxFuture<'_, Result<(Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>> {
        Box::pin(async move {
            let (client, connection) = self.0.connect().await?;
            Ok((client, tokio::spawn(drive(connection))))
        })
    }
}

/// Drives a pooled connection, reading the server's notices on the way. A COMMIT whose wait
/// for the synchronous standby was cut short (a cancel, or the session being terminated)
/// committed locally but perhaps on no standby, which a failover would lose; PostgreSQL says so
/// in a WARNING just before it reports the COMMIT a success. So on that warning the connection
/// is dropped before the COMMIT's own answer is read: the request sees a lost connection, an
/// outcome unknown (503, its claim kept), never an acknowledgement (SPEC H2).
async fn drive(mut connection: Connection<Socket, NoTlsStream>) {
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    while let Some(message) = messages.next().await {
        match message {
            Ok(AsyncMessage::Notice(notice)) if standby_wait_cut_short(&notice) => {
                tracing::warn!(
                    code = notice.code().code(),
                    error = notice.message(),
                    "a COMMIT's wait for the synchronous standby was cut short; dropping its connection so the commit is not acknowledged"
                );
                return;
            }
            Ok(AsyncMessage::Notice(notice)) => {
                tracing::info!(code = notice.code().code(), notice = notice.message(), "notice from PostgreSQL");
            }
            Ok(_) => {}
            Err(err) => {
                tracing::debug!(error = %crate::error::chain(&err), "a database connection ended");
                return;
            }
        }
    }
}

/// Whether `notice` is PostgreSQL's warning that a COMMIT stopped waiting for its synchronous
/// standby (raised in `SyncRepWaitForLSN`; the routine name is not translated, the message is).
fn standby_wait_cut_short(notice: &DbError) -> bool {
    notice.routine() == Some("SyncRepWaitForLSN") || notice.message().contains("synchronous replication")
}

/// One configuration per host of `config` (named `host:port` for logs; never the password),
/// each with everything else of the original. tokio-postgres offers no way to remove hosts, so
/// each is built afresh from the original's settings.
fn one_per_host(config: &Config) -> Vec<(String, Config)> {
    let n = config.get_hosts().len().max(config.get_hostaddrs().len());
    if n <= 1 {
        return vec![(host_name(config, 0), config.clone())];
    }
    (0..n)
        .map(|i| {
            let mut one = settings_of(config);
            match config.get_hosts().get(i) {
                Some(Host::Tcp(host)) => {
                    one.host(host);
                }
                Some(Host::Unix(path)) => {
                    one.host_path(path);
                }
                None => {}
            }
            if let Some(addr) = config.get_hostaddrs().get(i) {
                one.hostaddr(*addr);
            }
            if let Some(port) = config.get_ports().get(i).or(config.get_ports().first()) {
                one.port(*port);
            }
            (host_name(config, i), one)
        })
        .collect()
}

/// Every setting of `config` but its hosts, addresses and ports.
fn settings_of(config: &Config) -> Config {
    let mut one = Config::new();
    if let Some(user) = config.get_user() {
        one.user(user);
    }
    if let Some(password) = config.get_password() {
        one.password(password);
    }
    if let Some(dbname) = config.get_dbname() {
        one.dbname(dbname);
    }
    if let Some(options) = config.get_options() {
        one.options(options);
    }
    if let Some(name) = config.get_application_name() {
        one.application_name(name);
    }
    if let Some(timeout) = config.get_connect_timeout() {
        one.connect_timeout(*timeout);
    }
    if let Some(timeout) = config.get_tcp_user_timeout() {
        one.tcp_user_timeout(*timeout);
    }
    one.ssl_mode(config.get_ssl_mode())
        .ssl_negotiation(config.get_ssl_negotiation())
        .keepalives(config.get_keepalives())
        .keepalives_idle(config.get_keepalives_idle())
        .target_session_attrs(config.get_target_session_attrs())
        .channel_binding(config.get_channel_binding())
        .load_balance_hosts(config.get_load_balance_hosts());
    if let Some(interval) = config.get_keepalives_interval() {
        one.keepalives_interval(interval);
    }
    if let Some(retries) = config.get_keepalives_retries() {
        one.keepalives_retries(retries);
    }
    one
}

fn host_name(config: &Config, i: usize) -> String {
    let host = match (config.get_hosts().get(i), config.get_hostaddrs().get(i)) {
        (Some(Host::Tcp(host)), _) => host.clone(),
        (Some(Host::Unix(path)), _) => path.display().to_string(),
        (None, Some(addr)) => addr.to_string(),
        (None, None) => "?".into(),
    };
    let port = config.get_ports().get(i).or(config.get_ports().first()).copied().unwrap_or(5432);
    format!("{host}:{port}")
}

#[cfg(test)]
mod tests {
    use tokio_postgres::config::TargetSessionAttrs;

    use super::*;

    #[test]
    fn h1_a_multi_host_url_splits_into_one_configuration_per_host() {
        let url = "postgres://app:s3cret@db1:5433,db2:5434/payrail?target_session_attrs=read-write&application_name=payrail";
        let config = config(url, &Options::default(), true).unwrap();
        let hosts = one_per_host(&config);
        assert_eq!(hosts.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>(), ["db1:5433", "db2:5434"]);
        for (_, one) in &hosts {
            assert_eq!(one.get_hosts().len(), 1);
            assert_eq!(one.get_ports().len(), 1);
            assert_eq!(one.get_user(), Some("app"));
            assert_eq!(one.get_password(), Some(&b"s3cret"[..]));
            assert_eq!(one.get_dbname(), Some("payrail"));
            assert_eq!(one.get_application_name(), Some("payrail"));
            assert_eq!(one.get_target_session_attrs(), TargetSessionAttrs::ReadWrite);
            assert_eq!(one.get_options(), config.get_options());
            assert_eq!(one.get_keepalives_idle(), KEEPALIVE_IDLE);
            assert_eq!(one.get_tcp_user_timeout(), Some(&Duration::from_secs(10)));
        }
        assert!(!hosts.iter().any(|(name, _)| name.contains("s3cret")));
    }

    #[test]
    fn h1_a_host_that_took_the_whole_timeout_is_passed_over_while_another_remains() {
        let config = config("postgres://u@db1:5433,db2:5434,db3:5435/d", &Options::default(), true).unwrap();
        let connector = Connector::new(&config, Duration::from_secs(5));
        assert_eq!(connector.order(1), [1, 2, 0]);
        connector.suspects.suspect(1, Duration::from_secs(60));
        assert_eq!(connector.order(1), [2, 0], "the hung host is passed over");
        let sibling = connector.sibling(&config);
        assert_eq!(sibling.order(0), [0, 2], "siblings share what they know");
        for host in [0, 2] {
            connector.suspects.suspect(host, Duration::from_secs(60));
        }
        assert_eq!(connector.order(1), [1, 2, 0], "with every host passed over, all are tried");
        connector.suspects.suspect(1, Duration::ZERO);
        assert_eq!(connector.order(0), [1], "a host's turn comes back once its time is over");
    }

    #[test]
    fn h3_connections_carry_the_server_side_timeouts_and_durable_commits() {
        let options = Options { call_timeout: Duration::from_millis(2_500), ..Options::default() };
        let pooled = config("postgres://u@h/d?options=-c%20search_path%3Dx", &options, true).unwrap();
        assert_eq!(
            pooled.get_options(),
            Some("-c search_path=x -c synchronous_commit=on -c statement_timeout=2500 -c idle_in_transaction_session_timeout=2500")
        );
        let migrating = config("postgres://u@h/d", &options, false).unwrap();
        assert_eq!(migrating.get_options(), Some("-c synchronous_commit=on"));
    }
}
