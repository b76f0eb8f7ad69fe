//! The domain: resource types, their rules, and the operations on them. It knows the store
//! trait and JSON (the wire format is the resource's own shape), never HTTP or SQL.

// Value types the store shares, defined below both (`crate::base`); named here too, where the
// domain's readers look for them.
pub use crate::base::{api_key, secret_box, time};

pub mod balance_report;
pub mod bank_answer;
pub mod bank_id;
pub mod common;
pub mod connection;
pub mod correction;
pub mod counterparty;
pub mod enums;
pub mod event;
pub mod expected_payment;
pub mod external_account;
pub mod id;
pub mod incoming_payment_detail;
pub mod internal_account;
pub mod keys;
pub mod kinds;
pub mod ledger;
pub mod listing;
pub mod money;
pub mod payment_order;
pub mod returns;
pub mod schema;
pub mod transaction;
pub mod validate;
pub mod webhook;
pub mod webhook_delivery;
pub mod webhook_url;

use async_trait::async_trait;

use crate::error::Result;
use crate::store::{Store, StoredObject, WriteBatch};
use api_key::Scope;
use time::Timestamp;

/// Commits a batch together with the reply that reports it (the HTTP layer stores that reply
/// for idempotent replay in the same transaction, SPEC I3).
#[async_trait]
pub trait Commit: Send + Sync {
    async fn commit(&self, batch: WriteBatch, reply_json: &str) -> Result<()>;

    /// Like [`commit`](Self::commit), for a reply that carries a secret (a webhook endpoint's
    /// 201): the copy kept for replay is sealed under the master key (SPEC S4). Only such
    /// replies pay for sealing.
    async fn commit_secret_reply(&self, batch: WriteBatch, reply_json: &str) -> Result<()> {
        self.commit(batch, reply_json).await
    }
}

/// What an operation acts with: the store, the master key ring, the caller's tenant, and the
/// time it runs at.
pub struct Ctx<'a> {
    pub store: &'a dyn Store,
    /// The rails' creation-time rules (SPEC B3), where the application wired them in.
    pub rails: Option<&'a dyn payment_order::rails::RailRules>,
    /// Seals and opens secrets at rest (webhook signing secrets).
    pub secrets: &'a secret_box::SecretBox,
    pub scope: &'a Scope,
    pub now: Timestamp,
}

/// Reads the `kind` document `id` that a request refers to, and makes the batch fail if it is
/// gone by commit time. An id the caller's organization and mode cannot see is a 422 naming
/// `param` (SPEC E2), never a 404: the request is what is wrong.
pub async fn require(ctx: &Ctx<'_>, batch: &mut WriteBatch, kind: &'static str, id: &str, param: &str) -> Result<StoredObject> {
    let noun = kind.replace('_', " ");
    let not_found = || crate::error::Error::invalid(param, format!("{param} does not name an existing {noun}"));
    let stored = ctx.store.get(kind, ctx.scope, id).await?.ok_or_else(not_found)?;
    batch.push(crate::store::Write::Require { kind, scope: ctx.scope.clone(), id: id.to_owned(), parameter: param.to_owned() });
    Ok(stored)
}

/// How many times an update re-reads and re-applies after losing a race to another writer.
pub const UPDATE_ATTEMPTS_MAX: u32 = 32;
/// Cap of the random pause between attempts, so racing writers spread out.
const UPDATE_BACKOFF_MAX_US: u64 = 8_000;

/// Runs `attempt` again when it lost an optimistic-concurrency race (a version conflict),
/// after a short random pause; past the limit the conflict reaches the client as a 409.
/// Whether `after` differs from `before` in nothing but the `updated_at` that `stamp` reaches:
/// a PATCH that changes nothing answers the resource as it is and writes no event (SPEC E4).
pub fn unchanged<T: serde::Serialize + Clone>(before: &T, after: &T, stamp: impl Fn(&mut T) -> &mut Timestamp) -> bool {
    let mut after = after.clone();
    *stamp(&mut after) = *stamp(&mut before.clone());
    matches!((serde_json::to_value(&after), serde_json::to_value(before)), (Ok(a), Ok(b)) if a == b)
}

pub async fn retry_on_conflict<T, F, Fut>(mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        match attempt().await {
            Err(crate::error::Error::Conflict { parameter: None, .. }) if tries < UPDATE_ATTEMPTS_MAX => {
                let ceiling_us = (250u64 << tries.min(5)).min(UPDATE_BACKOFF_MAX_US);
                let pause_us = rand::Rng::random_range(&mut rand::rng(), 0..ceiling_us);
                tokio::time::sleep(std::time::Duration::from_micros(pause_us)).await;
            }
            other => return other,
        }
    }
}
