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
//! URL rules (server-side request forgery guard; the worker checks again before each attempt,
//! against the addresses the name resolves to then):
//! - `https` to any public host. `http` only to loopback (`127.0.0.0/8`, `::1`, `localhost`),
//!   for development, in either mode: so live mode needs `https` everywhere else.
//! - Private, shared, link-local and unique-local addresses (`10/8`, `172.16/12`, `192.168/16`,
//!   `100.64/10`, `169.254/16`, `0/8`, `fc00::/7`, `fe80::/10`, `::`) only with the server flag
//!   `--webhooks-allow-private`; multicast, broadcast and reserved addresses never.
//! - No credentials in the URL (it is shown by GET and carried by events), no fragment.
//!
//! `event_names` (empty: every event) entries match an event by its `event_name`
//! (`completed`) or by `resource.event_name` (`payment_order.completed`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

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

pub const KIND: &str = "webhook_endpoint";
/// The private half of an endpoint: secret and cursor. Never served by any route.
pub const STATE_KIND: &str = "webhook_endpoint_state";
/// The term every endpoint state carries, so the worker finds them all with one scan.
pub const DISPATCH_TERM: &str = "webhook_dispatch";
const DISPATCH_VALUE: &str = "0";

/// Endpoints the delivery worker serves at most (across all tenants).
pub const ENDPOINTS_SERVED_MAX: usize = 10_000;
pub const URL_LEN_MAX: usize = 2048;
pub const EVENT_NAMES_MAX: usize = 50;
pub const EVENT_NAME_LEN_MAX: usize = 100;
/// How long endpoint creation waits for DNS before leaving the check to delivery time.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);
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

/// Where webhooks may go (the server's `--webhooks-allow-private`).
#[derive(Debug, Clone, Copy, Default)]
pub struct UrlPolicy {
    pub allow_private: bool,
}

/// What an address is, for the request forgery guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    Loopback,
    /// Private, shared (CGNAT), link-local, unique-local, unspecified: needs the flag.
    Private,
    /// Multicast, broadcast, documentation and reserved ranges: never a receiver.
    Forbidden,
    Public,
}

pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let [a, b, c, _] = ip.octets();
    if a == 127 {
        AddressClass::Loopback
    } else if a == 0
        || a == 10
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 169 && b == 254)
        || (a == 100 && (64..128).contains(&b))
    {
        AddressClass::Private
    } else if a >= 224
        || (a == 192 && b == 0 && (c == 0 || c == 2))
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
    {
        AddressClass::Forbidden
    } else {
        AddressClass::Public
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let s = ip.segments();
    if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_unspecified() || (s[0] & 0xfe00) == 0xfc00 || (s[0] & 0xffc0) == 0xfe80 || (s[0] & 0xffc0) == 0xfec0 {
        AddressClass::Private
    } else if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        // NAT64: the IPv4 address it stands for decides.
        classify_v4(Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8))
    } else if s[0] == 0x2002 {
        // 6to4 embeds an IPv4 address.
        classify_v4(Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8))
    } else if (s[0] & 0xff00) == 0xff00 || (s[0] == 0x2001 && s[1] == 0x0db8) || s[0..6] == [0, 0, 0, 0, 0, 0] {
        // Multicast, documentation, and the deprecated IPv4-compatible form.
        AddressClass::Forbidden
    } else {
        AddressClass::Public
    }
}

impl UrlPolicy {
    /// Why `ip` may not receive webhooks, or `None` if it may.
    pub fn refusal(&self, ip: IpAddr) -> Option<String> {
        match classify(ip) {
            AddressClass::Loopback | AddressClass::Public => None,
            AddressClass::Private if self.allow_private => None,
            AddressClass::Private => Some(format!(
                "{ip} is a private or link-local address; webhooks go there only when the server runs with --webhooks-allow-private"
            )),
            AddressClass::Forbidden => Some(format!("{ip} is a multicast, broadcast or reserved address")),
        }
    }
}

/// True for `localhost` and names under `.localhost` (RFC 6761: always loopback).
pub fn is_localhost_name(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

/// A webhook URL that passed the rules, and the host to resolve when it is a name.
#[derive(Debug, Clone)]
pub struct CheckedUrl {
    pub url: url::Url,
    /// `Some(name)` when the host is a DNS name (checked again once resolved).
    pub name: Option<String>,
}

/// Checks a URL against the rules (without DNS). `param` names it in a 422.
pub fn check_url(param: &str, text: &str, live_mode: bool, policy: &UrlPolicy) -> Result<CheckedUrl> {
    let invalid = |why: String| Error::invalid(param, format!("{param} {why}"));
    if text.len() > URL_LEN_MAX {
        return Err(invalid(format!("must be at most {URL_LEN_MAX} characters")));
    }
    let url = url::Url::parse(text.trim()).map_err(|e| invalid(format!("is not an absolute URL ({e})")))?;
    let scheme = url.scheme();
    if scheme != "https" && scheme != "http" {
        return Err(invalid("must be an https URL".into()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("must not contain credentials: verify the X-Signature header instead".into()));
    }
    if url.fragment().is_some() {
        return Err(invalid("must not contain a fragment (#...)".into()));
    }
    let (loopback, name) = match url.host() {
        None => return Err(invalid("must name a host".into())),
        Some(url::Host::Ipv4(ip)) => (check_ip(policy, IpAddr::V4(ip)).map_err(&invalid)?, None),
        Some(url::Host::Ipv6(ip)) => (check_ip(policy, IpAddr::V6(ip)).map_err(&invalid)?, None),
        Some(url::Host::Domain(host)) => (is_localhost_name(host), Some(host.to_owned())),
    };
    if scheme == "http" && !loopback {
        let mode = if live_mode { " in live mode" } else { "" };
        return Err(invalid(format!(
            "must use https{mode}; http is accepted only for loopback hosts (127.0.0.1, ::1, localhost), for development"
        )));
    }
    Ok(CheckedUrl { url, name })
}

/// True if the address is loopback; an error saying why it is refused, if it is.
fn check_ip(policy: &UrlPolicy, ip: IpAddr) -> std::result::Result<bool, String> {
    match policy.refusal(ip) {
        Some(why) => Err(format!("is refused: {why}")),
        None => Ok(classify(ip) == AddressClass::Loopback),
    }
}

/// Resolves a host name (bounded by a short timeout) and refuses it if any address it has is
/// refused, or if a `localhost` name leads anywhere but loopback. A name that does not
/// resolve now is accepted: the worker checks every attempt against what it resolves to then.
pub async fn check_resolved(param: &str, checked: &CheckedUrl, policy: &UrlPolicy) -> Result<()> {
    let Some(name) = &checked.name else { return Ok(()) };
    let port = checked.url.port_or_known_default().unwrap_or(443);
    let lookup = tokio::net::lookup_host((name.as_str(), port));
    let Ok(Ok(addrs)) = tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await else { return Ok(()) };
    for addr in addrs {
        if let Some(why) = address_refusal(policy, name, addr.ip()) {
            return Err(Error::invalid(param, format!("{param} is refused: {name} resolves to {why}")));
        }
    }
    Ok(())
}

/// Why `name` may not be reached at `ip`, if it may not: the policy, plus loopback only for
/// `localhost` names.
pub fn address_refusal(policy: &UrlPolicy, name: &str, ip: IpAddr) -> Option<String> {
    if is_localhost_name(name) && classify(ip) != AddressClass::Loopback {
        return Some(format!("{ip}, which is not a loopback address"));
    }
    policy.refusal(ip)
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
    /// `https` (or `http` to a loopback host) URL the events are POSTed to.
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

/// Creates an endpoint; answers the 201 body, the only one that carries the secret (W1).
pub async fn create(ctx: &Ctx<'_>, commit: &dyn Commit, input: &EndpointInput, policy: &UrlPolicy) -> Result<String> {
    let url_text = input.url.as_deref().ok_or_else(|| Error::missing("url"))?;
    let checked = check_url("url", url_text, ctx.scope.live_mode, policy)?;
    let event_names = check_event_names("event_names", input.event_names.as_deref().unwrap_or_default())?;
    check_resolved("url", &checked, policy).await?;
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
    let cursor_seq = ctx.store.newest_seq(event::KIND, ctx.scope).await?;
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
    batch.push(Write::DeleteChildren { kind: super::webhook_delivery::KIND, scope: ctx.scope.clone(), parent_id: id.to_owned() });
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
    policy: &UrlPolicy,
) -> Result<String> {
    super::api_key::validate_org_id(org)?;
    let scope = Scope { organization_id: org.to_owned(), live_mode: mode.is_live() };
    let ctx = Ctx { store, secrets, scope: &scope, now };
    create(&ctx, &DirectCommit(store), input, policy).await
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
    let ctx = Ctx { store, secrets, scope: &scope, now };
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

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn ssrf_address_classes() {
        for loopback in ["127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1"] {
            assert_eq!(classify(ip(loopback)), AddressClass::Loopback, "{loopback}");
        }
        for private in [
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2002:a00:1::",
        ] {
            assert_eq!(classify(ip(private)), AddressClass::Private, "{private}");
        }
        for forbidden in ["224.0.0.1", "255.255.255.255", "240.0.0.1", "192.0.2.1", "ff02::1", "2001:db8::1"] {
            assert_eq!(classify(ip(forbidden)), AddressClass::Forbidden, "{forbidden}");
        }
        for public in ["8.8.8.8", "172.32.0.1", "1.1.1.1", "2606:4700::1111", "100.128.0.1"] {
            assert_eq!(classify(ip(public)), AddressClass::Public, "{public}");
        }
    }

    #[test]
    fn w1_url_rules() {
        let strict = UrlPolicy::default();
        let open = UrlPolicy { allow_private: true };
        let ok = |url: &str, live: bool, policy: &UrlPolicy| check_url("url", url, live, policy).is_ok();
        assert!(ok("https://hooks.example.com/payrail", true, &strict));
        assert!(ok("http://127.0.0.1:8080/hook", false, &strict));
        assert!(ok("http://127.0.0.1:8080/hook", true, &strict), "loopback http is for development, in any mode");
        assert!(ok("http://[::1]:8080/hook", false, &strict));
        assert!(ok("http://localhost:8080/hook", true, &strict));
        assert!(!ok("http://hooks.example.com/payrail", true, &strict), "live mode needs https");
        assert!(!ok("http://hooks.example.com/payrail", false, &strict), "http only to loopback");
        assert!(!ok("https://10.0.0.5/hook", false, &strict));
        assert!(ok("https://10.0.0.5/hook", false, &open));
        assert!(!ok("http://10.0.0.5/hook", false, &open), "http stays loopback-only");
        assert!(!ok("https://169.254.169.254/latest", true, &strict));
        assert!(!ok("https://[fe80::1]/hook", true, &strict));
        assert!(!ok("https://0.0.0.0/hook", true, &strict));
        assert!(!ok("https://224.0.0.1/hook", true, &open));
        assert!(!ok("ftp://example.com/x", false, &strict));
        assert!(!ok("https://user:pw@example.com/x", false, &strict));
        assert!(!ok("https://example.com/x#frag", false, &strict));
        assert!(!ok("not a url", false, &strict));
        match check_url("url", "https://10.0.0.5/", false, &strict) {
            Err(Error::Invalid { parameter, .. }) => assert_eq!(parameter, "url"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn localhost_names_must_stay_on_loopback() {
        let policy = UrlPolicy::default();
        assert!(address_refusal(&policy, "localhost", ip("127.0.0.1")).is_none());
        assert!(address_refusal(&policy, "app.localhost", ip("8.8.8.8")).is_some());
        assert!(address_refusal(&policy, "hooks.example.com", ip("8.8.8.8")).is_none());
        assert!(address_refusal(&policy, "hooks.example.com", ip("10.0.0.1")).is_some());
    }

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
