//! Closing connections whose request body was left unread.
//!
//! Many replies come before the body is read: a 401, a malformed `Idempotency-Key`, a 409 for a
//! key in flight, a replay. HTTP/1.1 cannot reuse such a connection (the unread bytes are still
//! in it), and hyper closes it after the reply; saying `Connection: close` in that reply tells
//! the client so, instead of letting it send its next request into a closing socket.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Frame, SizeHint};

/// A request body that records when it has been read to the end.
struct Watched {
    inner: Body,
    finished: Arc<AtomicBool>,
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

pub async fn close_if_unread(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    if body.is_end_stream() {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let finished = Arc::new(AtomicBool::new(false));
    let watched = Watched { inner: body, finished: finished.clone() };
    let mut response = next.run(Request::from_parts(parts, Body::new(watched.boxed_unsync()))).await;
    if !finished.load(Ordering::Acquire) {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
