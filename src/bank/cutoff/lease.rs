//! One cut-off of a connection at a time, whatever processes share the database (servers on
//! PostgreSQL, a server and the command line beside it on SQLite): the run holds the store's
//! lease `bank_cutoff/<connection id>` (`Write::Lease`), renews it while it works, and puts it
//! in every batch it commits as a fence, so a run that stalled past its lease (and was
//! overtaken) can no longer change anything. A run killed with the lease held frees it when the
//! lease runs out ([`LEASE_MS`]).
//!
//! Leases run on the wall clock, never a test's shifted clock: they are compared between
//! processes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::base::time::{Clock, SystemClock, Timestamp};
use crate::error::{Error, Result};
use crate::store::{Store, Write, WriteBatch};

/// How long a lease lasts without renewal: how long a killed run blocks the next one.
pub const LEASE_MS: i64 = 15_000;
/// How often a run renews its lease while it works.
const RENEW_EVERY: Duration = Duration::from_secs(4);

/// A held lease, renewed in the background until released or dropped.
pub struct Lease {
    store: Arc<dyn Store>,
    name: String,
    holder: String,
    lost: Arc<AtomicBool>,
    renewer: JoinHandle<()>,
}

fn now() -> Timestamp {
    SystemClock.now()
}

fn write(name: &str, holder: &str) -> Write {
    let now = now();
    Write::Lease { name: name.to_owned(), holder: holder.to_owned(), now, until: now.plus_micros(LEASE_MS * 1000) }
}

/// The lease name of a connection's cut-offs.
pub fn name_of(connection_id: &str) -> String {
    format!("bank_cutoff/{connection_id}")
}

/// Whether `err` says another holder has the lease.
pub fn is_held_elsewhere(err: &Error) -> bool {
    matches!(err, Error::Conflict { parameter: Some(p), .. } if p == "lease")
}

impl Lease {
    /// Takes the lease for a new holder; `Ok(None)` when another holder has it.
    pub async fn try_take(store: Arc<dyn Store>, name: &str) -> Result<Option<Lease>> {
        let holder = format!("{}:{}", std::process::id(), crate::domain::common::new_id());
        let mut batch = WriteBatch::new();
        batch.push(write(name, &holder));
        match store.commit(batch).await {
            Ok(()) => {}
            Err(err) if is_held_elsewhere(&err) => return Ok(None),
            Err(err) => return Err(err),
        }
        let lost = Arc::new(AtomicBool::new(false));
        let renewer = tokio::spawn(renew(store.clone(), name.to_owned(), holder.clone(), lost.clone()));
        Ok(Some(Lease { store, name: name.to_owned(), holder, lost, renewer }))
    }

    /// Takes the lease, waiting up to `wait` for another holder to finish (or its lease to run out).
    pub async fn take(store: Arc<dyn Store>, name: &str, wait: Duration) -> Result<Option<Lease>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(lease) = Self::try_take(store.clone(), name).await? {
                return Ok(Some(lease));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The fence for a batch committed under this lease (it also renews it).
    pub fn fence(&self) -> Write {
        write(&self.name, &self.holder)
    }

    /// An error once a renewal found the lease taken over: the run must stop.
    pub fn check(&self) -> Result<()> {
        if self.lost.load(Ordering::Acquire) {
            return Err(Error::Conflict {
                message: format!("the lease {} was lost to another worker; this run stopped", self.name),
                parameter: Some("lease".into()),
                retry_after_s: Some(1),
            });
        }
        Ok(())
    }

    /// Gives the lease back.
    pub async fn release(self) {
        self.renewer.abort();
        let mut batch = WriteBatch::new();
        batch.push(Write::Unlease { name: self.name.clone(), holder: self.holder.clone() });
        if let Err(err) = self.store.commit(batch).await {
            tracing::warn!(lease = %self.name, error = %err, "could not give a lease back; it runs out by itself");
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

async fn renew(store: Arc<dyn Store>, name: String, holder: String, lost: Arc<AtomicBool>) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let mut batch = WriteBatch::new();
        batch.push(write(&name, &holder));
        match store.commit(batch).await {
            Ok(()) => {}
            Err(err) if is_held_elsewhere(&err) => {
                tracing::error!(lease = %name, "a cut-off lost its lease to another worker; stopping it");
                lost.store(true, Ordering::Release);
                return;
            }
            // A failed renewal is retried; the fence in every batch still guards the run.
            Err(err) => tracing::warn!(lease = %name, error = %err, "renewing a lease failed; retrying"),
        }
    }
}
