//! The single writer thread and group commit.
//!
//! SQLite allows one writer at a time, and a durable commit costs an fsync. One thread owns the
//! write connection, drains every batch that is waiting, runs each inside its own savepoint (so
//! one batch's failure never touches another's) and commits them all with one fsync. Each batch
//! still commits atomically, and no reply leaves before the commit that holds it is on disk.
//!
//! **Bulk batches wait their turn.** A worker's bulk batch (a cut-off's chunk of orders, a
//! bank file's effects: more than [`BULK_WRITES`] writes) holds the writer for tens of
//! milliseconds or more. It is never grouped with small batches, and the small batches waiting
//! beside it commit first, so an API write waits for at most the one bulk batch already being
//! written, not for every one queued ahead of it. Bulk and small groups alternate while both
//! wait, so a steady stream of API writes cannot starve a cut-off either.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use tokio::sync::oneshot;

use super::{ledger, reply_slots, row_err};
use crate::base::api_key::{ApiKey, KeyHash, Scope};
use crate::base::time::Timestamp;
use crate::error::{Error, Result};
use crate::store::sql::kind_str;
use crate::store::{ObjectRecord, Write, WriteBatch, abandoned, backend_error, lease_held};

/// Batches folded into one commit at most: bounds the latency one commit adds to its first batch.
const GROUP_BATCHES_MAX: usize = 256;
/// A batch of more writes than this is a bulk batch, committed alone and after the small ones
/// waiting with it (API requests write a few to a few dozen).
pub const BULK_WRITES: usize = 64;
/// The checkpointer's pause between checkpoints while commits keep coming. Small checkpoints
/// often, not large ones seldom: each ends with an fsync of the database file that the next
/// commit's WAL fsync queues behind, so its size is what the tail latency of writes pays.
/// Measured (create_counterparty@64): p99 29-33 ms every 200 ms, 39-47 ms every 3 s, 23 ms
/// every 50 ms, 19-23 ms every 10 ms, throughput unchanged. Then create_payment_order@64, whose
/// requests write three times the pages: p99 73 ms every 50 ms, 30 ms every 10 ms, 21 ms every
/// 3 ms, 19 ms every 1 ms, 22 ms with no pause (and 15 to 19 ms with no checkpoint at all during
/// the run), throughput unchanged; the 100,000-order cut-off no slower (BENCHMARKS.md).
const CHECKPOINT_GAP: Duration = Duration::from_millis(1);
/// The writer's own auto-checkpoint, in pages: only if the checkpointer falls far behind.
pub const WRITER_AUTOCHECKPOINT_PAGES: u32 = 20_000;
/// The writer connection's page cache, in KiB (an upper bound; it grows only as pages are used).
pub const WRITER_CACHE_KIB: i64 = 16 * 1024;
/// How long the writer waits for SQLite's write lock when another process (the CLI) holds it.
pub const BUSY_TIMEOUT_MS: u64 = 5_000;

pub struct Job {
    pub batch: WriteBatch,
    pub done: oneshot::Sender<Result<()>>,
}

pub type JobSender = SyncSender<Job>;

/// Runs until every sender is gone; wakes the checkpointer after each commit.
pub fn run(mut conn: Connection, jobs: Receiver<Job>, checkpoint: SyncSender<()>) {
    let mut waiting = Waiting::default();
    loop {
        if waiting.is_empty() {
            match jobs.recv_timeout(Duration::from_secs(3600)) {
                Ok(job) => waiting.add(job),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        while waiting.small.len() < GROUP_BATCHES_MAX {
            match jobs.try_recv() {
                Ok(job) => waiting.add(job),
                Err(_) => break,
            }
        }
        commit_group(&mut conn, waiting.next_group());
        // Full means a wake-up is already pending.
        let _ = checkpoint.try_send(());
    }
}

/// The batches taken from the queue and not yet committed: small ones (grouped) and bulk ones
/// (each alone), see the module's documentation.
#[derive(Default)]
struct Waiting {
    small: Vec<Job>,
    bulk: VecDeque<Job>,
    /// The last group was small while a bulk batch waited: the next one is the bulk batch's.
    bulk_owed: bool,
}

impl Waiting {
    fn is_empty(&self) -> bool {
        self.small.is_empty() && self.bulk.is_empty()
    }

    fn add(&mut self, job: Job) {
        match job.batch.writes.len() > BULK_WRITES {
            true => self.bulk.push_back(job),
            false => self.small.push(job),
        }
    }

    /// The small batches, unless a bulk batch waits and it is its turn: that one alone.
    fn next_group(&mut self) -> Vec<Job> {
        let bulk_turn = self.small.is_empty() || self.bulk_owed;
        if bulk_turn && let Some(job) = self.bulk.pop_front() {
            self.bulk_owed = false;
            return vec![job];
        }
        self.bulk_owed = !self.bulk.is_empty();
        std::mem::take(&mut self.small)
    }
}

fn commit_group(conn: &mut Connection, group: Vec<Job>) {
    // Most groups fail nowhere: apply them without savepoints, whose sub-journal was an eighth
    // of the writer's time. A failure rolls the group back and runs it again, batch by batch
    // in savepoints, so one batch's failure still never touches another's.
    let group = match commit_optimistic(conn, group) {
        Ok(()) => return,
        Err(group) => group,
    };
    let mut outcomes: Vec<(oneshot::Sender<Result<()>>, Result<()>)> = Vec::with_capacity(group.len());
    let tx = match conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(err) => {
            for job in group {
                let _ = job.done.send(Err(backend_error("begin", &err)));
            }
            return;
        }
    };
    for job in group {
        let outcome = apply_gated(&tx, &job.batch);
        outcomes.push((job.done, outcome));
    }
    let committed = tx.commit().map_err(|err| backend_error("commit", err));
    for (done, outcome) in outcomes {
        let result = match (&committed, outcome) {
            (Ok(()), outcome) => outcome,
            (Err(err), _) => Err(Error::Internal(err.to_string())),
        };
        let _ = done.send(result);
    }
}

/// Applies and commits the whole group in one transaction, or gives it back untouched.
fn commit_optimistic(conn: &mut Connection, group: Vec<Job>) -> std::result::Result<(), Vec<Job>> {
    let Ok(tx) = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate) else { return Err(group) };
    let mut left = vec![false; group.len()];
    for (job, left) in group.iter().zip(left.iter_mut()) {
        if let Some(gate) = &job.batch.gate
            && !gate.begin_commit()
        {
            *left = true;
            continue;
        }
        if job.batch.writes.iter().try_for_each(|write| apply(&tx, write)).is_err() {
            drop(tx); // rolls back
            return Err(group);
        }
    }
    let committed = tx.commit().map_err(|err| backend_error("commit", err));
    for (job, left) in group.into_iter().zip(left) {
        let result = match &committed {
            Err(err) => Err(Error::Internal(err.to_string())),
            Ok(()) if left => Err(abandoned()),
            Ok(()) => Ok(()),
        };
        let _ = job.done.send(result);
    }
    Ok(())
}

/// Runs PASSIVE checkpoints beside the writer, after its commits and at most one per
/// `CHECKPOINT_GAP`, until the writer stops; so copying the WAL back into the database never
/// stalls a commit (the writer's own auto-checkpoint is only a backstop), and an idle server
/// does not wake up for it. Checkpoints do not change durability: the WAL is already fsynced.
pub fn checkpoint_loop(conn: Connection, commits: Receiver<()>) {
    while commits.recv().is_ok() {
        if let Err(err) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %crate::error::chain(&err), "WAL checkpoint failed; will retry after the next commit");
        }
        std::thread::sleep(CHECKPOINT_GAP);
    }
}

/// Applies one batch inside a savepoint, unless its request was abandoned meanwhile.
fn apply_gated(tx: &Transaction<'_>, batch: &WriteBatch) -> Result<()> {
    if let Some(gate) = &batch.gate
        && !gate.begin_commit()
    {
        return Err(abandoned());
    }
    tx.execute_batch("SAVEPOINT batch").map_err(|e| backend_error("savepoint", e))?;
    match batch.writes.iter().try_for_each(|write| apply(tx, write)) {
        Ok(()) => tx.execute_batch("RELEASE batch").map_err(|e| backend_error("release", e)),
        Err(err) => {
            tx.execute_batch("ROLLBACK TO batch; RELEASE batch").map_err(|e| backend_error("rollback", e))?;
            Err(err)
        }
    }
}

/// Applies one write of a batch inside the writer's transaction.
fn apply(tx: &Transaction<'_>, write: &Write) -> Result<()> {
    match write {
        Write::Insert(record) => insert_object(tx, record),
        Write::Replace { record, expected_version } => replace_object(tx, record, *expected_version),
        Write::Delete { kind, scope, id } => delete_object(tx, kind, scope, id),
        Write::DeleteChildren { kind, scope, parent_id } => delete_children(tx, kind, scope, parent_id),
        Write::Require { kind, scope, id, parameter } => match object_seq(tx, kind, &scope.organization_id, scope.live_mode, id)? {
            Some(_) => Ok(()),
            None => Err(Error::invalid(parameter.clone(), format!("{parameter} does not name an existing {}", kind_str(kind)))),
        },
        Write::Cap { kind, scope, max, parameter, message } => {
            if within_cap(tx, kind, scope, *max)? {
                Ok(())
            } else {
                Err(Error::invalid(parameter.clone(), message.clone()))
            }
        }
        Write::InsertApiKey { key, hash } => insert_api_key(tx, key, hash),
        Write::UpdateApiKey(key) => update_api_key(tx, key),
        Write::PurgeReplies { keys, before } => {
            for (api_key_id, key) in keys {
                reply_slots::delete_expired(tx, api_key_id, key, before.as_micros())?;
            }
            Ok(())
        }
        Write::SaveReply(reply) => reply_slots::save(tx, reply),
        Write::Unique { key, parameter, message } => ledger::unique(tx, key, parameter, message),
        Write::ReleaseUnique { key } => ledger::release_unique(tx, key),
        Write::Lease { name, holder, now, until } => lease(tx, name, holder, *now, *until),
        Write::Unlease { name, holder } => {
            tx.prepare_cached("DELETE FROM leases WHERE name = ?1 AND holder = ?2")
                .and_then(|mut st| st.execute(params![name, holder]))
                .map_err(row_err)?;
            Ok(())
        }
        Write::LedgerOpen { account_id, credit_normal } => ledger::open(tx, account_id, *credit_normal),
        Write::LedgerPost { lines, guards } => ledger::post(tx, lines, guards),
        Write::LedgerSettle { lines, post } => ledger::settle(tx, lines, *post),
        Write::LedgerClaim(claim) => ledger::claim(tx, claim),
        Write::LedgerUnclaim { settlement_id, .. } => ledger::unclaim(tx, settlement_id),
    }
}

/// Takes or renews a lease (see `Write::Lease`): the upsert changes no row while another
/// holder's lease runs.
fn lease(tx: &Transaction<'_>, name: &str, holder: &str, now: Timestamp, until: Timestamp) -> Result<()> {
    let granted = tx
        .prepare_cached(
            "INSERT INTO leases (name, holder, until) VALUES (?1, ?2, ?3)
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
             WHERE leases.holder = excluded.holder OR leases.until < ?4",
        )
        .and_then(|mut st| st.execute(params![name, holder, until.as_micros(), now.as_micros()]))
        .map_err(row_err)?;
    if granted == 0 { Err(lease_held(name)) } else { Ok(()) }
}

fn delete_object(tx: &Transaction<'_>, kind: &str, scope: &Scope, id: &str) -> Result<()> {
    let seq = object_seq(tx, kind, &scope.organization_id, scope.live_mode, id)?.ok_or_else(|| Error::not_found(&kind_str(kind)))?;
    tx.execute("DELETE FROM object_terms WHERE object_seq = ?1", [seq]).map_err(row_err)?;
    tx.execute("DELETE FROM objects WHERE seq = ?1", [seq]).map_err(row_err)?;
    Ok(())
}

fn delete_children(tx: &Transaction<'_>, kind: &str, scope: &Scope, parent_id: &str) -> Result<()> {
    let params = params![kind, scope.organization_id, scope.live_mode, parent_id];
    let filter = "kind = ?1 AND org_id = ?2 AND live_mode = ?3 AND parent_id = ?4";
    tx.execute(&format!("DELETE FROM object_terms WHERE object_seq IN (SELECT seq FROM objects WHERE {filter})"), params)
        .map_err(row_err)?;
    tx.execute(&format!("DELETE FROM objects WHERE {filter}"), params).map_err(row_err)?;
    Ok(())
}

/// Whether the tenant holds fewer than `max` objects of `kind` (SPEC W4). One writer thread:
/// nothing commits between this count and the batch's inserts.
fn within_cap(tx: &Transaction<'_>, kind: &str, scope: &Scope, max: usize) -> Result<bool> {
    let limit = i64::try_from(max).unwrap_or(i64::MAX);
    let held: i64 = tx
        .prepare_cached("SELECT count(*) FROM (SELECT 1 FROM objects WHERE org_id = ?1 AND live_mode = ?2 AND kind = ?3 LIMIT ?4)")
        .and_then(|mut st| st.query_row(params![scope.organization_id, scope.live_mode, kind, limit], |row| row.get(0)))
        .map_err(row_err)?;
    Ok(held < limit)
}

fn insert_api_key(tx: &Transaction<'_>, key: &ApiKey, hash: &KeyHash) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO api_keys (id, key_hash, name, organization_id, live_mode, created_at, updated_at, expires_at, decommissioned_at,
           idempotency_scope)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )
    .and_then(|mut st| {
        st.execute(params![
            key.id,
            &hash.0[..],
            key.name,
            key.organization_id,
            key.live_mode,
            key.created_at.as_micros(),
            key.updated_at.as_micros(),
            key.expires_at.map(|t| t.as_micros()),
            key.decommissioned_at.map(|t| t.as_micros()),
            key.idempotency_scope,
        ])
    })
    .map_err(row_err)?;
    Ok(())
}

fn update_api_key(tx: &Transaction<'_>, key: &ApiKey) -> Result<()> {
    let changed = tx
        .execute(
            "UPDATE api_keys SET name = ?2, updated_at = ?3, expires_at = ?4, decommissioned_at = ?5 WHERE id = ?1",
            params![
                key.id,
                key.name,
                key.updated_at.as_micros(),
                key.expires_at.map(|t| t.as_micros()),
                key.decommissioned_at.map(|t| t.as_micros()),
            ],
        )
        .map_err(row_err)?;
    if changed == 0 { Err(Error::not_found("api key")) } else { Ok(()) }
}

fn object_seq(tx: &Transaction<'_>, kind: &str, org: &str, live: bool, id: &str) -> Result<Option<i64>> {
    tx.prepare_cached("SELECT seq FROM objects WHERE id = ?1 AND kind = ?2 AND org_id = ?3 AND live_mode = ?4")
        .and_then(|mut st| st.query_row(params![id, kind, org, live], |row| row.get(0)).optional())
        .map_err(row_err)
}

fn insert_object(tx: &Transaction<'_>, record: &ObjectRecord) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO objects (id, kind, org_id, live_mode, parent_id, created_at, version, doc)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7)",
    )
    .and_then(|mut st| {
        st.execute(params![
            record.id,
            record.kind,
            record.scope.organization_id,
            record.scope.live_mode,
            record.parent_id,
            record.created_at.as_micros(),
            record.doc,
        ])
    })
    .map_err(row_err)?;
    insert_terms(tx, tx.last_insert_rowid(), record)
}

fn replace_object(tx: &Transaction<'_>, record: &ObjectRecord, expected_version: i64) -> Result<()> {
    let scope = &record.scope;
    let seq = object_seq(tx, record.kind, &scope.organization_id, scope.live_mode, &record.id)?
        .ok_or_else(|| Error::not_found(&kind_str(record.kind)))?;
    let changed = tx
        .prepare_cached("UPDATE objects SET doc = ?1, parent_id = ?2, version = version + 1 WHERE seq = ?3 AND version = ?4")
        .and_then(|mut st| st.execute(params![record.doc, record.parent_id, seq, expected_version]))
        .map_err(row_err)?;
    if changed == 0 {
        return Err(Error::Conflict {
            message: format!("the {} was changed by another request; retry", kind_str(record.kind)),
            parameter: None,
            retry_after_s: Some(0),
        });
    }
    replace_terms(tx, seq, record)
}

/// Brings the object's terms to the record's, touching only those that changed: a replace
/// usually moves a status or adds a term, and rewriting every term (two index entries each)
/// was most of a replace's cost.
fn replace_terms(tx: &Transaction<'_>, seq: i64, record: &ObjectRecord) -> Result<()> {
    let old: Vec<(String, String)> = tx
        .prepare_cached("SELECT name, value FROM object_terms WHERE object_seq = ?1")
        .and_then(|mut st| st.query_map([seq], |row| Ok((row.get(0)?, row.get(1)?)))?.collect())
        .map_err(row_err)?;
    let new: std::collections::HashSet<(&str, &str)> = record.terms.iter().map(|t| (t.name.as_str(), t.value.as_str())).collect();
    let mut delete = tx.prepare_cached("DELETE FROM object_terms WHERE object_seq = ?1 AND name = ?2 AND value = ?3").map_err(row_err)?;
    for (name, value) in &old {
        if !new.contains(&(name.as_str(), value.as_str())) {
            delete.execute(params![seq, name, value]).map_err(row_err)?;
        }
    }
    let mut insert =
        tx.prepare_cached("INSERT OR IGNORE INTO object_terms (object_seq, name, value) VALUES (?1, ?2, ?3)").map_err(row_err)?;
    for term in &record.terms {
        if !old.iter().any(|(name, value)| *name == term.name && *value == term.value) {
            insert.execute(params![seq, term.name, term.value]).map_err(row_err)?;
        }
    }
    Ok(())
}

fn insert_terms(tx: &Transaction<'_>, seq: i64, record: &ObjectRecord) -> Result<()> {
    let mut st = tx.prepare_cached("INSERT OR IGNORE INTO object_terms (object_seq, name, value) VALUES (?1, ?2, ?3)").map_err(row_err)?;
    for term in &record.terms {
        st.execute(params![seq, term.name, term.value]).map_err(row_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::api_key::Scope;
    use crate::base::time::Timestamp;

    fn scope() -> Scope {
        Scope { organization_id: "org".into(), live_mode: false }
    }

    fn insert(id: &str) -> Write {
        Write::Insert(ObjectRecord {
            id: id.into(),
            kind: "counterparty",
            scope: scope(),
            parent_id: None,
            created_at: Timestamp::from_micros(0),
            doc: "{}".into(),
            terms: vec![crate::store::Term::new("name", id)],
        })
    }

    fn job(writes: Vec<Write>) -> (Job, oneshot::Receiver<Result<()>>) {
        let (done, outcome) = oneshot::channel();
        (Job { batch: WriteBatch { writes, ..WriteBatch::default() }, done }, outcome)
    }

    #[test]
    fn s3_one_failing_batch_leaves_the_rest_of_its_group_committed() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("w.db")).unwrap();
        super::super::migrations::apply(&mut conn).unwrap();
        let missing = Write::Require { kind: "counterparty", scope: scope(), id: "cp_missing".into(), parameter: "counterparty_id".into() };
        let (first, first_done) = job(vec![insert("cp_1")]);
        let (bad, bad_done) = job(vec![insert("cp_2"), missing]);
        let (last, last_done) = job(vec![insert("cp_3")]);
        commit_group(&mut conn, vec![first, bad, last]);
        assert!(first_done.blocking_recv().unwrap().is_ok());
        assert!(matches!(bad_done.blocking_recv().unwrap(), Err(Error::Invalid { .. })));
        assert!(last_done.blocking_recv().unwrap().is_ok());
        let ids: Vec<String> = conn
            .prepare("SELECT id FROM objects ORDER BY id")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(ids, ["cp_1", "cp_3"], "the failed batch's own insert was rolled back with it, and only it");
        let terms: i64 = conn.query_row("SELECT count(*) FROM object_terms", [], |row| row.get(0)).unwrap();
        assert_eq!(terms, 2);
    }

    fn bulk(first: usize) -> Vec<Write> {
        (first..first + BULK_WRITES + 1).map(|i| insert(&format!("bulk_{i}"))).collect()
    }

    /// Small batches queued beside bulk ones commit first; bulk and small groups then take
    /// turns, so neither waits for the other's whole queue.
    #[test]
    fn s3_small_batches_do_not_wait_for_the_bulk_ones_queued_with_them() {
        let mut waiting = Waiting::default();
        let mut outcomes = Vec::new();
        let mut add = |waiting: &mut Waiting, writes| {
            let (queued, done) = job(writes);
            waiting.add(queued);
            outcomes.push(done);
        };
        for writes in [bulk(0), vec![insert("a")], bulk(100), vec![insert("b")]] {
            add(&mut waiting, writes);
        }
        let sizes = |group: Vec<Job>| group.iter().map(|j| j.batch.writes.len()).collect::<Vec<_>>();
        assert_eq!(sizes(waiting.next_group()), [1, 1], "the small ones first, in one group");
        assert_eq!(sizes(waiting.next_group()), [BULK_WRITES + 1]);
        add(&mut waiting, vec![insert("c")]);
        assert_eq!(sizes(waiting.next_group()), [1], "a small one that came meanwhile");
        add(&mut waiting, vec![insert("d")]);
        assert_eq!(sizes(waiting.next_group()), [BULK_WRITES + 1], "the bulk one's turn, though a small one waits");
        assert_eq!(sizes(waiting.next_group()), [1]);
        assert!(waiting.is_empty(), "nothing lost");
    }

    /// The checkpointer follows the writer's commits: what they wrote reaches the database file
    /// itself soon after, not only when the writer's backstop (20,000 pages of WAL) runs.
    #[tokio::test]
    async fn the_checkpointer_copies_commits_into_the_database_file() {
        use crate::store::Store;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let secrets = crate::base::secret_box::SecretBox::from_keys(&[crate::base::secret_box::generate_key()]);
        let store = super::super::SqliteStore::open(&path, &secrets).unwrap();
        for i in 0..300 {
            let mut batch = WriteBatch::default();
            batch.push(insert(&format!("cp_{i}")));
            store.commit(batch).await.unwrap();
        }
        // The database file alone, without its WAL, as a crash-free copy would see it.
        let copied = dir.path().join("copy.db");
        let mut backfilled = 0;
        for _ in 0..100 {
            std::fs::copy(&path, &copied).unwrap();
            backfilled = Connection::open(&copied).unwrap().query_row("SELECT count(*) FROM objects", [], |row| row.get(0)).unwrap_or(0);
            if backfilled == 300 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(backfilled, 300, "every commit was checkpointed into the database file");
    }
}
