//! Payrail's load benchmark (issue 7): the real server against the machine's own ceilings.
//!
//! Run: `cargo bench --bench load -- --quick` (about 30 s), or `cargo bench --bench load` (full:
//! every scenario at 1, 16 and 64 connections, 10 s each, plus the 1,000,000-reply check).
//! Flags: `--quick`, `--database-url URL` (a PostgreSQL server: the bench creates a fresh database
//! in it and drops it at the end), `--duration-secs N`, `--connections 1,16,64`,
//! `--scenarios ping,create_counterparty,...` (a subset; `replay_scale` names the 10k/1M check).
//! Environment: `PAYRAIL_BENCH_SERVER_WRAPPER="valgrind --tool=callgrind ..."` starts the server
//! under a wrapper (for profiles).
//!
//! What it does:
//! - Starts the `payrail` binary that cargo built for this bench (`CARGO_BIN_EXE_payrail`, the
//!   bench profile, i.e. release) as a child process on a fresh temporary data directory, creates
//!   its API key with `payrail keys create --json`, seeds what the scenarios need through the
//!   API, and kills it at the end.
//! - A closed-loop load generator: N connections, each its own HTTP/1.1 keep-alive connection over
//!   TLS (hyper's client connection over tokio-rustls, trusting the server's self-signed
//!   certificate), each sending its next request when the last reply's body is read. Latencies
//!   go into an HdrHistogram (microseconds). A reply with an unexpected status (or a replay
//!   without `Idempotent-Replayed: true`) is an error, counted and sampled in the report.
//! - Ceilings, in the same run on the same machine: `http_ceiling`, a minimal axum + rustls
//!   server inside this process (its own runtime, as many workers as Payrail's) checking a Basic
//!   header in constant time and answering a small JSON body, driven by the same generator at the
//!   same concurrency; `commit_ceiling`, single-row durable commits on the same disk (SQLite: WAL,
//!   synchronous=FULL, one INSERT per transaction on one writer; PostgreSQL: single-row INSERT
//!   transactions with synchronous_commit=on at the create run's concurrency).
//! - Prints a table, then one final line of JSON (the last line of stdout).

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

type BoxResult<T> = Result<T, String>;

/// Longest latency the histograms hold: one minute, in microseconds.
const LATENCY_MAX_US: u64 = 60_000_000;
/// How long a starting server may take to answer its first ping (generous for valgrind).
const START_TIMEOUT: Duration = Duration::from_secs(180);
/// Counterparties seeded for `get` and `list`.
const SEED_COUNTERPARTIES_QUICK: usize = 200;
const SEED_COUNTERPARTIES_FULL: usize = 1000;
/// Stored replies for the idempotency-at-scale check.
const SCALE_SMALL: u64 = 10_000;
const SCALE_LARGE: u64 = 1_000_000;
/// Row size of the commit ceiling's single-row transactions (about a counterparty document).
const CEILING_ROW_BYTES: usize = 512;
/// Error messages kept per run for the report.
const ERROR_SAMPLES_MAX: usize = 4;

// ---------------------------------------------------------------------------------------------
// Options and plan

#[derive(Debug, Clone)]
struct Options {
    quick: bool,
    database_url: Option<String>,
    duration: Duration,
    warmup: Duration,
    connections: Option<Vec<usize>>,
    scenarios: Option<Vec<String>>,
}

fn parse_args() -> BoxResult<Options> {
    let mut opts =
        Options { quick: false, database_url: None, duration: Duration::ZERO, warmup: Duration::ZERO, connections: None, scenarios: None };
    let mut duration_secs: Option<f64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--bench" => {} // passed by `cargo bench`
            "--quick" => opts.quick = true,
            "--database-url" => opts.database_url = Some(value("--database-url")?),
            "--duration-secs" => {
                let v = value("--duration-secs")?;
                duration_secs = Some(v.parse().map_err(|_| format!("--duration-secs: not a number: {v}"))?);
            }
            "--connections" => {
                let v = value("--connections")?;
                let list = v.split(',').map(|s| s.trim().parse::<usize>()).collect::<Result<Vec<_>, _>>();
                match list {
                    Ok(list) if !list.is_empty() && list.iter().all(|&n| n > 0) => opts.connections = Some(list),
                    _ => return Err(format!("--connections: expected a list like 1,16,64, got {v}")),
                }
            }
            "--scenarios" => opts.scenarios = Some(value("--scenarios")?.split(',').map(|s| s.trim().to_owned()).collect()),
            "-h" | "--help" => {
                eprintln!(
                    "usage: cargo bench --bench load -- [--quick] [--database-url URL] [--duration-secs N] \
                     [--connections 1,16,64] [--scenarios ping,create_counterparty,...]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other} (try --help)")),
        }
    }
    let secs = duration_secs.unwrap_or(if opts.quick { 2.0 } else { 10.0 });
    if secs.is_nan() || secs <= 0.0 {
        return Err("--duration-secs must be positive".into());
    }
    opts.duration = Duration::from_secs_f64(secs);
    opts.warmup = if opts.quick { Duration::from_millis(250) } else { Duration::from_secs(1) };
    if let Some(names) = &opts.scenarios {
        for name in names {
            if !Scenario::ALL.iter().any(|s| s.name() == name) {
                return Err(format!("unknown scenario {name}"));
            }
        }
    }
    Ok(opts)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    Ping,
    CreateCounterparty,
    CreatePaymentOrder,
    Replay,
    Get,
    List,
    Mix,
    ReplayScale,
    HttpCeiling,
}

impl Scenario {
    /// The API scenarios in the order they run, then the scale check.
    const ALL: [Scenario; 8] = [
        Scenario::Ping,
        Scenario::CreateCounterparty,
        Scenario::CreatePaymentOrder,
        Scenario::Replay,
        Scenario::Get,
        Scenario::List,
        Scenario::Mix,
        Scenario::ReplayScale,
    ];

    fn name(self) -> &'static str {
        match self {
            Scenario::Ping => "ping",
            Scenario::CreateCounterparty => "create_counterparty",
            Scenario::CreatePaymentOrder => "create_payment_order",
            Scenario::Replay => "replay",
            Scenario::Get => "get",
            Scenario::List => "list",
            Scenario::Mix => "mix",
            Scenario::ReplayScale => "replay_scale",
            Scenario::HttpCeiling => "http_ceiling",
        }
    }
}

#[derive(Clone)]
struct Plan {
    opts: Options,
    postgres: bool,
}

impl Plan {
    fn selected(&self, scenario: Scenario) -> bool {
        self.opts.scenarios.as_ref().is_none_or(|names| names.iter().any(|n| n == scenario.name()))
    }

    /// Connections per run: the flag's list, else quick (64, plus 1 for creates, plus 32 on
    /// PostgreSQL for creates) or full (1, 16, 64; plus 32 for creates on PostgreSQL).
    fn concurrencies(&self, scenario: Scenario) -> Vec<usize> {
        if let Some(list) = &self.opts.connections {
            return list.clone();
        }
        let create = scenario == Scenario::CreateCounterparty;
        match (self.opts.quick, create, self.postgres) {
            (_, _, _) if scenario == Scenario::ReplayScale => vec![64],
            (true, false, _) => vec![64],
            (true, true, false) => vec![1, 64],
            (true, true, true) => vec![1, 32, 64],
            (false, true, true) => vec![1, 16, 32, 64],
            (false, _, _) => vec![1, 16, 64],
        }
    }

    /// The concurrency of the headline figures: 64 when measured, else the largest.
    fn headline(&self) -> usize {
        let list = self.concurrencies(Scenario::CreateCounterparty);
        if list.contains(&64) { 64 } else { list.into_iter().max().unwrap_or(64) }
    }
}

// ---------------------------------------------------------------------------------------------
// Results

#[derive(Debug)]
struct RunResult {
    scenario: &'static str,
    connections: usize,
    ok: u64,
    errors: u64,
    /// Keep-alive connections the server had closed, reopened before the next request (whose
    /// latency includes the new handshake).
    reconnects: u64,
    elapsed_s: f64,
    hist: Histogram<u64>,
    error_samples: Vec<String>,
    rss_mb: Option<f64>,
    /// CPU the server process used during the run, in cores (of `nproc`), and the same for
    /// this process (the load generator, plus the http_ceiling server in its runs).
    server_cpu_cores: Option<f64>,
    bench_cpu_cores: Option<f64>,
    /// The server's CPU per thread name, in cores (its runtime's workers together, SQLite's
    /// writer and checkpointer): shows which thread a run waits on.
    server_threads: BTreeMap<String, f64>,
    /// Bytes the server caused to be written to storage (`write_bytes` of /proc/PID/io).
    server_disk_bytes: Option<u64>,
    /// Connections or writers actually used, where that differs from `connections` (the SQLite
    /// commit ceiling is paired with each create run but always uses one writer).
    writers: Option<usize>,
}

impl RunResult {
    fn empty(scenario: &'static str, connections: usize) -> Self {
        RunResult {
            scenario,
            connections,
            ok: 0,
            errors: 0,
            reconnects: 0,
            elapsed_s: 0.0,
            hist: new_hist(),
            error_samples: vec![],
            rss_mb: None,
            server_cpu_cores: None,
            bench_cpu_cores: None,
            server_threads: BTreeMap::new(),
            server_disk_bytes: None,
            writers: None,
        }
    }

    fn rps(&self) -> f64 {
        if self.elapsed_s > 0.0 { self.ok as f64 / self.elapsed_s } else { 0.0 }
    }

    /// Keeps up to [`ERROR_SAMPLES_MAX`] distinct error samples.
    fn keep_error_sample(&mut self, sample: String) {
        if self.error_samples.len() < ERROR_SAMPLES_MAX && !self.error_samples.contains(&sample) {
            self.error_samples.push(sample);
        }
    }

    /// Adds another round of the same scenario: counts and histograms add up, CPU is averaged
    /// over the rounds' measured time.
    fn absorb(&mut self, round: RunResult) {
        let weighted = |a: Option<f64>, wa: f64, b: Option<f64>, wb: f64| match (a, b) {
            (Some(a), Some(b)) if wa + wb > 0.0 => Some((a * wa + b * wb) / (wa + wb)),
            (a, b) => a.or(b),
        };
        self.server_cpu_cores = weighted(self.server_cpu_cores, self.elapsed_s, round.server_cpu_cores, round.elapsed_s);
        self.bench_cpu_cores = weighted(self.bench_cpu_cores, self.elapsed_s, round.bench_cpu_cores, round.elapsed_s);
        for (name, cores) in round.server_threads {
            let mine = self.server_threads.get(&name).copied();
            if let Some(merged) = weighted(mine, self.elapsed_s, Some(cores), round.elapsed_s) {
                self.server_threads.insert(name, merged);
            }
        }
        self.server_disk_bytes = match (self.server_disk_bytes, round.server_disk_bytes) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.ok += round.ok;
        self.errors += round.errors;
        self.reconnects += round.reconnects;
        self.elapsed_s += round.elapsed_s;
        let _ = self.hist.add(&round.hist);
        for sample in round.error_samples {
            self.keep_error_sample(sample);
        }
        self.rss_mb = round.rss_mb.or(self.rss_mb);
    }

    fn ms(&self, quantile: f64) -> f64 {
        if self.hist.is_empty() { 0.0 } else { self.hist.value_at_quantile(quantile) as f64 / 1000.0 }
    }

    fn max_ms(&self) -> f64 {
        self.hist.max() as f64 / 1000.0
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "scenario": self.scenario,
            "connections": self.connections,
            "rps": r1(self.rps()),
            "p50_ms": r3(self.ms(0.5)),
            "p99_ms": r3(self.ms(0.99)),
            "p999_ms": r3(self.ms(0.999)),
            "max_ms": r3(self.max_ms()),
            "ok": self.ok,
            "errors": self.errors,
            "reconnects": self.reconnects,
            "rss_mb": self.rss_mb.map(r1),
        });
        if let Some(cores) = self.server_cpu_cores {
            v["server_cpu_cores"] = json!(r3(cores));
            v["server_cpu_us_per_req"] = json!(r1(cores * 1e6 / self.rps().max(1.0)));
        }
        if let Some(cores) = self.bench_cpu_cores {
            v["bench_cpu_cores"] = json!(r3(cores));
        }
        if !self.server_threads.is_empty() {
            let threads: serde_json::Map<String, Value> =
                self.server_threads.iter().map(|(name, cores)| (name.clone(), json!(r3(*cores)))).collect();
            v["server_threads_cores"] = Value::Object(threads);
        }
        if let Some(bytes) = self.server_disk_bytes {
            v["server_disk_kb_per_req"] = json!(r1(bytes as f64 / 1024.0 / (self.ok.max(1) as f64)));
        }
        if let Some(writers) = self.writers {
            v["writers"] = json!(writers);
        }
        if !self.error_samples.is_empty() {
            v["error_samples"] = json!(self.error_samples);
        }
        v
    }
}

fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(r3(a / b)),
        _ => None,
    }
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("histogram bounds are valid")
}

// ---------------------------------------------------------------------------------------------
// The closed-loop driver, shared by HTTP and PostgreSQL sessions

/// What one request or transaction came to.
enum Outcome {
    Ok,
    /// An answer, but not the expected one: an error; the session stays usable.
    Unexpected(String),
    /// The connection failed: an error; the session is reopened.
    Broken(String),
}

trait Session: Send + 'static {
    fn once(&mut self, seq: u64) -> impl Future<Output = Outcome> + Send;

    /// Connections reopened since the last call, because the server had closed them.
    fn take_reconnects(&mut self) -> u64 {
        0
    }
}

trait Opener: Send + Sync + 'static {
    type S: Session;
    fn open(&self, conn: usize) -> impl Future<Output = BoxResult<Self::S>> + Send;
}

struct WorkerStats {
    ok: u64,
    errors: u64,
    reconnects: u64,
    hist: Histogram<u64>,
    samples: Vec<String>,
    done: Instant,
}

impl WorkerStats {
    fn error(&mut self, measured: bool, message: String) {
        if measured {
            self.errors += 1;
            if self.samples.len() < ERROR_SAMPLES_MAX {
                self.samples.push(message);
            }
        }
    }
}

/// Runs `conns` sessions in a closed loop: all connect, then `warmup` (not recorded), then
/// `duration` recorded. Requests still running at the end are waited for and counted.
async fn closed_loop<O: Opener>(name: &'static str, opener: Arc<O>, conns: usize, warmup: Duration, duration: Duration) -> RunResult {
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(conns);
    let (go_tx, go_rx) = tokio::sync::watch::channel::<Option<(Instant, Instant)>>(None);
    let mut tasks = Vec::with_capacity(conns);
    for conn in 0..conns {
        let (opener, ready, go) = (opener.clone(), ready_tx.clone(), go_rx.clone());
        tasks.push(tokio::spawn(session_loop(opener, conn, ready, go)));
    }
    drop(ready_tx);
    for _ in 0..conns {
        let _ = ready_rx.recv().await;
    }
    let start = Instant::now() + warmup;
    let end = start + duration;
    let _ = go_tx.send(Some((start, end)));
    let mut result = RunResult::empty(name, conns);
    let mut last = end;
    for task in tasks {
        match task.await {
            Ok(stats) => {
                result.ok += stats.ok;
                result.errors += stats.errors;
                result.reconnects += stats.reconnects;
                let _ = result.hist.add(&stats.hist);
                for sample in stats.samples {
                    result.keep_error_sample(sample);
                }
                last = last.max(stats.done);
            }
            Err(err) => {
                result.errors += 1;
                result.error_samples.push(format!("worker panicked: {err}"));
            }
        }
    }
    result.elapsed_s = last.saturating_duration_since(start).as_secs_f64();
    result
}

async fn session_loop<O: Opener>(
    opener: Arc<O>,
    conn: usize,
    ready: tokio::sync::mpsc::Sender<()>,
    mut go: tokio::sync::watch::Receiver<Option<(Instant, Instant)>>,
) -> WorkerStats {
    let mut stats = WorkerStats { ok: 0, errors: 0, reconnects: 0, hist: new_hist(), samples: vec![], done: Instant::now() };
    let mut first_error = None;
    let mut session = match opener.open(conn).await {
        Ok(s) => Some(s),
        Err(err) => {
            first_error = Some(err);
            None
        }
    };
    let _ = ready.send(()).await;
    drop(ready);
    let Ok(times) = go.wait_for(|t| t.is_some()).await.map(|t| (*t).expect("checked")) else {
        return stats;
    };
    let (start, end) = times;
    if let Some(err) = first_error {
        stats.error(true, format!("connect: {err}"));
    }
    let mut seq = 0u64;
    loop {
        let t0 = Instant::now();
        if t0 >= end {
            break;
        }
        let measured = t0 >= start;
        let Some(s) = session.as_mut() else {
            match opener.open(conn).await {
                Ok(s) => session = Some(s),
                Err(err) => {
                    stats.error(measured, format!("connect: {err}"));
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            continue;
        };
        let outcome = s.once(seq).await;
        let reconnects = s.take_reconnects();
        stats.reconnects += if measured { reconnects } else { 0 };
        seq += 1;
        let latency_us = t0.elapsed().as_micros().max(1) as u64;
        match outcome {
            Outcome::Ok if measured => {
                stats.ok += 1;
                let _ = stats.hist.record(latency_us.min(LATENCY_MAX_US));
            }
            Outcome::Ok => {}
            Outcome::Unexpected(msg) => stats.error(measured, msg),
            Outcome::Broken(msg) => {
                stats.error(measured, msg);
                session = None;
            }
        }
    }
    stats.done = Instant::now();
    stats
}

// ---------------------------------------------------------------------------------------------
// The HTTP client side

/// Where requests go and how they authenticate.
struct Target {
    addr: SocketAddr,
    tls: TlsConnector,
    server_name: ServerName<'static>,
    auth: HeaderValue,
}

impl Target {
    fn new(addr: SocketAddr, cert: CertificateDer<'static>, secret: &str) -> BoxResult<Self> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).map_err(|e| format!("trusting the server certificate: {e}"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let token = BASE64.encode(format!("x-api-key:{secret}"));
        Ok(Target {
            addr,
            tls: TlsConnector::from(Arc::new(config)),
            server_name: ServerName::try_from("localhost").expect("a valid name"),
            auth: HeaderValue::from_str(&format!("Basic {token}")).map_err(|e| e.to_string())?,
        })
    }
}

fn read_cert(path: &Path) -> BoxResult<CertificateDer<'static>> {
    CertificateDer::from_pem_file(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

type Sender = SendRequest<Full<Bytes>>;

/// What `send` answers when the connection was already closed before the request left.
const CLOSED: &str = "connection closed before the request was sent";

async fn connect(target: &Target) -> BoxResult<Sender> {
    let tcp = TcpStream::connect(target.addr).await.map_err(|e| format!("tcp: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let tls = target.tls.connect(target.server_name.clone(), tcp).await.map_err(|e| format!("tls: {e}"))?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| format!("http: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

struct Reply {
    status: StatusCode,
    replayed: bool,
    body: Bytes,
}

/// One request of a scenario and what its reply must be.
struct Call {
    method: Method,
    path: String,
    body: Option<Bytes>,
    key: Option<String>,
    expect: StatusCode,
    expect_replayed: bool,
}

impl Call {
    fn get(path: impl Into<String>) -> Call {
        Call { method: Method::GET, path: path.into(), body: None, key: None, expect: StatusCode::OK, expect_replayed: false }
    }

    fn post(path: &str, body: String, key: Option<String>) -> Call {
        Call {
            method: Method::POST,
            path: path.to_owned(),
            body: Some(Bytes::from(body)),
            key,
            expect: StatusCode::CREATED,
            expect_replayed: false,
        }
    }

    fn replayed(mut self) -> Call {
        self.expect_replayed = true;
        self
    }

    fn check(&self, reply: &Reply) -> Outcome {
        if reply.status != self.expect {
            let snippet: String = String::from_utf8_lossy(&reply.body).chars().take(160).collect();
            return Outcome::Unexpected(format!("{} {}: status {} ({snippet})", self.method, self.path, reply.status.as_u16()));
        }
        if self.expect_replayed && !reply.replayed {
            return Outcome::Unexpected(format!("{} {}: no Idempotent-Replayed: true", self.method, self.path));
        }
        Outcome::Ok
    }
}

async fn send(sender: &mut Sender, target: &Target, call: &Call) -> BoxResult<Reply> {
    let mut builder = Request::builder()
        .method(call.method.clone())
        .uri(call.path.as_str())
        .header(HOST, HeaderValue::from_static("localhost"))
        .header(AUTHORIZATION, target.auth.clone());
    if call.body.is_some() {
        builder = builder.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    if let Some(key) = &call.key {
        builder = builder.header("idempotency-key", key.as_str());
    }
    let request = builder.body(Full::new(call.body.clone().unwrap_or_default())).map_err(|e| format!("request: {e}"))?;
    if sender.ready().await.is_err() {
        return Err(CLOSED.into());
    }
    let response = sender.send_request(request).await.map_err(|e| format!("send: {e}"))?;
    let status = response.status();
    let replayed = response.headers().get("idempotent-replayed").is_some_and(|v| v.as_bytes() == b"true");
    let body = response.into_body().collect().await.map_err(|e| format!("body: {e}"))?.to_bytes();
    Ok(Reply { status, replayed, body })
}

/// What the scenarios need from setup.
#[derive(Debug, Default, Clone)]
struct Fixture {
    internal_account: String,
    external_account: String,
    replay_key: String,
    replay_body: Bytes,
    counterparty_ids: Vec<String>,
    scale_keys: u64,
}

/// A scenario's request stream.
struct Workload {
    scenario: Scenario,
    fixture: Arc<Fixture>,
    /// Makes every fresh Idempotency-Key of this run unique.
    tag: String,
}

impl Workload {
    fn call(&self, conn: usize, seq: u64, rng: &mut u64) -> Call {
        let fx = &self.fixture;
        let fresh_key = || Some(format!("{}-{conn}-{seq}", self.tag));
        match self.scenario {
            Scenario::Ping | Scenario::HttpCeiling => Call::get("/api/ping"),
            Scenario::CreateCounterparty => Call::post("/api/counterparties", format!(r#"{{"name":"bench {conn}-{seq}"}}"#), fresh_key()),
            Scenario::CreatePaymentOrder => Call::post(
                "/api/payment_orders",
                format!(
                    r#"{{"type":"ach","amount":100,"direction":"credit","originating_account_id":"{}","receiving_account_id":"{}"}}"#,
                    fx.internal_account, fx.external_account
                ),
                fresh_key(),
            ),
            Scenario::Replay => {
                Call::post("/api/counterparties", r#"{"name":"bench replay"}"#.into(), Some(fx.replay_key.clone())).replayed()
            }
            Scenario::Get => Call::get(format!("/api/counterparties/{}", pick(&fx.counterparty_ids, rng))),
            Scenario::List => Call::get("/api/counterparties?per_page=25"),
            Scenario::Mix => match next_rand(rng) % 10 {
                0 | 1 => Call::post("/api/counterparties", format!(r#"{{"name":"bench mix {conn}-{seq}"}}"#), fresh_key()),
                2..=5 => Call::get(format!("/api/counterparties/{}", pick(&fx.counterparty_ids, rng))),
                _ => Call::get("/api/counterparties?per_page=25"),
            },
            Scenario::ReplayScale => {
                let key = seed_key(next_rand(rng) % fx.scale_keys.max(1));
                Call::post("/api/counterparties", r#"{"name":"bench replay"}"#.into(), Some(key)).replayed()
            }
        }
    }
}

fn next_rand(state: &mut u64) -> u64 {
    // xorshift64*: cheap, and good enough to spread keys and ids.
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

fn pick<'a>(ids: &'a [String], rng: &mut u64) -> &'a str {
    if ids.is_empty() { "missing" } else { &ids[(next_rand(rng) % ids.len() as u64) as usize] }
}

struct HttpOpener {
    target: Arc<Target>,
    workload: Arc<Workload>,
}

struct HttpSession {
    sender: Sender,
    target: Arc<Target>,
    workload: Arc<Workload>,
    conn: usize,
    rng: u64,
    reconnects: u64,
}

impl Opener for HttpOpener {
    type S = HttpSession;

    async fn open(&self, conn: usize) -> BoxResult<HttpSession> {
        let sender = connect(&self.target).await?;
        let rng = (conn as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        Ok(HttpSession { sender, target: self.target.clone(), workload: self.workload.clone(), conn, rng, reconnects: 0 })
    }
}

impl Session for HttpSession {
    /// Sends the next call. A connection the server closed after its last reply (say, with
    /// `Connection: close`) is reopened first, as a real client would, and the handshake counts
    /// in this request's latency.
    async fn once(&mut self, seq: u64) -> Outcome {
        let call = self.workload.call(self.conn, seq, &mut self.rng);
        let mut reopened = false;
        loop {
            match send(&mut self.sender, &self.target, &call).await {
                Ok(reply) => return call.check(&reply),
                Err(err) if err == CLOSED && !reopened => match connect(&self.target).await {
                    Ok(sender) => {
                        self.sender = sender;
                        self.reconnects += 1;
                        reopened = true;
                    }
                    Err(err) => return Outcome::Broken(format!("reconnect: {err}")),
                },
                Err(err) => return Outcome::Broken(format!("{} {}: {err}", call.method, call.path)),
            }
        }
    }

    fn take_reconnects(&mut self) -> u64 {
        std::mem::take(&mut self.reconnects)
    }
}

async fn run_http(target: &Arc<Target>, scenario: Scenario, fixture: &Arc<Fixture>, conns: usize, plan: &Plan) -> RunResult {
    let tag = format!("bench-{}-{}-{conns}-{}", std::process::id(), scenario.name(), unix_micros());
    let workload = Arc::new(Workload { scenario, fixture: fixture.clone(), tag });
    let opener = Arc::new(HttpOpener { target: target.clone(), workload });
    closed_loop(scenario.name(), opener, conns, plan.opts.warmup, plan.opts.duration).await
}

fn unix_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// Setup through the API

async fn call_json(target: &Target, sender: &mut Sender, call: Call) -> BoxResult<(Value, Bytes)> {
    let reply = send(sender, target, &call).await?;
    if let Outcome::Unexpected(msg) = call.check(&reply) {
        return Err(msg);
    }
    let value = serde_json::from_slice(&reply.body).map_err(|e| format!("{} {}: not JSON: {e}", call.method, call.path))?;
    Ok((value, reply.body))
}

fn id_of(value: &Value) -> BoxResult<String> {
    value["id"].as_str().map(str::to_owned).ok_or_else(|| format!("no id in {value}"))
}

/// Creates the accounts, the replayed original and the counterparties `get` reads.
/// The fixture with a replay key created just now.
async fn fresh_replay_key(target: &Arc<Target>, fixture: &Arc<Fixture>) -> BoxResult<Arc<Fixture>> {
    let mut sender = connect(target).await?;
    let replay_key = format!("replay-{}-{}", std::process::id(), unix_micros());
    call_json(target, &mut sender, Call::post("/api/counterparties", r#"{"name":"bench replay"}"#.into(), Some(replay_key.clone())))
        .await?;
    Ok(Arc::new(Fixture { replay_key, ..fixture.as_ref().clone() }))
}

async fn seed(target: &Arc<Target>, count: usize) -> BoxResult<Fixture> {
    let mut sender = connect(target).await?;
    let tag = format!("seed-{}-{}", std::process::id(), unix_micros());
    let ia =
        call_json(target, &mut sender, Call::post("/api/internal_accounts", r#"{"name":"bench operating","currency":"USD"}"#.into(), None))
            .await?
            .0;
    let with_account = json!({"name": "bench receiver", "accounts": [{
        "account_details": [{"account_number": "123456789"}],
        "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}]
    }]});
    let cp = call_json(target, &mut sender, Call::post("/api/counterparties", with_account.to_string(), None)).await?.0;
    let external_account = cp["accounts"][0]["id"].as_str().ok_or("no accounts[0].id in the counterparty")?.to_owned();
    let replay_key = format!("{tag}-replay");
    let (_, replay_body) =
        call_json(target, &mut sender, Call::post("/api/counterparties", r#"{"name":"bench replay"}"#.into(), Some(replay_key.clone())))
            .await?;
    let workers = 16.min(count.max(1));
    let mut tasks = Vec::new();
    for w in 0..workers {
        let target = target.clone();
        let n = count / workers + usize::from(w < count % workers);
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&target).await?;
            let mut ids = Vec::with_capacity(n);
            for i in 0..n {
                let body = format!(r#"{{"name":"seed {w}-{i}","metadata":{{"bench":"seed"}}}}"#);
                ids.push(id_of(&call_json(&target, &mut sender, Call::post("/api/counterparties", body, None)).await?.0)?);
            }
            BoxResult::Ok(ids)
        }));
    }
    let mut counterparty_ids = Vec::with_capacity(count);
    for task in tasks {
        counterparty_ids.extend(task.await.map_err(|e| e.to_string())??);
    }
    Ok(Fixture { internal_account: id_of(&ia)?, external_account, replay_key, replay_body, counterparty_ids, scale_keys: 0 })
}

// ---------------------------------------------------------------------------------------------
// The server as a child process

/// Where Payrail keeps its data in this run.
#[derive(Clone)]
enum Store {
    Sqlite,
    /// A fresh database created by the bench in the given server.
    Postgres {
        url: String,
    },
}

impl Store {
    fn name(&self) -> &'static str {
        match self {
            Store::Sqlite => "sqlite",
            Store::Postgres { .. } => "postgres",
        }
    }

    fn url_args(&self) -> Vec<String> {
        match self {
            Store::Sqlite => vec![],
            Store::Postgres { url } => vec!["--database-url".into(), url.clone()],
        }
    }
}

fn server_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_payrail"))
}

/// `payrail keys create --json`: (key id, secret).
fn create_key(data_dir: &Path, store: &Store) -> BoxResult<(String, String)> {
    let output = Command::new(server_bin())
        .arg("--data-dir")
        .arg(data_dir)
        .args(store.url_args())
        .args(["keys", "create", "--name", "bench", "--json"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running payrail keys create: {e}"))?;
    if !output.status.success() {
        return Err(format!("payrail keys create failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().rev().find(|l| !l.trim().is_empty()).ok_or("payrail keys create printed nothing")?;
    let value: Value = serde_json::from_str(line).map_err(|e| format!("payrail keys create --json: {e}: {line}"))?;
    let id = value["id"].as_str().ok_or("no id from keys create")?.to_owned();
    let key = value["key"].as_str().ok_or("no key from keys create")?.to_owned();
    Ok((id, key))
}

struct ServerProcess {
    child: Option<Child>,
    addr: SocketAddr,
    data_dir: PathBuf,
    log: PathBuf,
}

impl ServerProcess {
    fn start(data_dir: &Path, store: &Store, log_name: &str) -> BoxResult<Self> {
        let addr = free_port()?;
        let log = data_dir.join(log_name);
        let log_file = std::fs::File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let log_err = log_file.try_clone().map_err(|e| e.to_string())?;
        let wrapper = std::env::var("PAYRAIL_BENCH_SERVER_WRAPPER").unwrap_or_default();
        let mut words = wrapper.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        words.push(server_bin().display().to_string());
        let mut command = Command::new(&words[0]);
        command
            .args(&words[1..])
            .arg("--data-dir")
            .arg(data_dir)
            .args(store.url_args())
            .args(["serve", "--listen", &addr.to_string(), "--admin-listen", "off", "--sandbox-step-ms", "3600000"])
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err);
        let child = command.spawn().map_err(|e| format!("starting {}: {e}", words[0]))?;
        Ok(ServerProcess { child: Some(child), addr, data_dir: data_dir.to_owned(), log })
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Waits for the certificate, then for an authenticated ping to answer 200.
    async fn ready(&mut self, secret: &str) -> BoxResult<Arc<Target>> {
        let deadline = Instant::now() + START_TIMEOUT;
        let cert_path = self.data_dir.join("tls-cert.pem");
        let mut last_err = String::from("not started");
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!("the server exited ({status}); its log:\n{}", tail(&self.log)));
            }
            if let Ok(cert) = read_cert(&cert_path) {
                let target = Arc::new(Target::new(self.addr, cert, secret)?);
                match connect(&target).await {
                    Ok(mut sender) => match send(&mut sender, &target, &Call::get("/api/ping")).await {
                        Ok(reply) if reply.status == StatusCode::OK => return Ok(target),
                        Ok(reply) => last_err = format!("ping answered {}", reply.status),
                        Err(e) => last_err = e,
                    },
                    Err(e) => last_err = e,
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(format!("the server did not answer within {START_TIMEOUT:?}: {last_err}; its log:\n{}", tail(&self.log)))
    }

    /// Peak resident set (VmHWM) so far, in MB.
    fn peak_rss_mb(&self) -> Option<f64> {
        self.pid().and_then(|pid| proc_status_kb(pid, "VmHWM:")).map(|kb| kb as f64 / 1024.0)
    }

    fn rss_mb(&self) -> Option<f64> {
        self.pid().and_then(|pid| proc_status_kb(pid, "VmRSS:")).map(|kb| kb as f64 / 1024.0)
    }

    /// SIGTERM, then SIGKILL if it has not drained in 40 s.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(40);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("bench: the server did not stop on SIGTERM; killing it");
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_port() -> BoxResult<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("finding a free port: {e}"))?;
    listener.local_addr().map_err(|e| e.to_string())
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// CPU time (user + system) of a process so far, in seconds (USER_HZ = 100 on Linux).
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// CPU seconds so far of each of a process's threads, summed per thread name.
fn thread_cpu_seconds(pid: u32) -> BTreeMap<String, f64> {
    let mut per_name = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return per_name };
    for task in tasks.flatten() {
        let tid = task.file_name().to_string_lossy().into_owned();
        let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")) else { continue };
        if let Some(seconds) = cpu_seconds(&format!("{pid}/task/{tid}")) {
            *per_name.entry(comm.trim().to_owned()).or_insert(0.0) += seconds;
        }
    }
    per_name
}

/// Bytes a process has caused to be written to storage so far (page cache writes included).
fn disk_write_bytes(pid: u32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    io.lines().find_map(|line| line.strip_prefix("write_bytes:")).and_then(|v| v.trim().parse().ok())
}

/// Measures the CPU the server (if any) and this process use over a run, and what the server
/// writes to storage.
struct CpuMeter {
    server: Option<ServerSample>,
    bench: Option<f64>,
    wall: Instant,
}

struct ServerSample {
    pid: u32,
    cpu: f64,
    threads: BTreeMap<String, f64>,
    disk: Option<u64>,
}

impl ServerSample {
    fn take(pid: u32) -> Option<Self> {
        let cpu = cpu_seconds(&pid.to_string())?;
        Some(ServerSample { pid, cpu, threads: thread_cpu_seconds(pid), disk: disk_write_bytes(pid) })
    }
}

impl CpuMeter {
    fn start(server_pid: Option<u32>) -> Self {
        CpuMeter { server: server_pid.and_then(ServerSample::take), bench: cpu_seconds("self"), wall: Instant::now() }
    }

    fn finish(self, run: &mut RunResult) {
        let wall = self.wall.elapsed().as_secs_f64().max(1e-9);
        if let Some(before) = self.server
            && let Some(after) = ServerSample::take(before.pid)
        {
            run.server_cpu_cores = Some((after.cpu - before.cpu) / wall);
            // A thread that started during the run counts from zero; one that ended is lost.
            run.server_threads = after
                .threads
                .iter()
                .map(|(name, s1)| (name.clone(), (s1 - before.threads.get(name).copied().unwrap_or(0.0)) / wall))
                .collect();
            run.server_disk_bytes = before.disk.zip(after.disk).map(|(d0, d1)| d1.saturating_sub(d0));
        }
        run.bench_cpu_cores = self.bench.and_then(|s0| cpu_seconds("self").map(|s1| (s1 - s0) / wall));
    }
}

fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

// ---------------------------------------------------------------------------------------------
// http_ceiling: a minimal axum + rustls server in this process

struct CeilingServer {
    addr: SocketAddr,
    cert: CertificateDer<'static>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CeilingServer {
    /// Starts on its own multi-threaded runtime (as many workers as Payrail's), on a port of
    /// its own, with a fresh self-signed certificate.
    fn start(secret: &str) -> BoxResult<Self> {
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

// ---------------------------------------------------------------------------------------------
// PostgreSQL helpers

async fn pg_connect(url: &str) -> BoxResult<tokio_postgres::Client> {
    let (client, connection) =
        tokio_postgres::connect(url, tokio_postgres::NoTls).await.map_err(|e| format!("connecting to PostgreSQL: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// The same server URL naming another database.
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[after_scheme..].find('/').map_or(base.len(), |i| after_scheme + i);
    let query = query.map(|q| format!("?{q}")).unwrap_or_default();
    format!("{}/{db}{query}", &base[..authority_end])
}

async fn pg_create_database(admin_url: &str, name: &str) -> BoxResult<String> {
    let admin = pg_connect(admin_url).await?;
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.map_err(|e| format!("CREATE DATABASE {name}: {e}"))?;
    Ok(with_database(admin_url, name))
}

async fn pg_drop_database(admin_url: &str, name: &str) {
    match pg_connect(admin_url).await {
        Ok(admin) => {
            if let Err(e) = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await {
                eprintln!("bench: dropping database {name}: {e}");
            }
        }
        Err(e) => eprintln!("bench: dropping database {name}: {e}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Durability checks

/// Every line of the server's sources that sets a synchronous level must set a durable one
/// (SQLite FULL or EXTRA; PostgreSQL synchronous_commit=on), and the store must set it.
fn source_durability(store: &Store) -> (bool, Vec<String>) {
    let mut problems = vec![];
    let mut sets_durable = false;
    let mut files = vec![];
    collect_sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim().to_ascii_lowercase();
            if code.starts_with("//") || code.starts_with("--") || !code.contains("synchronous") {
                continue;
            }
            let pg_on = code.replace([' ', '\''], "").contains("synchronous_commit=on");
            let sqlite_full = code.contains("full") || code.contains("extra");
            if !pg_on && !sqlite_full {
                problems.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
            sets_durable |= match store {
                Store::Sqlite => sqlite_full,
                Store::Postgres { .. } => pg_on,
            };
        }
    }
    if !sets_durable {
        problems.push(format!("no line in src/ sets a durable synchronous level for {}", store.name()));
    }
    (problems.is_empty(), problems)
}

fn collect_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs" || e == "sql") {
            out.push(path);
        }
    }
}

/// The server's SQLite file is in WAL mode (persistent; FULL sync is set per connection).
fn sqlite_journal_mode(db: &Path) -> BoxResult<String> {
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|e| e.to_string())?;
    conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).map_err(|e| e.to_string())
}

/// synchronous_commit, fsync and shared_buffers (the last only reported: it decides whether a
/// million stored replies stay in PostgreSQL's cache).
async fn pg_settings(url: &str) -> BoxResult<(String, String, String)> {
    let client = pg_connect(url).await?;
    let show = async |name: &str| -> BoxResult<String> {
        Ok(client.query_one(&format!("SHOW {name}"), &[]).await.map_err(|e| e.to_string())?.get(0))
    };
    Ok((show("synchronous_commit").await?, show("fsync").await?, show("shared_buffers").await?))
}

// ---------------------------------------------------------------------------------------------
// Idempotency lookups at scale: stored replies seeded directly into the store

/// Inserts replies `seed-<from>` .. `seed-<to - 1>` for `api_key_id` straight into the table,
/// with the body of a real reply, saved by the server's own `reply_slots::save` (in rowid
/// order, so the table is written front to back). The server must be stopped (SQLite).
fn sqlite_seed_replies(db: &Path, api_key_id: &str, body: &[u8], from: u64, to: u64) -> BoxResult<()> {
    use payrail::domain::time::Timestamp;
    use payrail::store::{StoredReply, sqlite::reply_slots};
    let err = |e: rusqlite::Error| format!("seeding replies: {e}");
    let mut keys: Vec<(i64, u64)> = (from..to).map(|x| (reply_slots::window(api_key_id, &seed_key(x)), x)).collect();
    keys.sort_unstable();
    let mut conn = rusqlite::Connection::open(db).map_err(err)?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(err)?;
    let now = unix_micros();
    let tx = conn.transaction().map_err(err)?;
    let body = Bytes::copy_from_slice(body);
    for (_, x) in keys {
        let reply = StoredReply {
            api_key_id: api_key_id.to_owned(),
            key: seed_key(x),
            status: 201,
            content_type: "application/json".into(),
            body: body.clone(),
            fingerprint: [0; 32],
            created_at: Timestamp::from_micros(now),
            expires_at: Timestamp::from_micros(now + 24 * 3600 * 1_000_000),
        };
        reply_slots::save(&tx, &reply).map_err(|e| format!("seeding replies: {e}"))?;
    }
    tx.commit().map_err(err)?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(err)?;
    Ok(())
}

/// The idempotency key of seeded reply `x` (as the replay_10k / replay_1m requests send it).
fn seed_key(x: u64) -> String {
    format!("seed-{x:07}")
}

async fn pg_seed_replies(url: &str, api_key_id: &str, body: &[u8], from: u64, to: u64) -> BoxResult<()> {
    let client = pg_connect(url).await?;
    let now = unix_micros();
    let expires = now + 24 * 3600 * 1_000_000;
    let zero = [0u8; 32];
    let step = 100_000u64;
    let mut lo = from;
    while lo < to {
        let hi = (lo + step).min(to);
        client
            .execute(
                "INSERT INTO idempotency_replies (api_key_id, key, status, content_type, body, fingerprint, created_at, expires_at)
                 SELECT $1, 'seed-' || lpad(g::text, 7, '0'), 201, 'application/json', $2, $3, $4, $5
                 FROM generate_series($6::bigint, $7::bigint) g",
                &[&api_key_id, &body, &&zero[..], &now, &expires, &(lo as i64), &(hi as i64 - 1)],
            )
            .await
            .map_err(|e| format!("seeding replies: {e}"))?;
        lo = hi;
    }
    client.batch_execute("ANALYZE idempotency_replies").await.map_err(|e| e.to_string())?;
    Ok(())
}

async fn seed_replies(store: &Store, data_dir: &Path, api_key_id: &str, body: &[u8], from: u64, to: u64) -> BoxResult<()> {
    match store {
        Store::Sqlite => {
            let (db, id, body) = (data_dir.join("payrail.db"), api_key_id.to_owned(), body.to_vec());
            tokio::task::spawn_blocking(move || sqlite_seed_replies(&db, &id, &body, from, to)).await.map_err(|e| e.to_string())?
        }
        Store::Postgres { url } => pg_seed_replies(url, api_key_id, body, from, to).await,
    }
}

struct ScaleOutcome {
    runs: Vec<RunResult>,
    rps_small: Option<f64>,
    rps_large: Option<f64>,
    rss_large_mb: Option<f64>,
    note: String,
}

/// Rounds of replay_10k and replay_1m, alternating, each a share of the run's duration (as
/// ping and its ceiling: one size measured minutes after the other could differ by 40 % on
/// this machine with nothing changed).
const SCALE_ROUNDS: u32 = 4;

/// The stores of the two sizes (on PostgreSQL, two fresh databases; on SQLite, two directories).
struct ScaleStores {
    small: Store,
    large: Store,
}

/// One size of the scale check: its own store holding only its stored replies, its own server.
struct ScaleSide {
    size: u64,
    server: ServerProcess,
    target: Arc<Target>,
    fixture: Arc<Fixture>,
}

impl ScaleSide {
    async fn start(dir: &Path, store: &Store, size: u64, body: &Bytes) -> BoxResult<Self> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let (key_id, secret) = create_key(dir, store)?;
        let t0 = Instant::now();
        seed_replies(store, dir, &key_id, body, 0, size).await?;
        eprintln!("bench: seeded {size} stored replies directly in {:.1} s", t0.elapsed().as_secs_f64());
        let mut server = ServerProcess::start(dir, store, &format!("server-scale-{size}.log"))?;
        let target = server.ready(&secret).await?;
        let fixture = Arc::new(Fixture { scale_keys: size, ..Fixture::default() });
        Ok(ScaleSide { size, server, target, fixture })
    }

    fn scenario(&self) -> &'static str {
        if self.size == SCALE_SMALL { "replay_10k" } else { "replay_1m" }
    }
}

/// Replays random keys among 10,000 stored replies and among 1,000,000 (full mode only), each
/// size on its own fresh store and server, both servers up at once and measured in alternating
/// rounds.
async fn scale_check(plan: &Plan, root: &Path, stores: &ScaleStores, body: &Bytes) -> BoxResult<ScaleOutcome> {
    let mut outcome = ScaleOutcome { runs: vec![], rps_small: None, rps_large: None, rss_large_mb: None, note: String::new() };
    let mut sides = vec![ScaleSide::start(&root.join("scale-10k"), &stores.small, SCALE_SMALL, body).await?];
    if plan.opts.quick {
        outcome.note = "quick mode: the 1,000,000-reply check is skipped (run the full mode)".into();
        eprintln!("bench: NOTE {}", outcome.note);
    } else {
        sides.push(ScaleSide::start(&root.join("scale-1m"), &stores.large, SCALE_LARGE, body).await?);
    }
    let conns = plan.concurrencies(Scenario::ReplayScale);
    let round_plan = Plan { opts: Options { duration: plan.opts.duration / SCALE_ROUNDS, ..plan.opts.clone() }, ..plan.clone() };
    for &c in &conns {
        let mut totals: Vec<RunResult> = sides.iter().map(|side| RunResult::empty(side.scenario(), c)).collect();
        for _ in 0..SCALE_ROUNDS {
            for (side, total) in sides.iter().zip(&mut totals) {
                let cpu = CpuMeter::start(side.server.pid());
                let mut run = run_http(&side.target, Scenario::ReplayScale, &side.fixture, c, &round_plan).await;
                cpu.finish(&mut run);
                run.rss_mb = side.server.rss_mb();
                total.absorb(run);
            }
        }
        for (side, total) in sides.iter().zip(totals) {
            report_progress(&total);
            if c == *conns.iter().max().unwrap_or(&c) {
                if side.size == SCALE_SMALL {
                    outcome.rps_small = Some(total.rps());
                } else {
                    outcome.rps_large = Some(total.rps());
                    outcome.rss_large_mb = side.server.peak_rss_mb();
                }
            }
            outcome.runs.push(total);
        }
    }
    for side in &mut sides {
        side.server.stop();
    }
    Ok(outcome)
}

// ---------------------------------------------------------------------------------------------
// The run

fn report_progress(run: &RunResult) {
    eprintln!(
        "bench: {:<22} c={:<3} {:>10.1} rps  p50 {:>8.3} ms  p99 {:>8.3} ms  errors {}  reconnects {}",
        run.scenario,
        run.connections,
        run.rps(),
        run.ms(0.5),
        run.ms(0.99),
        run.errors,
        run.reconnects
    );
    for sample in &run.error_samples {
        eprintln!("bench:     error: {sample}");
    }
}

/// Results by (scenario, connections).
#[derive(Default)]
struct Results {
    runs: Vec<RunResult>,
}

impl Results {
    fn find(&self, scenario: &str, conns: usize) -> Option<&RunResult> {
        self.runs.iter().find(|r| r.scenario == scenario && r.connections == conns)
    }

    fn rps(&self, scenario: &str, conns: usize) -> Option<f64> {
        self.find(scenario, conns).map(RunResult::rps)
    }

    fn p99(&self, scenario: &str, conns: usize) -> Option<f64> {
        self.find(scenario, conns).map(|r| r.ms(0.99))
    }

    fn push(&mut self, run: RunResult) {
        report_progress(&run);
        self.runs.push(run);
    }
}

struct MainRun {
    results: Results,
    peak_rss_mb: Option<f64>,
    replay_body: Bytes,
    journal_mode: Option<String>,
}

/// The main server: every API scenario with its ceilings.
/// Rounds of http_ceiling and ping, alternating, each a share of the run's duration.
const PING_ROUNDS: u32 = 4;

async fn interleaved_ping(
    ceiling: &Arc<Target>,
    target: &Arc<Target>,
    server: &ServerProcess,
    fixture: &Arc<Fixture>,
    conns: usize,
    plan: &Plan,
) -> (RunResult, RunResult) {
    let round_plan = Plan { opts: Options { duration: plan.opts.duration / PING_ROUNDS, ..plan.opts.clone() }, ..plan.clone() };
    let (mut ceiling_total, mut ping_total) = (RunResult::empty("http_ceiling", conns), RunResult::empty("ping", conns));
    for _ in 0..PING_ROUNDS {
        let cpu = CpuMeter::start(None);
        let mut run = run_http(ceiling, Scenario::HttpCeiling, fixture, conns, &round_plan).await;
        cpu.finish(&mut run);
        ceiling_total.absorb(run);
        let cpu = CpuMeter::start(server.pid());
        let mut run = run_http(target, Scenario::Ping, fixture, conns, &round_plan).await;
        cpu.finish(&mut run);
        ping_total.absorb(run);
    }
    (ceiling_total, ping_total)
}

async fn main_scenarios(plan: &Plan, root: &Path, store: &Store) -> BoxResult<MainRun> {
    let dir = root.join("main");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let (_key_id, secret) = create_key(&dir, store)?;
    let mut server = ServerProcess::start(&dir, store, "server.log")?;
    let target = server.ready(&secret).await?;
    let reads = [Scenario::Get, Scenario::List, Scenario::Mix].into_iter().any(|s| plan.selected(s));
    let count = match (reads, plan.opts.quick) {
        (false, _) => 0,
        (true, true) => SEED_COUNTERPARTIES_QUICK,
        (true, false) => SEED_COUNTERPARTIES_FULL,
    };
    let t0 = Instant::now();
    let fixture = Arc::new(seed(&target, count).await?);
    eprintln!("bench: seeded {count} counterparties through the API in {:.2} s", t0.elapsed().as_secs_f64());
    let ceiling = CeilingServer::start(&secret)?;
    let ceiling_target = Arc::new(Target::new(ceiling.addr, ceiling.cert.clone(), &secret)?);
    let mut results = Results::default();
    for scenario in Scenario::ALL.into_iter().filter(|&s| s != Scenario::ReplayScale && plan.selected(s)) {
        for conns in plan.concurrencies(scenario) {
            if scenario == Scenario::Ping {
                // Interleaved rounds, so that the ceiling and ping share the machine's weather
                // (on a shared 2-core machine one back-to-back pair could differ by 40 %).
                let (ceiling_run, ping_run) = interleaved_ping(&ceiling_target, &target, &server, &fixture, conns, plan).await;
                results.push(ceiling_run);
                let mut ping_run = ping_run;
                ping_run.rss_mb = server.rss_mb();
                results.push(ping_run);
                continue;
            }
            if scenario == Scenario::CreateCounterparty {
                // Measured right before each create run, so both see the same disk weather.
                match store {
                    Store::Sqlite => {
                        let (d, w, t) = (dir.clone(), plan.opts.warmup, plan.opts.duration);
                        let mut run =
                            tokio::task::spawn_blocking(move || sqlite_commit_ceiling(&d, w, t)).await.map_err(|e| e.to_string())??;
                        run.connections = conns;
                        results.push(run);
                    }
                    Store::Postgres { url } => results.push(pg_commit_ceiling(url, conns, plan).await?),
                }
            }
            // A replay measures a retry, which follows its original closely: the key is created
            // right before its run. (replay_10k / replay_1m measure keys the server did not
            // answer itself, i.e. the database path.)
            let fixture = if scenario == Scenario::Replay { fresh_replay_key(&target, &fixture).await? } else { fixture.clone() };
            let cpu = CpuMeter::start(server.pid());
            let mut run = run_http(&target, scenario, &fixture, conns, plan).await;
            cpu.finish(&mut run);
            run.rss_mb = server.rss_mb();
            results.push(run);
        }
    }
    drop(ceiling);
    // VmHWM only grows: read after the last run, it is the peak over the server's whole life,
    // the 64-connection runs included.
    let peak_rss_mb = server.peak_rss_mb();
    server.stop();
    let journal_mode = match store {
        Store::Sqlite => Some(sqlite_journal_mode(&dir.join("payrail.db"))?),
        Store::Postgres { .. } => None,
    };
    Ok(MainRun { results, peak_rss_mb, replay_body: fixture.replay_body.clone(), journal_mode })
}

fn machine() -> Value {
    let nproc = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_mb = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb / 1024);
    let load1 = load_average();
    json!({"nproc": nproc, "mem_mb": mem_mb, "loadavg_1m_at_start": load1, "temp_fs": temp_fs(&std::env::temp_dir())})
}

/// The commit the server was built from, and whether src/ had uncommitted changes.
fn source_revision() -> Value {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short", "HEAD"]);
    let dirty = git(&["status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock"]).map(|s| !s.is_empty());
    json!({"commit": commit, "src_dirty": dirty})
}

fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// The filesystem type the temporary directory lives on (tmpfs makes fsync free).
fn temp_fs(dir: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, mount, fs) = (f.next()?, f.next()?, f.next()?);
            dir.starts_with(mount).then(|| (mount.len(), fs.to_owned()))
        })
        .max()
        .map(|(_, fs)| fs)
}

struct Durability {
    durable: bool,
    checks: Value,
}

async fn durability(store: &Store, main: &MainRun) -> Durability {
    let (source_ok, problems) = source_durability(store);
    let mut checks = json!({"source_sets_durable_sync": source_ok, "source_problems": problems});
    let mut durable = source_ok;
    match store {
        Store::Sqlite => {
            let wal = main.journal_mode.as_deref() == Some("wal");
            checks["sqlite_journal_mode"] = json!(main.journal_mode);
            durable &= wal;
        }
        Store::Postgres { url } => match pg_settings(url).await {
            Ok((sync, fsync, shared_buffers)) => {
                durable &= sync == "on" && fsync == "on";
                checks["pg_synchronous_commit"] = json!(sync);
                checks["pg_fsync"] = json!(fsync);
                checks["pg_shared_buffers"] = json!(shared_buffers);
            }
            Err(e) => {
                durable = false;
                checks["pg_settings_error"] = json!(e);
            }
        },
    }
    // At one connection nothing can share a commit: each create waits for its own sync, so it
    // cannot run much faster than the single-row commit ceiling unless syncs were skipped.
    let r = &main.results;
    let ceiling_c1 = r.rps("commit_ceiling", 1);
    if let (Some(create), Some(ceiling)) = (r.rps("create_counterparty", 1), ceiling_c1) {
        let ratio = create / ceiling.max(1.0);
        checks["create_c1_vs_commit_ceiling"] = json!(r3(ratio));
        if ratio > 2.0 {
            checks["suspicious"] = json!("create at 1 connection beat the single-commit ceiling by more than 2x: are commits synced?");
            durable = false;
        }
    }
    Durability { durable, checks }
}

fn print_table(runs: &[&RunResult], results: &Results, commit_ceiling: impl Fn(usize) -> Option<f64>) {
    println!();
    println!(
        "{:<22} {:>5} {:>11} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7}  ratio",
        "scenario", "conns", "rps", "p50 ms", "p99 ms", "p999 ms", "max ms", "errors", "reconn", "srv cpu", "gen cpu"
    );
    println!("{}", "-".repeat(134));
    for run in runs {
        let c = run.connections;
        let note = match run.scenario {
            "ping" => ratio(Some(run.rps()), results.rps("http_ceiling", c)).map(|x| format!("{x:.3} of http_ceiling")),
            "create_counterparty" | "create_payment_order" => {
                ratio(Some(run.rps()), commit_ceiling(c)).map(|x| format!("{x:.3} of commit_ceiling"))
            }
            "replay" | "get" | "list" => ratio(Some(run.rps()), results.rps("ping", c)).map(|x| format!("{x:.3} of ping")),
            "commit_ceiling" if run.writers == Some(1) => Some("one writer, single-row commits".into()),
            "commit_ceiling" => Some("single-row commits, one per connection".into()),
            _ => None,
        };
        println!(
            "{:<22} {:>5} {:>11.1} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>7} {:>7} {:>7} {:>7}  {}",
            run.scenario,
            c,
            run.rps(),
            run.ms(0.5),
            run.ms(0.99),
            run.ms(0.999),
            run.max_ms(),
            run.errors,
            run.reconnects,
            run.server_cpu_cores.map(|c| format!("{c:.2}")).unwrap_or_else(|| "-".into()),
            run.bench_cpu_cores.map(|c| format!("{c:.2}")).unwrap_or_else(|| "-".into()),
            note.unwrap_or_default()
        );
    }
    println!();
}

async fn run(plan: Plan) -> BoxResult<Value> {
    let started = Instant::now();
    let machine = machine();
    eprintln!("bench: machine {machine}");
    if machine["loadavg_1m_at_start"].as_f64().is_some_and(|l| l > 0.5) {
        eprintln!("bench: WARNING the machine is busy (1-minute load average above 0.5): figures will be noisy");
    }
    let root = tempfile::Builder::new().prefix("payrail-bench-").tempdir().map_err(|e| e.to_string())?;
    let mut created_dbs = vec![];
    let (store, scale) = match &plan.opts.database_url {
        None => (Store::Sqlite, ScaleStores { small: Store::Sqlite, large: Store::Sqlite }),
        Some(admin) => {
            let base = format!("payrail_bench_{}_{}", std::process::id(), unix_micros());
            let mut create = async |name: String| -> BoxResult<Store> {
                let url = pg_create_database(admin, &name).await?;
                created_dbs.push(name);
                Ok(Store::Postgres { url })
            };
            let main = create(base.clone()).await?;
            let scale = ScaleStores { small: create(format!("{base}_scale_10k")).await?, large: create(format!("{base}_scale_1m")).await? };
            (main, scale)
        }
    };
    let outcome = run_stores(&plan, root.path(), &store, &scale, machine, started).await;
    if let Some(admin) = &plan.opts.database_url {
        for db in &created_dbs {
            pg_drop_database(admin, db).await;
        }
    }
    outcome
}

async fn run_stores(
    plan: &Plan,
    root: &Path,
    store: &Store,
    scale_stores: &ScaleStores,
    machine: Value,
    started: Instant,
) -> BoxResult<Value> {
    eprintln!("bench: server {} on {}, data in {}", server_bin().display(), store.name(), root.display());
    let main = main_scenarios(plan, root, store).await?;
    let scale =
        if plan.selected(Scenario::ReplayScale) { Some(scale_check(plan, root, scale_stores, &main.replay_body).await?) } else { None };
    let durability = durability(store, &main).await;
    let r = &main.results;
    let h = plan.headline();
    let commit_ceiling = |c: usize| r.rps("commit_ceiling", c);
    let mut all: Vec<&RunResult> = r.runs.iter().collect();
    if let Some(scale) = &scale {
        all.extend(scale.runs.iter());
    }
    print_table(&all, r, commit_ceiling);
    let ping = r.rps("ping", h);
    let create = r.rps("create_counterparty", h);
    let replay = r.rps("replay", h);
    let mut out = json!({
        "store": store.name(),
        "durable": durability.durable,
        "quick": plan.opts.quick,
        "connections": h,
        "duration_s": plan.opts.duration.as_secs_f64(),
        "ping_rps": ping.map(r1),
        "http_ceiling_rps": r.rps("http_ceiling", h).map(r1),
        "ping_vs_ceiling": ratio(ping, r.rps("http_ceiling", h)),
        "create_rps": create.map(r1),
        "create_p99_ms": r.p99("create_counterparty", h).map(r3),
        "commit_ceiling_tps": commit_ceiling(h).map(r1),
        "create_vs_commit_ceiling": ratio(create, commit_ceiling(h)),
        "replay_rps": replay.map(r1),
        "replay_vs_ping": ratio(replay, ping),
        "peak_rss_mb": main.peak_rss_mb.map(r1),
    });
    for scenario in ["create_counterparty", "create_payment_order", "replay", "get", "list", "mix"] {
        out[format!("{scenario}_rps")] = json!(r.rps(scenario, h).map(r1));
        out[format!("{scenario}_p99_ms")] = json!(r.p99(scenario, h).map(r3));
    }
    if matches!(store, Store::Postgres { .. }) && r.find("create_counterparty", 32).is_some() {
        out["create_rps_c32"] = json!(r.rps("create_counterparty", 32).map(r1));
        out["commit_ceiling_tps_c32"] = json!(commit_ceiling(32).map(r1));
        out["create_vs_commit_ceiling_c32"] = json!(ratio(r.rps("create_counterparty", 32), commit_ceiling(32)));
    }
    if let Some(scale) = &scale {
        out["replay_rps_10k"] = json!(scale.rps_small.map(r1));
        out["replay_rps_1m"] = json!(scale.rps_large.map(r1));
        out["replay_1m_vs_10k"] = json!(ratio(scale.rps_large, scale.rps_small));
        out["scale_rss_mb_1m"] = json!(scale.rss_large_mb.map(r1));
        out["scale_seeding"] =
            json!("direct INSERT into idempotency_replies (server stopped meanwhile), real reply body, keys seed-NNNNNNN");
        if !scale.note.is_empty() {
            out["scale_note"] = json!(scale.note);
        }
    }
    out["errors_total"] = json!(all.iter().map(|run| run.errors).sum::<u64>());
    out["reconnects_total"] = json!(all.iter().map(|run| run.reconnects).sum::<u64>());
    out["durable_checks"] = durability.checks;
    out["machine"] = machine;
    out["server_bin"] = json!(server_bin().display().to_string());
    out["source"] = source_revision();
    out["wall_s"] = json!(r1(started.elapsed().as_secs_f64()));
    out["machine"]["loadavg_1m_at_end"] = json!(load_average());
    let mut per_run: BTreeMap<String, Value> = BTreeMap::new();
    for run in &all {
        per_run.insert(format!("{}@{}", run.scenario, run.connections), run.to_json());
    }
    out["runs"] = json!(per_run);
    Ok(out)
}

fn main() {
    if cfg!(debug_assertions) {
        eprintln!("bench: WARNING built without optimisations; use `cargo bench --bench load`");
    }
    let opts = match parse_args() {
        Ok(opts) => opts,
        Err(e) => {
            eprintln!("bench: {e}");
            std::process::exit(2);
        }
    };
    let plan = Plan { postgres: opts.database_url.is_some(), opts };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    match runtime.block_on(run(plan)) {
        Ok(out) => println!("{out}"),
        Err(e) => {
            eprintln!("bench: FAILED: {e}");
            std::process::exit(1);
        }
    }
}
