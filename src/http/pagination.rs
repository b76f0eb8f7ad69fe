//! Cursor pagination (SPEC L1, L6): bare JSON arrays, newest first, `X-After-Cursor` and
//! `X-Per-Page` headers. A cursor holds the position of the last item served, so rows inserted
//! meanwhile (always newer) never shift a page, and the last page has an empty cursor.
//!
//! Positions are global sequence numbers: shown as they are, they told a tenant how much every
//! other tenant wrote between two pages. So a cursor is the position sealed with
//! ChaCha20-Poly1305 under a key derived from the key pepper (`AppState::list_cursor_key`: every
//! instance on one database has it, nothing new is stored), with a random nonce (two cursors for
//! one position differ) and the tenant (organization, mode) and the list's path as associated
//! data: a cursor reveals nothing, and one from another tenant or another list, or altered, is
//! refused with a 422 naming `after_cursor`. `v1:` cursors (the readable position) are refused
//! with a message saying to start again from the first page; cursors are short-lived, so no
//! client depends on keeping one across an upgrade.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

use super::auth::Principal;
use super::extract::QueryParams;
use crate::app::AppState;
use crate::base::api_key::{DerivedKey, Scope};
use crate::domain::listing::{ListedPage, PageSpec};
use crate::error::Error;

pub const PER_PAGE_DEFAULT: usize = 25;
pub const PER_PAGE_MAX: usize = 100;
/// The first byte of a sealed cursor: its format (`v1:` text cursors came before).
const CURSOR_VERSION: u8 = 2;
const POSITION_LEN: usize = 8;
const TAG_LEN: usize = 16;
/// Version, nonce, sealed position, tag.
const SEALED_LEN: usize = 1 + NONCE_LEN + POSITION_LEN + TAG_LEN;

/// Seals and opens the cursors of one list for one tenant.
pub struct CursorSeal {
    key: LessSafeKey,
    /// The associated data: version, tenant and list, each length-prefixed.
    context: Vec<u8>,
}

impl CursorSeal {
    /// The seal of the list at `path` (e.g. `/api/counterparties`) for `scope`.
    pub fn new(key: &DerivedKey, scope: &Scope, path: &str) -> Self {
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, key.expose()).expect("a 32-byte ChaCha20-Poly1305 key");
        let mut context = vec![CURSOR_VERSION];
        for part in [scope.organization_id.as_bytes(), &[u8::from(scope.live_mode)], path.as_bytes()] {
            context.extend_from_slice(&(part.len() as u32).to_be_bytes());
            context.extend_from_slice(part);
        }
        CursorSeal { key: LessSafeKey::new(unbound), context }
    }

    pub fn seal(&self, position: i64) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let mut sealed = position.to_be_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(&self.context), &mut sealed)
            .expect("sealing 8 bytes cannot fail");
        let mut out = Vec::with_capacity(SEALED_LEN);
        out.push(CURSOR_VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        URL_SAFE_NO_PAD.encode(out)
    }

    /// The position inside `cursor`, if this seal made it.
    pub fn open(&self, cursor: &str) -> Result<i64, Error> {
        let foreign = || Error::invalid("after_cursor", "after_cursor is not a cursor this server gave out for this list");
        // What is not base64 decodes to nothing here, which no cursor is; an old cursor may
        // come base64-encoded or as its own text.
        let raw = URL_SAFE_NO_PAD.decode(cursor.trim_end_matches('=')).unwrap_or_default();
        if raw.starts_with(b"v1:") || cursor.starts_with("v1:") {
            return Err(Error::invalid(
                "after_cursor",
                "after_cursor is an old-format cursor, no longer accepted: list again from the first page",
            ));
        }
        if raw.len() != SEALED_LEN || raw[0] != CURSOR_VERSION {
            return Err(foreign());
        }
        let nonce = Nonce::try_assume_unique_for_key(&raw[1..1 + NONCE_LEN]).map_err(|_| foreign())?;
        let mut sealed = raw[1 + NONCE_LEN..].to_vec();
        let plain = self.key.open_in_place(nonce, Aad::from(&self.context), &mut sealed).map_err(|_| foreign())?;
        let position = i64::from_be_bytes(plain.try_into().map_err(|_| foreign())?);
        if position > 0 { Ok(position) } else { Err(foreign()) }
    }
}

/// The paging of a list request: which page it asks for, and how its cursor is sealed. Extracted
/// from the request (its tenant, path and `after_cursor`/`per_page` query parameters).
pub struct Paging {
    pub spec: PageSpec,
    seal: CursorSeal,
}

impl Paging {
    pub fn new(seal: CursorSeal, query: &QueryParams) -> Result<Self, Error> {
        let per_page = match query.get("per_page").filter(|v| !v.is_empty()) {
            None => PER_PAGE_DEFAULT,
            Some(text) => match text.parse::<u64>() {
                Ok(n) if n > 0 => usize::try_from(n).unwrap_or(PER_PAGE_MAX).min(PER_PAGE_MAX),
                // Any whole number above the maximum is clamped to it, however many digits.
                Err(_) if text.bytes().all(|b| b.is_ascii_digit()) && text.bytes().any(|b| b != b'0') => PER_PAGE_MAX,
                _ => return Err(Error::invalid("per_page", "per_page must be a whole number, 1 or more (above 100 counts as 100)")),
            },
        };
        let after_seq = query.get("after_cursor").filter(|v| !v.is_empty()).map(|cursor| seal.open(cursor)).transpose()?;
        Ok(Paging { spec: PageSpec { per_page, after_seq }, seal })
    }

    /// A list reply: the JSON array and its paging headers (an empty cursor on the last page).
    pub fn reply(&self, page: ListedPage) -> Response {
        let mut response = (StatusCode::OK, [(axum::http::header::CONTENT_TYPE, "application/json")], page.json).into_response();
        let cursor = page.next_seq.map(|seq| self.seal.seal(seq)).unwrap_or_default();
        let headers = response.headers_mut();
        headers.insert("x-after-cursor", HeaderValue::from_str(&cursor).unwrap_or(HeaderValue::from_static("")));
        headers.insert("x-per-page", HeaderValue::from(self.spec.per_page));
        response
    }
}

impl FromRequestParts<AppState> for Paging {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let principal = parts.extensions.get::<Principal>().ok_or_else(|| Error::internal("paging before authentication"))?;
        let seal = CursorSeal::new(&state.list_cursor_key, &principal.scope(), parts.uri.path());
        Paging::new(seal, &QueryParams::parse(parts.uri.query()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::api_key::KeyHasher;

    fn seal(org: &str, live_mode: bool, path: &str) -> CursorSeal {
        let key = KeyHasher::new(vec![9; 32]).derive(crate::base::api_key::LIST_CURSOR_KEY_LABEL);
        CursorSeal::new(&key, &Scope { organization_id: org.into(), live_mode }, path)
    }

    #[test]
    fn l6_cursor_round_trips_and_reveals_nothing() {
        let list = seal("acme", false, "/api/counterparties");
        let (a, b) = (list.seal(42), list.seal(42));
        assert_ne!(a, b, "a random nonce: equal positions give different cursors");
        assert_eq!((list.open(&a).unwrap(), list.open(&b).unwrap()), (42, 42));
        let raw = URL_SAFE_NO_PAD.decode(&a).unwrap();
        assert_eq!(raw.len(), SEALED_LEN);
        assert!(!raw.windows(8).any(|w| w == 42i64.to_be_bytes()), "the position is not in the clear");
    }

    #[test]
    fn l6_a_cursor_opens_only_for_its_tenant_and_list_and_unaltered() {
        let cursor = seal("acme", false, "/api/counterparties").seal(7);
        for other in
            [seal("other", false, "/api/counterparties"), seal("acme", true, "/api/counterparties"), seal("acme", false, "/api/events")]
        {
            assert!(other.open(&cursor).is_err());
        }
        let mut raw = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        raw[SEALED_LEN - 1] ^= 1;
        assert!(seal("acme", false, "/api/counterparties").open(&URL_SAFE_NO_PAD.encode(raw)).is_err());
        let v1 = seal("acme", false, "/api/counterparties").open(&URL_SAFE_NO_PAD.encode("v1:7")).unwrap_err();
        assert!(format!("{v1:?}").contains("first page"), "{v1:?}");
        let padded = seal("acme", false, "/api/counterparties").open("djE6Nw==").unwrap_err();
        assert!(format!("{padded:?}").contains("first page"), "{padded:?}");
        let text = seal("acme", false, "/api/counterparties").open("v1:7").unwrap_err();
        assert!(format!("{text:?}").contains("first page"), "{text:?}");
    }

    #[test]
    fn l1_per_page_bounds_and_garbage_cursors() {
        let parse = |q: &str| Paging::new(seal("acme", false, "/api/x"), &QueryParams::parse(Some(q)));
        assert_eq!(parse("per_page=500").unwrap().spec.per_page, 100);
        assert!(parse("after_cursor=zzz").is_err());
        assert!(parse("per_page=0").is_err());
        assert!(parse("per_page=ten").is_err());
        assert_eq!(parse("").unwrap().spec.per_page, 25);
        let cursor = seal("acme", false, "/api/x").seal(3);
        assert_eq!(parse(&format!("after_cursor={cursor}")).unwrap().spec.after_seq, Some(3));
    }
}
