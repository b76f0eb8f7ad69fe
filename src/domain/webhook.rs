//! Webhook endpoints (SPEC W1): where an organization wants its events POSTed, which ones, and
//! the secret they are signed with.
//!
//! An endpoint is two objects. The `webhook_endpoint` document is what the API returns: `id`,
//! `object`, `url`, `event_names`, `live_mode`, `created_at`, `updated_at`. Its private state,
//! a `webhook_endpoint_state` child that no route can read, holds the signing secret and the
//! outbox cursor (the `seq` of the last event the worker considered for it). The secret is in
//! the reply to the POST that made the endpoint and nowhere else the API shows. At rest it is
//! sealed under the master key, bound to the endpoint's id (SPEC S4), and so is the copy of
//! that reply kept for idempotent replay; the worker opens it to sign.
//!
//! URL rules (server-side request forgery guard, SPEC W5): see `domain::webhook_url`; the
//! worker checks again before each attempt, against the addresses the name resolves to then.
//!
//! An organization and mode has at most `endpoints_max` endpoints (SPEC W4, default
//! [`ENDPOINTS_MAX_DEFAULT`]): a create past it is a 422 on `url`. The count is checked by the
//! store inside the create's own transaction ([`Write::Cap`]), so concurrent creates, on one
//! instance or several, never pass it together.
//!
//! `event_names` (empty: every event) entries match an event by its `event_name`
//! (`completed`) or by `resource.event_name` (`payment_order.completed`).

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::api_key::Scope;
use super::common::new_id;
use super::listing::{self, ListedPage, PageSpec};
use super::secret_box::{self, SecretBox};
use super::time::Timestamp;
use super::{Commit, Ctx, event};
use crate::error::{Error, Result};
use crate::store::{ObjectRecord, Store, StoredObject, Term, Write, WriteBatch};

pub use super::webhook_url::{AddressClass, CheckedUrl, URL_LEN_MAX, UrlPolicy, address_refusal, check_resolved, check_url, classify};

pub const KIND: &str = super::kinds::WEBHOOK_ENDPOINT;
/// The private half of an endpoint: secret and cursor. Never served by any route.
pub const STATE_KIND: &str = super::kinds::WEBHOOK_ENDPOINT_STATE;
/// An endpoint's deliveries (`webhook_delivery`): defined here, since deliveries belong to
/// endpoints and go when their endpoint goes.
pub const DELIVERY_KIND: &str = super::kinds::WEBHOOK_DELIVERY;
/// The term every endpoint state carries, so the worker finds them all with one scan.
pub const DISPATCH_TERM: &str = "webhook_dispatch";
const DISPATCH_VALUE: &str = "0";

/// Endpoints the delivery worker serves at most (across all tenants).
pub const ENDPOINTS_SERVED_MAX: usize = 10_000;
/// Endpoints one organization and mode may have, unless the operator says otherwise
/// (`--webhook-endpoints-max`): every event is sent once to each, so this bounds the delivery
/// work one event makes (SPEC W4).
pub const ENDPOINTS_MAX_DEFAULT: usize = 20;
pub const EVENT_NAMES_MAX: usize = 50;
pub const EVENT_NAME_LEN_MAX: usize = 100;
const SECRET_PREFIX: &str = "whsec_";
const SECRET_BODY_LEN: usize = 43;
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A signing secret: `whsec_` and 43 base62 characters (256 random bits). The HMAC key is the
/// whole string's UTF-8 bytes, as the official SDKs' `validate_signature` use it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WebhookSecret(String);

impl WebhookSecret {
    pub fn generate() -> Self {
        let mut rng = rand::rng();
        let mut secret = String::with_capacity(SECRET_PREFIX.len() + SECRET_BODY_LEN);
        secret.push_str(SECRET_PREFIX);
        for _ in 0..SECRET_BODY_LEN {
            secret.push(char::from(BASE62[rng.random_range(0..BASE62.len())]));
        }
        WebhookSecret(secret)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(<redacted>)")
    }
}

/// Checks the `event_names` filter: at most 50 names of 1 to 100 characters from `a-z`, `0-9`,
/// `_` and `.`; duplicates are dropped, order is kept.
pub fn check_event_names(param: &str, names: &[String]) -> Result<Vec<String>> {
    if names.len() > EVENT_NAMES_MAX {
        return Err(Error::invalid(param, format!("{param} holds at most {EVENT_NAMES_MAX} names")));
    }
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let ok = !name.is_empty()
            && name.len() <= EVENT_NAME_LEN_MAX
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.');
        if !ok {
            return Err(Error::invalid(
                format!("{param}[{i}]"),
                format!("{param}[{i}] must be an event name such as completed or payment_order.completed"),
            ));
        }
        if !out.contains(name) {
            out.push(name.clone());
        }
    }
    Ok(out)
}

/// Whether an endpoint with filter `names` wants event `event_name` of `resource`.
pub fn wants(names: &[String], resource: &str, event_name: &str) -> bool {
    names.is_empty()
        || names.iter().any(|n| {
            n == event_name || n.strip_prefix(resource).and_then(|rest| rest.strip_prefix('.')).is_some_and(|rest| rest == event_name)
        })
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = webhook_endpoint)]
pub struct WebhookEndpoint {
    pub id: String,
    pub object: String,
    pub url: String,
    pub event_names: Vec<String>,
    pub live_mode: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The reply to the POST that made an endpoint: the only one with the secret.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = webhook_endpoint_created)]
pub struct CreatedEndpoint<'a> {
    #[serde(flatten)]
    endpoint: &'a WebhookEndpoint,
    /// The signing secret (`whsec_...`): shown in this reply only (SPEC W1).
    secret: &'a str,
}

#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[schema(as = webhook_endpoint_create_request)]
pub struct EndpointInput {
    /// `https` URL the events are POSTed to (in sandbox mode also `http` to a loopback host).
    #[schema(value_type = String, required = true, format = "uri")]
    pub url: Option<String>,
    pub event_names: Option<Vec<String>>,
}

/// The private state of an endpoint, as stored (kind [`STATE_KIND`], parent the endpoint).
/// `url` and `event_names` are copies (endpoints never change), so the worker needs one read.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndpointState {
    pub endpoint_id: String,
    pub url: String,
    pub event_names: Vec<String>,
    /// The signing secret sealed under the master key (text form); an older release stored it
    /// plain under `secret`, which is read too and sealed at the next start.
    #[serde(rename = "secret_sealed", alias = "secret")]
    pub secret: String,
    /// `seq` of the last event considered for this endpoint (SPEC E4 outbox).
    pub cursor_seq: i64,
    pub created_at: Timestamp,
}

/// An endpoint as the worker sees it.
#[derive(Debug, Clone)]
pub struct LoadedEndpoint {
    pub scope: Scope,
    pub state_id: String,
    pub version: i64,
    pub state: EndpointState,
}

/// What an endpoint's sealed secret is bound to: a sealed secret copied to another endpoint's
/// state does not open.
fn secret_purpose(endpoint_id: &str) -> String {
    format!("webhook_endpoint:{endpoint_id}:secret")
}

impl LoadedEndpoint {
    /// The signing secret, opened (a plain one left by an older release is taken as it is).
    pub fn secret(&self, secrets: &SecretBox) -> Result<WebhookSecret> {
        if !secret_box::is_sealed_text(&self.state.secret) {
            return Ok(WebhookSecret(self.state.secret.clone()));
        }
        let purpose = secret_purpose(&self.state.endpoint_id);
        let plain = secrets
            .open_text(&self.state.secret, &purpose)
            .map_err(|e| Error::internal(format!("webhook endpoint {}: signing secret: {e}", self.state.endpoint_id)))?;
        Ok(WebhookSecret(plain))
    }

    /// The state record with the cursor moved to `cursor_seq`, for a versioned replace.
    pub fn advanced(&self, cursor_seq: i64) -> Result<ObjectRecord> {
        let mut state = self.state.clone();
        state.cursor_seq = cursor_seq;
        state_record(&self.scope, &self.state_id, &state)
    }
}

fn state_record(scope: &Scope, id: &str, state: &EndpointState) -> Result<ObjectRecord> {
    Ok(ObjectRecord {
        id: id.to_owned(),
        kind: STATE_KIND,
        scope: scope.clone(),
        parent_id: Some(state.endpoint_id.clone()),
        created_at: state.created_at,
        doc: serde_json::to_string(state).map_err(|e| Error::internal(format!("endpoint state: {e}")))?,
        terms: vec![Term::new(DISPATCH_TERM, DISPATCH_VALUE)],
    })
}

fn to_json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::internal(format!("webhook endpoint: {e}")))
}

fn endpoint_record(scope: &Scope, endpoint: &WebhookEndpoint) -> Result<ObjectRecord> {
    Ok(ObjectRecord {
        id: endpoint.id.clone(),
        kind: KIND,
        scope: scope.clone(),
        parent_id: None,
        created_at: endpoint.created_at,
        doc: to_json(endpoint)?,
        terms: Vec::new(),
    })
}

/// What the server allows of endpoints: where they may point (W5), how many a tenant has (W4).
#[derive(Debug, Clone, Copy)]
pub struct EndpointRules {
    pub policy: UrlPolicy,
    pub endpoints_max: usize,
}

impl Default for EndpointRules {
    fn default() -> Self {
        EndpointRules { policy: UrlPolicy::default(), endpoints_max: ENDPOINTS_MAX_DEFAULT }
    }
}

/// The precondition that keeps a tenant within `endpoints_max` endpoints (SPEC W4). Blamed on
/// `url`: the one required field, whose value would have been one endpoint too many.
fn endpoint_cap(scope: &Scope, endpoints_max: usize) -> Write {
    let mode = if scope.live_mode { "live" } else { "sandbox" };
    Write::Cap {
        kind: KIND,
        scope: scope.clone(),
        max: endpoints_max,
        parameter: "url".into(),
        message: format!(
            "url cannot be added: this organization already has {endpoints_max} webhook endpoints in {mode} mode, the most allowed. \
             Delete one, or send more events to an existing endpoint (event_names)."
        ),
    }
}

/// Creates an endpoint; answers the 201 body, the only one that carries the secret (W1).
pub async fn create(ctx: &Ctx<'_>, commit: &dyn Commit, input: &EndpointInput, rules: &EndpointRules) -> Result<String> {
    let url_text = input.url.as_deref().ok_or_else(|| Error::missing("url"))?;
    let live_mode = ctx.scope.live_mode;
    let checked = check_url("url", url_text, live_mode, &rules.policy)?;
    let event_names = check_event_names("event_names", input.event_names.as_deref().unwrap_or_default())?;
    check_resolved("url", &checked, live_mode, &rules.policy).await?;
    let endpoint = WebhookEndpoint {
        id: new_id(),
        object: KIND.into(),
        url: checked.url.to_string(),
        event_names,
        live_mode: ctx.scope.live_mode,
        created_at: ctx.now,
        updated_at: ctx.now,
    };
    let secret = WebhookSecret::generate();
    let sealed = ctx.secrets.seal_text(secret.expose(), &secret_purpose(&endpoint.id));
    // Only events after this one reach the endpoint (the cursor starts at the newest event).
    let cursor_seq = ctx.store.outbox_newest(ctx.scope).await?;
    let state = EndpointState {
        endpoint_id: endpoint.id.clone(),
        url: endpoint.url.clone(),
        event_names: endpoint.event_names.clone(),
        secret: sealed,
        cursor_seq,
        created_at: ctx.now,
    };
    let public_json = to_json(&endpoint)?;
    let mut batch = WriteBatch::new();
    // First, so the count is of the endpoints that exist before this one.
    batch.push(endpoint_cap(ctx.scope, rules.endpoints_max));
    batch.push(Write::Insert(endpoint_record(ctx.scope, &endpoint)?));
    batch.push(Write::Insert(state_record(ctx.scope, &new_id(), &state)?));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", &endpoint.id, &public_json, ctx.now)?));
    let reply = to_json(&CreatedEndpoint { endpoint: &endpoint, secret: secret.expose() })?;
    // The reply carries the secret: its copy kept for replay is sealed too.
    commit.commit_secret_reply(batch, &reply).await?;
    Ok(reply)
}

pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    listing::stored_doc(ctx, KIND, id, "webhook endpoint").await
}

pub async fn list(ctx: &Ctx<'_>, page: PageSpec) -> Result<ListedPage> {
    listing::stored_page(ctx, KIND, Vec::new(), page).await
}

/// Deletes the endpoint, its state and every delivery to it; nothing more is sent to it.
pub async fn delete(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str) -> Result<()> {
    let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("webhook endpoint"))?;
    let mut batch = WriteBatch::new();
    batch.push(Write::DeleteChildren { kind: DELIVERY_KIND, scope: ctx.scope.clone(), parent_id: id.to_owned() });
    batch.push(Write::DeleteChildren { kind: STATE_KIND, scope: ctx.scope.clone(), parent_id: id.to_owned() });
    batch.push(Write::Delete { kind: KIND, scope: ctx.scope.clone(), id: id.to_owned() });
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "deleted", id, &stored.doc, ctx.now)?));
    commit.commit(batch, "").await
}

/// Every endpoint of every tenant, for the worker (at most `limit`).
pub async fn load_all(store: &dyn Store, limit: usize) -> Result<Vec<LoadedEndpoint>> {
    let found = store.scan_due(STATE_KIND, DISPATCH_TERM, DISPATCH_VALUE, limit).await?;
    found.into_iter().map(|(scope, stored)| loaded(scope, &stored)).collect()
}

fn loaded(scope: Scope, stored: &StoredObject) -> Result<LoadedEndpoint> {
    let state: EndpointState =
        serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored webhook endpoint state {}: {e}", stored.id)))?;
    Ok(LoadedEndpoint { scope, state_id: stored.id.clone(), version: stored.version, state })
}

/// `payrail webhooks create`: makes an endpoint for `org` in `mode`; answers the 201 body
/// (with the secret, shown this once).
pub async fn create_for(
    store: &dyn Store,
    secrets: &SecretBox,
    now: Timestamp,
    org: &str,
    mode: super::api_key::Mode,
    input: &EndpointInput,
    rules: &EndpointRules,
) -> Result<String> {
    super::api_key::validate_org_id(org)?;
    let scope = Scope { organization_id: org.to_owned(), live_mode: mode.is_live() };
    let ctx = Ctx { store, rails: None, secrets, scope: &scope, now };
    create(&ctx, &DirectCommit(store), input, rules).await
}

/// An endpoint as `payrail webhooks list` shows it: never its secret.
#[derive(Debug, Clone, Serialize)]
pub struct EndpointSummary {
    pub id: String,
    pub object: &'static str,
    pub url: String,
    pub event_names: Vec<String>,
    pub live_mode: bool,
    pub organization_id: String,
    pub created_at: Timestamp,
}

/// `payrail webhooks list`: every endpoint of every organization and mode, oldest first.
pub async fn list_all(store: &dyn Store) -> Result<Vec<EndpointSummary>> {
    let mut all: Vec<EndpointSummary> = load_all(store, ENDPOINTS_SERVED_MAX)
        .await?
        .into_iter()
        .map(|e| EndpointSummary {
            id: e.state.endpoint_id,
            object: KIND,
            url: e.state.url,
            event_names: e.state.event_names,
            live_mode: e.scope.live_mode,
            organization_id: e.scope.organization_id,
            created_at: e.state.created_at,
        })
        .collect();
    all.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    Ok(all)
}

/// `payrail webhooks delete ID`: deletes the endpoint whatever its organization and mode.
pub async fn delete_by_id(store: &dyn Store, secrets: &SecretBox, now: Timestamp, id: &str) -> Result<EndpointSummary> {
    let found = list_all(store).await?.into_iter().find(|e| e.id == id).ok_or_else(|| Error::not_found("webhook endpoint"))?;
    let scope = Scope { organization_id: found.organization_id.clone(), live_mode: found.live_mode };
    let ctx = Ctx { store, rails: None, secrets, scope: &scope, now };
    delete(&ctx, &DirectCommit(store), id).await?;
    Ok(found)
}

/// What a rewrap did: endpoints whose secret was re-sealed, of all endpoints seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rewrapped {
    pub resealed: usize,
    pub total: usize,
}

/// Re-seals every endpoint's secret that is not sealed under the newest master key (with
/// `only_plain`, only those an older release stored plain: what a server does at start, so
/// instances with different key rings never undo each other). Each is a versioned replace,
/// retried when the worker moved the endpoint's cursor meanwhile.
pub async fn rewrap_secrets(store: &dyn Store, secrets: &SecretBox, only_plain: bool) -> Result<Rewrapped> {
    let all = load_all(store, ENDPOINTS_SERVED_MAX).await?;
    let mut done = Rewrapped { resealed: 0, total: all.len() };
    for endpoint in all {
        let (scope, state_id) = (endpoint.scope.clone(), endpoint.state_id.clone());
        let resealed = super::retry_on_conflict(|| async {
            let Some(stored) = store.get(STATE_KIND, &scope, &state_id).await? else { return Ok(false) };
            let current = loaded(scope.clone(), &stored)?;
            let plain = !secret_box::is_sealed_text(&current.state.secret);
            if !plain && (only_plain || secrets.is_current_text(&current.state.secret)) {
                return Ok(false);
            }
            let secret = current.secret(secrets)?;
            let mut state = current.state.clone();
            state.secret = secrets.seal_text(secret.expose(), &secret_purpose(&state.endpoint_id));
            let record = state_record(&scope, &state_id, &state)?;
            store
                .commit(WriteBatch { writes: vec![Write::Replace { record, expected_version: current.version }], ..WriteBatch::default() })
                .await?;
            Ok(true)
        })
        .await?;
        done.resealed += usize::from(resealed);
    }
    Ok(done)
}

/// Commits batches straight to the store, for callers with no reply to keep (the CLI).
pub struct DirectCommit<'a>(pub &'a dyn Store);

#[async_trait::async_trait]
impl Commit for DirectCommit<'_> {
    async fn commit(&self, batch: WriteBatch, _reply_json: &str) -> Result<()> {
        self.0.commit(batch).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_name_filter() {
        assert!(wants(&[], "payment_order", "created"));
        let names = vec!["completed".to_owned(), "counterparty.created".to_owned()];
        assert!(wants(&names, "payment_order", "completed"));
        assert!(wants(&names, "counterparty", "created"));
        assert!(!wants(&names, "payment_order", "created"));
        assert!(!wants(&["counterparty".to_owned()], "counterparty", "created"));
        assert!(check_event_names("event_names", &["Created".into()]).is_err());
        assert_eq!(check_event_names("event_names", &["a".into(), "a".into()]).unwrap(), vec!["a".to_owned()]);
    }

    #[test]
    fn secrets_are_long_and_redacted() {
        let secret = WebhookSecret::generate();
        assert_eq!(secret.expose().len(), SECRET_PREFIX.len() + SECRET_BODY_LEN);
        assert_ne!(secret, WebhookSecret::generate());
        assert!(!format!("{secret:?}").contains(secret.expose()));
    }
}
