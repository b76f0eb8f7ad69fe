//! Webhook deliveries (SPEC W2, W3): one per event and endpoint, retried until delivered or
//! until its retry window (3 days by default) is over.
//!
//! A delivery is an object of kind `webhook_delivery` whose parent is its endpoint. Its id is the
//! `X-Webhook-ID` (unique per event and endpoint, the same on every retry). Its body,
//! `{"event": <event_name>, "data": <resource>}`, is built from its event (immutable) each time it
//! is sent, so every attempt sends the same bytes and a delivery stores no copy of the resource:
//! an event for twenty endpoints is stored once, not twenty-one times (storage layout level 6).
//! Deliveries written by older releases keep the body they stored, and send it.
//!
//! A pending delivery carries the term `webhook_due.<endpoint id>` = the instant it is due, so
//! the worker finds what is due for one endpoint with one indexed scan, and a slow endpoint's
//! backlog never hides another endpoint's work. Claiming is a versioned replace that sets a
//! lease (`lease_until`, and the due term moved to it): with several instances on one database
//! only one replace wins, so one instance at a time sends a delivery, and a lease whose holder
//! died runs out and the delivery is due again (at least once, SPEC W3).

use futures_util::future::try_join_all;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::api_key::Scope;
use super::common::new_id;
use super::listing::{self, ListedPage, PageSpec};
use super::time::Timestamp;
use super::webhook::{self, LoadedEndpoint};
use super::{Commit, Ctx};
use crate::error::{Error, Result};
use crate::store::{Filter, ObjectRecord, Store, StoredObject, Term, Write, WriteBatch};

pub const KIND: &str = webhook::DELIVERY_KIND;
pub const PENDING: &str = "pending";
pub const DELIVERED: &str = "delivered";
pub const FAILED: &str = "failed";
/// Every status a delivery can have.
pub const STATUSES: &[&str] = super::enums::WEBHOOK_DELIVERY_STATUSES;
/// Re-reads a delivery whose replace lost a race, at most this often.
const RECORD_ATTEMPTS_MAX: usize = 4;

/// The term a finished delivery carries; its value is when it finished.
pub const DONE_TERM: &str = "webhook_done_at";

/// The term a pending delivery of `endpoint_id` is found by; its value is when it is due.
pub fn due_term(endpoint_id: &str) -> String {
    format!("webhook_due.{endpoint_id}")
}

/// A delivery as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = webhook_delivery)]
pub struct Delivery {
    pub id: String,
    pub object: String,
    pub live_mode: bool,
    pub webhook_endpoint_id: String,
    pub event_id: String,
    pub resource: String,
    pub event_name: String,
    /// `pending`, `delivered` or `failed`.
    #[schema(schema_with = super::schema::delivery_status)]
    pub status: String,
    pub attempts: u32,
    pub last_attempt_at: Option<Timestamp>,
    pub last_status_code: Option<u16>,
    pub last_error: Option<String>,
    /// When the next attempt is due; set only while pending.
    pub next_attempt_at: Option<Timestamp>,
    pub delivered_at: Option<Timestamp>,
    /// After this instant a failing delivery is given up (`failed`).
    pub retry_until: Timestamp,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A delivery as stored: the public part and the lease (and the body, in deliveries an older
/// release wrote).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredDelivery {
    #[serde(flatten)]
    pub delivery: Delivery,
    /// The exact bytes an older release stored to sign and send; this one builds them from the
    /// event (`body_of`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// While set and in the future, an instance is sending this delivery.
    pub lease_until: Option<Timestamp>,
}

impl StoredDelivery {
    fn due_at(&self) -> Option<Timestamp> {
        if self.delivery.status != PENDING {
            return None;
        }
        let next = self.delivery.next_attempt_at?;
        Some(self.lease_until.map_or(next, |lease| lease.max(next)))
    }

    fn record(&self, scope: &Scope) -> Result<ObjectRecord> {
        let d = &self.delivery;
        let mut terms = vec![Term::new("webhook_endpoint_id", &d.webhook_endpoint_id), Term::new("status", &d.status)];
        match self.due_at() {
            Some(due) => terms.push(Term::new(due_term(&d.webhook_endpoint_id), due.to_string())),
            // Finished (delivered or failed): found by age when it is time to purge it.
            None => terms.push(Term::new(DONE_TERM, d.updated_at.to_string())),
        }
        Ok(ObjectRecord {
            id: d.id.clone(),
            kind: KIND,
            scope: scope.clone(),
            parent_id: Some(d.webhook_endpoint_id.clone()),
            created_at: d.created_at,
            doc: serde_json::to_string(self).map_err(|e| Error::internal(format!("webhook delivery: {e}")))?,
            terms,
        })
    }
}

fn parse(stored: &StoredObject) -> Result<StoredDelivery> {
    let mut parsed: StoredDelivery =
        serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored webhook delivery {}: {e}", stored.id)))?;
    let d = &mut parsed.delivery;
    d.last_error = d.last_error.take().map(|text| legacy_failure(&text, d.last_status_code).to_string());
    Ok(parsed)
}

/// The failure a stored error text stands for. Releases before SPEC W5 stored the client's own
/// words (operating-system errors included); they are shown as one of the four texts too.
fn legacy_failure(text: &str, status_code: Option<u16>) -> Failure {
    match (text, status_code) {
        ("timeout", _) => Failure::Timeout,
        ("TLS failed", _) => Failure::TlsFailed,
        (_, Some(code)) => Failure::Status(code),
        (text, None) if text.starts_with("no answer within") => Failure::Timeout,
        (text, None) if text.to_ascii_lowercase().contains("tls") => Failure::TlsFailed,
        _ => Failure::ConnectionFailed,
    }
}

fn public_json(delivery: &Delivery) -> Result<String> {
    serde_json::to_string(delivery).map_err(|e| Error::internal(format!("webhook delivery: {e}")))
}

/// When to try again, and when to give up.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// The first retry comes after between half of this and this (SPEC W3: within 10 s).
    pub base_ms: u64,
    /// Longest pause between attempts.
    pub max_ms: u64,
    /// How long after its creation (or resend) a delivery is retried before it is `failed`.
    pub window_secs: i64,
}

impl RetryPolicy {
    /// Pause after the `failed_attempts`-th failure: exponential (`base * 2^(n-1)`, capped at
    /// `max`) with equal jitter (between half and all of it), so receivers that come back are
    /// not hit by every delivery at once.
    pub fn delay_ms(&self, failed_attempts: u32, rng: &mut impl Rng) -> u64 {
        let exp = failed_attempts.saturating_sub(1).min(40);
        let full = self.base_ms.saturating_mul(1u64 << exp).min(self.max_ms).max(2);
        full / 2 + rng.random_range(0..=full / 2)
    }
}

/// The fields of an event the worker needs.
#[derive(Deserialize)]
struct EventView<'a> {
    id: String,
    resource: String,
    event_name: String,
    entity_id: String,
    #[serde(borrow)]
    data: &'a RawValue,
}

/// The webhook body: exactly `{"event":<event_name>,"data":<resource>}` (SPEC W2).
pub fn body(event_name: &str, data: &RawValue) -> Result<String> {
    let name = serde_json::to_string(event_name).map_err(|e| Error::internal(format!("webhook body: {e}")))?;
    Ok(format!("{{\"event\":{name},\"data\":{}}}", data.get()))
}

/// Turns the endpoint's next events (at most `batch_max`) into deliveries and moves its
/// cursor past them, in one transaction guarded by the cursor's version: if another instance
/// did it first, nothing is written here. Returns how many events were read.
pub async fn enqueue(
    store: &dyn Store,
    endpoint: &LoadedEndpoint,
    now: Timestamp,
    policy: &RetryPolicy,
    batch_max: usize,
) -> Result<usize> {
    let events = store.outbox_after(&endpoint.scope, endpoint.state.cursor_seq, batch_max).await?;
    let Some(&(last_seq, _)) = events.last() else { return Ok(0) };
    let mut batch = WriteBatch::new();
    batch.push(Write::Replace { record: endpoint.advanced(last_seq)?, expected_version: endpoint.version });
    for (_, stored) in &events {
        let event: EventView<'_> =
            serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored event {}: {e}", stored.id)))?;
        // An endpoint is not told about its own creation.
        let own = event.resource == webhook::KIND && event.entity_id == endpoint.state.endpoint_id;
        if own || !webhook::wants(&endpoint.state.event_names, &event.resource, &event.event_name) {
            continue;
        }
        let delivery = StoredDelivery {
            delivery: Delivery {
                id: new_id(),
                object: KIND.into(),
                live_mode: endpoint.scope.live_mode,
                webhook_endpoint_id: endpoint.state.endpoint_id.clone(),
                event_id: event.id.clone(),
                resource: event.resource.clone(),
                event_name: event.event_name.clone(),
                status: PENDING.into(),
                attempts: 0,
                last_attempt_at: None,
                last_status_code: None,
                last_error: None,
                next_attempt_at: Some(now),
                delivered_at: None,
                retry_until: now.plus_secs(policy.window_secs),
                created_at: now,
                updated_at: now,
            },
            body: None,
            lease_until: None,
        };
        batch.push(Write::Insert(delivery.record(&endpoint.scope)?));
    }
    match store.commit(batch).await {
        // Another instance moved the cursor, or the endpoint is gone: nothing to do here.
        Ok(()) | Err(Error::Conflict { .. } | Error::NotFound { .. }) => Ok(events.len()),
        Err(err) => Err(err),
    }
}

/// A delivery this instance holds the lease of, to send now.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    pub scope: Scope,
    /// The version the lease wrote: the outcome replaces exactly that.
    pub version: i64,
    pub stored: StoredDelivery,
    /// The exact bytes to sign and send.
    pub body: String,
}

/// The bytes `stored` sends: those an older release stored, or else built from its event.
async fn body_of(store: &dyn Store, scope: &Scope, stored: &StoredDelivery) -> Result<String> {
    if let Some(body) = &stored.body {
        return Ok(body.clone());
    }
    let event_id = &stored.delivery.event_id;
    let event = store
        .get(super::event::KIND, scope, event_id)
        .await?
        .ok_or_else(|| Error::internal(format!("webhook delivery {}: its event {event_id} is gone", stored.delivery.id)))?;
    let view: EventView<'_> = serde_json::from_str(&event.doc).map_err(|e| Error::internal(format!("stored event {event_id}: {e}")))?;
    body(&view.event_name, view.data)
}

/// Leases up to `limit` of the endpoint's due deliveries, oldest due first, until
/// `now + lease_ms`. All or none: if another instance leased one of them first, this claims
/// nothing and the caller tries again on its next pass.
pub async fn claim(store: &dyn Store, endpoint_id: &str, now: Timestamp, lease_ms: u64, limit: usize) -> Result<Vec<ClaimedDelivery>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let due = store.scan_due(KIND, &due_term(endpoint_id), &now.to_string(), limit).await?;
    if due.is_empty() {
        return Ok(Vec::new());
    }
    let lease_until = now.plus_micros(i64::try_from(lease_ms).unwrap_or(i64::MAX / 1000).saturating_mul(1000));
    let mut batch = WriteBatch::new();
    let mut leased = Vec::with_capacity(due.len());
    for (scope, object) in due {
        let mut stored = parse(&object)?;
        if stored.delivery.status != PENDING {
            continue;
        }
        stored.lease_until = Some(lease_until);
        batch.push(Write::Replace { record: stored.record(&scope)?, expected_version: object.version });
        leased.push((scope, object.version + 1, stored));
    }
    match store.commit(batch).await {
        Ok(()) => {}
        Err(Error::Conflict { .. } | Error::NotFound { .. }) => return Ok(Vec::new()),
        Err(err) => return Err(err),
    }
    // Only a claim that won reads its events, together (PostgreSQL answers concurrent reads in
    // one round trip). Should a read fail, the leases run out and the deliveries are due again.
    let bodies = try_join_all(leased.iter().map(|(scope, _, stored)| body_of(store, scope, stored))).await?;
    Ok(leased.into_iter().zip(bodies).map(|((scope, version, stored), body)| ClaimedDelivery { scope, version, stored, body }).collect())
}

/// Why an attempt failed: all that is stored, listed and logged at info level (SPEC W5). No
/// operating-system text, no detail of how a connection failed, so the answers never tell an
/// open port from a closed one beyond these four words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No answer within the send timeout (connecting included).
    Timeout,
    /// No connection: refused, unreachable, reset, no address, an address the guard refused,
    /// or an answer that was not HTTP.
    ConnectionFailed,
    /// A connection, but no TLS session (handshake refused, closed or not TLS at all).
    TlsFailed,
    /// An HTTP answer other than 2xx (redirects included: they are not followed).
    Status(u16),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout => f.write_str("timeout"),
            Failure::ConnectionFailed => f.write_str("connection failed"),
            Failure::TlsFailed => f.write_str("TLS failed"),
            Failure::Status(code) => write!(f, "HTTP {code}"),
        }
    }
}

/// How an attempt ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A 2xx answer.
    Delivered {
        status_code: u16,
    },
    Failed(Failure),
}

/// Applies an attempt's outcome: delivered; or pending with the next attempt scheduled; or
/// failed once the next attempt would fall after `retry_until`.
fn apply(stored: &mut StoredDelivery, outcome: &Outcome, at: Timestamp, policy: &RetryPolicy) {
    let d = &mut stored.delivery;
    d.attempts += 1;
    d.last_attempt_at = Some(at);
    d.updated_at = at;
    stored.lease_until = None;
    match outcome {
        Outcome::Delivered { status_code } => {
            d.status = DELIVERED.into();
            d.last_status_code = Some(*status_code);
            d.last_error = None;
            d.next_attempt_at = None;
            d.delivered_at = Some(at);
        }
        Outcome::Failed(failure) => {
            d.last_status_code = match failure {
                Failure::Status(code) => Some(*code),
                _ => None,
            };
            d.last_error = Some(failure.to_string());
            let delay_ms = policy.delay_ms(d.attempts, &mut rand::rng());
            let next = at.plus_micros(i64::try_from(delay_ms).unwrap_or(i64::MAX / 1000).saturating_mul(1000));
            if next > d.retry_until {
                d.status = FAILED.into();
                d.next_attempt_at = None;
            } else {
                d.next_attempt_at = Some(next);
            }
        }
    }
}

/// Records an attempt under the lease it was sent with. If the lease was lost meanwhile (it
/// ran out and another instance took the delivery), a failure is dropped (the new holder
/// decides) but a success is still recorded, on whatever the delivery has become.
pub async fn record(store: &dyn Store, claimed: &ClaimedDelivery, outcome: &Outcome, at: Timestamp, policy: &RetryPolicy) -> Result<()> {
    let mut stored = claimed.stored.clone();
    let mut version = claimed.version;
    for _ in 0..RECORD_ATTEMPTS_MAX {
        apply(&mut stored, outcome, at, policy);
        let mut batch = WriteBatch::new();
        batch.push(Write::Replace { record: stored.record(&claimed.scope)?, expected_version: version });
        match store.commit(batch).await {
            Ok(()) | Err(Error::NotFound { .. }) => return Ok(()),
            Err(Error::Conflict { .. }) if matches!(outcome, Outcome::Delivered { .. }) => {
                let Some(current) = store.get(KIND, &claimed.scope, &stored.delivery.id).await? else { return Ok(()) };
                stored = parse(&current)?;
                version = current.version;
                if stored.delivery.status == DELIVERED {
                    return Ok(());
                }
            }
            Err(Error::Conflict { .. }) => return Ok(()),
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// Deletes up to `batch_max` deliveries of every tenant that finished (delivered or failed)
/// before `before`; returns how many. A failed one can no longer be resent after that.
pub async fn purge(store: &dyn Store, before: Timestamp, batch_max: usize) -> Result<usize> {
    let old = store.scan_due(KIND, DONE_TERM, &before.to_string(), batch_max).await?;
    if old.is_empty() {
        return Ok(0);
    }
    let count = old.len();
    let mut batch = WriteBatch::new();
    for (scope, object) in old {
        batch.push(Write::Delete { kind: KIND, scope, id: object.id });
    }
    match store.commit(batch).await {
        // A resend or a deleted endpoint got there first: the next purge takes the rest.
        Ok(()) | Err(Error::NotFound { .. }) => Ok(count),
        Err(err) => Err(err),
    }
}

async fn require_endpoint(ctx: &Ctx<'_>, endpoint_id: &str) -> Result<()> {
    match ctx.store.get(webhook::KIND, ctx.scope, endpoint_id).await? {
        Some(_) => Ok(()),
        None => Err(Error::not_found("webhook endpoint")),
    }
}

/// The endpoint's deliveries, newest first; `status` narrows them.
pub async fn list(ctx: &Ctx<'_>, endpoint_id: &str, status: Option<&str>, page: PageSpec) -> Result<ListedPage> {
    let status = status.map(|s| super::validate::one_of("status", s, STATUSES)).transpose()?;
    require_endpoint(ctx, endpoint_id).await?;
    let mut filters: Vec<Filter> = vec![Filter::Eq { name: "webhook_endpoint_id".into(), value: endpoint_id.to_owned() }];
    filters.extend(listing::eq("status", status.as_deref()));
    let found = listing::fetch(ctx, KIND, filters, page).await?;
    let items: Vec<Delivery> = found.items.iter().map(|o| parse(o).map(|s| s.delivery)).collect::<Result<_>>()?;
    let json = serde_json::to_vec(&items).map_err(|e| Error::internal(format!("webhook deliveries: {e}")))?;
    Ok(ListedPage { json, next_seq: found.next_seq })
}

async fn find(ctx: &Ctx<'_>, endpoint_id: &str, id: &str) -> Result<(StoredObject, StoredDelivery)> {
    let not_found = || Error::not_found("webhook delivery");
    let object = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(not_found)?;
    if object.parent_id.as_deref() != Some(endpoint_id) {
        return Err(not_found());
    }
    let stored = parse(&object)?;
    Ok((object, stored))
}

pub async fn get(ctx: &Ctx<'_>, endpoint_id: &str, id: &str) -> Result<String> {
    let (_, stored) = find(ctx, endpoint_id, id).await?;
    public_json(&stored.delivery)
}

/// Queues a failed delivery again (same `X-Webhook-ID`), due now, with a fresh retry window;
/// a pending one that is not being sent is made due now. A delivered one, or one being sent
/// at this moment, is a 409.
pub async fn resend(ctx: &Ctx<'_>, commit: &dyn Commit, endpoint_id: &str, id: &str, policy: &RetryPolicy) -> Result<String> {
    let mut tries = 0;
    loop {
        tries += 1;
        let (object, mut stored) = find(ctx, endpoint_id, id).await?;
        if stored.delivery.status == DELIVERED {
            let message = "This delivery was delivered; only a failed delivery can be resent.".into();
            return Err(Error::Conflict { message, parameter: None, retry_after_s: None });
        }
        if stored.lease_until.is_some_and(|lease| lease > ctx.now) {
            let message = "This delivery is being sent right now; look again in a moment.".into();
            return Err(Error::Conflict { message, parameter: None, retry_after_s: Some(1) });
        }
        stored.lease_until = None;
        let d = &mut stored.delivery;
        if d.status == FAILED {
            d.retry_until = ctx.now.plus_secs(policy.window_secs);
        }
        d.status = PENDING.into();
        d.next_attempt_at = Some(ctx.now);
        d.updated_at = ctx.now;
        let json = public_json(&stored.delivery)?;
        let mut batch = WriteBatch::new();
        batch.push(Write::Replace { record: stored.record(ctx.scope)?, expected_version: object.version });
        match commit.commit(batch, &json).await {
            Err(Error::Conflict { parameter: None, retry_after_s: Some(0), .. }) if tries < super::UPDATE_ATTEMPTS_MAX => {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            Err(err) => return Err(err),
            Ok(()) => return Ok(json),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: RetryPolicy = RetryPolicy { base_ms: 5_000, max_ms: 3_600_000, window_secs: 3 * 86_400 };

    #[test]
    fn w3_first_retry_within_ten_seconds_then_exponential_capped() {
        let mut rng = rand::rng();
        for _ in 0..100 {
            let first = POLICY.delay_ms(1, &mut rng);
            assert!((2_500..=5_000).contains(&first), "{first}");
            let fourth = POLICY.delay_ms(4, &mut rng);
            assert!((20_000..=40_000).contains(&fourth), "{fourth}");
            let late = POLICY.delay_ms(60, &mut rng);
            assert!((1_800_000..=3_600_000).contains(&late), "{late}");
        }
    }

    #[test]
    fn w3_retried_for_days_then_failed() {
        let start = Timestamp::from_micros(1_700_000_000_000_000);
        let mut stored = StoredDelivery {
            delivery: Delivery {
                id: "d".into(),
                object: KIND.into(),
                live_mode: false,
                webhook_endpoint_id: "e".into(),
                event_id: "ev".into(),
                resource: "counterparty".into(),
                event_name: "created".into(),
                status: PENDING.into(),
                attempts: 0,
                last_attempt_at: None,
                last_status_code: None,
                last_error: None,
                next_attempt_at: Some(start),
                delivered_at: None,
                retry_until: start.plus_secs(POLICY.window_secs),
                created_at: start,
                updated_at: start,
            },
            body: None,
            lease_until: None,
        };
        let failure = Outcome::Failed(Failure::Status(500));
        while stored.delivery.status == PENDING {
            let at = stored.delivery.next_attempt_at.unwrap();
            apply(&mut stored, &failure, at, &POLICY);
        }
        let d = &stored.delivery;
        assert_eq!(d.status, FAILED);
        assert!(d.last_attempt_at.unwrap() > start.plus_secs(POLICY.window_secs - 3_600), "retried until the window's end");
        assert!((70..=130).contains(&d.attempts), "{} attempts in 3 days", d.attempts);
    }

    #[test]
    fn w5_old_error_texts_are_shown_as_the_four() {
        assert_eq!(
            legacy_failure("could not connect: tcp connect error: Connection refused (os error 111)", None),
            Failure::ConnectionFailed
        );
        assert_eq!(legacy_failure("could not connect: tls handshake eof", None), Failure::TlsFailed);
        assert_eq!(legacy_failure("no answer within 5000 ms", None), Failure::Timeout);
        assert_eq!(legacy_failure("the receiver answered HTTP 500", Some(500)), Failure::Status(500));
        for text in ["timeout", "connection failed", "TLS failed", "HTTP 404"] {
            assert_eq!(legacy_failure(text, text.strip_prefix("HTTP ").map(|c| c.parse().unwrap())).to_string(), text);
        }
    }

    #[test]
    fn w5_failure_texts_are_four_words() {
        let texts: Vec<String> = [Failure::Timeout, Failure::ConnectionFailed, Failure::TlsFailed, Failure::Status(503)]
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(texts, ["timeout", "connection failed", "TLS failed", "HTTP 503"]);
    }

    #[test]
    fn w2_body_is_exactly_event_and_data() {
        let data: &RawValue = serde_json::from_str(r#"{"id":"x","amount":1}"#).unwrap();
        assert_eq!(body("completed", data).unwrap(), r#"{"event":"completed","data":{"id":"x","amount":1}}"#);
    }

    #[test]
    fn w3_a_delivery_an_older_release_stored_with_its_body_keeps_it_through_every_rewrite() {
        let doc = r#"{"id":"d","object":"webhook_delivery","live_mode":false,"webhook_endpoint_id":"e","event_id":"ev",
            "resource":"counterparty","event_name":"created","status":"pending","attempts":0,"last_attempt_at":null,
            "last_status_code":null,"last_error":null,"next_attempt_at":null,"delivered_at":null,
            "retry_until":"2026-01-04T00:00:00.000000Z","created_at":"2026-01-01T00:00:00.000000Z",
            "updated_at":"2026-01-01T00:00:00.000000Z","body":"{\"event\":\"created\",\"data\":{}}","lease_until":null}"#;
        let old: StoredDelivery = serde_json::from_str(doc).unwrap();
        assert_eq!(old.body.as_deref(), Some(r#"{"event":"created","data":{}}"#));
        let again: StoredDelivery = serde_json::from_str(&serde_json::to_string(&old).unwrap()).unwrap();
        assert_eq!(again.body, old.body, "a lease or an outcome rewrites the delivery with its body");
        let new = StoredDelivery { body: None, ..old };
        assert!(!serde_json::to_string(&new).unwrap().contains("body"), "this release stores none");
    }
}
