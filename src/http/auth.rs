//! API-key authentication for every `/api/*` request (SPEC A1-A3).
//!
//! HTTP Basic with user name `x-api-key` (or the key's organization id) and the key as password.
//! The key is hashed under the database pepper and looked up by hash; the final comparison is
//! constant-time. A request with more than one `Authorization` header is refused (SPEC L5).
//! Every refusal looks the same from outside: 401, `invalid_key` (or `expired_key` for a rolled
//! key past its grace), and `WWW-Authenticate`.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::app::AppState;
use crate::domain::api_key::{ApiKey, KeyState, Scope, SecretKey};
use crate::error::{AuthFailure, Error};

/// The user name every client may send.
pub const API_KEY_USER: &str = "x-api-key";
/// Longest Authorization header worth decoding; real ones are under 200 bytes.
const AUTHORIZATION_LEN_MAX: usize = 1024;

/// The authenticated caller, available to every handler under `/api` (shared: every layer
/// and extractor that needs it clones it).
#[derive(Debug, Clone)]
pub struct Principal {
    pub key: Arc<ApiKey>,
}

impl Principal {
    pub fn scope(&self) -> Scope {
        self.key.scope()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Principal>().cloned().ok_or(Error::Unauthorized(AuthFailure::Invalid))
    }
}

/// Authenticates a request under `/api` and attaches its [`Principal`], or refuses it before
/// routing (so unknown paths say 401, not 404). Other paths pass untouched to their 404.
pub async fn authenticate_request(state: &AppState, request: &mut Request) -> Result<(), Error> {
    if !is_api_path(request.uri().path()) {
        return Ok(());
    }
    let key = authenticate(state, request.headers()).await?;
    request.extensions_mut().insert(Principal { key });
    Ok(())
}

/// `/api` and everything under it: the paths that need a key.
pub fn is_api_path(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/")
}

async fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<Arc<ApiKey>, Error> {
    let invalid = Error::Unauthorized(AuthFailure::Invalid);
    let mut decoded = [0u8; DECODED_LEN_MAX];
    let (user, secret) = decode_basic(headers, &mut decoded).ok_or(Error::Unauthorized(AuthFailure::Invalid))?;
    let secret = SecretKey::parse(secret).ok_or(Error::Unauthorized(AuthFailure::Invalid))?;
    let hash = state.store.key_hasher().hash(&secret);
    let Some((key, stored_hash)) = state.store.api_key_by_hash(&hash).await? else {
        return Err(invalid);
    };
    if !stored_hash.matches(&hash) {
        return Err(invalid);
    }
    if user != API_KEY_USER && user != key.organization_id {
        return Err(invalid);
    }
    match key.state(state.clock.now()) {
        KeyState::Active => Ok(key),
        KeyState::Expired => Err(Error::Unauthorized(AuthFailure::Expired)),
        KeyState::Revoked => Err(invalid),
    }
}

/// `(user, password)` from `Authorization: Basic base64(user:password)`.
pub fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let mut decoded = [0u8; DECODED_LEN_MAX];
    let (user, password) = decode_basic(headers, &mut decoded)?;
    Some((user.to_owned(), password.to_owned()))
}

/// Most bytes an accepted Authorization header decodes to.
const DECODED_LEN_MAX: usize = AUTHORIZATION_LEN_MAX / 4 * 3;

/// [`basic_credentials`] decoded into `buf`, so authenticating a request copies no secret to
/// the heap.
fn decode_basic<'b>(headers: &HeaderMap, buf: &'b mut [u8; DECODED_LEN_MAX]) -> Option<(&'b str, &'b str)> {
    // Two Authorization headers are ambiguous (which key acts?): refused, whatever they hold (L5).
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?.as_bytes();
    if values.next().is_some() {
        return None;
    }
    if value.len() > AUTHORIZATION_LEN_MAX {
        return None;
    }
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let len = STANDARD.decode_slice(encoded.trim(), buf).ok()?;
    std::str::from_utf8(&buf[..len]).ok()?.split_once(':')
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with_auth(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn a1_parses_basic_credentials() {
        let encoded = STANDARD.encode("x-api-key:pr_sandbox_abc:def");
        let parsed = basic_credentials(&with_auth(&format!("Basic {encoded}")));
        assert_eq!(parsed, Some(("x-api-key".into(), "pr_sandbox_abc:def".into())));
        assert!(basic_credentials(&with_auth(&format!("basic {encoded}"))).is_some());
    }

    #[test]
    fn a2_rejects_malformed_credentials() {
        let no_colon = STANDARD.encode("x-api-key");
        for bad in ["Bearer abc", "Basic", "Basic !!!", &format!("Basic {no_colon}"), "Digest x"] {
            assert_eq!(basic_credentials(&with_auth(bad)), None, "{bad}");
        }
        assert_eq!(basic_credentials(&HeaderMap::new()), None);
    }

    #[test]
    fn l5_rejects_repeated_authorization_headers() {
        let encoded = STANDARD.encode("x-api-key:pr_sandbox_abc");
        let mut headers = with_auth(&format!("Basic {encoded}"));
        headers.append(header::AUTHORIZATION, HeaderValue::from_str(&format!("Basic {encoded}")).unwrap());
        assert_eq!(basic_credentials(&headers), None, "even the same credentials twice");
    }
}
