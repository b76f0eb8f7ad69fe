//! The API listener: TLS termination, plain-HTTP rejection, connection limits (global and per
//! client address, `conn_limit`), the TLS handshake timeout, graceful shutdown. Connections are
//! served by hyper behind `head_errors`, which gives hyper's own refusals the error body.
//!
//! A connection is closed gracefully (hyper's `graceful_shutdown`: an idle one at once, one with
//! a request in flight once its reply is out), so a TLS client gets a `close_notify` and sees a
//! clean end of stream, not a truncation: at server shutdown, and when it waited longer than the
//! header read timeout for a request head. A client still sending a head by then (a slow sender)
//! gets [`CLOSE_GRACE`] more, then is cut off.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::Api;
use super::conn_limit::ConnectionLimits;
use super::head_errors::ErrorBodies;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;

/// The first byte of every TLS connection: a handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;
/// Read buffer for a request head, in bytes: heads much larger than this are refused with 431
/// (hyper may read one buffer past it before it checks, so the hard bound is a few times this).
const HEADER_BYTES_MAX: usize = 16 * 1024;
/// How long in-flight requests get to finish after shutdown begins.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection being closed for its header read timeout gets to finish closing.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct ListenerOptions {
    pub tls: Option<TlsAcceptor>,
    pub handshake_timeout: Duration,
    /// How long a client may take to send a request's headers (slow senders are cut off).
    pub header_read_timeout: Duration,
    pub connections_max: usize,
    /// Most connections from one client address (an IPv4 address, an IPv6 /64).
    pub connections_per_address_max: usize,
}

/// Serves `app` on `listener` until `shutdown` resolves, then drains open connections.
pub async fn serve(listener: TcpListener, app: Api, options: ListenerOptions, shutdown: impl Future<Output = ()>) {
    // Every connection task holds a sender: once all are dropped, the connections are drained.
    let (closing_tx, closing) = watch::channel(false);
    let (open_tx, mut open) = mpsc::channel::<()>(1);
    let metrics = app.state.metrics.clone();
    let limits = ConnectionLimits::new(options.connections_max, options.connections_per_address_max, metrics.clone());
    let body_limit = app.state.config.body_limit_bytes;
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(err) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Over a cap: dropped here, so closed at once, before any TLS work (SPEC T4).
        let slot = match limits.admit(peer.ip()) {
            Ok(slot) => slot,
            Err(why) => {
                // Debug, not warn: a flood would otherwise flood the log; /metrics counts them.
                tracing::debug!(reason = why.label(), "connection cap reached; closed a new connection");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let options = options.clone();
        let watcher = Watcher { closing: closing.clone(), _open: open_tx.clone() };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let _slot = slot;
            match &options.tls {
                None => serve_connection(ErrorBodies::new(stream, body_limit), app, watcher, options.header_read_timeout).await,
                Some(acceptor) => {
                    // Covers a client that never sends a byte, as well as a slow handshake.
                    match tokio::time::timeout(options.handshake_timeout, accept_tls(acceptor, stream)).await {
                        Ok(Some(tls)) => {
                            serve_connection(ErrorBodies::new(tls, body_limit), app, watcher, options.header_read_timeout).await
                        }
                        Ok(None) => {}
                        Err(_) => metrics.handshake_timed_out(),
                    }
                }
            }
        });
    }
    drop(listener);
    let _ = closing_tx.send(true);
    drop(open_tx);
    if tokio::time::timeout(DRAIN_TIMEOUT, open.recv()).await.is_err() {
        tracing::warn!("connections still open after the drain timeout; closing them");
    }
}

/// What a connection task watches: the server's shutdown, and (held) the drain's count.
struct Watcher {
    closing: watch::Receiver<bool>,
    _open: mpsc::Sender<()>,
}

async fn serve_connection<S>(io: ErrorBodies<S>, app: Api, mut watcher: Watcher, header_read_timeout: Duration)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let heads = Arc::new(HeadWatch::new());
    let service = {
        let heads = heads.clone();
        hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let busy = heads.request_started();
            let app = app.clone();
            async move {
                let reply = app.handle(request).await;
                drop(busy);
                Ok::<_, std::convert::Infallible>(reply)
            }
        })
    };
    // Large or numerous headers are refused (431; hyper's own limit of 100 header lines, whose
    // array lives on the stack: setting a lower one copies a heap-sized array per request);
    // slow senders of headers are cut off below.
    let connection = hyper::server::conn::http1::Builder::new().max_buf_size(HEADER_BYTES_MAX).serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let shutting_down = async {
        let _ = watcher.closing.wait_for(|closing| *closing).await;
    };
    let shutdown = tokio::select! {
        served = connection.as_mut() => return log_end(served),
        () = shutting_down => true,
        () = heads.expired(header_read_timeout) => false,
    };
    connection.as_mut().graceful_shutdown();
    if shutdown {
        // Requests in flight finish (the drain bounds them); a head that is not sent in time
        // is still cut off.
        tokio::select! {
            served = connection.as_mut() => log_end(served),
            () = heads.expired(header_read_timeout) => {}
        }
    } else if let Ok(served) = tokio::time::timeout(CLOSE_GRACE, connection).await {
        log_end(served);
    } else {
        tracing::debug!("cut off a connection that sent no complete request head in time");
    }
}

fn log_end(served: hyper::Result<()>) {
    if let Err(err) = served {
        tracing::debug!(%err, "connection ended with an error");
    }
}

/// Cuts off a connection that has been waiting for a request head longer than the header read
/// timeout: slow senders of headers, and idle keep-alive connections. hyper can do this itself,
/// but it allocates and registers a timer for every request (a tenth of a ping's CPU in the
/// benchmark); one coarse watchdog per connection costs a clock read per request.
struct HeadWatch {
    since: Instant,
    /// Requests whose head was read and whose reply is not ready yet.
    busy: AtomicUsize,
    /// When the connection last became free to read a head, in ms after `since`.
    idle_from_ms: AtomicU64,
}

/// Marks a request in progress until dropped.
struct Busy(Arc<HeadWatch>);

impl Drop for Busy {
    fn drop(&mut self) {
        let now = self.0.now_ms();
        self.0.idle_from_ms.store(now, Ordering::Release);
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

impl HeadWatch {
    fn new() -> Self {
        HeadWatch { since: Instant::now(), busy: AtomicUsize::new(0), idle_from_ms: AtomicU64::new(0) }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn request_started(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    /// Resolves once the connection has waited `limit` for a head (checked every quarter of it,
    /// so a connection is cut off between `limit` and 1.25 `limit`).
    async fn expired(&self, limit: Duration) {
        let limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        let mut ticks = tokio::time::interval((limit / 4).max(Duration::from_millis(5)));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let idle = self.busy.load(Ordering::Acquire) == 0;
            if idle && self.now_ms().saturating_sub(self.idle_from_ms.load(Ordering::Acquire)) >= limit_ms {
                return;
            }
        }
    }
}

/// Completes the TLS handshake, or answers a plain-HTTP request with 400 (SPEC T2).
async fn accept_tls(acceptor: &TlsAcceptor, stream: TcpStream) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let mut first = [0u8; 1];
    let peeked = stream.peek(&mut first).await.ok()?;
    if peeked == 0 {
        return None;
    }
    if first[0] != TLS_HANDSHAKE_RECORD {
        refuse_plain_http(stream).await;
        return None;
    }
    match acceptor.accept(stream).await {
        Ok(tls) => Some(tls),
        Err(err) => {
            tracing::debug!(%err, "TLS handshake failed");
            None
        }
    }
}

/// Answers a plain-HTTP request on the TLS port with a short 400, and serves nothing.
async fn refuse_plain_http(mut stream: TcpStream) {
    let body =
        br#"{"errors":{"code":"https_required","message":"This server only accepts HTTPS: use https:// in the URL.","parameter":null}}"#;
    let head = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    // Read what the client sent first, so closing does not reset the connection before it
    // has read our answer.
    let mut scratch = [0u8; 8192];
    let _ = tokio::time::timeout(Duration::from_millis(500), stream.read(&mut scratch)).await;
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body).await;
    let _ = stream.shutdown().await;
    let _ = tokio::time::timeout(Duration::from_millis(500), async { while matches!(stream.read(&mut scratch).await, Ok(n) if n > 0) {} })
        .await;
}
