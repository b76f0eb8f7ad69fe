//! The HTTP client side: a TLS connection trusting the server's certificate, one request and
//! its reply, the [`Call`] a scenario makes and what its reply must be, and the closed-loop run
//! of a scenario's [`Requests`].

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::driver::{Opener, Outcome, Session, closed_loop};
use super::results::RunResult;
use super::sampling::CpuMeter;
use super::server::ServerProcess;
use super::{BoxResult, unix_micros};
use crate::plan::Plan;
use crate::seed::Fixture;

/// Where requests go and how they authenticate.
pub struct Target {
    addr: SocketAddr,
    tls: TlsConnector,
    server_name: ServerName<'static>,
    auth: HeaderValue,
}

impl Target {
    pub fn new(addr: SocketAddr, cert: CertificateDer<'static>, secret: &str) -> BoxResult<Self> {
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

pub fn read_cert(path: &Path) -> BoxResult<CertificateDer<'static>> {
    CertificateDer::from_pem_file(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

pub type Sender = SendRequest<Full<Bytes>>;

/// What `send` answers when the connection was already closed before the request left.
pub const CLOSED: &str = "connection closed before the request was sent";

pub async fn connect(target: &Target) -> BoxResult<Sender> {
    let tcp = TcpStream::connect(target.addr).await.map_err(|e| format!("tcp: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let tls = target.tls.connect(target.server_name.clone(), tcp).await.map_err(|e| format!("tls: {e}"))?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| format!("http: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

pub struct Reply {
    pub status: StatusCode,
    pub replayed: bool,
    pub body: Bytes,
}

/// One request of a scenario and what its reply must be.
pub struct Call {
    pub method: Method,
    pub path: String,
    pub body: Option<Bytes>,
    pub key: Option<String>,
    pub expect: StatusCode,
    pub expect_replayed: bool,
    /// A refusal the scenario expects too (a 422 for a failed balance condition): a right
    /// answer, counted apart from `expect` (as `refused`).
    pub refusal: Option<StatusCode>,
    /// A number the scenario attaches and gets back in [`Requests::observe`] (a debit's amount).
    pub weight: u64,
}

impl Call {
    pub fn get(path: impl Into<String>) -> Call {
        Call {
            method: Method::GET,
            path: path.into(),
            body: None,
            key: None,
            expect: StatusCode::OK,
            expect_replayed: false,
            refusal: None,
            weight: 0,
        }
    }

    pub fn post(path: &str, body: String, key: Option<String>) -> Call {
        Call {
            method: Method::POST,
            path: path.to_owned(),
            body: Some(Bytes::from(body)),
            key,
            expect: StatusCode::CREATED,
            expect_replayed: false,
            refusal: None,
            weight: 0,
        }
    }

    pub fn replayed(mut self) -> Call {
        self.expect_replayed = true;
        self
    }

    /// The same call, with `status` an expected refusal and `weight` attached.
    pub fn or_refused(mut self, status: StatusCode, weight: u64) -> Call {
        self.refusal = Some(status);
        self.weight = weight;
        self
    }

    pub fn check(&self, reply: &Reply) -> Outcome {
        if Some(reply.status) == self.refusal {
            return Outcome::Refused;
        }
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

pub async fn send(sender: &mut Sender, target: &Target, call: &Call) -> BoxResult<Reply> {
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

/// A scenario's request stream: the request of one connection's next call.
pub trait Requests: Sync + 'static {
    fn call(&self, fixture: &Fixture, req: &mut Req<'_>) -> Call;

    /// Sees every reply, warm-up included (a scenario that must account for what the server
    /// accepted keeps its tally in the fixture).
    fn observe(&self, _fixture: &Fixture, _call: &Call, _reply: &Reply) {}
}

/// Where a call stands in its run: its connection, its number on that connection, and the
/// connection's random state.
pub struct Req<'a> {
    pub conn: usize,
    pub seq: u64,
    /// Makes every fresh Idempotency-Key of this run unique.
    tag: &'a str,
    rng: &'a mut u64,
}

impl Req<'_> {
    /// An Idempotency-Key no other call of any run has sent.
    pub fn fresh_key(&self) -> Option<String> {
        Some(format!("{}-{}-{}", self.tag, self.conn, self.seq))
    }

    pub fn rand(&mut self) -> u64 {
        next_rand(self.rng)
    }

    /// One of `ids` at random ("missing" if there are none).
    pub fn pick<'i>(&mut self, ids: &'i [String]) -> &'i str {
        if ids.is_empty() { "missing" } else { &ids[(self.rand() % ids.len() as u64) as usize] }
    }
}

fn next_rand(state: &mut u64) -> u64 {
    // xorshift64*: cheap, and good enough to spread keys and ids.
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// A run's request stream: the scenario's requests over its fixture.
struct Workload<R: ?Sized + 'static> {
    requests: &'static R,
    fixture: Arc<Fixture>,
    tag: String,
}

struct HttpOpener<R: ?Sized + 'static> {
    target: Arc<Target>,
    workload: Arc<Workload<R>>,
}

struct HttpSession<R: ?Sized + 'static> {
    sender: Sender,
    target: Arc<Target>,
    workload: Arc<Workload<R>>,
    conn: usize,
    rng: u64,
    reconnects: u64,
}

impl<R: Requests + ?Sized> Opener for HttpOpener<R> {
    type S = HttpSession<R>;

    async fn open(&self, conn: usize) -> BoxResult<HttpSession<R>> {
        let sender = connect(&self.target).await?;
        let rng = (conn as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        Ok(HttpSession { sender, target: self.target.clone(), workload: self.workload.clone(), conn, rng, reconnects: 0 })
    }
}

impl<R: Requests + ?Sized> Session for HttpSession<R> {
    /// Sends the next call. A connection the server closed after its last reply (say, with
    /// `Connection: close`) is reopened first, as a real client would, and the handshake counts
    /// in this request's latency.
    async fn once(&mut self, seq: u64) -> Outcome {
        let workload = &self.workload;
        let mut req = Req { conn: self.conn, seq, tag: &workload.tag, rng: &mut self.rng };
        let call = workload.requests.call(&workload.fixture, &mut req);
        let mut reopened = false;
        loop {
            match send(&mut self.sender, &self.target, &call).await {
                Ok(reply) => {
                    workload.requests.observe(&workload.fixture, &call, &reply);
                    return call.check(&reply);
                }
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

/// One closed-loop run of `requests` against `target`, reported as `name`.
pub async fn run_http<R: Requests + ?Sized>(
    target: &Arc<Target>,
    name: &'static str,
    requests: &'static R,
    fixture: &Arc<Fixture>,
    conns: usize,
    plan: &Plan,
) -> RunResult {
    let tag = format!("bench-{}-{name}-{conns}-{}", std::process::id(), unix_micros());
    let workload = Arc::new(Workload { requests, fixture: fixture.clone(), tag });
    let opener = Arc::new(HttpOpener { target: target.clone(), workload });
    closed_loop(name, opener, conns, plan.opts.warmup, plan.opts.duration).await
}

/// [`run_http`] with the CPU it cost, and the server's CPU, disk writes and memory when the
/// run is against a server process (`server`; none for the in-process http_ceiling).
pub async fn measure_http<R: Requests + ?Sized>(
    target: &Arc<Target>,
    server: Option<&ServerProcess>,
    name: &'static str,
    requests: &'static R,
    fixture: &Arc<Fixture>,
    conns: usize,
    plan: &Plan,
) -> RunResult {
    let cpu = CpuMeter::start(server.and_then(ServerProcess::pid));
    let mut run = run_http(target, name, requests, fixture, conns, plan).await;
    cpu.finish(&mut run);
    if let Some(server) = server {
        run.rss_mb = server.rss_mb();
    }
    run
}

/// Sends one setup call, which must succeed: its reply as JSON, and its raw body.
pub async fn call_json(target: &Target, sender: &mut Sender, call: Call) -> BoxResult<(Value, Bytes)> {
    let reply = send(sender, target, &call).await?;
    if let Outcome::Unexpected(msg) = call.check(&reply) {
        return Err(msg);
    }
    let value = serde_json::from_slice(&reply.body).map_err(|e| format!("{} {}: not JSON: {e}", call.method, call.path))?;
    Ok((value, reply.body))
}

pub fn id_of(value: &Value) -> BoxResult<String> {
    value["id"].as_str().map(str::to_owned).ok_or_else(|| format!("no id in {value}"))
}
