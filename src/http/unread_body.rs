//! Closing connections whose request body was left unread.
//!
//! Many replies come before the body is read: a 401, a malformed `Idempotency-Key`, a 409 for a
//! key in flight, a replay. HTTP/1.1 cannot reuse such a connection (the unread bytes are still
//! in it), and hyper closes it after the reply; saying `Connection: close` in that reply tells
//! the client so, instead of letting it send its next request into a closing socket.
//!
//! Closing a socket that still has unread request bytes makes the kernel reset it, and a reset
//! can destroy the reply before the client reads it: the client sees the connection drop
//! instead of its 401 or its replayed 201 (schema fuzzing found this with bodies over ~16 KiB).
//! So a body left unread is drained in the background after the reply, at most
//! [`drain_bytes_max`] (the body limit and 32 MiB more, so a body somewhat over the limit
//! still gets its 413) and for at most [`DRAIN_TIMEOUT`], and the connection closes only once
//! the client has sent it all. A client that sends more, or more slowly, is cut off as before:
//! draining costs the server no more than the client's sending costs the client.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Frame, SizeHint};

/// Longest a left-over request body is drained for before the connection is closed anyway.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes drained beyond the body limit at most.
const DRAIN_BEYOND_LIMIT_BYTES: usize = 32 << 20;

/// Most bytes of a request left unread that are drained before its connection closes.
pub fn drain_bytes_max(body_limit_bytes: usize) -> usize {
    body_limit_bytes.saturating_add(DRAIN_BEYOND_LIMIT_BYTES)
}

/// A request body that records when it has been read to the end, and is drained in the
/// background if it is dropped before that.
struct Watched {
    inner: Body,
    finished: Arc<AtomicBool>,
    /// Most bytes drained after a drop (the body limit).
    drain_max_bytes: usize,
}

impl Drop for Watched {
    fn drop(&mut self) {
        if self.finished.load(Ordering::Acquire) || self.inner.is_end_stream() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let body = std::mem::take(&mut self.inner);
        runtime.spawn(drain(body, self.drain_max_bytes));
    }
}

/// Reads and discards `body` until its end, `max_bytes`, or [`DRAIN_TIMEOUT`]; hyper goes on
/// reading the connection for as long as the body is wanted.
async fn drain(mut body: Body, max_bytes: usize) {
    let mut seen: usize = 0;
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while let Some(Ok(frame)) = body.frame().await {
            seen = seen.saturating_add(frame.data_ref().map_or(0, Bytes::len));
            if seen > max_bytes {
                break;
            }
        }
    })
    .await;
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.finished.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Watches a request's body: the returned flag turns true once the handler read it to the end.
/// A body already complete (no body, or fully buffered) needs no watching.
pub fn watch(request: Request, drain_max_bytes: usize) -> (Request, Option<Arc<AtomicBool>>) {
    let (parts, body) = request.into_parts();
    if body.is_end_stream() {
        return (Request::from_parts(parts, body), None);
    }
    let finished = Arc::new(AtomicBool::new(false));
    let watched = Watched { inner: body, finished: finished.clone(), drain_max_bytes };
    (Request::from_parts(parts, Body::new(watched.boxed_unsync())), Some(finished))
}

/// Marks the reply `Connection: close` if the watched body was left unread.
pub fn close_if_unread(response: &mut Response, finished: Option<&AtomicBool>) {
    if finished.is_some_and(|finished| !finished.load(Ordering::Acquire)) {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
}
