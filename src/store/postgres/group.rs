//! Group commit for PostgreSQL: the creates of many concurrent requests in one transaction.
//!
//! On a small machine PostgreSQL's cost is per statement, not per row: a create committed on
//! its own was ten statements. Batches that only insert (creates: objects, events, the reply,
//! preconditions and the claim) queue here; a few committer tasks each take whatever is waiting
//! and commit it as one transaction of four set-based statements (release the claims, check the
//! preconditions, insert the objects with their terms, insert the replies). Every batch still
//! commits atomically, with its own outcome: a batch whose claim is gone or whose precondition
//! fails is left out before anything is written; if a write fails anyway, the group is rolled
//! back and each batch is committed on its own, so one batch's failure never touches another's
//! (unless the failure was the database's: unreachable, hung past the call deadline or
//! read-only, when every batch of the group is answered 503 at once). A COMMIT that gets no
//! answer leaves every batch of the group with an unknown outcome: each is answered 503 and
//! keeps its idempotency claim until its lease ends (SPEC H2).
//! Durability is PostgreSQL's: the one COMMIT returns only once it is flushed, and replicated
//! to the synchronous standby if there is one (SPEC S3, H2).

use std::collections::{BTreeMap, HashSet};

use super::{Db, claims, commit_alone, db_err, faults, ledger, queue, within, writes};
use crate::error::{Error, Result};
use crate::store::ledger::{self as store_ledger, AccountState, LedgerLine};
use crate::store::sql::kind_str;
use crate::store::{ObjectRecord, StoredReply, Write, WriteBatch, abandoned, claim_lost, reply_cache};

/// Batches in one group at most.
const GROUP_MAX: usize = 128;
/// Committer tasks: while one waits for its flush, the next group is being written.
const COMMITTERS: usize = 3;

type Job = queue::Job<WriteBatch, ()>;
pub type Queue = queue::Queue<WriteBatch, ()>;

/// Whether a batch can join a group: inserts, preconditions and its reply only.
pub fn eligible(batch: &WriteBatch) -> bool {
    batch.writes.iter().all(|w| {
        matches!(
            w,
            Write::Insert(_)
                | Write::Require { .. }
                | Write::SaveReply(_)
                | Write::LedgerPost { .. }
                | Write::LedgerOpen { .. }
                | Write::Unique { .. }
        )
    })
}

/// Starts the committers; they stop when the queue's last sender is dropped.
pub fn start(db: Db) -> Queue {
    queue::serve(COMMITTERS, GROUP_MAX, move |group| {
        let db = db.clone();
        async move { commit_group(&db, group).await }
    })
}

pub async fn submit(queue: &Queue, batch: WriteBatch) -> Result<()> {
    queue::submit(queue, batch, "group committer").await
}

/// How a group's transaction ended.
enum Written {
    Committed,
    /// Failed before COMMIT, or refused by it: nothing of it is in the database.
    RolledBack(Error),
    /// COMMIT got no answer: whether it took effect is unknown, so nobody retries it here.
    OutcomeUnknown(Error),
}

async fn commit_group(db: &Db, group: Vec<Job>) {
    if group.len() == 1 {
        let job = group.into_iter().next().expect("one job");
        let _ = job.done.send(commit_alone(db, job.item).await);
        return;
    }
    let mut outcomes: Vec<Option<Result<()>>> = (0..group.len()).map(|_| None).collect();
    let written = write_and_commit(db, &group, &mut outcomes).await;
    match &written {
        Written::RolledBack(err) => {
            tracing::debug!(error = %crate::error::chain(&err), "a group commit was rolled back; committing its batches one by one")
        }
        Written::OutcomeUnknown(_) | Written::Committed => {}
    }
    for (job, outcome) in group.into_iter().zip(outcomes) {
        let result = match (&written, outcome) {
            // Left out before the write (claim lost, precondition failed, abandoned).
            (_, Some(refused)) => refused,
            (Written::Committed, None) => Ok(()),
            (Written::OutcomeUnknown(_), None) => Err(faults::outcome_unknown()),
            // The database is out of reach (or hung, or read-only): alone, each would fail
            // too, one deadline after the other.
            (Written::RolledBack(Error::Unavailable { message, retry_after_s }), None) => {
                Err(Error::Unavailable { message: message.clone(), retry_after_s: *retry_after_s })
            }
            (Written::RolledBack(_), None) => commit_alone(db, job.item).await,
        };
        let _ = job.done.send(result);
    }
}

/// The group's transaction, each step under the call deadline; a connection that failed with
/// 503 is dropped (rolled back by the server when it sees the connection close).
async fn write_and_commit(db: &Db, group: &[Job], outcomes: &mut [Option<Result<()>>]) -> Written {
    let client = match db.get().await {
        Ok(client) => client,
        Err(err) => return Written::RolledBack(err),
    };
    let deadline = db.deadline_for(group.iter().map(|job| job.item.writes.len()).sum());
    let written = match within(deadline, write_group(&client, group, outcomes)).await {
        Ok(()) => match faults::commit(&client, deadline).await {
            Ok(()) => Written::Committed,
            Err(err @ Error::OutcomeUnknown { .. }) => Written::OutcomeUnknown(err),
            Err(refused) => Written::RolledBack(refused),
        },
        Err(err @ Error::Unavailable { .. }) => Written::RolledBack(err),
        Err(err) => match within(db.deadline, async { client.batch_execute("ROLLBACK").await.map_err(db_err) }).await {
            Ok(()) => Written::RolledBack(err),
            // The rollback failing says more than the write's own error: the connection broke.
            Err(broken) => Written::RolledBack(broken),
        },
    };
    if let Written::RolledBack(err) | Written::OutcomeUnknown(err) = &written
        && faults::breaks_connection(err)
    {
        db.discard(client);
    }
    written
}

/// Opens a transaction and writes the batches of `group` not refused into `outcomes`, leaving
/// the transaction open for the caller to commit (or roll back, on an error).
async fn write_group(client: &deadpool_postgres::Object, group: &[Job], outcomes: &mut [Option<Result<()>>]) -> Result<()> {
    client.batch_execute("BEGIN").await.map_err(db_err)?;
    let (released, present) = tokio::join!(release_claims(client, group), lock_required(client, group));
    let (released, present) = (released?, present?);
    for (i, job) in group.iter().enumerate() {
        if let Some(claim) = &job.item.claim
            && !released.contains(&(claim.api_key_id.as_str(), claim.key.as_str(), claim.nonce as i64))
        {
            outcomes[i] = Some(Err(claim_lost()));
        } else if let Some(missing) = first_missing(&job.item, &present) {
            outcomes[i] = Some(Err(missing));
        }
    }
    // Last, just before writing: from here on each request's answer is the commit's.
    for (job, outcome) in group.iter().zip(outcomes.iter_mut()) {
        if outcome.is_none()
            && let Some(gate) = &job.item.gate
            && !gate.begin_commit()
        {
            *outcome = Some(Err(abandoned()));
        }
    }
    // Postings without balance conditions or lock versions are refused only by a taken
    // external_id, which is rare: their objects go in before the ledger's accounts are locked
    // (they lock nothing another group waits for), so the account rows, a hot account's above
    // all, are held only for the ledger's own writes and the COMMIT. A batch the ledger refuses
    // after all takes its objects back out, in the same transaction, so nobody sees them. Guarded
    // postings are refused often (an account drained by a race), so theirs wait for the verdict,
    // as do the objects of a group that locks no account.
    let batches = |indices: &[usize]| -> Vec<&WriteBatch> { indices.iter().map(|i| &group[*i].item).collect() };
    let admitted: Vec<usize> = (0..group.len()).filter(|i| outcomes[*i].is_none()).collect();
    let writes = || admitted.iter().flat_map(|i| group[*i].item.writes.iter());
    let early = writes().any(|w| matches!(w, Write::LedgerPost { .. })) && !writes().any(is_guarded_post);
    if early {
        insert_objects(client, &batches(&admitted)).await?;
    }
    apply_ledger(client, group, outcomes).await?;
    let (kept, refused): (Vec<usize>, Vec<usize>) = admitted.iter().partition(|i| outcomes[**i].is_none());
    let (kept, refused) = (batches(&kept), batches(&refused));
    if early {
        withdraw_objects(client, &refused).await?;
        insert_replies(client, &kept).await
    } else {
        let (objects, replies) = tokio::join!(insert_objects(client, &kept), insert_replies(client, &kept));
        objects.and(replies)
    }
}

/// The group's ledger writes (SPEC G4, G6): unique keys checked, then every posting applied in
/// the group's order to the accounts' sums, locked once for the whole group in account-id order
/// and checked in memory, so a hot account costs one row update per group instead of one per
/// request. A batch whose key is taken or whose posting fails a check is left out with its
/// error; what the others did is written in a few set-based statements.
async fn apply_ledger(client: &deadpool_postgres::Object, group: &[Job], outcomes: &mut [Option<Result<()>>]) -> Result<()> {
    let admitted = |outcomes: &[Option<Result<()>>]| -> Vec<usize> { (0..group.len()).filter(|i| outcomes[*i].is_none()).collect() };
    let wanted: Vec<&str> =
        admitted(outcomes).into_iter().flat_map(|i| writes::unique_keys(&group[i].item.writes)).map(|(key, _, _)| key).collect();
    let taken: HashSet<String> = ledger::taken_keys(client, &wanted).await?.into_iter().collect();
    let mut named: Vec<String> = Vec::new();
    for i in admitted(outcomes) {
        for write in &group[i].item.writes {
            if let Write::LedgerPost { lines, guards } = write {
                named.extend(store_ledger::accounts_named(lines, guards));
            }
        }
    }
    named.sort();
    named.dedup();
    let mut states = if named.is_empty() { BTreeMap::new() } else { ledger::lock(client, &named).await? };
    let mut claimed: HashSet<&str> = HashSet::new();
    let (mut lines_out, mut versions_out): (Vec<&LedgerLine>, Vec<i64>) = (Vec::new(), Vec::new());
    for i in admitted(outcomes) {
        let batch = &group[i].item;
        let keys: Vec<(&str, &str, &str)> = writes::unique_keys(&batch.writes).collect();
        if let Some((_, parameter, message)) = keys.iter().find(|(key, _, _)| taken.contains(*key) || claimed.contains(key)) {
            outcomes[i] = Some(Err(Error::invalid(*parameter, *message)));
            continue;
        }
        match post_in_memory(batch, &mut states) {
            Ok(posted) => {
                claimed.extend(keys.iter().map(|(key, _, _)| *key));
                for (line, version) in posted {
                    lines_out.push(line);
                    versions_out.push(version);
                }
            }
            Err(err) => outcomes[i] = Some(Err(err)),
        }
    }
    let opens: Vec<(&str, bool)> = admitted(outcomes)
        .into_iter()
        .flat_map(|i| group[i].item.writes.iter())
        .filter_map(|w| match w {
            Write::LedgerOpen { account_id, credit_normal } => Some((account_id.as_str(), *credit_normal)),
            _ => None,
        })
        .collect();
    if !states.is_empty() {
        ledger::store(client, &states).await?;
    }
    ledger::insert_postings(client, &lines_out, &versions_out).await?;
    ledger::take_keys(client, &claimed.into_iter().collect::<Vec<_>>()).await?;
    ledger::open_all(client, &opens).await
}

fn is_guarded_post(write: &Write) -> bool {
    matches!(write, Write::LedgerPost { guards, .. } if !guards.is_empty())
}

/// Applies one batch's postings to `states`, all or nothing; each line with its new version.
fn post_in_memory<'a>(batch: &'a WriteBatch, states: &mut BTreeMap<String, AccountState>) -> Result<Vec<(&'a LedgerLine, i64)>> {
    let mut scratch: BTreeMap<String, AccountState> = BTreeMap::new();
    let mut posted = Vec::new();
    for write in &batch.writes {
        let Write::LedgerPost { lines, guards } = write else { continue };
        for id in store_ledger::accounts_named(lines, guards) {
            if let (false, Some(state)) = (scratch.contains_key(&id), states.get(&id)) {
                scratch.insert(id, *state);
            }
        }
        let versions = store_ledger::post(&mut scratch, lines, guards)?;
        posted.extend(lines.iter().zip(versions));
    }
    states.extend(scratch);
    Ok(posted)
}

type ReleasedClaim<'a> = (&'a str, &'a str, i64);

async fn release_claims<'a>(client: &deadpool_postgres::Object, group: &'a [Job]) -> Result<HashSet<ReleasedClaim<'a>>> {
    let claims: Vec<_> = group.iter().filter_map(|job| job.item.claim.as_ref()).collect();
    if claims.is_empty() {
        return Ok(HashSet::new());
    }
    let ids: Vec<&str> = claims.iter().map(|c| c.api_key_id.as_str()).collect();
    let keys: Vec<&str> = claims.iter().map(|c| c.key.as_str()).collect();
    let nonces: Vec<i64> = claims.iter().map(|c| c.nonce as i64).collect();
    // Planned afresh each time (a statement prepared for this one run), never as a cached
    // generic plan: the claims table is a queue, small when a connection first plans the
    // release (a hash join over a sequential scan) and then full of dead rows until autovacuum
    // comes, which that scan reads on every group commit. A plan made now sees the table's size
    // and takes the primary key.
    let rows = client.query(claims::RELEASE_SQL, &[&ids, &keys, &nonces]).await.map_err(db_err)?;
    // Answer in terms of the group's own strings, so the set borrows nothing from the rows.
    let mut released = HashSet::new();
    for row in rows {
        let (id, key, nonce): (String, String, i64) = (row.get(0), row.get(1), row.get(2));
        if let Some(claim) = claims.iter().find(|c| c.api_key_id == id && c.key == key && c.nonce as i64 == nonce) {
            released.insert((claim.api_key_id.as_str(), claim.key.as_str(), nonce));
        }
    }
    Ok(released)
}

/// Preconditions of the group, key-share locked until commit (a concurrent delete waits).
async fn lock_required(client: &deadpool_postgres::Object, group: &[Job]) -> Result<HashSet<(String, String, String, bool)>> {
    let required: Vec<(&String, &str, &String, bool)> = group
        .iter()
        .flat_map(|job| job.item.writes.iter())
        .filter_map(|w| match w {
            Write::Require { kind, scope, id, .. } => Some((id, *kind, &scope.organization_id, scope.live_mode)),
            _ => None,
        })
        .collect();
    if required.is_empty() {
        return Ok(HashSet::new());
    }
    let ids: Vec<&str> = required.iter().map(|r| r.0.as_str()).collect();
    let kinds: Vec<&str> = required.iter().map(|r| r.1).collect();
    let orgs: Vec<&str> = required.iter().map(|r| r.2.as_str()).collect();
    let lives: Vec<bool> = required.iter().map(|r| r.3).collect();
    let statement = client
        .prepare_cached(
            // One index lookup per precondition, whatever the table's size (as `reads` does),
            // with a plan made once (the store's note on plans).
            "SELECT o.id, o.kind, o.org_id, o.live_mode
             FROM unnest((SELECT $1::text[]), (SELECT $2::text[]), (SELECT $3::text[]), (SELECT $4::bool[]))
               AS r(id, kind, org_id, live_mode)
             CROSS JOIN LATERAL (SELECT x.id, x.kind, x.org_id, x.live_mode FROM objects x
               WHERE x.id = r.id AND x.kind = r.kind AND x.org_id = r.org_id AND x.live_mode = r.live_mode
               OFFSET 0 FOR KEY SHARE) o",
        )
        .await
        .map_err(db_err)?;
    let rows = client.query(&statement, &[&ids, &kinds, &orgs, &lives]).await.map_err(db_err)?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1), row.get(2), row.get(3))).collect())
}

fn first_missing(batch: &WriteBatch, present: &HashSet<(String, String, String, bool)>) -> Option<Error> {
    batch.writes.iter().find_map(|w| match w {
        Write::Require { kind, scope, id, parameter } => {
            let key = (id.clone(), (*kind).to_owned(), scope.organization_id.clone(), scope.live_mode);
            (!present.contains(&key))
                .then(|| Error::invalid(parameter.clone(), format!("{parameter} does not name an existing {}", kind_str(kind))))
        }
        _ => None,
    })
}

async fn insert_objects(client: &deadpool_postgres::Object, batches: &[&WriteBatch]) -> Result<()> {
    let records: Vec<&ObjectRecord> = batches
        .iter()
        .flat_map(|b| b.writes.iter())
        .filter_map(|w| match w {
            Write::Insert(record) => Some(record),
            _ => None,
        })
        .collect();
    writes::insert_many(client, &records).await
}

/// Deletes, with their terms, the objects `batches` inserted earlier in this transaction.
async fn withdraw_objects(client: &deadpool_postgres::Object, batches: &[&WriteBatch]) -> Result<()> {
    let ids: Vec<&str> = batches
        .iter()
        .flat_map(|b| b.writes.iter())
        .filter_map(|w| match w {
            Write::Insert(record) => Some(record.id.as_str()),
            _ => None,
        })
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    let statement = client
        .prepare_cached(
            "WITH gone AS (DELETE FROM objects WHERE id = ANY($1) RETURNING seq)
             DELETE FROM object_terms WHERE object_seq IN (SELECT seq FROM gone)",
        )
        .await
        .map_err(db_err)?;
    client.execute(&statement, &[&ids]).await.map_err(db_err)?;
    Ok(())
}

async fn insert_replies(client: &deadpool_postgres::Object, batches: &[&WriteBatch]) -> Result<()> {
    let replies: Vec<&StoredReply> = batches.iter().flat_map(|b| reply_cache::saved(&b.writes)).collect();
    if replies.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = replies.iter().map(|r| r.api_key_id.as_str()).collect();
    let keys: Vec<&str> = replies.iter().map(|r| r.key.as_str()).collect();
    let statuses: Vec<i32> = replies.iter().map(|r| i32::from(r.status)).collect();
    let types: Vec<&str> = replies.iter().map(|r| r.content_type.as_str()).collect();
    let bodies: Vec<&[u8]> = replies.iter().map(|r| &r.body[..]).collect();
    let fingerprints: Vec<&[u8]> = replies.iter().map(|r| &r.fingerprint[..]).collect();
    let created: Vec<i64> = replies.iter().map(|r| r.created_at.as_micros()).collect();
    let expires: Vec<i64> = replies.iter().map(|r| r.expires_at.as_micros()).collect();
    // An expired reply not yet purged may still hold the key: the new one replaces it.
    let statement = client
        .prepare_cached(
            "INSERT INTO idempotency_replies (api_key_id, key, status, content_type, body, fingerprint, created_at, expires_at)
             SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::bytea[], $6::bytea[], $7::bigint[], $8::bigint[])
             ON CONFLICT (api_key_id, key) DO UPDATE SET status = EXCLUDED.status, content_type = EXCLUDED.content_type,
               body = EXCLUDED.body, fingerprint = EXCLUDED.fingerprint, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at",
        )
        .await
        .map_err(db_err)?;
    client.execute(&statement, &[&ids, &keys, &statuses, &types, &bodies, &fingerprints, &created, &expires]).await.map_err(db_err)?;
    Ok(())
}
