//! Cursor pagination (SPEC L1): bare JSON arrays, newest first, `X-After-Cursor` and
//! `X-Per-Page` headers. A cursor is the position of the last item served, so rows inserted
//! meanwhile (always newer) never shift a page, and the last page has an empty cursor.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::extract::QueryParams;
use crate::error::Error;

pub const PER_PAGE_DEFAULT: usize = 25;
pub const PER_PAGE_MAX: usize = 100;
const CURSOR_PREFIX: &str = "v1:";

/// Which page a list request asks for.
#[derive(Debug, Clone, Copy)]
pub struct PageRequest {
    pub per_page: usize,
    pub after_seq: Option<i64>,
}

impl PageRequest {
    pub fn from_query(query: &QueryParams) -> Result<Self, Error> {
        let per_page = match query.get("per_page").filter(|v| !v.is_empty()) {
            None => PER_PAGE_DEFAULT,
            Some(text) => match text.parse::<u64>() {
                Ok(0) | Err(_) => return Err(Error::invalid("per_page", "per_page must be a whole number from 1 to 100")),
                Ok(n) => usize::try_from(n).unwrap_or(PER_PAGE_MAX).min(PER_PAGE_MAX),
            },
        };
        let after_seq = match query.get("after_cursor").filter(|v| !v.is_empty()) {
            None => None,
            Some(cursor) => Some(
                decode_cursor(cursor).ok_or_else(|| Error::invalid("after_cursor", "after_cursor is not a cursor this server gave out"))?,
            ),
        };
        Ok(PageRequest { per_page, after_seq })
    }
}

pub fn encode_cursor(seq: i64) -> String {
    URL_SAFE_NO_PAD.encode(format!("{CURSOR_PREFIX}{seq}"))
}

fn decode_cursor(cursor: &str) -> Option<i64> {
    let raw = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = std::str::from_utf8(&raw).ok()?;
    text.strip_prefix(CURSOR_PREFIX)?.parse().ok().filter(|seq: &i64| *seq > 0)
}

/// A list reply: the JSON array (already serialised) and its paging headers.
pub fn page_response(body: Vec<u8>, per_page: usize, next_seq: Option<i64>) -> Response {
    let mut response = (StatusCode::OK, [(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response();
    let cursor = next_seq.map(encode_cursor).unwrap_or_default();
    let headers = response.headers_mut();
    headers.insert("x-after-cursor", HeaderValue::from_str(&cursor).unwrap_or(HeaderValue::from_static("")));
    headers.insert("x-per-page", HeaderValue::from(per_page));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l1_cursor_round_trips_and_garbage_is_rejected() {
        let q = QueryParams::parse(Some(&format!("after_cursor={}&per_page=500", encode_cursor(42))));
        let page = PageRequest::from_query(&q).unwrap();
        assert_eq!((page.per_page, page.after_seq), (100, Some(42)));
        assert!(PageRequest::from_query(&QueryParams::parse(Some("after_cursor=zzz"))).is_err());
        assert!(PageRequest::from_query(&QueryParams::parse(Some("per_page=0"))).is_err());
        assert!(PageRequest::from_query(&QueryParams::parse(Some("per_page=ten"))).is_err());
        assert_eq!(PageRequest::from_query(&QueryParams::default()).unwrap().per_page, 25);
    }
}
