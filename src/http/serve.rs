//! The API listener: TLS termination, plain-HTTP rejection, connection limits, graceful shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// The first byte of every TLS connection: a handshake record.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;
/// Most header lines in one request.
const HEADERS_MAX: usize = 64;
/// Read buffer for a request head, in bytes: heads much larger than this are refused with 431
/// (hyper may read one buffer past it before it checks, so the hard bound is a few times this).
const HEADER_BYTES_MAX: usize = 16 * 1024;
/// How long in-flight requests get to finish after shutdown begins.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub struct ListenerOptions {
    pub tls: Option<TlsAcceptor>,
    pub handshake_timeout: Duration,
    /// How long a client may take to send a request's headers (slow senders are cut off).
    pub header_read_timeout: Duration,
    pub connections_max: usize,
}

/// Serves `app` on `listener` until `shutdown` resolves, then drains open connections.
pub async fn serve(listener: TcpListener, app: Router, options: ListenerOptions, shutdown: impl Future<Output = ()>) {
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(Semaphore::new(options.connections_max));
    tokio::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
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
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!("connection limit reached; closing a new connection");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let options = options.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _permit = permit;
            match &options.tls {
                None => serve_connection(TokioIo::new(stream), app, watcher, options.header_read_timeout).await,
                Some(acceptor) => {
                    let handshake = tokio::time::timeout(options.handshake_timeout, accept_tls(acceptor, stream)).await;
                    if let Ok(Some(tls)) = handshake {
                        serve_connection(TokioIo::new(tls), app, watcher, options.header_read_timeout).await;
                    }
                }
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("connections still open after the drain timeout; closing them");
    }
}

async fn serve_connection<S>(io: TokioIo<S>, app: Router, watcher: hyper_util::server::graceful::Watcher, header_read_timeout: Duration)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| app.clone().oneshot(request));
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        // Slow senders of headers are cut off; large or numerous headers are refused (431).
        .header_read_timeout(header_read_timeout)
        .max_headers(HEADERS_MAX)
        .max_buf_size(HEADER_BYTES_MAX)
        .serve_connection(io, service);
    if let Err(err) = watcher.watch(connection).await {
        tracing::debug!(%err, "connection ended with an error");
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
    let body = br#"{"errors":{"code":"https_required","message":"This server only accepts HTTPS: use https:// in the URL.","parameter":null}}"#;
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
    let _ = tokio::time::timeout(Duration::from_millis(500), async {
        while matches!(stream.read(&mut scratch).await, Ok(n) if n > 0) {}
    })
    .await;
}
