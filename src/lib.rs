//! Payrail: a self-hostable payments API server speaking the Modern Treasury wire format.
//!
//! [`launch`] starts a server on a listener the caller bound (tests bind port 0) and returns
//! once it is serving. Layers: `http` (the only module that knows HTTP) calls `api` handlers,
//! which call the `domain`, which calls the `store` trait; `store` is the only module that
//! knows SQL. The contract is SPEC.md; rule ids (T1, I4, ...) are named where they are kept.

pub mod api;
pub mod app;
pub mod bank;
pub mod base;
pub mod config;
pub mod domain;
pub mod error;
pub mod http;
pub mod ledger_monitor;
pub mod sandbox;
pub mod store;
pub mod webhooks;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use base::secret_box::SecretBox;
use config::Config;
use http::serve::ListenerOptions;
use store::Store;
use store::layout::{self, Layout};
use store::postgres::PostgresStore;
use store::sqlite::{ServeLock, SqliteStore};

/// Replies purged per background pass; small, so a purge never holds the writer for long.
const PURGE_BATCH_MAX: usize = 500;
const PURGE_INTERVAL: Duration = Duration::from_secs(60);

/// A running server.
pub struct Server {
    pub local_addr: SocketAddr,
    pub admin_addr: Option<SocketAddr>,
    /// The certificate clients should trust (the generated one, or the configured one).
    pub cert_path: Option<PathBuf>,
    /// The server's store, for in-process tools (tests create keys through it).
    pub store: Arc<dyn Store>,
    /// The master key ring it seals secrets under (for in-process tools, like the store).
    pub secrets: Arc<SecretBox>,
    task: JoinHandle<()>,
    /// Why the server stopped by itself, if it did (a newer storage layout, see `store::layout`).
    stopped_because: Arc<OnceLock<String>>,
}

impl Server {
    /// Waits until the server has shut down and drained: an error if it stopped by itself.
    pub async fn wait(self) -> anyhow::Result<()> {
        let _ = self.task.await;
        match self.stopped_because.get() {
            Some(reason) => Err(anyhow::anyhow!("stopped serving: {reason}")),
            None => Ok(()),
        }
    }
}

/// Opens the store named by the configuration (SQLite or PostgreSQL), applying migrations.
pub async fn connect_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    Ok(connect(config).await?.0)
}

/// Opens the master key ring and the store (whose key pepper it seals): what every command
/// that reads or writes secrets needs.
pub async fn connect(config: &Config) -> anyhow::Result<(Arc<dyn Store>, Arc<SecretBox>)> {
    let (secrets, created) = secrets_made(config)?;
    let url = config.database_url();
    let opened: anyhow::Result<Arc<dyn Store>> = if PostgresStore::is_url(&url) {
        PostgresStore::open_with(&url, &postgres_options(config), &secrets).await.map(|s| Arc::new(s) as Arc<dyn Store>)
    } else {
        open_sqlite(config, &secrets)
    };
    let store = opened.inspect_err(|err| forget_unusable_key(&secrets, created, err))?;
    refuse_newer_layout(store.as_ref()).await?;
    Ok((store, secrets))
}

/// Removes the `master.key` this process just made when the database turned out to be sealed
/// under another key (a command run without the server's `--master-key-file`): that key can
/// open nothing there and nobody sealed anything under it, and left in place it would be
/// mistaken for the data directory's key.
fn forget_unusable_key(secrets: &SecretBox, created: bool, err: &anyhow::Error) {
    let sealed_elsewhere = err.chain().any(|cause| cause.to_string().contains(base::secret_box::UNKNOWN_KEY_SAYS));
    if let (true, true, Some(path)) = (created, sealed_elsewhere, secrets.path()) {
        match std::fs::remove_file(path) {
            Ok(()) => tracing::warn!(path = %path.display(), "removed the master key just made: the database is sealed under another one"),
            Err(remove) => tracing::warn!(path = %path.display(), error = %remove, "could not remove the master key just made"),
        }
    }
}

/// Fails when a newer release has moved the database to a layout this one does not know.
async fn refuse_newer_layout(store: &dyn Store) -> anyhow::Result<()> {
    match layout::read(store).await.context("reading the storage layout's level")? {
        Layout::Known => Ok(()),
        Layout::TooNew(reason) => anyhow::bail!(reason),
    }
}

/// Waits, when this release's migration raised the storage layout's level only just now,
/// until every older instance has seen it and finished its requests (`store::layout`).
async fn hold_off_older_instances(store: &dyn Store, config: &Config) -> anyhow::Result<()> {
    let deadline = Duration::from_millis(config.request_timeout_ms);
    let wait = layout::hold_off(store, deadline, config.clock.now()).await.context("reading when the storage layout changed")?;
    if !wait.is_zero() {
        tracing::warn!(
            wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            "the storage layout was just raised: waiting for older instances to stop before serving"
        );
        tokio::time::sleep(wait).await;
    }
    Ok(())
}

/// The pool size and time limits of the configuration (SPEC H3).
fn postgres_options(config: &Config) -> store::postgres::Options {
    store::postgres::Options {
        pool_max: config.database_pool_max,
        connect_timeout: Duration::from_millis(config.database_connect_timeout_ms.max(1)),
        call_timeout: Duration::from_millis(config.database_timeout_ms.max(1)),
    }
}

/// The master key ring of `--master-key-file`, or the data directory's `master.key` (made on
/// first use, 0600, with a log line saying production should keep it elsewhere). The data
/// directory is made 0700 (or tightened to it) first, and whatever is below it owner-only
/// (SPEC S4).
pub fn open_secrets(config: &Config) -> anyhow::Result<Arc<SecretBox>> {
    Ok(secrets_made(config)?.0)
}

/// [`open_secrets`], and whether it created the data directory's `master.key` just now.
fn secrets_made(config: &Config) -> anyhow::Result<(Arc<SecretBox>, bool)> {
    base::private_fs::ensure_private_dir(&config.data_dir)
        .with_context(|| format!("making the data directory {} private", config.data_dir.display()))?;
    base::private_fs::tighten_tree(&config.data_dir);
    let (secrets, created) = SecretBox::load_or_create(config.master_key_file.as_deref(), &config.data_dir)?;
    let path = secrets.path().map(|p| p.display().to_string()).unwrap_or_default();
    if created {
        tracing::warn!(
            %path,
            "created a master key in the data directory; in production keep it outside (--master-key-file) so a copy of the data directory alone reveals no secret"
        );
    }
    tracing::info!(%path, key = %secrets.newest_id(), "master key ring loaded");
    Ok((Arc::new(secrets), created))
}

/// Opens an embedded SQLite store (PostgreSQL needs [`connect_store`]).
pub fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    open_sqlite(config, open_secrets(config)?.as_ref())
}

fn open_sqlite(config: &Config, secrets: &SecretBox) -> anyhow::Result<Arc<dyn Store>> {
    let url = config.database_url();
    match store::sqlite::path_from_url(&url) {
        Some(path) => {
            let store = SqliteStore::open(&path, secrets).with_context(|| format!("opening SQLite database {}", path.display()))?;
            Ok(Arc::new(store))
        }
        None if PostgresStore::is_url(&url) => anyhow::bail!("PostgreSQL URLs are opened with connect_store"),
        None => anyhow::bail!("unsupported database URL (expected sqlite://PATH or postgres://...)"),
    }
}

/// Applies migrations and exits (`payrail migrate`).
pub async fn migrate(config: &Config) -> anyhow::Result<()> {
    let url = config.database_url();
    if PostgresStore::is_url(&url) {
        return PostgresStore::migrate(&url, &postgres_options(config)).await;
    }
    match store::sqlite::path_from_url(&url) {
        Some(path) => SqliteStore::migrate(&path),
        None => anyhow::bail!("unsupported database URL (expected sqlite://PATH or postgres://...)"),
    }
}

/// Takes the lock that makes this the only server on a SQLite file.
fn lock_store(config: &Config) -> anyhow::Result<Option<ServeLock>> {
    match store::sqlite::path_from_url(&config.database_url()) {
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                base::private_fs::ensure_private_dir(dir)?;
            }
            store::sqlite::lock_for_serving(&path).map(Some)
        }
        None => Ok(None),
    }
}

/// Starts serving the API on `listener` until `shutdown` resolves.
pub async fn launch(config: Config, listener: TcpListener, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<Server> {
    base::private_fs::ensure_private_dir(&config.data_dir)?;
    let lock = lock_store(&config)?;
    let (store, secrets) = connect(&config).await?;
    let mut shutdown = Box::pin(shutdown);
    // A SQLite file has one server at a time (its lock, which an older one lets go only once
    // drained): there is nobody to wait for.
    if lock.is_none() {
        tokio::select! {
            held = hold_off_older_instances(store.as_ref(), &config) => held?,
            () = &mut shutdown => anyhow::bail!("stopped before serving, while older instances were stopping"),
        }
    }
    store.prepare_to_serve().await;
    // Endpoints an older release stored with a plain secret are sealed now (SPEC S4).
    let sealed = domain::webhook::rewrap_secrets(store.as_ref(), &secrets, true).await?;
    if sealed.resealed > 0 {
        tracing::info!(endpoints = sealed.resealed, "sealed webhook secrets that were stored plain");
    }
    let config = Arc::new(config);
    let state = app::AppState::serving(store.clone(), secrets.clone(), config.clone(), Some(Arc::new(bank::rails::BankRails)));
    let (tls, cert_path) = if config.plain_http {
        tracing::warn!("serving plain HTTP: only do this behind a proxy that terminates TLS (SPEC T3)");
        (None, None)
    } else {
        let (tls, cert_path) = http::tls::server_config(&config.tls, &config.data_dir)?;
        tracing::info!(cert = %cert_path.display(), "TLS certificate in use");
        (Some(tokio_rustls::TlsAcceptor::from(tls)), Some(cert_path))
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let on_signal = stop_tx.clone();
    tokio::spawn(async move {
        shutdown.await;
        let _ = on_signal.send(true);
    });
    let stopped_because = Arc::new(OnceLock::new());
    tokio::spawn(watch_layout(store.clone(), stop_tx, stopped_because.clone(), stop_rx.clone()));
    let admin_addr = start_admin(&config, state.clone(), stop_rx.clone()).await?;
    tokio::spawn(purge_replies(state.clone(), stop_rx.clone()));
    let sandbox_worker = tokio::spawn(sandbox::run(state.clone(), stop_rx.clone()));
    tokio::spawn(ledger_monitor::run(state.clone(), stop_rx.clone()));
    let bank_worker = tokio::spawn(bank::cutoff::schedule::run(state.clone(), stop_rx.clone()));
    let webhook_worker = tokio::spawn(webhooks::run(state.clone(), stop_rx.clone()));
    let local_addr = listener.local_addr()?;
    let options = ListenerOptions {
        tls,
        handshake_timeout: Duration::from_millis(config.handshake_timeout_ms),
        header_read_timeout: Duration::from_millis(config.header_read_timeout_ms),
        connections_max: config.connections_max,
        connections_per_address_max: config.connections_per_address_cap(),
    };
    let app = http::router(state, api::routes());
    tracing::info!(%local_addr, scheme = if options.tls.is_some() { "https" } else { "http" }, "payrail is serving");
    let task = tokio::spawn(async move {
        http::serve::serve(listener, app, options, stopped(stop_rx)).await;
        // Sends in flight finish and record their outcome before the database is let go, and
        // so does a cut-off or bank file in progress, which then gives back its lease: another
        // instance carries the connection's orders at once instead of when the lease runs out.
        // Bounded: a bank that stopped answering mid-upload must not hold the shutdown.
        let workers = async { tokio::join!(webhook_worker, sandbox_worker, bank_worker) };
        if tokio::time::timeout(WORKERS_STOP_WAIT, workers).await.is_err() {
            tracing::warn!(
                waited_s = WORKERS_STOP_WAIT.as_secs(),
                "stopping without waiting longer for background work; its leases run out by themselves"
            );
        }
        drop(lock);
        tracing::info!("payrail stopped");
    });
    Ok(Server { local_addr, admin_addr, cert_path, store, secrets, task, stopped_because })
}

/// How long a stopping server waits for its background work in progress (a cut-off, a bank
/// file, webhook sends) to finish.
const WORKERS_STOP_WAIT: Duration = Duration::from_secs(30);

/// Stops the server (drained, as on a signal) once a newer release raises the storage layout's
/// level past this one's; a failed read is the store's trouble, left to the next check.
async fn watch_layout(store: Arc<dyn Store>, stop_tx: watch::Sender<bool>, reason: Arc<OnceLock<String>>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(layout::CHECK_INTERVAL) => {}
            _ = stop.changed() => return,
        }
        if let Ok(Layout::TooNew(why)) = layout::read(store.as_ref()).await {
            tracing::error!(reason = %why, "stopping: the database's storage layout is newer than this release");
            let _ = reason.set(why);
            let _ = stop_tx.send(true);
            return;
        }
    }
}

async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

async fn start_admin(config: &Config, state: app::AppState, stop: watch::Receiver<bool>) -> anyhow::Result<Option<SocketAddr>> {
    let Some(addr) = config.admin_listen else { return Ok(None) };
    let listener = TcpListener::bind(addr).await.with_context(|| format!("binding the admin listener on {addr}"))?;
    let bound = listener.local_addr()?;
    let app = http::admin::router(state, api::openapi::json);
    tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, app).with_graceful_shutdown(stopped(stop)).await {
            tracing::error!(%err, "admin listener failed");
        }
    });
    tracing::info!(%bound, "admin listener (healthz, metrics) is serving plain HTTP");
    Ok(Some(bound))
}

/// Deletes expired idempotency replies in small batches (SPEC I10).
async fn purge_replies(state: app::AppState, mut stop: watch::Receiver<bool>) {
    loop {
        loop {
            match state.store.purge_replies(state.clock.now(), PURGE_BATCH_MAX).await {
                Ok(n) if n == PURGE_BATCH_MAX => tokio::task::yield_now().await,
                Ok(_) => break,
                Err(err) => {
                    tracing::warn!(%err, "purging expired idempotency replies failed");
                    break;
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(PURGE_INTERVAL) => {}
            _ = stop.changed() => return,
        }
    }
}
