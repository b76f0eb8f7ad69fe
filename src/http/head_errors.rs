//! hyper's own refusals of a request head, given the contract's error body (SPEC L5, L3).
//!
//! hyper's HTTP/1 parser refuses some request heads before the service ever sees them: 431 for a
//! head larger than the read buffer or with more than 100 header lines (a long request line
//! included), 400 for a malformed request line, a bad `Content-Length` or a control character in
//! a header value, 414 for a URI past 64 KiB. It answers them itself with an empty body
//! (`HTTP/1.1 431 …\r\nconnection: close\r\ncontent-length: 0\r\ndate: …\r\n\r\n`), writes
//! nothing after, and closes. [`ErrorBodies`] wraps a connection's IO and replaces that bodiless
//! reply with one of the same status carrying the error body, as JSON, still closing.
//!
//! Why rewrite hyper's reply rather than pre-validate heads with `httparse` in front of hyper:
//! finding each head in the byte stream means framing every body (lengths, chunked encoding,
//! pipelining) a second time, a second HTTP/1 parser whose least disagreement with hyper's would
//! be a request-smuggling hazard, and hyper would still refuse what it refuses. The reply, on the
//! other hand, can be recognised with certainty: it is a complete head, the last bytes hyper
//! writes, with a 4xx status and its standard reason, `content-length: 0`, and no header besides
//! `connection`, `content-length` and `date`. Every reply of the service has a `content-type`
//! and a JSON body (JSON never holds a raw CR or LF), so neither a reply of ours nor any bytes
//! inside one can take that shape. A normal reply costs a look at its last four bytes.
//!
//! After the replacement, the client's unread bytes (the rest of an oversized head, and the body
//! of a request whose head was refused) are read and dropped before the connection closes, as
//! much and for as long as a body left unread is drained (`unread_body`): closing
//! on unread bytes makes the kernel reset the connection, and a reset can destroy the reply
//! before the client reads it. Most clients send the whole body before they read (schema
//! fuzzing lost the 400 of a refused head followed by a 900 KB body when this stopped at
//! 256 KiB and 1 s).

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::http::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use super::error;

/// Longest a refused client's leftover bytes are read for before the connection closes.
const LINGER: Duration = super::unread_body::DRAIN_TIMEOUT;
/// hyper's refusal is well under this (status line, `connection`, `content-length`, `date`).
const REFUSAL_LEN_MAX: usize = 256;
const REFUSAL_START: &[u8] = b"HTTP/1.1 4";

/// A connection's IO whose bodiless 4xx replies from hyper get the error body.
pub struct ErrorBodies<S> {
    inner: S,
    /// The reply replacing hyper's, once hyper wrote its own, and how much of it is written.
    replacement: Option<(Vec<u8>, usize)>,
    shut_down: bool,
    linger: Option<Pin<Box<Sleep>>>,
    lingered_bytes: usize,
    /// Most leftover bytes read: a refused head's rest and its body, drained as a body left
    /// unread is.
    linger_bytes_max: usize,
}

impl<S> ErrorBodies<S> {
    /// `body_limit_bytes`: the largest request body the server takes.
    pub fn new(inner: S, body_limit_bytes: usize) -> Self {
        let linger_bytes_max = super::unread_body::drain_bytes_max(body_limit_bytes);
        ErrorBodies { inner, replacement: None, shut_down: false, linger: None, lingered_bytes: 0, linger_bytes_max }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> ErrorBodies<S> {
    /// Writes what is left of the replacement, if any.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, written)) = &mut self.replacement
            && *written < bytes.len()
        {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Reads and drops what the client still sends, until it closes, [`LINGER`] passes or
    /// `linger_bytes_max` arrived.
    fn poll_linger(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self.linger.get_or_insert_with(|| Box::pin(tokio::time::sleep(LINGER)));
        let mut scratch = [0u8; 16 * 1024];
        loop {
            if self.lingered_bytes >= self.linger_bytes_max || deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut self.inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => self.lingered_bytes += buf.filled().len(),
                Poll::Ready(_) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for ErrorBodies<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for ErrorBodies<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.replacement.is_some() {
            // hyper writes nothing after its refusal; were it to, it would follow the replacement.
            ready!(this.poll_replacement(cx))?;
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        }
        match bare_refusal_at(buf) {
            None => Pin::new(&mut this.inner).poll_write(cx, buf),
            // The bytes before it first (the end of an earlier reply), then the refusal itself.
            Some(start) if start > 0 => Pin::new(&mut this.inner).poll_write(cx, &buf[..start]),
            Some(_) => {
                this.replacement = Some((replacement_for(buf), 0));
                Poll::Ready(Ok(buf.len()))
            }
        }
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.replacement.is_some() {
            ready!(this.poll_replacement(cx))?;
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        }
        // hyper's refusal is one head, so one slice: the last one with bytes.
        let Some(last) = bufs.iter().rposition(|b| !b.is_empty()) else {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        };
        match bare_refusal_at(&bufs[last]) {
            None => Pin::new(&mut this.inner).poll_write_vectored(cx, bufs),
            Some(0) if bufs[..last].iter().all(|b| b.is_empty()) => {
                this.replacement = Some((replacement_for(&bufs[last]), 0));
                Poll::Ready(Ok(bufs[last].len()))
            }
            Some(start) => {
                let mut before = bufs[..last].to_vec();
                before.push(IoSlice::new(&bufs[last][..start]));
                Pin::new(&mut this.inner).poll_write_vectored(cx, &before)
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_replacement(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.replacement.is_none() {
            return Pin::new(&mut this.inner).poll_shutdown(cx);
        }
        if !this.shut_down {
            ready!(this.poll_replacement(cx))?;
            ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
            this.shut_down = true;
        }
        ready!(this.poll_linger(cx));
        Poll::Ready(Ok(()))
    }
}

/// Where hyper's bodiless refusal starts in `buf`, if `buf` ends with one.
fn bare_refusal_at(buf: &[u8]) -> Option<usize> {
    if !buf.ends_with(b"\r\n\r\n") {
        return None;
    }
    let from = buf.len().saturating_sub(REFUSAL_LEN_MAX);
    let start = from + buf[from..].windows(REFUSAL_START.len()).rposition(|w| w == REFUSAL_START)?;
    is_bare_refusal(&buf[start..]).then_some(start)
}

/// Whether `head` is exactly a reply head as hyper writes its refusals: a 4xx status with its
/// standard reason, `content-length: 0`, and only `connection` and `date` besides.
fn is_bare_refusal(head: &[u8]) -> bool {
    let Some(text) = std::str::from_utf8(head).ok().and_then(|t| t.strip_suffix("\r\n\r\n")) else {
        return false;
    };
    let mut lines = text.split("\r\n");
    if lines.next().and_then(refusal_status).is_none() {
        return false;
    }
    let mut empty = false;
    for line in lines {
        match line.split_once(": ") {
            Some(("content-length", "0")) => empty = true,
            Some(("connection" | "date", _)) => {}
            _ => return false,
        }
    }
    empty
}

/// The 4xx status of a status line `HTTP/1.1 NNN Reason` with the status's standard reason.
fn refusal_status(line: &str) -> Option<StatusCode> {
    let rest = line.strip_prefix("HTTP/1.1 ")?;
    let (code, reason) = rest.split_once(' ')?;
    let status = StatusCode::from_bytes(code.as_bytes()).ok().filter(StatusCode::is_client_error)?;
    (status.canonical_reason() == Some(reason)).then_some(status)
}

/// The reply that replaces hyper's refusal `head`: same status and date, the error body.
fn replacement_for(head: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let status = text.split("\r\n").next().and_then(refusal_status).unwrap_or(StatusCode::BAD_REQUEST);
    let (code, message) = match status {
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => (
            "request_headers_too_large",
            "The request head is too large: at most 100 header lines and about 16 KiB, request line included.",
        ),
        StatusCode::URI_TOO_LONG => ("request_uri_too_long", "The request URI is too long."),
        _ => ("invalid_request", "The request could not be parsed: its request line or a header is malformed."),
    };
    let body = error::body_bytes(code, message, None);
    let date = text.split("\r\n").find(|line| line.starts_with("date: ")).map(|line| format!("{line}\r\n")).unwrap_or_default();
    let mut reply = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{date}\r\n",
        status.as_str(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes();
    reply.extend_from_slice(&body);
    reply
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const REFUSAL: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: Tue, 24 Nov 2026 14:00:07 GMT\r\n\r\n";

    #[test]
    fn l5_recognises_hypers_refusal_and_nothing_of_ours() {
        assert_eq!(bare_refusal_at(REFUSAL), Some(0));
        let ours = b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(bare_refusal_at(ours), None, "a head with a content-type is a reply of the service");
        let json = br#"HTTP/1.1 200 OK\r\ncontent-length: 40\r\n\r\n{"name":"HTTP/1.1 400 Bad Request"}"#;
        assert_eq!(bare_refusal_at(json), None);
        let not_empty = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 5\r\n\r\n";
        assert_eq!(bare_refusal_at(not_empty), None);
        let wrong_reason = b"HTTP/1.1 400 Oops\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(bare_refusal_at(wrong_reason), None);
        let success = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(bare_refusal_at(success), None, "only 4xx refusals are replaced");
        // After the end of an earlier (pipelined) reply in the same buffer.
        let earlier = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n{\"ping\":\"pong\"}";
        assert_eq!(bare_refusal_at(&[&earlier[..], REFUSAL].concat()), Some(earlier.len()));
    }

    async fn through_wrapper(write: impl AsyncFnOnce(&mut ErrorBodies<tokio::io::DuplexStream>)) -> String {
        let (server, mut client) = tokio::io::duplex(64 * 1024);
        let mut wrapped = ErrorBodies::new(server, 1 << 20);
        write(&mut wrapped).await;
        wrapped.shutdown().await.unwrap();
        drop(wrapped);
        let mut out = String::new();
        client.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn l5_the_refusal_goes_out_with_the_error_body_after_earlier_replies() {
        let earlier = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n{\"ping\":\"pong\"}";
        let out = through_wrapper(async |w| {
            w.write_all(earlier.as_bytes()).await.unwrap();
            w.write_all(REFUSAL).await.unwrap();
            w.flush().await.unwrap();
        })
        .await;
        let (first, second) = out.split_at(earlier.len());
        assert_eq!(first, earlier, "replies of the service pass untouched");
        let (head, body) = second.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "{head}");
        assert!(head.contains("content-type: application/json\r\n") && head.contains("connection: close"), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
        assert!(head.contains("date: Tue, 24 Nov 2026 14:00:07 GMT"), "{head}");
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["errors"]["code"], "request_headers_too_large");
        assert!(body["errors"]["parameter"].is_null());
    }

    #[tokio::test]
    async fn l5_vectored_refusals_are_replaced_too() {
        let out = through_wrapper(async |w| {
            let bad = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
            let slices = [IoSlice::new(b""), IoSlice::new(bad)];
            let written = std::future::poll_fn(|cx| Pin::new(&mut *w).poll_write_vectored(cx, &slices)).await.unwrap();
            assert_eq!(written, bad.len());
            w.flush().await.unwrap();
        })
        .await;
        assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"), "{out}");
        assert!(out.ends_with(r#""code":"invalid_request","message":"The request could not be parsed: its request line or a header is malformed.","parameter":null}}"#), "{out}");
    }
}
