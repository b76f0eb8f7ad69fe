//! Storage: the one trait every backend implements, and the types that cross it.
//!
//! Resources are stored as documents (`doc`, the JSON the API returns) with a few indexed
//! `terms` (name/value pairs the domain chooses) for filtering, so every resource lists through
//! one query shape and the store knows nothing of payment semantics. A change is a
//! [`WriteBatch`]: inserts, replacements guarded by a version, deletions, preconditions, and the
//! idempotent reply, applied atomically and durably, or not at all (SPEC I3, I8, E4, S3).

/// The kind of the outbox's documents, as a literal: the PostgreSQL store writes it into its
/// outbox statement so that the plan can use the index that covers that kind alone.
macro_rules! outbox_kind {
    () => {
        "event"
    };
}

pub mod key_cache;
pub mod layout;
pub mod ledger;
pub mod postgres;
pub mod reply_cache;
pub mod sql;
pub mod sqlite;

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use crate::base::api_key::{ApiKey, KeyHash, KeyHasher, Scope};
use crate::base::ledger::{Totals, Window};
use crate::base::time::Timestamp;
use crate::error::{Error, Result};

/// The one kind kept in commit order for the outbox read ([`Store::outbox_after`]): events,
/// which webhooks deliver (SPEC E4, W2).
pub const OUTBOX_KIND: &str = outbox_kind!();

/// A key found by its hash, and that hash (to compare in constant time).
pub type FoundKey = (Arc<ApiKey>, KeyHash);

/// A name/value pair a document is found by (`name`, `metadata.<key>`, `counterparty_id`...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub name: String,
    pub value: String,
}

impl Term {
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Term { name: name.into(), value: value.into() }
    }
}

/// One resource as written.
#[derive(Debug, Clone)]
pub struct ObjectRecord {
    pub id: String,
    pub kind: &'static str,
    pub scope: Scope,
    /// The owning resource (an external account's counterparty), for cascades and embedding.
    pub parent_id: Option<String>,
    pub created_at: Timestamp,
    pub doc: String,
    pub terms: Vec<Term>,
}

/// One resource as read back.
#[derive(Debug, Clone)]
pub struct StoredObject {
    pub id: String,
    pub parent_id: Option<String>,
    pub version: i64,
    pub doc: String,
}

/// A reply kept for replay under an idempotency key (SPEC I3, I4).
#[derive(Debug, Clone)]
pub struct StoredReply {
    /// The API key's idempotency scope (`ApiKey::idempotency_scope`: the key's own id unless it
    /// was made by a roll, I2). Named, and stored in a column named, for what it was before.
    pub api_key_id: String,
    pub key: String,
    pub status: u16,
    pub content_type: String,
    pub body: Bytes,
    /// SHA-256 of method, path and body, for strict mode (SPEC I11).
    pub fingerprint: [u8; 32],
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
}

/// One change inside a batch.
#[derive(Debug, Clone)]
pub enum Write {
    Insert(ObjectRecord),
    /// Replace a document if nobody changed it since `expected_version` was read.
    Replace {
        record: ObjectRecord,
        expected_version: i64,
    },
    Delete {
        kind: &'static str,
        scope: Scope,
        id: String,
    },
    /// Deletes every object of `kind` whose parent is `parent_id` (a cascade).
    DeleteChildren {
        kind: &'static str,
        scope: Scope,
        parent_id: String,
    },
    /// Fails the batch with a 422 naming `parameter` unless the object exists in `scope`.
    Require {
        kind: &'static str,
        scope: Scope,
        id: String,
        parameter: String,
    },
    /// Fails the batch with a 422 naming `parameter` (saying `message`) if `scope` already holds
    /// `max` objects of `kind`. Put it before the batch's own inserts of `kind`. Batches holding
    /// the same cap are serialised by the store, so concurrent ones never pass it together
    /// (SQLite: one writer; PostgreSQL: a transaction advisory lock per kind and scope).
    Cap {
        kind: &'static str,
        scope: Scope,
        max: usize,
        parameter: String,
        message: String,
    },
    /// Takes `key` in the store's set of unique keys (an `external_id` within its ledger); a key
    /// already taken fails the batch with a 422 naming `parameter`. Racing batches cannot both
    /// take it: the set is a primary key on both stores.
    Unique {
        key: String,
        parameter: String,
        message: String,
    },
    /// Gives a unique key back (an archived transaction's `external_id`).
    ReleaseUnique {
        key: String,
    },
    /// Takes or renews the lease `name` for `holder` until `until`: granted when nobody holds
    /// it, when `holder` already does, or when the holder's lease ended before `now`; otherwise
    /// the batch fails with a 409 naming `lease`. One row per name on both stores, so racing
    /// batches cannot both be granted it. Put in a batch, it also fences that batch: a worker
    /// whose lease was taken over (it stalled past `until`) can no longer commit under it.
    Lease {
        name: String,
        holder: String,
        now: Timestamp,
        until: Timestamp,
    },
    /// Gives the lease `name` back if `holder` still holds it (nothing otherwise).
    Unlease {
        name: String,
        holder: String,
    },
    /// Starts a ledger account's sums and version at zero.
    LedgerOpen {
        account_id: String,
        credit_normal: bool,
    },
    /// Writes ledger entries into their accounts' sums, if every guard holds after them; else
    /// the batch fails (409 for a stale lock version, 422 for a balance condition). SPEC G2-G6.
    LedgerPost {
        lines: Vec<ledger::LedgerLine>,
        guards: Vec<ledger::AccountGuard>,
    },
    /// Moves pending entries to posted (`post`) or archived; fails the batch with a 409 if one is
    /// no longer pending.
    LedgerSettle {
        lines: Vec<ledger::LedgerLine>,
        post: bool,
    },
    /// Marks the entries a settlement takes as settled by it (see [`ledger::Claim`]).
    LedgerClaim(ledger::Claim),
    /// Gives back every entry `settlement_id` took on `account_id` (an archived settlement).
    LedgerUnclaim {
        account_id: String,
        settlement_id: String,
    },
    InsertApiKey {
        key: ApiKey,
        hash: KeyHash,
    },
    UpdateApiKey(ApiKey),
    SaveReply(StoredReply),
    /// Deletes these replies if they are still expired at `before` (SPEC I10).
    PurgeReplies {
        keys: Vec<(String, String)>,
        before: Timestamp,
    },
}

/// Writes applied together: all of them durably, or none.
#[derive(Debug, Default)]
pub struct WriteBatch {
    pub writes: Vec<Write>,
    /// When set, the batch runs only if the gate is still open when its turn comes.
    pub gate: Option<Arc<CommitGate>>,
    /// The idempotency claim the request holds. The commit releases it atomically with the
    /// effects, and is refused if the claim is no longer this request's (lost to an expired
    /// lease, or to a database crash on PostgreSQL): only the key's owner ever commits (I6, I8).
    pub claim: Option<ClaimToken>,
}

impl WriteBatch {
    pub fn new() -> Self {
        WriteBatch::default()
    }

    pub fn push(&mut self, write: Write) -> &mut Self {
        self.writes.push(write);
        self
    }

    /// Whether the batch creates or changes an API key (caches of keys must hear of it).
    pub fn changes_keys(&self) -> bool {
        self.writes.iter().any(|w| matches!(w, Write::InsertApiKey { .. } | Write::UpdateApiKey(_)))
    }
}

/// Decides, exactly once, whether a unit of work commits or is abandoned.
///
/// A request that timed out or whose client went away abandons its gate; a batch whose gate is
/// abandoned is refused, and a gate whose batch started committing can no longer be abandoned,
/// so a client never sees a failure for a write that happened (SPEC I5).
#[derive(Debug, Default)]
pub struct CommitGate(AtomicU8);

const GATE_OPEN: u8 = 0;
const GATE_COMMITTING: u8 = 1;
const GATE_ABANDONED: u8 = 2;

impl CommitGate {
    /// True if the work may commit; from then on it cannot be abandoned.
    pub fn begin_commit(&self) -> bool {
        match self.0.compare_exchange(GATE_OPEN, GATE_COMMITTING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(state) => state == GATE_COMMITTING,
        }
    }

    /// True if the work was abandoned; false if it is already committing.
    pub fn abandon(&self) -> bool {
        match self.0.compare_exchange(GATE_OPEN, GATE_ABANDONED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(state) => state == GATE_ABANDONED,
        }
    }
}

/// How a list is narrowed. All filters are ANDed (SPEC L2).
#[derive(Debug, Clone)]
pub enum Filter {
    Eq {
        name: String,
        value: String,
    },
    /// Case-insensitive substring; the domain stores and passes lower-cased values.
    Contains {
        name: String,
        needle: String,
    },
    /// Term value at least / at most (string order: dates and RFC 3339 sort as they should).
    AtLeast {
        name: String,
        value: String,
    },
    AtMost {
        name: String,
        value: String,
    },
    CreatedFrom(Timestamp),
    CreatedTo(Timestamp),
    /// The object's id is one of these (`id[]=...`); an empty list matches nothing.
    IdIn(Vec<String>),
    /// The object's parent is this one (a transaction's entries or versions): found by the
    /// parent index, with no search term written for it.
    Parent(String),
    /// The term's value is one of these (`status[]=...`); an empty list matches nothing.
    AnyOf {
        name: String,
        values: Vec<String>,
    },
    /// The term's value is one of these keys, each of which names few objects (reference
    /// numbers): the store finds the objects from the keys instead of testing every object of
    /// the kind against the list, which is what a long list of keys needs (SQLite tested each
    /// object against each key). Not for values many objects share (a status): use `AnyOf`.
    Keys {
        name: String,
        values: Vec<String>,
    },
    /// Ledger entries a settlement took (`of_parent`: the transactions holding such entries).
    SettledBy {
        settlement_id: String,
        of_parent: bool,
    },
    /// Ledger entries by their posting row (storage layout level 3): an entry's direction,
    /// status and effective time are columns of `ledger_postings`, no longer search terms.
    /// `of_parent`: the transactions with such an entry (every entry of a transaction shares
    /// its status and effective time).
    Posting {
        filter: PostingFilter,
        of_parent: bool,
    },
}

impl Filter {
    /// Whether a value the filter names holds a NUL (see [`Filter::without_nul`]).
    pub fn names_a_nul(&self) -> bool {
        let nul = |s: &String| s.contains('\0');
        match self {
            Filter::Eq { name, value } | Filter::AtLeast { name, value } | Filter::AtMost { name, value } => nul(name) || nul(value),
            Filter::Contains { name, needle } => nul(name) || nul(needle),
            Filter::Parent(id) | Filter::SettledBy { settlement_id: id, .. } => nul(id),
            Filter::Posting { filter, .. } => filter.account_id.as_ref().is_some_and(nul),
            Filter::IdIn(values) => values.iter().any(nul),
            Filter::AnyOf { name, values } | Filter::Keys { name, values } => nul(name) || values.iter().any(nul),
            Filter::CreatedFrom(_) | Filter::CreatedTo(_) => false,
        }
    }

    /// The filter without the values that hold a NUL, which no stored text does (PostgreSQL's
    /// text refuses one outright), or None when it can then match nothing.
    pub fn without_nul(self) -> Option<Filter> {
        let nul = |s: &str| s.contains('\0');
        let keep = |values: Vec<String>| values.into_iter().filter(|v| !nul(v)).collect::<Vec<_>>();
        match self {
            Filter::Eq { ref name, ref value } | Filter::AtLeast { ref name, ref value } | Filter::AtMost { ref name, ref value }
                if nul(name) || nul(value) =>
            {
                None
            }
            Filter::Contains { ref name, ref needle } if nul(name) || nul(needle) => None,
            Filter::Parent(ref id) if nul(id) => None,
            Filter::SettledBy { ref settlement_id, .. } if nul(settlement_id) => None,
            Filter::Posting { ref filter, .. } if filter.account_id.as_deref().is_some_and(nul) => None,
            Filter::AnyOf { ref name, .. } | Filter::Keys { ref name, .. } if nul(name) => None,
            Filter::IdIn(ids) => Some(Filter::IdIn(keep(ids))),
            Filter::AnyOf { name, values } => Some(Filter::AnyOf { name, values: keep(values) }),
            Filter::Keys { name, values } => Some(Filter::Keys { name, values: keep(values) }),
            other => Some(other),
        }
    }
}

/// What [`Filter::Posting`] asks of an entry's posting row; every field given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PostingFilter {
    /// The entry's account (the list's `ledger_account_id`, which its term also answers):
    /// lets the planner start from the account's postings when the other conditions are rare.
    pub account_id: Option<String>,
    pub debit: Option<bool>,
    /// One of these `ledger::STATUS_*` codes; an empty list matches nothing.
    pub statuses: Option<Vec<i16>>,
    /// Effective at or after / at or before (microseconds since the epoch).
    pub effective_from: Option<i64>,
    pub effective_to: Option<i64>,
    /// Written at or before this version of its account (a statement's entries: those its
    /// balances were made from).
    pub version_max: Option<i64>,
}

/// A page request: newest first, strictly older than `after_seq`.
#[derive(Debug, Clone)]
pub struct ListQuery {
    pub kind: &'static str,
    pub scope: Scope,
    pub filters: Vec<Filter>,
    pub after_seq: Option<i64>,
    pub limit: usize,
}

/// A page and the position of its last item, when more items follow.
#[derive(Debug, Clone)]
pub struct Page {
    pub items: Vec<StoredObject>,
    pub next_seq: Option<i64>,
}

/// The answer to an idempotency claim (SPEC I4, I6).
#[derive(Debug)]
pub enum Claim {
    /// The caller owns the key until it releases the token.
    Acquired(ClaimToken),
    /// Another request with the key is being processed.
    InFlight,
    /// A success was stored: replay it.
    Replay(StoredReply),
}

/// Proof of ownership of `(api_key_id, key)` while a request is in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimToken {
    /// The idempotency scope the key is claimed in (as [`StoredReply::api_key_id`]).
    pub api_key_id: String,
    pub key: String,
    pub nonce: u64,
}

/// [`Store::bulk_chunk`] of a store with concurrent writers.
pub const BULK_CHUNK_DEFAULT: usize = 500;

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Applies the batch atomically and durably (on disk before this returns Ok).
    async fn commit(&self, batch: WriteBatch) -> Result<()>;

    /// Items (orders) a worker's bulk job writes per commit when it may choose. On a store with
    /// one writer every API write waits for the bulk commit in progress, so small chunks keep
    /// API latency down; stores with concurrent writers prefer fewer, larger commits.
    fn bulk_chunk(&self) -> usize {
        BULK_CHUNK_DEFAULT
    }

    /// Bulk commits (each under its own version guards) a worker may have in flight at once:
    /// independent ones (a cut-off's `sent` parts) or each prepared on the one before it (its
    /// claims, which land in order or fail together). One on a store with one writer: a second
    /// would only queue behind the first, and API writes behind both.
    fn bulk_in_flight(&self) -> usize {
        1
    }

    async fn get(&self, kind: &'static str, scope: &Scope, id: &str) -> Result<Option<StoredObject>>;

    async fn list(&self, query: &ListQuery) -> Result<Page>;

    /// Objects of `kind` whose parent is one of `parent_ids`, oldest first.
    async fn children(&self, kind: &'static str, scope: &Scope, parent_ids: &[String]) -> Result<Vec<StoredObject>>;

    /// The current sums and version of each of `account_ids` that exists.
    async fn ledger_accounts(&self, account_ids: &[String]) -> Result<Vec<(String, ledger::AccountState)>>;

    /// The sums of one account's live entries within `window` (SPEC G5): exact at any instant,
    /// whatever was backdated.
    async fn ledger_window(&self, account_id: &str, window: &Window) -> Result<Totals>;

    /// The posted entries of `account_id` no settlement has taken, effective before
    /// `before_micros` and written at or before `upto_version`: how many, and their sums.
    async fn ledger_unsettled(&self, account_id: &str, before_micros: i64, upto_version: i64) -> Result<ledger::Claimed>;

    /// The account version each of `entry_ids` was written at (for the balances it resulted in).
    async fn ledger_entry_versions(&self, entry_ids: &[String]) -> Result<Vec<(String, i64)>>;

    /// Readies what serving needs and the command line does not (run once, before serving).
    async fn prepare_to_serve(&self) {}

    /// Ok when the store can take writes now (`/healthz`, SPEC H3), answered within about
    /// `deadline`. The default reads; PostgreSQL also checks it is on a writable primary.
    async fn health(&self, _deadline: std::time::Duration) -> Result<()> {
        self.api_key("healthz-probe").await.map(|_| ())
    }

    /// The key stored under `hash`, with that hash. Shared: most lookups are answered from
    /// memory, and a request should not copy its key.
    async fn api_key_by_hash(&self, hash: &KeyHash) -> Result<Option<FoundKey>>;

    async fn api_key(&self, id: &str) -> Result<Option<ApiKey>>;

    async fn api_keys(&self) -> Result<Vec<ApiKey>>;

    fn key_hasher(&self) -> &KeyHasher;

    /// Claims `(api_key_id, key)`, `api_key_id` being the API key's idempotency scope: replays a stored success, refuses while another request holds
    /// it, or grants it for `lease_ms` (after which a crashed owner no longer blocks it, I8).
    async fn claim(&self, api_key_id: &str, key: &str, now: Timestamp, lease_ms: u64) -> Result<Claim>;

    /// Extends a claim the caller still owns to `now + lease_ms`; false if it no longer owns it.
    /// The owner renews while it works, so a short lease frees a crashed owner's keys quickly
    /// without ever overtaking a live request (I8).
    async fn renew(&self, token: &ClaimToken, now: Timestamp, lease_ms: u64) -> Result<bool>;

    /// Gives a claim back. Releasing a token that no longer owns the key does nothing.
    async fn release(&self, token: &ClaimToken);

    /// Objects of `kind`, in every tenant, whose term `term` is at most `upto`, lowest first:
    /// how background work (the sandbox bank) finds what is due.
    async fn scan_due(&self, kind: &'static str, term: &str, upto: &str, limit: usize) -> Result<Vec<(Scope, StoredObject)>>;

    /// Objects of `kind`, in every tenant, whose term `term` is greater than `after`, lowest
    /// first: how background work walks every object of a kind (give each a unique term).
    async fn scan_terms(&self, kind: &'static str, term: &str, after: &str, limit: usize) -> Result<Vec<(Scope, StoredObject)>>;

    /// Deletes up to `batch_max` replies that expired before `now`; returns how many (I10).
    async fn purge_replies(&self, now: Timestamp, batch_max: usize) -> Result<usize>;

    /// The unexpired replies whose body is sealed (they carry a secret, S4): what a master key
    /// rewrap re-seals, so that retiring the old key never breaks a replay. They are few (a
    /// webhook endpoint's creation), and this is an operator's command, so a scan is fine.
    async fn sealed_replies(&self, now: Timestamp) -> Result<Vec<StoredReply>>;

    /// Replaces a stored reply's body if it is still `old` (compare-and-set); false if it was not.
    async fn replace_reply_body(&self, api_key_id: &str, key: &str, old: &[u8], new: &[u8]) -> Result<bool>;

    /// The outbox read (SPEC E4, W2): objects of [`OUTBOX_KIND`] in `scope` past position `after`,
    /// oldest first, at most `limit`, each with its position. Positions are opaque, store-defined
    /// and increasing; the caller only keeps the last one as its cursor.
    ///
    /// The answer is a gap-free prefix in commit order: once a position has been returned, no
    /// object with a smaller position may become visible later, or a cursor past it would skip
    /// it. SQLite has one writer, so its `seq` is commit order. PostgreSQL allocates sequence
    /// values before commit, so there the position is (transaction id, rank in transaction) and
    /// only transactions older than every transaction still running are returned.
    async fn outbox_after(&self, scope: &Scope, after: i64, limit: usize) -> Result<Vec<(i64, StoredObject)>>;

    /// A position at or after every outbox object in `scope` committed so far: where a new
    /// outbox cursor starts, so that it is sent only what commits later.
    async fn outbox_newest(&self, scope: &Scope) -> Result<i64>;

    /// The raw value of a `settings` row (the store keeps bytes; what they mean is not its
    /// business: the key pepper is sealed by the caller).
    async fn setting(&self, name: &str) -> Result<Option<Vec<u8>>>;

    /// Replaces a setting's value if it is still `old` (compare-and-set); false if it was not.
    async fn replace_setting(&self, name: &str, old: &[u8], new: &[u8]) -> Result<bool>;
}

/// Wraps a backend failure as a 500 that reveals nothing.
/// A commit refused because its request no longer holds its idempotency claim: nothing was
/// carried out, and a retry either replays the new owner's reply or runs afresh.
pub(crate) fn claim_lost() -> Error {
    Error::Conflict {
        message: "This request lost its Idempotency-Key claim before it could commit; nothing was carried out. Retry.".into(),
        parameter: Some("Idempotency-Key".into()),
        retry_after_s: Some(1),
    }
}

/// A commit refused because another holder has the lease it asked for (`Write::Lease`).
pub(crate) fn lease_held(name: &str) -> Error {
    Error::Conflict {
        message: format!("the lease {name} is held by another worker"),
        parameter: Some("lease".into()),
        retry_after_s: Some(1),
    }
}

/// A commit refused because its request was abandoned (timed out, or its client left) before
/// its turn came: nothing was carried out.
pub(crate) fn abandoned() -> Error {
    Error::Unavailable { message: "the request was abandoned before it committed".into(), retry_after_s: 1 }
}

pub(crate) fn backend_error<E: std::error::Error>(context: &str, err: E) -> Error {
    Error::Internal(format!("{context}: {}", crate::error::chain(&err)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l3_a_filter_value_holding_a_nul_matches_nothing_and_a_list_keeps_its_other_values() {
        let eq = |value: &str| Filter::Eq { name: "status".into(), value: value.into() };
        assert!(eq("a\0b").without_nul().is_none());
        assert!(matches!(eq("ab").without_nul(), Some(Filter::Eq { value, .. }) if value == "ab"));
        assert!(Filter::Parent("p\0".into()).without_nul().is_none());
        let ids = Filter::IdIn(vec!["x\0".into(), "y".into()]).without_nul();
        assert!(matches!(ids, Some(Filter::IdIn(ids)) if ids == ["y"]));
        assert!(Filter::IdIn(vec!["x\0".into()]).names_a_nul() && !eq("ab").names_a_nul());
        let keys = Filter::Keys { name: "trace".into(), values: vec!["\0".into()] }.without_nul();
        assert!(matches!(keys, Some(Filter::Keys { values, .. }) if values.is_empty()), "an empty list matches nothing");
    }
}
