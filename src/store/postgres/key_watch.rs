//! The key epoch on PostgreSQL: when an instance may trust its cached API keys (SPEC A5).
//!
//! Every key change bumps `keys_epoch` in its own transaction (with `NOTIFY payrail_keys`) and,
//! once committed, waits until every live instance has acknowledged the new epoch in
//! `key_cache_instances`, so `payrail keys revoke` returns only when no instance will accept
//! the key again. An instance keeps one connection that listens for the notification and, on
//! it or every [`HEARTBEAT`], reads the epoch, adopts it (which empties its cache), and only
//! then acknowledges it while extending its lease (`alive_until`, on the database's clock).
//! It trusts its cache only until shortly before that lease ends and while the connection is
//! up; an instance that is partitioned, paused or gone stops trusting its cache before the
//! database stops counting it as alive, so the waiting command never depends on it.
//!
//! The watch connects through the store's connector (each host of the URL in turn, each under
//! the connect timeout) and every statement on it runs under the call deadline: a hung or
//! demoted primary ends the connection (and the trust) within seconds, and the watch
//! reconnects by itself, to the next host of the URL if need be (SPEC H1, H3).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::sync::oneshot;
use tokio_postgres::{AsyncMessage, Client};

use super::connect::Connector;
use super::{db_err, within};
use crate::error::Result;

/// How often an instance renews its lease and re-reads the epoch without a notification.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// The lease an instance holds in `key_cache_instances` (database clock).
const LEASE: Duration = Duration::from_secs(5);
/// How much sooner than its lease an instance stops trusting its cache (clock drift, delays).
const MARGIN: Duration = Duration::from_secs(1);
/// The database's clock, in microseconds since the Unix epoch.
const DB_NOW: &str = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";

/// An instance's view of the epoch, shared with its lookups.
#[derive(Debug)]
pub struct KeyWatch {
    base: Instant,
    epoch: AtomicU64,
    /// Trusted until this many µs after `base`; 0 when not trusted at all.
    trusted_until_us: AtomicU64,
}

impl KeyWatch {
    fn new() -> Self {
        KeyWatch { base: Instant::now(), epoch: AtomicU64::new(0), trusted_until_us: AtomicU64::new(0) }
    }

    /// The epoch cached keys may be read under, or None when the cache must not be trusted.
    pub fn epoch(&self) -> Option<u64> {
        let now = u64::try_from(self.base.elapsed().as_micros()).unwrap_or(u64::MAX);
        (now < self.trusted_until_us.load(Ordering::SeqCst)).then(|| self.epoch.load(Ordering::SeqCst))
    }

    fn adopt(&self, epoch: u64) {
        self.epoch.store(epoch, Ordering::SeqCst);
    }

    fn trust_until(&self, until: Instant) {
        let us = u64::try_from(until.saturating_duration_since(self.base).as_micros()).unwrap_or(0);
        self.trusted_until_us.store(us, Ordering::SeqCst);
    }

    fn distrust(&self) {
        self.trusted_until_us.store(0, Ordering::SeqCst);
    }
}

/// Starts watching; the watcher stops (and withdraws the instance) when `stop` is dropped.
/// `deadline` bounds each statement on the watch's connection.
pub fn start(connector: Arc<Connector>, deadline: Duration) -> (Arc<KeyWatch>, oneshot::Sender<()>) {
    let watch = Arc::new(KeyWatch::new());
    let (stop_tx, stop_rx) = oneshot::channel();
    let link = Link { connector, deadline };
    tokio::spawn(run(link, watch.clone(), stop_rx));
    (watch, stop_tx)
}

/// How the watch reaches the database.
struct Link {
    connector: Arc<Connector>,
    deadline: Duration,
}

/// Aborts the task driving a connection when the watch lets go of it, however it does.
struct Driver(tokio::task::JoinHandle<String>);

impl Drop for Driver {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn run(link: Link, watch: Arc<KeyWatch>, mut stop: oneshot::Receiver<()>) {
    let instance = format!("inst_{}", uuid::Uuid::new_v4().simple());
    loop {
        let outcome = tokio::select! {
            outcome = watch_once(&link, &watch, &instance) => outcome,
            _ = &mut stop => None,
        };
        watch.distrust();
        match outcome {
            None => {
                let _ = tokio::time::timeout(link.deadline, withdraw(&link, &instance)).await;
                return;
            }
            Some(err) => tracing::warn!(%err, "API key cache disabled until the database is reachable again"),
        }
        tokio::select! {
            () = tokio::time::sleep(HEARTBEAT) => {}
            _ = &mut stop => return,
        }
    }
}

/// Listens and heartbeats on one connection until it fails (returns why).
async fn watch_once(link: &Link, watch: &KeyWatch, instance: &str) -> Option<String> {
    let (client, mut connection) = match link.connector.connect().await {
        Ok(pair) => pair,
        Err(err) => return Some(crate::error::chain(&err)),
    };
    let (notified_tx, mut notified) = tokio::sync::mpsc::unbounded_channel();
    let mut driver = Driver(tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(_)) => {
                    let _ = notified_tx.send(());
                }
                Ok(_) => {}
                Err(err) => return crate::error::chain(&err),
            }
        }
        "the connection closed".to_owned()
    }));
    let listen = within(link.deadline, async { client.batch_execute("LISTEN payrail_keys").await.map_err(db_err) });
    if let Err(err) = listen.await {
        return Some(crate::error::chain(&err));
    }
    loop {
        if let Err(err) = within(link.deadline, sync(&client, watch, instance)).await {
            return Some(crate::error::chain(&err));
        }
        tokio::select! {
            _ = notified.recv() => {}
            () = tokio::time::sleep(HEARTBEAT) => {}
            ended = &mut driver.0 => return Some(ended.unwrap_or_else(|err| crate::error::chain(&err))),
        }
    }
}

/// Adopts the current epoch, then acknowledges it and renews the lease, in that order: an
/// acknowledgement always follows the emptying of the cache it promises.
async fn sync(client: &Client, watch: &KeyWatch, instance: &str) -> Result<()> {
    let epoch: i64 = client.query_one("SELECT epoch FROM keys_epoch", &[]).await.map_err(db_err)?.get(0);
    watch.adopt(epoch as u64);
    let sent = Instant::now();
    let lease_us = i64::try_from(LEASE.as_micros()).unwrap_or(i64::MAX);
    client
        .execute(
            &format!(
                "INSERT INTO key_cache_instances (id, seen_epoch, alive_until) VALUES ($1, $2, {DB_NOW} + $3)
                 ON CONFLICT (id) DO UPDATE SET seen_epoch = EXCLUDED.seen_epoch, alive_until = EXCLUDED.alive_until"
            ),
            &[&instance, &epoch, &lease_us],
        )
        .await
        .map_err(db_err)?;
    // The database counts us alive until at least `sent + LEASE`; stop trusting well before.
    watch.trust_until(sent + LEASE - MARGIN);
    Ok(())
}

async fn withdraw(link: &Link, instance: &str) {
    if let Ok((client, connection)) = link.connector.connect().await {
        let driver = tokio::spawn(connection);
        let _ = client.execute("DELETE FROM key_cache_instances WHERE id = $1", &[&instance]).await;
        drop(client);
        let _ = driver.await;
    }
}

/// In a key-changing transaction: moves the epoch (and tells every instance at commit).
pub async fn bump(tx: &deadpool_postgres::Object) -> Result<i64> {
    let row = tx.query_one("UPDATE keys_epoch SET epoch = epoch + 1 RETURNING epoch", &[]).await.map_err(db_err)?;
    tx.batch_execute("NOTIFY payrail_keys").await.map_err(db_err)?;
    Ok(row.get(0))
}

/// After a key change committed: waits until no live instance can still trust a cache from
/// before `epoch` (each has acknowledged it, or its lease has run out). Each look is bounded by
/// `deadline`.
pub async fn await_acknowledged(client: &Client, epoch: i64, deadline: Duration) -> Result<()> {
    let give_up = Instant::now() + LEASE + HEARTBEAT + MARGIN;
    let sql = format!("SELECT count(*) FROM key_cache_instances WHERE seen_epoch < $1 AND alive_until > {DB_NOW}");
    loop {
        let behind: i64 = within(deadline, async { client.query_one(&sql, &[&epoch]).await.map_err(db_err) }).await?.get(0);
        if behind == 0 {
            return Ok(());
        }
        if Instant::now() > give_up {
            // Only a database clock jumping backwards gets here: leases are counted on it.
            tracing::warn!(behind, "instances did not acknowledge a key change in time");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
