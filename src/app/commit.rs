//! The commit machinery every write goes through: a handler's effects, its events and, under an
//! idempotency key, the reply that reports them commit in one transaction (SPEC I3, I8), behind
//! the request's [`CommitGate`] (a request that timed out can no longer commit) and only while
//! the request still owns its claim (I6). The idempotency layer in `http/` builds the
//! [`WriteContext`]; this module knows nothing of how it arrived. A reply that carries a secret
//! is kept sealed under the master key ([`Commit::commit_secret_reply`]); replay opens it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use super::AppState;
use crate::base::secret_box::reply_purpose;
use crate::domain::Commit;
use crate::error::Error;
use crate::store::{ClaimToken, CommitGate, StoredReply, Write, WriteBatch};

/// What a handler needs to commit its work: the gate, and where its reply is kept.
#[derive(Debug, Clone)]
pub struct WriteContext {
    pub(crate) gate: Arc<CommitGate>,
    pub(crate) reply: Option<ReplyTarget>,
    pub(crate) claim: Option<ClaimToken>,
    /// Set once the reply is committed: the claim was released with it.
    pub(crate) stored: Arc<AtomicBool>,
    /// Set when a commit's outcome is unknown: the claim must not be released, only left to
    /// its lease, so a retry cannot run while the commit may yet land (SPEC H2).
    pub(crate) claim_kept: Arc<AtomicBool>,
}

/// Where a request's reply is kept: its API key's idempotency scope (shared along a chain of
/// rolled keys, I2), its idempotency key, and the request's fingerprint for strict mode (I11).
#[derive(Debug, Clone)]
pub(crate) struct ReplyTarget {
    pub(crate) scope_id: String,
    pub(crate) key: String,
    pub(crate) fingerprint: [u8; 32],
}

impl AppState {
    /// Commits `batch` and, under an idempotency key, the reply `body` with it (I3); with
    /// `sealed`, the kept copy is sealed under the master key (a reply carrying a secret, S4).
    pub async fn commit_reply(
        &self,
        ctx: &WriteContext,
        mut batch: WriteBatch,
        status: u16,
        body: Bytes,
        sealed: bool,
    ) -> Result<(), Error> {
        if let Some(target) = &ctx.reply {
            let body = if sealed { Bytes::from(self.secrets.seal(&body, &reply_purpose(&target.scope_id, &target.key))) } else { body };
            batch.push(Write::SaveReply(self.stored_reply(target, status, body)));
        }
        batch.gate = Some(ctx.gate.clone());
        // The commit releases the claim with the reply, and only if the claim is still ours.
        batch.claim = ctx.claim.clone();
        match self.store.commit(batch).await {
            Ok(()) => {
                ctx.stored.store(true, Ordering::Release);
                Ok(())
            }
            Err(err @ Error::OutcomeUnknown { .. }) => {
                ctx.claim_kept.store(true, Ordering::Release);
                Err(err)
            }
            Err(err) => Err(err),
        }
    }

    /// The domain's way to commit, for a handler that will answer `status`.
    pub fn committer<'a>(&'a self, ctx: &'a WriteContext, status: u16) -> Committer<'a> {
        Committer { state: self, ctx, status }
    }

    fn stored_reply(&self, target: &ReplyTarget, status: u16, body: Bytes) -> StoredReply {
        let now = self.clock.now();
        StoredReply {
            api_key_id: target.scope_id.clone(),
            key: target.key.clone(),
            status,
            content_type: "application/json".into(),
            body,
            fingerprint: target.fingerprint,
            created_at: now,
            expires_at: now.plus_secs(self.config.idempotency_ttl_secs),
        }
    }
}

/// Commits domain batches with the reply that will report them.
pub struct Committer<'a> {
    state: &'a AppState,
    ctx: &'a WriteContext,
    status: u16,
}

#[async_trait::async_trait]
impl Commit for Committer<'_> {
    async fn commit(&self, batch: WriteBatch, reply_json: &str) -> Result<(), Error> {
        let body = Bytes::copy_from_slice(reply_json.as_bytes());
        self.state.commit_reply(self.ctx, batch, self.status, body, false).await
    }

    async fn commit_secret_reply(&self, batch: WriteBatch, reply_json: &str) -> Result<(), Error> {
        let body = Bytes::copy_from_slice(reply_json.as_bytes());
        self.state.commit_reply(self.ctx, batch, self.status, body, true).await
    }
}
