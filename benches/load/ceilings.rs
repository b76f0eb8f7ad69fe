//! The machine's own ceilings, measured in the same run beside Payrail: `http_ceiling`, a
//! minimal axum + rustls server inside this process (its own runtime, as many workers as
//! Payrail's) checking a Basic header in constant time and answering a small JSON body; and
//! `commit_ceiling`, single-row durable commits on the same disk (SQLite: WAL, synchronous=FULL,
//! one INSERT per transaction on one writer; PostgreSQL: single-row INSERT transactions with
//! synchronous_commit=on at the paired run's concurrency).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hyper::StatusCode;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::harness::driver::{Opener, Outcome, Session, closed_loop};
use crate::harness::pg::pg_connect;
use crate::harness::{BoxResult, RunResult, Store, Target};
use crate::plan::Plan;

/// Row size of the commit ceiling's single-row transactions (about a counterparty document).
const CEILING_ROW_BYTES: usize = 512;

// ---------------------------------------------------------------------------------------------
// http_ceiling: a minimal axum + rustls server in this process

pub struct CeilingServer {
    addr: SocketAddr,
    cert: CertificateDer<'static>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CeilingServer {
    /// Starts on its own multi-threaded runtime (as many workers as Payrail's), on a port of
    /// its own, with a fresh self-signed certificate.
    pub fn start(secret: &str) -> BoxResult<Self> {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .map_err(|e| format!("rcgen: {e}"))?;
        let cert = certified.cert.der().clone();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)
            .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let expected: Arc<[u8]> = Arc::from(format!("x-api-key:{secret}").into_bytes());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
        let thread = std::thread::Builder::new()
            .name("http-ceiling".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = TcpListener::from_std(listener).expect("a tokio listener");
                    tokio::select! {
                        () = ceiling_accept_loop(listener, acceptor, expected) => {}
                        _ = stop_rx => {}
                    }
                });
                runtime.shutdown_background();
            })
            .map_err(|e| e.to_string())?;
        Ok(CeilingServer { addr, cert, stop: Some(stop_tx), thread: Some(thread) })
    }

    /// Where the load generator sends its requests, with the same key as Payrail's.
    pub fn target(&self, secret: &str) -> BoxResult<Arc<Target>> {
        Ok(Arc::new(Target::new(self.addr, self.cert.clone(), secret)?))
    }
}

impl Drop for CeilingServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn ceiling_accept_loop(listener: TcpListener, acceptor: TlsAcceptor, expected: Arc<[u8]>) {
    let app = axum::Router::new().route("/api/ping", axum::routing::get(ceiling_ping)).with_state(expected);
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let _ = stream.set_nodelay(true);
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else { return };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
        });
    }
}

/// Basic auth checked in constant time, then a small JSON body.
async fn ceiling_ping(
    axum::extract::State(expected): axum::extract::State<Arc<[u8]>>,
    headers: hyper::HeaderMap,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    use subtle::ConstantTimeEq;
    let presented = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Basic "))
        .and_then(|b64| BASE64.decode(b64).ok())
        .unwrap_or_default();
    if bool::from(presented.as_slice().ct_eq(&expected)) {
        ([(CONTENT_TYPE, "application/json")], r#"{"ping":"pong"}"#).into_response()
    } else {
        (StatusCode::UNAUTHORIZED, [(CONTENT_TYPE, "application/json")], r#"{"errors":{"code":"invalid_key"}}"#).into_response()
    }
}

// ---------------------------------------------------------------------------------------------
// commit_ceiling

/// Single-row durable commits with SQLite (WAL, synchronous=FULL) on one writer, in `dir`.
fn sqlite_commit_ceiling(dir: &Path, warmup: Duration, duration: Duration) -> BoxResult<RunResult> {
    let err = |e: rusqlite::Error| format!("commit ceiling: {e}");
    let mut conn = rusqlite::Connection::open(dir.join("commit-ceiling.db")).map_err(err)?;
    conn.pragma_update(None, "journal_mode", "WAL").map_err(err)?;
    conn.pragma_update(None, "synchronous", "FULL").map_err(err)?;
    let journal: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).map_err(err)?;
    let sync: i64 = conn.query_row("PRAGMA synchronous", [], |r| r.get(0)).map_err(err)?;
    if journal != "wal" || sync != 2 {
        return Err(format!("commit ceiling: journal_mode={journal} synchronous={sync}, expected wal and 2 (FULL)"));
    }
    conn.execute_batch("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, body BLOB NOT NULL)").map_err(err)?;
    let payload = vec![0x5au8; CEILING_ROW_BYTES];
    let mut result = RunResult::empty("commit_ceiling", 1);
    result.writers = Some(1);
    let start = Instant::now() + warmup;
    let end = start + duration;
    loop {
        let t0 = Instant::now();
        if t0 >= end {
            break;
        }
        let tx = conn.transaction().map_err(err)?;
        tx.prepare_cached("INSERT INTO rows (body) VALUES (?1)").and_then(|mut st| st.execute([&payload])).map_err(err)?;
        tx.commit().map_err(err)?;
        if t0 >= start {
            result.ok += 1;
            let _ = result.hist.record((t0.elapsed().as_micros() as u64).max(1));
        }
    }
    result.elapsed_s = start.elapsed().as_secs_f64();
    Ok(result)
}

struct PgOpener {
    config: tokio_postgres::Config,
}

struct PgSession {
    client: tokio_postgres::Client,
    insert: tokio_postgres::Statement,
    payload: Vec<u8>,
}

impl Opener for PgOpener {
    type S = PgSession;

    async fn open(&self, _conn: usize) -> BoxResult<PgSession> {
        let (client, connection) = self.config.connect(tokio_postgres::NoTls).await.map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let insert = client.prepare("INSERT INTO bench_commit_ceiling (body) VALUES ($1)").await.map_err(|e| e.to_string())?;
        Ok(PgSession { client, insert, payload: vec![0x5a; CEILING_ROW_BYTES] })
    }
}

impl Session for PgSession {
    async fn once(&mut self, _seq: u64) -> Outcome {
        // One statement outside a transaction block: one single-row transaction, one round trip.
        match self.client.execute(&self.insert, &[&self.payload]).await {
            Ok(1) => Outcome::Ok,
            Ok(n) => Outcome::Unexpected(format!("inserted {n} rows")),
            Err(e) if self.client.is_closed() => Outcome::Broken(e.to_string()),
            Err(e) => Outcome::Unexpected(e.to_string()),
        }
    }
}

async fn pg_commit_ceiling(url: &str, conns: usize, plan: &Plan) -> BoxResult<RunResult> {
    let mut config: tokio_postgres::Config = url.parse().map_err(|e| format!("--database-url: {e}"))?;
    config.options("-c synchronous_commit=on");
    let admin = pg_connect(url).await?;
    admin
        .batch_execute("CREATE TABLE IF NOT EXISTS bench_commit_ceiling (id BIGSERIAL PRIMARY KEY, body BYTEA NOT NULL)")
        .await
        .map_err(|e| e.to_string())?;
    let opener = Arc::new(PgOpener { config });
    Ok(closed_loop("commit_ceiling", opener, conns, plan.opts.warmup, plan.opts.duration).await)
}

/// The commit ceiling of `store` at the concurrency of the run it is paired with: on SQLite
/// always one writer (reported at `conns`), on PostgreSQL `conns` connections.
pub async fn commit_ceiling(store: &Store, dir: &Path, conns: usize, plan: &Plan) -> BoxResult<RunResult> {
    match store {
        Store::Sqlite => {
            let (d, w, t) = (dir.to_owned(), plan.opts.warmup, plan.opts.duration);
            let mut run = tokio::task::spawn_blocking(move || sqlite_commit_ceiling(&d, w, t)).await.map_err(|e| e.to_string())??;
            run.connections = conns;
            Ok(run)
        }
        Store::Postgres { url } => pg_commit_ceiling(url, conns, plan).await,
    }
}
