//! The idempotency layer (SPEC I1-I8, I11) and the commit gate every write runs behind.
//!
//! For a POST with `Idempotency-Key`, the key is claimed (in the API key's idempotency scope,
//! which a rolled key shares with its predecessor: I2) as soon as the headers are in, before
//! the body is read, so a request still uploading is already in flight (I6). The handler then
//! runs in its own task: a client that disconnects cannot cancel it halfway. Its effects, events
//! and the reply bytes commit in one transaction through `AppState::commit_reply` (`app::commit`) (I3, I8);
//! any failure commits nothing and frees the key (I5), except a commit whose outcome is
//! unknown (it may yet land): that key is left to its lease, so a retry replays or runs once
//! (H2). Requests that time out abandon their [`CommitGate`], so a write never lands after its
//! client was told it failed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::auth::Principal;
use super::extract::read_body;
use crate::app::AppState;
use crate::app::commit::{ReplyTarget, WriteContext};
use crate::base::secret_box;
use crate::error::Error;
use crate::store::{Claim, ClaimToken, CommitGate, Store, StoredReply, WriteBatch};

pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
pub const REPLAYED: &str = "idempotent-replayed";
/// What a client is told to wait before retrying a key that is in flight.
const IN_FLIGHT_RETRY_AFTER_S: u64 = 1;
pub const KEY_LEN_MAX: usize = 255;

impl<S: Send + Sync> FromRequestParts<S> for WriteContext {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<WriteContext>().cloned().ok_or_else(|| Error::internal("write context missing"))
    }
}

pub fn json_response(status: StatusCode, body: Bytes) -> Response {
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

/// The `Idempotency-Key` of a POST, if any: one header, well formed (I1); two are ambiguous
/// and refused like a malformed one (L5).
fn key_header(headers: &HeaderMap) -> Result<Option<String>, Error> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Err(Error::bad_request(
            "invalid_idempotency_key",
            "Send one Idempotency-Key header, not several.",
            Some("Idempotency-Key"),
        ));
    }
    parse_key(value).map(Some)
}

/// Checks an `Idempotency-Key` value: 1 to 255 visible ASCII characters (I1).
pub fn parse_key(value: &HeaderValue) -> Result<String, Error> {
    let bytes = value.as_bytes();
    let visible = bytes.iter().all(|b| (0x21..=0x7e).contains(b));
    if bytes.is_empty() || bytes.len() > KEY_LEN_MAX || !visible {
        return Err(Error::bad_request(
            "invalid_idempotency_key",
            "Idempotency-Key must be 1 to 255 visible ASCII characters.",
            Some("Idempotency-Key"),
        ));
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

/// Middleware over every routed `/api` request (after authentication). It also copies the
/// matched route onto the response, where the front door's metrics read it.
pub async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().cloned();
    let mut response = handle(state, request, next).await;
    if let Some(route) = route {
        response.extensions_mut().insert(route);
    }
    response
}

/// The same over the router's fallbacks (an unknown path, a method a path does not take):
/// under `/api` a POST whose key holds a stored reply replays it, whatever its path (I4), and
/// one whose key is in flight answers 409 (I6); otherwise the 404 or 405 stands, and it is
/// never stored. Paths outside `/api` are not authenticated and not idempotent.
pub async fn fallback_layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request.extensions().get::<Principal>().is_none() {
        return next.run(request).await;
    }
    handle(state, request, next).await
}

async fn handle(state: AppState, request: Request, next: Next) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        let timeout = Duration::from_millis(state.config.request_timeout_ms);
        return match tokio::time::timeout(timeout, next.run(request)).await {
            Ok(response) => response,
            Err(_) => timed_out().into_response(),
        };
    }
    // Boxed: the write path's future is large, and every read would otherwise carry (and move)
    // its space.
    Box::pin(handle_write(state, request, next)).await
}

async fn handle_write(state: AppState, request: Request, next: Next) -> Response {
    // The header counts on POST only; elsewhere it is ignored entirely, even malformed (I7).
    let key = if request.method() == Method::POST {
        match key_header(request.headers()) {
            Ok(key) => key,
            Err(err) => return err.into_response(),
        }
    } else {
        None
    };
    let Some(key) = key else {
        return run_gated(state, request, next, None).await;
    };
    let Some(principal) = request.extensions().get::<Principal>().cloned() else {
        return Error::internal("idempotency layer ran before authentication").into_response();
    };
    let now = state.clock.now();
    // Keyed by the key's idempotency scope, not its id: a rolled key's successor shares its
    // predecessor's claims and replies (I2).
    match state.store.claim(&principal.key.idempotency_scope, &key, now, state.config.idempotency_lease_ms).await {
        Err(err) => err.into_response(),
        Ok(Claim::InFlight) => in_flight().into_response(),
        Ok(Claim::Replay(reply)) => replay(&state, request, reply).await,
        Ok(Claim::Acquired(token)) => run_gated(state, request, next, Some(token)).await,
    }
}

fn in_flight() -> Error {
    Error::Conflict {
        message: "A request with this Idempotency-Key is still being processed; retry after it completes.".into(),
        parameter: Some("Idempotency-Key".into()),
        retry_after_s: Some(IN_FLIGHT_RETRY_AFTER_S),
    }
}

fn timed_out() -> Error {
    Error::Unavailable { message: "The request timed out and was not carried out.".into(), retry_after_s: 1 }
}

/// Answers with a stored success, byte for byte (I4); in strict mode only to the same request.
/// The body is read either way, so the connection stays usable for the client's next request.
async fn replay(state: &AppState, request: Request, reply: StoredReply) -> Response {
    let (parts, body) = request.into_parts();
    let timeout = Duration::from_millis(state.config.request_timeout_ms);
    let body = tokio::time::timeout(timeout, read_body(body, state.config.body_limit_bytes)).await.unwrap_or_else(|_| Err(timed_out()));
    if state.config.idempotency_strict {
        let body = match body {
            Ok(body) => body,
            Err(err) => return err.into_response(),
        };
        if fingerprint(&parts.method, &parts.uri, &body) != reply.fingerprint {
            return Error::Invalid {
                code: "idempotency_key_reused",
                parameter: "Idempotency-Key".into(),
                message: "This Idempotency-Key was used for a different request (method, path or body differ).".into(),
            }
            .into_response();
        }
    }
    let body = match opened_body(state, &reply) {
        Ok(body) => body,
        Err(err) => return err.into_response(),
    };
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    let mut response = (status, body).into_response();
    let headers: &mut HeaderMap = response.headers_mut();
    if let Ok(content_type) = HeaderValue::from_str(&reply.content_type) {
        headers.insert(header::CONTENT_TYPE, content_type);
    }
    headers.insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

/// The stored body as the client first got it: a reply kept sealed (it carries a secret, S4)
/// is opened; any other is the stored bytes themselves (a prefix compare is all it costs).
fn opened_body(state: &AppState, reply: &StoredReply) -> Result<Bytes, Error> {
    if !secret_box::is_sealed(&reply.body) {
        return Ok(reply.body.clone());
    }
    let purpose = secret_box::reply_purpose(&reply.api_key_id, &reply.key);
    state
        .secrets
        .open(&reply.body, &purpose)
        .map(Bytes::from)
        .map_err(|err| Error::internal(format!("opening a sealed stored reply: {err}")))
}

/// Holds a claim while the work runs: renews its lease, and frees it when the work ends,
/// however it ends (even by panic).
struct ReleaseOnDrop {
    store: Arc<dyn Store>,
    token: Option<ClaimToken>,
    renewer: Option<tokio::task::JoinHandle<()>>,
}

impl ReleaseOnDrop {
    fn new(state: &AppState, token: Option<ClaimToken>) -> Self {
        let renewer = token.clone().map(|token| tokio::spawn(renew_while_working(state.clone(), token)));
        ReleaseOnDrop { store: state.store.clone(), token, renewer }
    }

    /// Stops renewing and frees the claim, unless a commit already released it with its reply.
    async fn finish(mut self, released_by_commit: bool) {
        if let Some(renewer) = self.renewer.take() {
            renewer.abort();
        }
        if let Some(token) = self.token.take()
            && !released_by_commit
        {
            self.store.release(&token).await;
        }
    }
}

/// Extends the claim every third of its lease, so only a vanished owner's claim ever expires.
async fn renew_while_working(state: AppState, token: ClaimToken) {
    let lease_ms = state.config.idempotency_lease_ms;
    let every = Duration::from_millis((lease_ms / 3).max(1));
    loop {
        tokio::time::sleep(every).await;
        match state.store.renew(&token, state.clock.now(), lease_ms).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::error!("an idempotency claim was lost while its request ran");
                return;
            }
            Err(err) => tracing::warn!(%err, "renewing an idempotency claim failed; will retry"),
        }
    }
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        if let Some(renewer) = self.renewer.take() {
            renewer.abort();
        }
        if let Some(token) = self.token.take() {
            let store = self.store.clone();
            tokio::spawn(async move { store.release(&token).await });
        }
    }
}

/// Abandons the gate if the client's side of the request goes away (timeout or disconnect).
struct AbandonOnDrop(Arc<CommitGate>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.abandon();
    }
}

/// How long before the request timeout a mutating request's work is stopped, so that giving
/// its key back (a store call) fits inside the timeout (SPEC H3) and a healthy store has done
/// it before the reply leaves (I5: the client's immediate retry executes afresh).
const RELEASE_GRACE: Duration = Duration::from_millis(250);

/// Runs a mutating request in its own task behind a commit gate, under the request timeout.
async fn run_gated(state: AppState, request: Request, next: Next, claim: Option<ClaimToken>) -> Response {
    let gate = Arc::new(CommitGate::default());
    let abandon_on_drop = AbandonOnDrop(gate.clone());
    let timeout = Duration::from_millis(state.config.request_timeout_ms);
    let started = tokio::time::Instant::now();
    let (store, held) = (state.store.clone(), claim.clone());
    let mut task = tokio::spawn(execute(state, request, next, claim, gate.clone()));
    // The work stops a little before the request timeout, leaving the key's release time to
    // finish inside it.
    let answer = match tokio::time::timeout(timeout.saturating_sub(RELEASE_GRACE), &mut task).await {
        Ok(joined) => joined.map_err(|_| Error::internal("handler panicked")),
        // Too late to abandon: the work is committing, so its answer is the truth.
        Err(_) if !gate.abandon() => task.await.map_err(|_| Error::internal("handler panicked")),
        // Abandoned before committing: stop the work now and drop the request body so the
        // connection can close.
        Err(_) => {
            task.abort();
            let _ = (&mut task).await;
            Err(timed_out())
        }
    };
    drop(abandon_on_drop);
    match answer {
        Ok(response) => response,
        Err(err) => {
            // The work ended without its own answer, and its key would be given back only by
            // a task spawned as it was dropped: free the key before this reply leaves, as
            // every other failure does, so the client's immediate retry executes afresh (I5)
            // instead of meeting its own dead request's claim (I6). Release is by token, so
            // releasing twice, or after a commit already released it, does nothing. A store
            // that does not answer (a hung database) does not hold the reply past the request
            // timeout (H3): the release goes on without it, and the claim's lease bounds it.
            if let Some(token) = held {
                let release = tokio::spawn(async move { store.release(&token).await });
                let left = timeout.saturating_sub(started.elapsed()).max(RELEASE_GRACE / 2);
                let _ = tokio::time::timeout(left, release).await;
            }
            err.into_response()
        }
    }
}

async fn execute(state: AppState, request: Request, next: Next, claim: Option<ClaimToken>, gate: Arc<CommitGate>) -> Response {
    let release = ReleaseOnDrop::new(&state, claim);
    let (stored, claim_kept) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let settled = Settled { stored: stored.clone(), claim_kept: claim_kept.clone() };
    let response = match execute_claimed(&state, request, next, release.token.as_ref(), gate, settled).await {
        Ok(response) => response,
        Err(err) => err.into_response(),
    };
    // Released before the reply leaves, so a client's immediate retry finds the key free; but
    // not after a commit of unknown outcome, which may yet land: its lease frees the key, and
    // a retry then replays what committed or runs once (H2).
    release.finish(stored.load(Ordering::Acquire) || claim_kept.load(Ordering::Acquire)).await;
    response
}

/// How the work's claim ended up, as its commit reports it (see [`WriteContext`]).
struct Settled {
    stored: Arc<AtomicBool>,
    claim_kept: Arc<AtomicBool>,
}

async fn execute_claimed(
    state: &AppState,
    request: Request,
    next: Next,
    claim: Option<&ClaimToken>,
    gate: Arc<CommitGate>,
    settled: Settled,
) -> Result<Response, Error> {
    let Settled { stored, claim_kept } = settled;
    let (mut parts, body) = request.into_parts();
    let (body, reply) = match claim {
        None => (body, None),
        Some(token) => {
            let bytes = read_body(body, state.config.body_limit_bytes).await?;
            let target = ReplyTarget {
                scope_id: token.api_key_id.clone(),
                key: token.key.clone(),
                fingerprint: fingerprint(&parts.method, &parts.uri, &bytes),
            };
            (Body::from(bytes), Some(target))
        }
    };
    let ctx = WriteContext { gate, reply, claim: claim.cloned(), stored: stored.clone(), claim_kept };
    parts.extensions.insert(ctx.clone());
    let response = next.run(Request::from_parts(parts, body)).await;
    if ctx.reply.is_some() && response.status().is_success() && !stored.load(Ordering::Acquire) {
        // A success that committed nothing (no handler does this today) is still stored.
        return store_late(state, &ctx, response).await;
    }
    Ok(response)
}

async fn store_late(state: &AppState, ctx: &WriteContext, response: Response) -> Result<Response, Error> {
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.map_err(|err| Error::internal(format!("reading reply: {err}")))?;
    state.commit_reply(ctx, WriteBatch::new(), parts.status.as_u16(), bytes.clone(), false).await?;
    Ok(Response::from_parts(parts, Body::from(bytes)))
}

/// SHA-256 over method, path with query, and body: what strict mode compares (I11).
fn fingerprint(method: &Method, uri: &axum::http::Uri, body: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(method.as_str().as_bytes());
    hasher.update([0]);
    hasher.update(uri.path_and_query().map_or("", |pq| pq.as_str()).as_bytes());
    hasher.update([0]);
    hasher.update(body);
    hasher.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i1_key_is_one_to_255_visible_ascii() {
        assert!(parse_key(&HeaderValue::from_static("abc-123_XYZ")).is_ok());
        assert!(parse_key(&HeaderValue::from_str(&"k".repeat(255)).unwrap()).is_ok());
        assert!(parse_key(&HeaderValue::from_str(&"k".repeat(256)).unwrap()).is_err());
        assert!(parse_key(&HeaderValue::from_static("")).is_err());
        assert!(parse_key(&HeaderValue::from_static("has space")).is_err());
        assert!(parse_key(&HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap()).is_err());
    }

    #[test]
    fn l5_a_repeated_key_is_refused_like_a_malformed_one() {
        let mut headers = HeaderMap::new();
        assert_eq!(key_header(&headers).unwrap(), None);
        headers.insert(IDEMPOTENCY_KEY, HeaderValue::from_static("a"));
        assert_eq!(key_header(&headers).unwrap().as_deref(), Some("a"));
        headers.append(IDEMPOTENCY_KEY, HeaderValue::from_static("a"));
        let err = key_header(&headers).unwrap_err();
        assert!(
            matches!(&err, Error::BadRequest { code: "invalid_idempotency_key", parameter: Some(p), .. } if p == "Idempotency-Key"),
            "{err:?}"
        );
    }

    /// The layer over two POST routes whose work ends without an answer of its own (one
    /// outlives the request timeout, one panics), on a SQLite store in `dir`, and the principal
    /// their requests run as.
    fn failing_api(dir: &std::path::Path) -> (axum::Router, AppState, Principal) {
        use crate::domain::api_key::{ApiKey, Mode};
        let config = crate::config::Config { data_dir: dir.to_owned(), request_timeout_ms: 100, ..Default::default() };
        let store = crate::open_store(&config).expect("store");
        let state = AppState::serving(
            store,
            Arc::new(crate::base::secret_box::SecretBox::from_keys(&[crate::base::secret_box::generate_key()])),
            Arc::new(config),
            None,
        );
        let stalls = axum::routing::post(|| async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            StatusCode::CREATED
        });
        async fn panicking() -> StatusCode {
            panic!("a handler bug")
        }
        let panics = axum::routing::post(panicking);
        let api = axum::Router::new()
            .route("/stalls", stalls)
            .route("/panics", panics)
            .route_layer(axum::middleware::from_fn_with_state(state.clone(), layer))
            .with_state(state.clone());
        let key = ApiKey::new("test".into(), Mode::Sandbox, "org_test".into(), state.clock.now());
        (api, state, Principal { key: Arc::new(key) })
    }

    /// I5 with I6: when the failure of an original reaches the client, its key is free
    /// already, so a retry sent that instant runs rather than meeting the dead request's claim.
    /// On this test's single-threaded runtime nothing else runs between the 503 and the claim
    /// below, so a release left to a task spawned when the timed-out work is dropped fails it
    /// every time (checked). A panic's own release is spawned before its 500 is handed back,
    /// so here it passes either way; it stands for the multi-threaded runtime's race.
    #[tokio::test]
    async fn i5_an_original_without_an_answer_frees_its_key_before_its_reply_leaves() {
        use tower::ServiceExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let (api, state, principal) = failing_api(dir.path());
        for (path, status) in [("/stalls", StatusCode::SERVICE_UNAVAILABLE), ("/panics", StatusCode::INTERNAL_SERVER_ERROR)] {
            let mut request = Request::post(path).header(IDEMPOTENCY_KEY, path).body(Body::empty()).unwrap();
            request.extensions_mut().insert(principal.clone());
            let response = api.clone().oneshot(request).await.unwrap();
            assert_eq!(response.status(), status, "{path}");
            let claim = state.store.claim(&principal.key.idempotency_scope, path, state.clock.now(), 10_000).await.expect("claim");
            assert!(matches!(claim, Claim::Acquired(_)), "{path}: the retry must run afresh, got {claim:?}");
        }
    }
}
