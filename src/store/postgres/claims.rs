//! Idempotency claims on PostgreSQL, taken for many concurrent requests in one round trip.
//!
//! A claim is two statements: take the key (or find its stored reply), then look again for a
//! reply in a snapshot taken after the key was taken, since the previous owner may have
//! committed one as it let go (SPEC I4, I8). Each is its own transaction, and on a small machine
//! PostgreSQL's cost is per statement: claimed one by one, claims cost more than the writes they
//! guard. So claims wait here, and a few claimer tasks each take whatever is waiting and send
//! the two statements for the whole group in one pipeline; PostgreSQL runs the second after the
//! first has committed, as before. Each request still gets its own answer: stored replies
//! replay, free keys (or keys whose owner's lease ran out) are taken, held keys are in flight.
//!
//! Keys are taken in one global order (sorted) so concurrent groups cannot deadlock on them,
//! and a key appears at most once per group (a second request with it waits for the next group).
//! A group whose statement fails anyway (say a deadlock with a commit releasing keys that are
//! in flight twice) is claimed again request by request, so a collision is answered only to the
//! requests it concerns.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use deadpool_postgres::Object;
use futures_util::future::join_all;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::{Db, db_err, queue, within};
use crate::base::time::Timestamp;
use crate::error::{Error, Result};
use crate::store::{Claim, ClaimToken, StoredReply};

/// Claims in one group at most.
const GROUP_MAX: usize = 128;
/// Claimer tasks: while one group is in the database, the next is being gathered.
const CLAIMERS: usize = 2;

/// One request's claim, as the claimers take it.
pub struct Request {
    pub api_key_id: String,
    pub key: String,
    pub nonce: i64,
    pub lease_until: Timestamp,
    pub now: Timestamp,
}

type Job = queue::Job<Request, Claim>;
pub type Queue = queue::Queue<Request, Claim>;

/// Starts the claimers; they stop when the queue's last sender is dropped.
pub fn start(db: Db) -> Queue {
    let (tx, jobs) = queue::channel();
    for _ in 0..CLAIMERS {
        tokio::spawn(claimer(db.clone(), jobs.clone()));
    }
    tx
}

/// Claims `request`'s key. If the caller is dropped before it has read the answer (its client
/// hung up), the key is given back: the claim may have been taken, even delivered, with nobody
/// left to free it before its lease ran out (I5). Release is by nonce, so a claim never taken,
/// or taken by another request since, is left alone.
pub async fn submit(db: &Db, queue: &Queue, request: Request) -> Result<Claim> {
    let mut unread = Unread { db: db.clone(), held: Some(Held::of(&request)) };
    let claim = queue::submit(queue, request, "claimer").await;
    unread.held = None;
    claim
}

/// A key as one request claims it: what a release names. By nonce, so a claim of the key
/// another request holds is left alone.
struct Held {
    api_key_id: String,
    key: String,
    nonce: i64,
}

impl Held {
    fn of(request: &Request) -> Held {
        Held { api_key_id: request.api_key_id.clone(), key: request.key.clone(), nonce: request.nonce }
    }
}

/// The claim of a caller still waiting for its answer; see [`submit`].
struct Unread {
    db: Db,
    held: Option<Held>,
}

impl Drop for Unread {
    fn drop(&mut self) {
        let Some(held) = self.held.take() else { return };
        let db = self.db.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { give_back(&db, &[held]).await });
        }
    }
}

async fn claimer(db: Db, jobs: queue::Jobs<Request, Claim>) {
    // Second requests for a key already in a group, kept for this claimer's next group.
    let mut deferred: Vec<Job> = Vec::new();
    loop {
        let mut group = std::mem::take(&mut deferred);
        if !queue::gather(&jobs, &mut group, GROUP_MAX).await {
            return;
        }
        // Sorted (stable: repeats keep their order of arrival), then each key once.
        group.sort_by(|a, b| key_of(a).cmp(&key_of(b)));
        let mut distinct: Vec<Job> = Vec::with_capacity(group.len());
        for job in group {
            match distinct.last() {
                Some(previous) if key_of(previous) == key_of(&job) => deferred.push(job),
                _ => distinct.push(job),
            }
        }
        claim_group(&db, distinct).await;
    }
}

fn key_of(job: &Job) -> (&str, &str) {
    (&job.item.api_key_id, &job.item.key)
}

/// Claims `group`'s keys (sorted, each once) and answers each request.
async fn claim_group(db: &Db, mut group: Vec<Job>) {
    let requests: Vec<&Request> = group.iter().map(|job| &job.item).collect();
    let mut undelivered = Vec::new();
    match claim_together(db, &requests).await {
        Ok(claims) => {
            for (job, claim) in group.into_iter().zip(claims) {
                undelivered.extend(answer(job, Ok(claim)));
            }
        }
        Err(err) if group.len() == 1 => {
            if let Some(job) = group.pop() {
                let _ = job.done.send(Err(err));
            }
        }
        // The database is out of reach (or hung, or read-only): claiming alone would fail as well.
        Err(Error::Unavailable { message, retry_after_s }) => {
            for job in group {
                let _ = job.done.send(Err(Error::Unavailable { message: message.clone(), retry_after_s }));
            }
        }
        Err(err) => {
            tracing::debug!(error = %crate::error::chain(&err), "a group claim failed; claiming its keys one by one");
            let alone = join_all(group.iter().map(|job| async move { claim_together(db, &[&job.item]).await })).await;
            for (job, claim) in group.into_iter().zip(alone) {
                undelivered.extend(answer(job, claim.map(|mut claims| claims.pop().unwrap_or(Claim::InFlight))));
            }
        }
    }
    give_back(db, &undelivered).await;
}

/// Answers one request; the key it took, if nobody was left to receive it (the client hung up
/// while its claim was in the database): that key is given back at once, or every retry would
/// answer 409 until its lease ran out (I5).
fn answer(job: Job, claim: Result<Claim>) -> Option<Held> {
    match job.done.send(claim) {
        Err(Ok(Claim::Acquired(_))) => Some(Held { api_key_id: job.item.api_key_id, key: job.item.key, nonce: job.item.nonce }),
        _ => None,
    }
}

async fn give_back(db: &Db, held: &[Held]) {
    if held.is_empty() {
        return;
    }
    let Ok(client) = db.get().await else { return };
    // Bounded as any call; on failure `release` logs, and the leases free the keys.
    let outcome = within(db.deadline, async {
        release(&client, held.iter().map(|h| (h.api_key_id.as_str(), h.key.as_str(), h.nonce))).await;
        Ok(())
    })
    .await;
    let _ = db.settle(client, outcome);
}

/// Takes the keys of `requests` not already replied, in the order given (each key once).
/// Columns: the key, then the stored reply's columns (NULL for a key taken instead).
/// Replies are looked up key by key (a LATERAL subquery with LIMIT is never turned into a hash
/// join): a generic plan made while the table was small would otherwise scan it whole. The
/// input is read through sub-selects so that the plan is made once (the store's note on plans).
const CLAIM_GROUP_SQL: &str = "WITH req AS (
       SELECT * FROM unnest((SELECT $1::text[]), (SELECT $2::text[]), (SELECT $3::bigint[]), (SELECT $4::bigint[]), (SELECT $5::bigint[]))
         WITH ORDINALITY AS q(api_key_id, key, nonce, lease_until, now, n)),
     stored AS (
       SELECT q.api_key_id, q.key, r.status, r.content_type, r.body, r.fingerprint, r.created_at, r.expires_at
       FROM req q CROSS JOIN LATERAL (
         SELECT * FROM idempotency_replies r WHERE r.api_key_id = q.api_key_id AND r.key = q.key AND r.expires_at > q.now LIMIT 1) r),
     taken AS (
       INSERT INTO idempotency_claims (api_key_id, key, nonce, lease_until)
       SELECT q.api_key_id, q.key, q.nonce, q.lease_until FROM req q
       WHERE NOT EXISTS (SELECT 1 FROM stored s WHERE s.api_key_id = q.api_key_id AND s.key = q.key)
       ORDER BY q.n
       ON CONFLICT (api_key_id, key) DO UPDATE SET nonce = EXCLUDED.nonce, lease_until = EXCLUDED.lease_until
       WHERE idempotency_claims.lease_until <= $6
       RETURNING api_key_id, key)
     SELECT api_key_id, key, status, content_type, body, fingerprint, created_at, expires_at FROM stored
     UNION ALL
     SELECT api_key_id, key, NULL, NULL, NULL, NULL, NULL, NULL FROM taken";

/// The second look, in a snapshot taken after the claim statement committed.
/// Its input is read through sub-selects so that its plan is made once (the store's note on plans).
const REPLIES_SQL: &str = "SELECT q.api_key_id, q.key, r.status, r.content_type, r.body, r.fingerprint, r.created_at, r.expires_at
     FROM unnest((SELECT $1::text[]), (SELECT $2::text[]), (SELECT $3::bigint[])) AS q(api_key_id, key, now)
     CROSS JOIN LATERAL (
       SELECT * FROM idempotency_replies r WHERE r.api_key_id = q.api_key_id AND r.key = q.key AND r.expires_at > q.now LIMIT 1) r";

/// Gives back the claims still held under these nonces; the rows say which were. Also how a
/// group commit releases its claims (group.rs).
pub const RELEASE_SQL: &str =
    "DELETE FROM idempotency_claims c USING unnest($1::text[], $2::text[], $3::bigint[]) AS k(api_key_id, key, nonce)
     WHERE c.api_key_id = k.api_key_id AND c.key = k.key AND c.nonce = k.nonce
     RETURNING c.api_key_id, c.key, c.nonce";

/// Claims `requests` (distinct keys, sorted) with one pipelined round trip, under the call
/// deadline; the answers in order.
async fn claim_together(db: &Db, requests: &[&Request]) -> Result<Vec<Claim>> {
    let client = db.get().await?;
    let outcome = within(db.deadline, claim_on(&client, requests)).await;
    db.settle(client, outcome)
}

async fn claim_on(client: &Object, requests: &[&Request]) -> Result<Vec<Claim>> {
    let ids: Vec<&str> = requests.iter().map(|r| r.api_key_id.as_str()).collect();
    let keys: Vec<&str> = requests.iter().map(|r| r.key.as_str()).collect();
    let nonces: Vec<i64> = requests.iter().map(|r| r.nonce).collect();
    let leases: Vec<i64> = requests.iter().map(|r| r.lease_until.as_micros()).collect();
    let nows: Vec<i64> = requests.iter().map(|r| r.now.as_micros()).collect();
    // A lease is judged by the group's earliest clock: a takeover may come a few milliseconds
    // late, never early.
    let earliest = nows.iter().copied().min().unwrap_or(0);
    let (claim, replies) = tokio::join!(client.prepare_cached(CLAIM_GROUP_SQL), client.prepare_cached(REPLIES_SQL));
    let (claim, replies) = (claim.map_err(db_err)?, replies.map_err(db_err)?);
    // Sent together; PostgreSQL runs the second, in a new snapshot, once the first committed.
    let claim_params: [&(dyn ToSql + Sync); 6] = [&ids, &keys, &nonces, &leases, &nows, &earliest];
    let replies_params: [&(dyn ToSql + Sync); 3] = [&ids, &keys, &nows];
    let (claimed, second_look) = tokio::join!(client.query(&claim, &claim_params), client.query(&replies, &replies_params));
    let claimed = claimed.map_err(db_err)?;

    let mut stored: HashMap<(&str, &str), StoredReply> = HashMap::new();
    let mut taken: HashSet<(&str, &str)> = HashSet::new();
    for row in &claimed {
        let (id, key): (&str, &str) = (row.get(0), row.get(1));
        match row.get::<_, Option<i32>>(2) {
            Some(_) => {
                stored.insert((id, key), reply_from(id, key, row));
            }
            None => {
                taken.insert((id, key));
            }
        }
    }
    let is_taken = |r: &&Request| taken.contains(&(r.api_key_id.as_str(), r.key.as_str()));
    let second_look = match second_look {
        Ok(rows) => rows,
        Err(err) => {
            // Give back what the first statement took: a retry must not wait for the leases.
            release(client, requests.iter().copied().filter(is_taken).map(named)).await;
            return Err(db_err(err));
        }
    };
    let mut late: HashMap<(&str, &str), StoredReply> =
        second_look.iter().map(|row| ((row.get(0), row.get(1)), reply_from(row.get(0), row.get(1), row))).collect();
    // Taken, but a reply was committed as the previous owner let go: give the key back, replay.
    let replied = |r: &&Request| is_taken(r) && late.contains_key(&(r.api_key_id.as_str(), r.key.as_str()));
    release(client, requests.iter().copied().filter(replied).map(named)).await;
    Ok(requests
        .iter()
        .map(|r| {
            let id_key = (r.api_key_id.as_str(), r.key.as_str());
            if let Some(reply) = stored.remove(&id_key) {
                Claim::Replay(reply)
            } else if let Some(reply) = late.remove(&id_key) {
                // Held by another request when claimed, or given back above: it has replied since.
                Claim::Replay(reply)
            } else if taken.contains(&id_key) {
                Claim::Acquired(ClaimToken { api_key_id: r.api_key_id.clone(), key: r.key.clone(), nonce: r.nonce as u64 })
            } else {
                Claim::InFlight
            }
        })
        .collect())
}

/// A request's key as [`release`] names it.
fn named(request: &Request) -> (&str, &str, i64) {
    (&request.api_key_id, &request.key, request.nonce)
}

/// Gives back the claims named by (idempotency scope, key, nonce).
async fn release<'a>(client: &Object, held: impl IntoIterator<Item = (&'a str, &'a str, i64)>) {
    let (mut ids, mut keys, mut nonces): (Vec<&str>, Vec<&str>, Vec<i64>) = (Vec::new(), Vec::new(), Vec::new());
    for (id, key, nonce) in held {
        ids.push(id);
        keys.push(key);
        nonces.push(nonce);
    }
    if ids.is_empty() {
        return;
    }
    if let Err(err) = client.execute(RELEASE_SQL, &[&ids, &keys, &nonces]).await {
        // The lease frees the keys anyway; until then retries answer 409 (I8).
        tracing::warn!(error = %crate::error::chain(&err), "giving back idempotency claims failed; their leases will free them");
    }
}

/// A stored reply from a row whose columns 2 to 7 are the reply's.
pub(super) fn reply_from(api_key_id: &str, key: &str, row: &Row) -> StoredReply {
    let fingerprint: Vec<u8> = row.get(5);
    StoredReply {
        api_key_id: api_key_id.to_owned(),
        key: key.to_owned(),
        status: u16::try_from(row.get::<_, i32>(2)).unwrap_or(200),
        content_type: row.get(3),
        body: Bytes::from(row.get::<_, Vec<u8>>(4)),
        fingerprint: fingerprint.try_into().unwrap_or([0; 32]),
        created_at: Timestamp::from_micros(row.get(6)),
        expires_at: Timestamp::from_micros(row.get(7)),
    }
}
