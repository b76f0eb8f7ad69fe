//! The webhook worker (SPEC W2, W3, W4): reads the event outbox, queues deliveries, sends them.
//!
//! Every pass (each `webhook_poll_ms`, or sooner when a send finishes):
//! 1. For each endpoint, the events after its cursor become deliveries and the cursor moves
//!    past them, in one transaction guarded by the cursor's version (`enqueue`). Each event is
//!    read once per endpoint of its tenant and makes at most one delivery there: the work is
//!    linear in events times subscribed endpoints (W4), never a rescan.
//! 2. Due deliveries are leased (`claim`) up to the free slots, tenant by tenant (an
//!    organization in one mode) from a start that rotates every pass, and endpoint by endpoint
//!    within a tenant, likewise rotated. Slots are bounded three ways in this instance:
//!    `webhook_in_flight_max` in all, `webhook_tenant_in_flight_max` per tenant and
//!    `webhook_endpoint_in_flight_max` per endpoint. So a tenant whose receivers hang holds
//!    only its own share, and the others keep theirs (W4): with the defaults (64, 8, 4), up to
//!    eight tenants whose every receiver hangs fill the pool, and past that a tenant whose
//!    receivers answer (no send of its took half the timeout in the last minute) still gets its
//!    own share beyond it, so no number of hanging tenants delays it; the rotation hands each
//!    freed slot to the tenants in turn.
//! 3. Each leased delivery is sent in its own task; its outcome is recorded under the lease.
//!
//! All state is in the store, so deliveries survive restarts; a lease (`webhook_lease_ms`,
//! longer than the send timeout) lets several instances share the work without sending a
//! delivery from two of them at once. On shutdown the worker stops claiming and waits for the
//! sends in flight (bounded by the timeout) so their outcomes are recorded. Repeated log lines
//! (the same line about the same endpoint) are logged at most once per [`LOG_REPEAT_WINDOW`],
//! with the count of those held back.
//!
//! Limits: up to `domain::webhook::ENDPOINTS_SERVED_MAX` endpoints across all tenants are
//! served; each pass reads up to `ENQUEUE_BATCH_MAX` events per endpoint (a backlog drains
//! over consecutive passes).

pub mod client;
pub mod signer;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use crate::app::AppState;
use crate::base::log_limit::LogLimit;
use crate::config::Config;
use crate::domain::api_key::Scope;
use crate::domain::time::{Clock, Timestamp};
use crate::domain::webhook::{self, LoadedEndpoint, UrlPolicy};
use crate::domain::webhook_delivery::{self as delivery, ClaimedDelivery, Outcome, RetryPolicy};
use crate::error::Result;
use crate::store::Store;
use client::Sender;

/// Events turned into deliveries per endpoint and pass at most.
pub const ENQUEUE_BATCH_MAX: usize = 200;
/// Extra time given to sends in flight at shutdown, beyond their own timeout.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// After a send finishes, the worker waits this long before its next pass, so a burst of
/// finishing sends costs one pass rather than one each.
const WAKE_SETTLE: Duration = Duration::from_millis(5);
/// How often finished deliveries past their retention are purged, and how many per batch.
const PURGE_INTERVAL: Duration = Duration::from_secs(60);
const PURGE_BATCH_MAX: usize = 500;
/// The same log line about the same endpoint at most once per this (SPEC W4).
pub const LOG_REPEAT_WINDOW: Duration = Duration::from_secs(10);

/// The worker's settings, from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub poll: Duration,
    pub timeout: Duration,
    pub lease_ms: u64,
    pub retry: RetryPolicy,
    pub in_flight_max: usize,
    pub tenant_in_flight_max: usize,
    pub endpoint_in_flight_max: usize,
    pub policy: UrlPolicy,
    pub retention_secs: i64,
}

/// How much longer than the send timeout a delivery's lease lasts: time to record the outcome.
/// A sender killed mid-attempt leaves its delivery due again when the lease ends, so it must
/// stay short (W3: with the 5 s timeout, the first retry within 10 s of a failed attempt).
const LEASE_MARGIN_MS: u64 = 3_000;

impl Settings {
    pub fn from_config(config: &Config) -> Self {
        let timeout_ms = config.webhook_timeout_ms.max(1);
        Settings {
            poll: Duration::from_millis(config.webhook_poll_ms.max(1)),
            timeout: Duration::from_millis(timeout_ms),
            // A lease always outlives the send it covers, by a margin to record its outcome.
            lease_ms: config.webhook_lease_ms.max(timeout_ms.saturating_add(LEASE_MARGIN_MS)),
            retry: config.webhook_retry_policy(),
            in_flight_max: config.webhook_in_flight_max.max(1),
            tenant_in_flight_max: config.webhook_tenant_in_flight_max.max(1),
            endpoint_in_flight_max: config.webhook_endpoint_in_flight_max.max(1),
            policy: config.webhook_endpoint_rules().policy,
            retention_secs: config.webhook_delivery_retention_secs.max(0),
        }
    }
}

/// Sends in flight, per endpoint, per tenant and in all; and the tenants whose receivers are
/// slow (a send that took half the timeout or more), until when.
#[derive(Debug, Default)]
struct InFlight {
    per_endpoint: HashMap<String, usize>,
    per_tenant: HashMap<Scope, usize>,
    total: usize,
    slow_until: HashMap<Scope, Instant>,
}

/// How long a tenant counts as slow after one of its sends was.
const SLOW_MEMORY: Duration = Duration::from_secs(60);

impl InFlight {
    fn add(&mut self, scope: &Scope, endpoint_id: &str) {
        *self.per_endpoint.entry(endpoint_id.to_owned()).or_default() += 1;
        *self.per_tenant.entry(scope.clone()).or_default() += 1;
        self.total += 1;
    }

    fn remove(&mut self, scope: &Scope, endpoint_id: &str, slow: bool) {
        self.total = self.total.saturating_sub(1);
        decrement(&mut self.per_endpoint, endpoint_id);
        decrement(&mut self.per_tenant, scope);
        if slow {
            let now = Instant::now();
            self.slow_until.retain(|_, until| *until > now);
            self.slow_until.insert(scope.clone(), now + SLOW_MEMORY);
        }
    }

    fn is_slow(&self, scope: &Scope) -> bool {
        self.slow_until.get(scope).is_some_and(|until| *until > Instant::now())
    }
}

/// Counts one less under `key`, forgetting it at zero (the maps hold only what is busy).
fn decrement<K: std::hash::Hash + Eq + ?Sized, Q: std::hash::Hash + Eq + std::borrow::Borrow<K>>(map: &mut HashMap<Q, usize>, key: &K) {
    if let Some(busy) = map.get_mut(key) {
        *busy = busy.saturating_sub(1);
        if *busy == 0 {
            map.remove(key);
        }
    }
}

struct Worker {
    store: Arc<dyn Store>,
    secrets: Arc<crate::base::secret_box::SecretBox>,
    clock: Arc<dyn Clock>,
    settings: Settings,
    sender: Sender,
    in_flight: Arc<Mutex<InFlight>>,
    wake: Arc<Notify>,
    tasks: JoinSet<()>,
    rotation: usize,
    log: Arc<LogLimit>,
}

/// Runs until `stop` turns true, then waits for the sends in flight.
pub async fn run(state: AppState, mut stop: watch::Receiver<bool>) {
    let settings = Settings::from_config(&state.config);
    let sender = match Sender::new(settings.policy, settings.timeout) {
        Ok(sender) => sender,
        Err(err) => {
            tracing::error!(%err, "webhooks are off: the HTTP client could not be built");
            return;
        }
    };
    let mut worker = Worker {
        store: state.store.clone(),
        secrets: state.secrets.clone(),
        clock: state.clock.clone(),
        settings,
        sender,
        in_flight: Arc::default(),
        wake: Arc::new(Notify::new()),
        tasks: JoinSet::new(),
        rotation: 0,
        log: Arc::new(LogLimit::new(LOG_REPEAT_WINDOW)),
    };
    let mut last_purge: Option<tokio::time::Instant> = None;
    while !*stop.borrow() {
        if last_purge.is_none_or(|at| at.elapsed() >= PURGE_INTERVAL) {
            last_purge = Some(tokio::time::Instant::now());
            worker.purge().await;
        }
        let more = match worker.pass().await {
            Ok(more) => more,
            Err(err) => {
                if let Some(suppressed) = worker.log.admit("pass", Instant::now()) {
                    tracing::warn!(%err, suppressed, "webhook pass failed");
                }
                false
            }
        };
        while worker.tasks.try_join_next().is_some() {}
        if more {
            tokio::task::yield_now().await;
            continue;
        }
        let wake = worker.wake.clone();
        tokio::select! {
            () = tokio::time::sleep(worker.settings.poll) => {}
            () = wake.notified() => tokio::time::sleep(WAKE_SETTLE).await,
            _ = stop.changed() => {}
        }
    }
    let drain = async { while worker.tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(worker.settings.timeout + DRAIN_GRACE, drain).await.is_err() {
        tracing::warn!("webhook sends still in flight at shutdown: their leases will run out and they will be sent again");
    }
}

impl Worker {
    /// Deletes finished deliveries past their retention, in small batches.
    async fn purge(&self) {
        let before = self.clock.now().plus_secs(-self.settings.retention_secs);
        loop {
            match delivery::purge(self.store.as_ref(), before, PURGE_BATCH_MAX).await {
                Ok(n) if n == PURGE_BATCH_MAX => tokio::task::yield_now().await,
                Ok(_) => return,
                Err(err) => {
                    tracing::warn!(%err, "purging old webhook deliveries failed");
                    return;
                }
            }
        }
    }

    /// One pass; true when an endpoint has more events waiting than one pass takes.
    async fn pass(&mut self) -> Result<bool> {
        let endpoints = webhook::load_all(self.store.as_ref(), webhook::ENDPOINTS_SERVED_MAX).await?;
        self.rotation = self.rotation.wrapping_add(1);
        let tenants = by_tenant(&endpoints, self.rotation);
        let mut more = false;
        for endpoint in tenants.iter().flatten() {
            let now = self.clock.now();
            match delivery::enqueue(self.store.as_ref(), endpoint, now, &self.settings.retry, ENQUEUE_BATCH_MAX).await {
                Ok(read) => more |= read == ENQUEUE_BATCH_MAX,
                Err(err) => self.warn_about(endpoint, "queueing webhook deliveries failed", &err),
            }
        }
        for tenant in &tenants {
            for endpoint in tenant {
                let free = self.free_slots(&endpoint.scope, &endpoint.state.endpoint_id);
                if free.tenant == 0 {
                    break;
                }
                // A full pool (other tenants' receivers hanging) does not hold back a tenant
                // whose receivers answer: it still gets its own share (W4). The pool bounds the
                // slow ones; a tenant counts as slow for a minute after a send of its took half
                // the timeout, so the pool is exceeded only by sends that end quickly.
                let total = if free.total == 0 && !free.slow { free.tenant } else { free.total };
                let limit = free.endpoint.min(free.tenant).min(total);
                if limit > 0 {
                    self.claim_for(endpoint, limit).await;
                }
            }
        }
        Ok(more)
    }

    async fn claim_for(&mut self, endpoint: &LoadedEndpoint, limit: usize) {
        let now = self.clock.now();
        match delivery::claim(self.store.as_ref(), &endpoint.state.endpoint_id, now, self.settings.lease_ms, limit).await {
            Ok(claimed) => claimed.into_iter().for_each(|c| self.spawn_send(endpoint, c)),
            Err(err) => self.warn_about(endpoint, "claiming webhook deliveries failed", &err),
        }
    }

    fn warn_about(&self, endpoint: &LoadedEndpoint, what: &'static str, err: &crate::error::Error) {
        let id = &endpoint.state.endpoint_id;
        if let Some(suppressed) = self.log.admit(&format!("{what}/{id}"), Instant::now()) {
            tracing::warn!(%err, endpoint = %id, suppressed, "{what}");
        }
    }

    fn free_slots(&self, scope: &Scope, endpoint_id: &str) -> Free {
        let in_flight = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        let s = &self.settings;
        Free {
            total: s.in_flight_max.saturating_sub(in_flight.total),
            tenant: s.tenant_in_flight_max.saturating_sub(in_flight.per_tenant.get(scope).copied().unwrap_or(0)),
            endpoint: s.endpoint_in_flight_max.saturating_sub(in_flight.per_endpoint.get(endpoint_id).copied().unwrap_or(0)),
            slow: in_flight.is_slow(scope),
        }
    }

    fn spawn_send(&mut self, endpoint: &LoadedEndpoint, claimed: ClaimedDelivery) {
        // Opened for each send, never kept: a wrong master key fails here, loudly, and the
        // delivery stays due (its lease runs out) instead of leaving with a wrong signature.
        let secret = match endpoint.secret(&self.secrets) {
            Ok(secret) => secret.expose().to_owned(),
            Err(err) => {
                tracing::error!(%err, "cannot open a webhook signing secret; not sending");
                return;
            }
        };
        let endpoint_id = endpoint.state.endpoint_id.clone();
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).add(&endpoint.scope, &endpoint_id);
        let slot = SlotGuard {
            in_flight: self.in_flight.clone(),
            wake: self.wake.clone(),
            scope: endpoint.scope.clone(),
            endpoint_id,
            started: Instant::now(),
            slow_after: self.settings.timeout / 2,
        };
        let send = Send {
            store: self.store.clone(),
            clock: self.clock.clone(),
            sender: self.sender.clone(),
            retry: self.settings.retry,
            url: endpoint.state.url.clone(),
            secret,
            claimed,
            log: self.log.clone(),
        };
        self.tasks.spawn(async move {
            send.run().await;
            drop(slot);
        });
    }
}

/// The endpoints grouped by tenant; tenants, and endpoints within each, start at a position
/// that moves with `rotation`, so no tenant or endpoint is always served first.
fn by_tenant(endpoints: &[LoadedEndpoint], rotation: usize) -> Vec<Vec<&LoadedEndpoint>> {
    let mut groups: BTreeMap<(&str, bool), Vec<&LoadedEndpoint>> = BTreeMap::new();
    for endpoint in endpoints {
        groups.entry((endpoint.scope.organization_id.as_str(), endpoint.scope.live_mode)).or_default().push(endpoint);
    }
    let mut tenants: Vec<Vec<&LoadedEndpoint>> = groups.into_values().collect();
    for tenant in &mut tenants {
        let start = rotation % tenant.len();
        tenant.rotate_left(start);
    }
    if !tenants.is_empty() {
        let start = rotation % tenants.len();
        tenants.rotate_left(start);
    }
    tenants
}

struct Free {
    total: usize,
    tenant: usize,
    endpoint: usize,
    slow: bool,
}

/// Frees a send's slot however its task ends, and wakes the worker to fill it.
struct SlotGuard {
    in_flight: Arc<Mutex<InFlight>>,
    wake: Arc<Notify>,
    scope: Scope,
    endpoint_id: String,
    started: Instant,
    slow_after: Duration,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let slow = self.started.elapsed() >= self.slow_after;
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.scope, &self.endpoint_id, slow);
        self.wake.notify_one();
    }
}

/// One attempt of one delivery.
struct Send {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    sender: Sender,
    retry: RetryPolicy,
    url: String,
    secret: String,
    claimed: ClaimedDelivery,
    log: Arc<LogLimit>,
}

impl Send {
    async fn run(self) {
        let sent_at = self.clock.now();
        let outcome = self.sender.send(&self.url, &self.secret, &self.claimed, unix_secs(sent_at)).await;
        let d = &self.claimed.stored.delivery;
        match &outcome {
            Outcome::Delivered { status_code } => {
                tracing::debug!(delivery = %d.id, endpoint = %d.webhook_endpoint_id, status_code, "webhook delivered");
            }
            // Only the failure's word (SPEC W5), and once per window per endpoint (W4).
            Outcome::Failed(failure) => {
                if let Some(suppressed) = self.log.admit(&format!("attempt/{}", d.webhook_endpoint_id), Instant::now()) {
                    tracing::info!(delivery = %d.id, endpoint = %d.webhook_endpoint_id, %failure, attempt = d.attempts + 1, suppressed, "webhook attempt failed");
                }
            }
        }
        let at = self.clock.now();
        if let Err(err) = delivery::record(self.store.as_ref(), &self.claimed, &outcome, at, &self.retry).await
            && let Some(suppressed) = self.log.admit(&format!("record/{}", d.webhook_endpoint_id), Instant::now())
        {
            tracing::warn!(%err, delivery = %d.id, suppressed, "recording a webhook attempt failed; the lease will run out and it is sent again");
        }
    }
}

fn unix_secs(at: Timestamp) -> i64 {
    at.as_micros().div_euclid(1_000_000)
}
