//! `--latency`: API latency while the bank work runs (issues 20, 21: "API p99 within 2x of
//! idle"). A Payrail server is launched in the bench's process on the same data directory or
//! database, and the cut-off and the answer files run inside it, through the calls its bank
//! worker makes (its own schedule is off), as they do in production: on SQLite they share the
//! server's one writer with the API. One client sends requests one after the other, 20 a
//! second, alternating a write (`POST /api/counterparties`) and a read (`GET
//! /api/payment_orders?per_page=10`): first for 10 s with nothing else running (idle), then
//! for as long as the bank work runs. Each phase's latencies go into a histogram; p50, p99 and
//! the largest are printed, and the slowest few with their time from the phase's start (to line
//! up with the cut-off's own log lines, which `PAYRAIL_BENCH_LOG=payrail=info` prints with
//! timestamps in this mode). Peak RSS is not measured in this mode (the server shares the
//! bench's process): take it from a run without `--latency`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use payrail::config::Config;
use payrail::domain::api_key::Mode;
use payrail::domain::time::SystemClock;
use serde_json::json;

/// One request every this often (at most; a slow reply delays the next).
const PACE: Duration = Duration::from_millis(50);
const IDLE: Duration = Duration::from_secs(10);

/// A client of the launched server.
#[derive(Clone)]
pub struct Api {
    base: String,
    client: reqwest::Client,
    secret: String,
}

/// The launched server; it stops when dropped.
pub struct Running {
    server: payrail::Server,
    data_dir: std::path::PathBuf,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Running {
    /// A cut-off of `connection` in the server's process; its seconds and report lines.
    pub async fn cutoff(&self, connection: &str) -> (f64, String) {
        use payrail::bank::cutoff;
        let registered = cutoff::connection(self.server.store.as_ref(), connection).await.unwrap();
        let now = payrail::domain::time::Clock::now(&SystemClock);
        let started = Instant::now();
        let store = self.server.store.clone();
        let report = cutoff::run(store, &self.server.secrets, &self.data_dir, &registered, now, cutoff::Mode::Now, Duration::ZERO)
            .await
            .expect("the cut-off runs")
            .expect("no other cut-off holds the lease");
        let lines =
            report.iter().map(|f| format!("{}  {}  orders={}  {:?}\n", f.file.id, f.file.name, f.file.order_count, f.error)).collect();
        (started.elapsed().as_secs_f64(), lines)
    }

    /// A poll of `connection`'s inbound folder in the server's process; its seconds and each
    /// file's effects, worded as `payrail bank inbound` prints them.
    pub async fn inbound(&self, connection: &str) -> (f64, String) {
        let registered = payrail::bank::cutoff::connection(self.server.store.as_ref(), connection).await.unwrap();
        let now = payrail::domain::time::Clock::now(&SystemClock);
        let started = Instant::now();
        let store = self.server.store.clone();
        let received = payrail::bank::inbound::poll(store, &self.server.secrets, &self.data_dir, &registered, now, Duration::ZERO)
            .await
            .expect("the inbound folder is read")
            .expect("no other reader holds the lease");
        let seconds = started.elapsed().as_secs_f64();
        let lines = received
            .iter()
            .map(|r| format!("{}  transactions={}  returns={}  error={:?}\n", r.name, r.effects.transactions, r.effects.returns, r.error))
            .collect();
        (seconds, lines)
    }
}

/// Launches the server on `config`'s store, with a key of `org`.
pub async fn launch(mut config: Config, org: &str) -> (Api, Running) {
    let data_dir = config.data_dir.clone();
    config.bank_tick_ms = 0;
    config.admin_listen = None;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = payrail::launch(config, listener, async move {
        let _ = stopped.await;
    })
    .await
    .expect("launch the server");
    let pem = std::fs::read(server.cert_path.as_ref().expect("TLS by default")).unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .tls_built_in_root_certs(false)
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let issued = payrail::domain::keys::create(server.store.as_ref(), &SystemClock, "bench", Mode::Live, org).await.unwrap();
    let base = format!("https://127.0.0.1:{}", server.local_addr.port());
    (Api { base, client, secret: issued.secret.expose().to_owned() }, Running { server, data_dir, _stop: stop })
}

/// A measure running in the background until [`Probing::finish`].
pub struct Probing {
    done: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Latencies>,
}

impl Probing {
    pub fn start(runtime: &tokio::runtime::Runtime, api: &Api) -> Probing {
        let done = Arc::new(AtomicBool::new(false));
        let (api, flag) = (api.clone(), done.clone());
        Probing { done, task: runtime.spawn(async move { api.measure(flag, None).await }) }
    }

    pub fn finish(self, runtime: &tokio::runtime::Runtime) -> Latencies {
        self.done.store(true, Ordering::Relaxed);
        runtime.block_on(self.task).expect("the probe ran")
    }
}

impl Api {
    /// 10 s of requests with nothing else running.
    pub async fn idle(&self) -> Latencies {
        self.measure(Arc::new(AtomicBool::new(false)), Some(IDLE)).await
    }

    /// Requests until `done` is set (or `limit` passes); their latencies in microseconds.
    pub async fn measure(&self, done: Arc<AtomicBool>, limit: Option<Duration>) -> Latencies {
        let mut latencies = Latencies::default();
        let started = Instant::now();
        let mut n: u64 = 0;
        while !done.load(Ordering::Relaxed) && limit.is_none_or(|l| started.elapsed() < l) {
            let next = Instant::now() + PACE;
            let sent = Instant::now();
            let write = n.is_multiple_of(2);
            let request = if write {
                self.client.post(format!("{}/api/counterparties", self.base)).json(&json!({"name": format!("Probe {n}")}))
            } else {
                self.client.get(format!("{}/api/payment_orders?per_page=10", self.base))
            };
            let response = request.basic_auth("x-api-key", Some(&self.secret)).send().await.expect("the server answers");
            let status = response.status();
            let _ = response.bytes().await;
            assert!(status.is_success(), "probe request {n} answered {status}");
            let histogram = if write { &mut latencies.writes } else { &mut latencies.reads };
            let micros = sent.elapsed().as_micros() as u64;
            histogram.record(micros).unwrap();
            latencies.note_slow(sent.duration_since(started), micros, if write { "write" } else { "read" });
            n += 1;
            tokio::time::sleep_until(next.into()).await;
        }
        latencies
    }
}

/// Requests listed by [`Latencies::slowest`].
const SLOWEST: usize = 5;

/// Latencies in microseconds, writes and reads apart.
pub struct Latencies {
    pub writes: Histogram<u64>,
    pub reads: Histogram<u64>,
    /// The slowest requests: (sent this long after the phase started, microseconds, kind).
    slowest: Vec<(Duration, u64, &'static str)>,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies { writes: Histogram::new(3).unwrap(), reads: Histogram::new(3).unwrap(), slowest: Vec::new() }
    }
}

impl Latencies {
    fn note_slow(&mut self, at: Duration, micros: u64, kind: &'static str) {
        self.slowest.push((at, micros, kind));
        self.slowest.sort_by_key(|s| std::cmp::Reverse(s.1));
        self.slowest.truncate(SLOWEST);
    }

    /// `"911 ms (write, at 12.3 s), ..."`, slowest first.
    fn slowest(&self) -> String {
        let each = self
            .slowest
            .iter()
            .map(|(at, micros, kind)| format!("{:.0} ms ({kind}, at {:.1} s)", *micros as f64 / 1000.0, at.as_secs_f64()));
        each.collect::<Vec<_>>().join(", ")
    }
}

/// `what`'s latency lines and JSON fields (writes, then reads), against `idle`.
pub fn report(store: &str, what: &str, idle: &Latencies, during: &Latencies) {
    report_one(store, what, "write", &idle.writes, &during.writes);
    report_one(store, what, "read", &idle.reads, &during.reads);
    println!("latency {store}: slowest during {what}: {}; slowest idle: {}", during.slowest(), idle.slowest());
}

fn report_one(store: &str, what: &str, kind: &str, idle: &Histogram<u64>, during: &Histogram<u64>) {
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let ratio = ms(during, 0.99) / ms(idle, 0.99);
    println!(
        "latency {store} during {what}, {kind}s: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} requests; idle p50 {:.1} ms, p99 {:.1} ms ({} requests); p99 ratio {ratio:.2}",
        ms(during, 0.5),
        ms(during, 0.99),
        during.max() as f64 / 1000.0,
        during.len(),
        ms(idle, 0.5),
        ms(idle, 0.99),
        idle.len()
    );
    println!(
        "{}",
        json!({"bench": "latency", "during": what, "requests": kind, "store": store, "count": during.len(), "p50_ms": ms(during, 0.5), "p99_ms": ms(during, 0.99),
            "max_ms": during.max() as f64 / 1000.0, "idle_p50_ms": ms(idle, 0.5), "idle_p99_ms": ms(idle, 0.99), "p99_ratio": ratio})
    );
}
