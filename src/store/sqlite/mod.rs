//! The embedded store: SQLite in WAL mode with full sync (SPEC S1, S3).
//!
//! Writes go through one writer thread with group commit (`writer`); reads run on a small pool of
//! read connections, inline on the calling task (a cached read costs microseconds, less than a
//! hand-off to another thread). Idempotency claims live in this process (`claims`): the server
//! that serves a SQLite file holds its lock file, so no other server can be in flight on it.

mod claims;
mod ledger;
mod migrations;
mod reply_keys;
pub mod reply_slots;
mod writer;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use async_trait::async_trait;
use rand::RngCore;
use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, params, params_from_iter};
use tokio::sync::oneshot;

use super::key_cache::{EpochFile, KeyEntries};
use super::reply_cache::{self, ReplyCache};
use super::{
    Claim, ClaimToken, Filter, FoundKey, ListQuery, OUTBOX_KIND, Page, Store, StoredObject, StoredReply, WriteBatch, backend_error,
    claim_lost,
};
use crate::base::api_key::{ApiKey, KeyHash, KeyHasher, Scope};
use crate::base::ledger::{Totals, Window};
use crate::base::private_fs;
use crate::base::secret_box::{self, SecretBox};
use crate::base::time::Timestamp;
use crate::error::{Error, Result};
use crate::store::ledger::AccountState;
use crate::store::sql::{PostingValue, escape_like, posting_condition};

/// Read connections kept open.
const READERS: usize = 8;
/// Each reader's page cache, in KiB (an upper bound; it grows only as pages are used). Holds
/// the interior pages of the stored replies' table at a million replies (a few hundred pages of
/// rowids; see `reply_slots`) with room to spare, so that a replay reads at most its leaf.
const READER_CACHE_KIB: i64 = 8 * 1024;
/// Batches that may wait for the writer before callers wait to enqueue.
const WRITE_QUEUE_MAX: usize = 4096;

pub struct SqliteStore {
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
    writer: writer::JobSender,
    hasher: KeyHasher,
    claims: claims::Claims,
    keys: KeyEntries,
    keys_epoch: EpochFile,
    replies: ReplyCache,
    reply_keys: Arc<reply_keys::ReplyKeys>,
    path: PathBuf,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("path", &self.path).finish_non_exhaustive()
    }
}

/// Parses `sqlite://PATH` (or `sqlite:PATH`) into a file path.
pub fn path_from_url(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:"))?;
    (!rest.is_empty()).then(|| PathBuf::from(rest))
}

/// Holds the database's lock file for the life of a server, so that a second server cannot
/// serve the same file (its in-process idempotency claims would not see ours).
#[derive(Debug)]
pub struct ServeLock {
    _file: File,
}

pub fn lock_for_serving(db_path: &Path) -> anyhow::Result<ServeLock> {
    let lock_path = PathBuf::from(format!("{}.lock", db_path.display()));
    let file = private_fs::options().create(true).truncate(false).write(true).open(&lock_path)?;
    private_fs::tighten_file(&lock_path)?;
    match file.try_lock() {
        Ok(()) => Ok(ServeLock { _file: file }),
        Err(_) => anyhow::bail!(
            "another Payrail server is serving {} (lock {} is held); one server per SQLite file, use PostgreSQL for several",
            db_path.display(),
            lock_path.display()
        ),
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database, applies migrations and starts the writer thread.
    /// The key pepper is sealed under `secrets` (sealed in place if an older release left it
    /// plain).
    pub fn open(path: &Path, secrets: &SecretBox) -> anyhow::Result<Self> {
        let mut conn = open_private(path)?;
        configure(&conn)?;
        refuse_a_foreign_master_key(&conn, secrets)?;
        migrations::apply(&mut conn)?;
        let hasher = KeyHasher::new(load_pepper(&conn, secrets)?);
        let readers = (0..READERS).map(|_| open_reader(path).map(Mutex::new)).collect::<anyhow::Result<Vec<_>>>()?;
        conn.pragma_update(None, "wal_autocheckpoint", writer::WRITER_AUTOCHECKPOINT_PAGES)?;
        // Ids and idempotency keys are random, so inserts land all over their indexes: with
        // SQLite's default 2 MiB cache the writer re-read a page from the OS for most of them.
        conn.pragma_update(None, "cache_size", -writer::WRITER_CACHE_KIB)?;
        let checkpoint_conn = Connection::open(path)?;
        configure(&checkpoint_conn)?;
        // The writer holds the only sender: the checkpointer stops with it.
        let (commits, committed) = mpsc::sync_channel(1);
        std::thread::Builder::new().name("sqlite-checkpoint".into()).spawn(move || writer::checkpoint_loop(checkpoint_conn, committed))?;
        let (tx, rx) = mpsc::sync_channel(WRITE_QUEUE_MAX);
        std::thread::Builder::new().name("sqlite-writer".into()).spawn(move || writer::run(conn, rx, commits))?;
        Ok(SqliteStore {
            readers,
            next_reader: AtomicUsize::new(0),
            writer: tx,
            hasher,
            claims: claims::Claims::default(),
            keys: KeyEntries::default(),
            keys_epoch: EpochFile::open(path),
            replies: ReplyCache::default(),
            reply_keys: Arc::default(),
            path: path.to_owned(),
        })
    }

    /// Only migrates (the `payrail migrate` command).
    pub fn migrate(path: &Path) -> anyhow::Result<()> {
        let mut conn = open_private(path)?;
        configure(&conn)?;
        migrations::apply(&mut conn)
    }

    fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T> {
        self.read_with(|conn| f(conn).map_err(row_err))
    }

    /// [`read`](Self::read) for work that fails with the crate's own errors.
    fn read_with<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        // The first idle connection, always searched from the first: reads run on the
        // runtime's few worker threads, so the first two or three connections serve nearly
        // all of them and keep their caches warm, and the rest stay small.
        for reader in &self.readers {
            if let Ok(conn) = reader.try_lock() {
                return f(&conn);
            }
        }
        // All busy: wait for one, spreading the waiters.
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        let conn = self.readers[start % self.readers.len()].lock().unwrap_or_else(|p| p.into_inner());
        f(&conn)
    }

    fn reply(&self, api_key_id: &str, key: &str, now: Timestamp) -> Result<Option<StoredReply>> {
        self.read(|conn| reply_slots::find(conn, api_key_id, key, now))
    }
}

/// Opens the database file, creating it 0600 first: SQLite gives its `-wal` and `-shm` files
/// the database file's mode, so all three stay the owner's alone (SPEC S4).
fn open_private(path: &Path) -> anyhow::Result<Connection> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        private_fs::ensure_private_dir(dir)?;
    }
    private_fs::touch(path)?;
    for suffix in ["-wal", "-shm", "-journal"] {
        private_fs::tighten_file(&PathBuf::from(format!("{}{suffix}", path.display())))?;
    }
    Ok(Connection::open(path)?)
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(std::time::Duration::from_millis(writer::BUSY_TIMEOUT_MS))?;
    // WAL with FULL sync: a commit is on disk (WAL fsynced) before it returns (SPEC S3).
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    // Statement and savepoint journals in memory: they only matter until their transaction
    // ends, and writing them to a temporary file cost the writer a syscall per page.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

fn open_reader(path: &Path) -> anyhow::Result<Connection> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    conn.busy_timeout(std::time::Duration::from_millis(writer::BUSY_TIMEOUT_MS))?;
    conn.pragma_update(None, "cache_size", -READER_CACHE_KIB)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// Fails, before any migration runs, when the master key ring cannot open the pepper the
/// database holds (as on PostgreSQL: a migration must not change a database this instance
/// cannot serve).
fn refuse_a_foreign_master_key(conn: &Connection, secrets: &SecretBox) -> anyhow::Result<()> {
    let known =
        conn.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'settings'", [], |row| row.get::<_, i64>(0))?;
    if known == 0 {
        return Ok(());
    }
    let stored: Option<Vec<u8>> =
        conn.query_row("SELECT value FROM settings WHERE name = ?1", [secret_box::PEPPER_SETTING], |row| row.get(0)).optional()?;
    if let Some(stored) = stored {
        secret_box::open_pepper(secrets, &stored)?;
    }
    Ok(())
}

/// The per-database secret keys are hashed under; made once, by whichever process comes first,
/// and stored sealed. A plain pepper left by an older release is sealed in place; the update
/// only applies if the value is still the plain one, so racing processes cannot clash.
fn load_pepper(conn: &Connection, secrets: &SecretBox) -> anyhow::Result<Vec<u8>> {
    let mut fresh = [0u8; 32];
    rand::rng().fill_bytes(&mut fresh);
    let sealed = secrets.seal(&fresh, secret_box::PEPPER_PURPOSE);
    conn.execute("INSERT OR IGNORE INTO settings (name, value) VALUES (?1, ?2)", params![secret_box::PEPPER_SETTING, sealed])?;
    let stored: Vec<u8> = conn.query_row("SELECT value FROM settings WHERE name = ?1", [secret_box::PEPPER_SETTING], |row| row.get(0))?;
    let (pepper, reseal) = secret_box::open_pepper(secrets, &stored)?;
    if let Some(sealed) = reseal {
        let n = conn.execute(
            "UPDATE settings SET value = ?1 WHERE name = ?2 AND value = ?3",
            params![sealed, secret_box::PEPPER_SETTING, stored],
        )?;
        if n == 1 {
            tracing::info!(key = %secrets.newest_id(), "sealed the API key pepper under the master key (it was stored plain)");
        }
    }
    Ok(pepper)
}

pub(crate) fn row_err(err: rusqlite::Error) -> Error {
    backend_error("sqlite", err)
}

fn stored_object(row: &Row<'_>) -> rusqlite::Result<StoredObject> {
    Ok(StoredObject { id: row.get(0)?, parent_id: row.get(1)?, version: row.get(2)?, doc: row.get(3)? })
}

fn api_key_row(row: &Row<'_>) -> rusqlite::Result<(ApiKey, KeyHash)> {
    let hash: Vec<u8> = row.get(1)?;
    let decommissioned_at: Option<i64> = row.get(8)?;
    let key = ApiKey {
        id: row.get(0)?,
        object: "api_key",
        name: row.get(2)?,
        organization_id: row.get(3)?,
        live_mode: row.get(4)?,
        created_at: Timestamp::from_micros(row.get(5)?),
        updated_at: Timestamp::from_micros(row.get(6)?),
        expires_at: row.get::<_, Option<i64>>(7)?.map(Timestamp::from_micros),
        decommissioned: decommissioned_at.is_some(),
        decommissioned_at: decommissioned_at.map(Timestamp::from_micros),
        idempotency_scope: row.get(9)?,
    };
    Ok((key, KeyHash(hash.try_into().unwrap_or([0; 32]))))
}

/// A key written by a release without idempotency scopes has none: its scope is its own id (I2).
const API_KEY_COLUMNS: &str = "id, key_hash, name, organization_id, live_mode, created_at, updated_at, expires_at, decommissioned_at, COALESCE(idempotency_scope, id)";

/// `n` comma-separated `?`, or a `NULL` that matches nothing when `n` is 0.
fn placeholders(n: usize) -> String {
    if n == 0 { "NULL".into() } else { vec!["?"; n].join(", ") }
}

/// The condition of [`Filter::SettledBy`]: the entries a settlement took, or their transactions.
fn settled_by(of_parent: bool) -> &'static str {
    if of_parent {
        " AND o.id IN (SELECT e.parent_id FROM ledger_postings p JOIN objects e ON e.id = p.entry_id WHERE p.settlement_id = ?)"
    } else {
        " AND o.id IN (SELECT entry_id FROM ledger_postings WHERE settlement_id = ?)"
    }
}

/// Builds the SQL and parameters of a list query.
fn list_sql(query: &ListQuery) -> (String, Vec<Value>) {
    // With a list of ids (or a parent), SQLite would still walk the newest-first index over
    // every object of the kind (it serves the ORDER BY) and test each one: a page cost as much
    // as the whole kind. `+column` keeps that index out, so the objects are looked up by the id
    // (or parent) index and the few found are sorted.
    let by_id = query.filters.iter().any(|f| matches!(f, Filter::IdIn(_) | Filter::Parent(_)));
    let mut sql = String::from(if by_id {
        "SELECT o.id, o.parent_id, o.version, o.doc, o.seq FROM objects o WHERE +o.org_id = ? AND +o.live_mode = ? AND +o.kind = ?"
    } else {
        "SELECT o.id, o.parent_id, o.version, o.doc, o.seq FROM objects o WHERE o.org_id = ? AND o.live_mode = ? AND o.kind = ?"
    });
    let mut args: Vec<Value> = vec![
        Value::Text(query.scope.organization_id.clone()),
        Value::Integer(i64::from(query.scope.live_mode)),
        Value::Text(query.kind.to_owned()),
    ];
    if let Some(seq) = query.after_seq {
        sql.push_str(" AND o.seq < ?");
        args.push(Value::Integer(seq));
    }
    for filter in &query.filters {
        let term =
            |op: &str| format!(" AND EXISTS (SELECT 1 FROM object_terms t WHERE t.object_seq = o.seq AND t.name = ? AND t.value {op})");
        match filter {
            Filter::Eq { name, value } => {
                sql.push_str(&term("= ?"));
                args.extend([Value::Text(name.clone()), Value::Text(value.clone())]);
            }
            Filter::Contains { name, needle } => {
                sql.push_str(&term("LIKE ? ESCAPE '\\'"));
                args.extend([Value::Text(name.clone()), Value::Text(format!("%{}%", escape_like(needle)))]);
            }
            Filter::AtLeast { name, value } => {
                sql.push_str(&term(">= ?"));
                args.extend([Value::Text(name.clone()), Value::Text(value.clone())]);
            }
            Filter::AtMost { name, value } => {
                sql.push_str(&term("<= ?"));
                args.extend([Value::Text(name.clone()), Value::Text(value.clone())]);
            }
            Filter::CreatedFrom(at) => {
                sql.push_str(" AND o.created_at >= ?");
                args.push(Value::Integer(at.as_micros()));
            }
            Filter::CreatedTo(at) => {
                sql.push_str(" AND o.created_at <= ?");
                args.push(Value::Integer(at.as_micros()));
            }
            Filter::IdIn(ids) => {
                sql.push_str(&format!(" AND o.id IN ({})", placeholders(ids.len())));
                args.extend(ids.iter().map(|id| Value::Text(id.clone())));
            }
            Filter::Parent(id) => {
                sql.push_str(" AND o.parent_id = ?");
                args.push(Value::Text(id.clone()));
            }
            Filter::AnyOf { name, values } => {
                sql.push_str(&term(&format!("IN ({})", placeholders(values.len()))));
                args.push(Value::Text(name.clone()));
                args.extend(values.iter().map(|v| Value::Text(v.clone())));
            }
            Filter::Keys { name, values } => {
                // Looked up by the terms index, then sorted: a list walk would test each
                // object of the kind against every key.
                sql.push_str(&format!(
                    " AND o.seq IN (SELECT t.object_seq FROM object_terms t WHERE t.name = ? AND t.value IN ({}))",
                    placeholders(values.len())
                ));
                args.push(Value::Text(name.clone()));
                args.extend(values.iter().map(|v| Value::Text(v.clone())));
            }
            Filter::SettledBy { settlement_id, of_parent } => {
                sql.push_str(settled_by(*of_parent));
                args.push(Value::Text(settlement_id.clone()));
            }
            Filter::Posting { filter, of_parent } => {
                let (condition, values) = posting_condition(filter, *of_parent, |_| "?".into());
                sql.push_str(&condition);
                args.extend(values.into_iter().map(|value| match value {
                    PostingValue::Text(t) => Value::Text(t),
                    PostingValue::Bool(b) => Value::Integer(i64::from(b)),
                    PostingValue::Int(i) => Value::Integer(i),
                }));
            }
        }
    }
    sql.push_str(" ORDER BY o.seq DESC LIMIT ?");
    args.push(Value::Integer(i64::try_from(query.limit + 1).unwrap_or(i64::MAX)));
    (sql, args)
}

/// [`Store::bulk_chunk`] on SQLite.
pub const SQLITE_BULK_CHUNK: usize = 50;

#[async_trait]
impl Store for SqliteStore {
    /// 50 orders a commit (a few ms of the one writer), not 500: an API write waits for the
    /// bulk commit in progress. On the 100,000-order cut-off, with checkpoints every 1 ms: API
    /// writes p99 5.1 to 5.4 ms and a cut-off of 12.5 to 12.8 s; 100 a commit, 7.9 to 10.3 ms and
    /// 11.3 to 12.3 s; 200, 14.2 to 14.6 ms and 9.8 to 10.8 s (BENCHMARKS.md, tenth round).
    fn bulk_chunk(&self) -> usize {
        SQLITE_BULK_CHUNK
    }

    async fn commit(&self, batch: WriteBatch) -> Result<()> {
        let claim = batch.claim.clone();
        let changes_keys = batch.changes_keys();
        let saved: Vec<StoredReply> = reply_cache::saved(&batch.writes).cloned().collect();
        for reply in &saved {
            self.reply_keys.add(&reply.api_key_id, &reply.key);
        }
        if let Some(token) = &claim
            && !self.claims.holds(token)
        {
            return Err(claim_lost());
        }
        let (done, outcome) = oneshot::channel();
        let job = writer::Job { batch, done };
        // The queue is bounded; when full, wait for room off the async workers.
        let job = match self.writer.try_send(job) {
            Ok(()) => None,
            Err(mpsc::TrySendError::Full(job)) => Some(job),
            Err(mpsc::TrySendError::Disconnected(_)) => return Err(Error::internal("sqlite writer stopped")),
        };
        if let Some(job) = job {
            let sender = self.writer.clone();
            tokio::task::spawn_blocking(move || sender.send(job))
                .await
                .map_err(|e| backend_error("enqueue", e))?
                .map_err(|_| Error::internal("sqlite writer stopped"))?;
        }
        outcome.await.map_err(|_| Error::internal("sqlite writer dropped a batch"))??;
        if changes_keys {
            self.keys_epoch.bump();
        }
        self.replies.insert_committed(&saved);
        if let Some(token) = &claim {
            if !saved.is_empty() {
                self.claims.note_reply(token);
            }
            self.claims.release(token);
        }
        Ok(())
    }

    async fn ledger_accounts(&self, account_ids: &[String]) -> Result<Vec<(String, AccountState)>> {
        self.read(|conn| ledger::accounts(conn, account_ids))
    }

    async fn ledger_window(&self, account_id: &str, window: &Window) -> Result<Totals> {
        self.read_with(|conn| ledger::window(conn, account_id, window))
    }

    async fn ledger_entry_versions(&self, entry_ids: &[String]) -> Result<Vec<(String, i64)>> {
        self.read(|conn| ledger::entry_versions(conn, entry_ids))
    }

    async fn ledger_unsettled(&self, account_id: &str, before_micros: i64, upto_version: i64) -> Result<crate::store::ledger::Claimed> {
        self.read(|conn| ledger::unsettled(conn, account_id, before_micros, upto_version))
    }

    async fn get(&self, kind: &'static str, scope: &Scope, id: &str) -> Result<Option<StoredObject>> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT id, parent_id, version, doc FROM objects WHERE id = ?1 AND kind = ?2 AND org_id = ?3 AND live_mode = ?4",
            )?
            .query_row(params![id, kind, scope.organization_id, scope.live_mode], stored_object)
            .optional()
        })
    }

    async fn list(&self, query: &ListQuery) -> Result<Page> {
        let (sql, args) = list_sql(query);
        let mut rows: Vec<(StoredObject, i64)> = self.read(|conn| {
            let mut st = conn.prepare_cached(&sql)?;
            let mapped = st.query_map(params_from_iter(args.iter()), |row| Ok((stored_object(row)?, row.get::<_, i64>(4)?)))?;
            mapped.collect()
        })?;
        let next_seq = if rows.len() > query.limit {
            rows.truncate(query.limit);
            rows.last().map(|(_, seq)| *seq)
        } else {
            None
        };
        Ok(Page { items: rows.into_iter().map(|(item, _)| item).collect(), next_seq })
    }

    async fn children(&self, kind: &'static str, scope: &Scope, parent_ids: &[String]) -> Result<Vec<StoredObject>> {
        if parent_ids.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders = vec!["?"; parent_ids.len()].join(", ");
        let sql = format!(
            "SELECT id, parent_id, version, doc FROM objects WHERE kind = ? AND org_id = ? AND live_mode = ? AND parent_id IN ({placeholders}) ORDER BY seq"
        );
        let mut args =
            vec![Value::Text(kind.to_owned()), Value::Text(scope.organization_id.clone()), Value::Integer(i64::from(scope.live_mode))];
        args.extend(parent_ids.iter().map(|id| Value::Text(id.clone())));
        self.read(|conn| {
            let mut st = conn.prepare(&sql)?;
            let rows = st.query_map(params_from_iter(args.iter()), stored_object)?;
            rows.collect()
        })
    }

    async fn api_key_by_hash(&self, hash: &KeyHash) -> Result<Option<FoundKey>> {
        // The epoch is read before the database, so an entry is never newer than its epoch.
        let epoch = self.keys_epoch.epoch();
        if let Some(hit) = epoch.and_then(|epoch| self.keys.get(epoch, hash)) {
            return Ok(Some(hit));
        }
        let sql = format!("SELECT {API_KEY_COLUMNS} FROM api_keys WHERE key_hash = ?1");
        let found = self.read(|conn| conn.prepare_cached(&sql)?.query_row([&hash.0[..]], api_key_row).optional())?;
        let found = found.map(|(key, hash)| (Arc::new(key), hash));
        if let (Some(epoch), Some(found)) = (epoch, &found) {
            self.keys.insert(epoch, found);
        }
        Ok(found)
    }

    async fn api_key(&self, id: &str) -> Result<Option<ApiKey>> {
        let sql = format!("SELECT {API_KEY_COLUMNS} FROM api_keys WHERE id = ?1");
        let found = self.read(|conn| conn.prepare_cached(&sql)?.query_row([id], api_key_row).optional())?;
        Ok(found.map(|(key, _)| key))
    }

    async fn api_keys(&self) -> Result<Vec<ApiKey>> {
        let sql = format!("SELECT {API_KEY_COLUMNS} FROM api_keys ORDER BY created_at, id");
        let rows = self.read(|conn| {
            let mut st = conn.prepare(&sql)?;
            let rows = st.query_map([], api_key_row)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        Ok(rows.into_iter().map(|(key, _)| key).collect())
    }

    fn key_hasher(&self) -> &KeyHasher {
        &self.hasher
    }

    async fn prepare_to_serve(&self) {
        let started = std::time::Instant::now();
        let path = self.path.clone();
        let keys = self.reply_keys.clone();
        let counted = tokio::task::spawn_blocking(move || -> anyhow::Result<usize> { Ok(keys.load(&open_reader(&path)?)?) })
            .await
            .map_err(anyhow::Error::from)
            .and_then(|counted| counted);
        match counted {
            Ok(rows) => tracing::info!(rows, elapsed_ms = started.elapsed().as_millis() as u64, "stored idempotency replies indexed"),
            Err(err) => {
                tracing::warn!(error = %format!("{err:#}"), "could not index stored idempotency replies; every new key will be looked up")
            }
        }
    }

    async fn claim(&self, api_key_id: &str, key: &str, now: Timestamp, lease_ms: u64) -> Result<Claim> {
        if let Some(reply) = self.replies.get(api_key_id, key, now) {
            return Ok(Claim::Replay(reply));
        }
        let generation = self.claims.reply_generation(api_key_id, key);
        // A stored success answers at once, without claiming: replays never contend (I4). A key
        // with no reply counted has none stored, and needs no read.
        if self.reply_keys.may_exist(api_key_id, key)
            && let Some(reply) = self.reply(api_key_id, key, now)?
        {
            return Ok(Claim::Replay(reply));
        }
        // Then claim. A finishing owner stores its reply before it releases, so whoever gets
        // the claim after that release must look again, unless no reply landed since the first
        // look (owners bump the key's generation after committing a reply and before releasing).
        let Some(token) = self.claims.try_take(api_key_id, key, now, lease_ms) else {
            return Ok(Claim::InFlight);
        };
        // An owner counts its reply before committing it, and commits before releasing: a
        // reply that landed since the first look is counted by now.
        if self.claims.reply_generation(api_key_id, key) == generation || !self.reply_keys.may_exist(api_key_id, key) {
            return Ok(Claim::Acquired(token));
        }
        match self.reply(api_key_id, key, now) {
            Ok(Some(reply)) => {
                self.claims.release(&token);
                Ok(Claim::Replay(reply))
            }
            Ok(None) => Ok(Claim::Acquired(token)),
            Err(err) => {
                self.claims.release(&token);
                Err(err)
            }
        }
    }

    async fn renew(&self, token: &ClaimToken, now: Timestamp, lease_ms: u64) -> Result<bool> {
        Ok(self.claims.renew(token, now, lease_ms))
    }

    async fn release(&self, token: &ClaimToken) {
        self.claims.release(token);
    }

    async fn scan_due(&self, kind: &'static str, term: &str, upto: &str, limit: usize) -> Result<Vec<(Scope, StoredObject)>> {
        self.read(|conn| {
            let mut st = conn.prepare_cached(
                "SELECT o.id, o.parent_id, o.version, o.doc, o.org_id, o.live_mode FROM object_terms t
                 JOIN objects o ON o.seq = t.object_seq
                 WHERE t.name = ?1 AND t.value <= ?2 AND o.kind = ?3 ORDER BY t.value LIMIT ?4",
            )?;
            let rows = st.query_map(params![term, upto, kind, limit as i64], |row| {
                let scope = Scope { organization_id: row.get(4)?, live_mode: row.get(5)? };
                Ok((scope, stored_object(row)?))
            })?;
            rows.collect()
        })
    }

    async fn scan_terms(&self, kind: &'static str, term: &str, after: &str, limit: usize) -> Result<Vec<(Scope, StoredObject)>> {
        self.read(|conn| {
            let mut st = conn.prepare_cached(
                "SELECT o.id, o.parent_id, o.version, o.doc, o.org_id, o.live_mode FROM object_terms t
                 JOIN objects o ON o.seq = t.object_seq
                 WHERE t.name = ?1 AND t.value > ?2 AND o.kind = ?3 ORDER BY t.value LIMIT ?4",
            )?;
            let rows = st.query_map(params![term, after, kind, limit as i64], |row| {
                let scope = Scope { organization_id: row.get(4)?, live_mode: row.get(5)? };
                Ok((scope, stored_object(row)?))
            })?;
            rows.collect()
        })
    }

    async fn outbox_after(&self, scope: &Scope, after_seq: i64, limit: usize) -> Result<Vec<(i64, StoredObject)>> {
        // One writer: `seq` order is commit order, so this is always a gap-free prefix.
        self.read(|conn| {
            let mut st = conn.prepare_cached(
                "SELECT id, parent_id, version, doc, seq FROM objects
                 WHERE org_id = ?1 AND live_mode = ?2 AND kind = ?3 AND seq > ?4 ORDER BY seq LIMIT ?5",
            )?;
            let rows = st.query_map(params![scope.organization_id, scope.live_mode, OUTBOX_KIND, after_seq, limit as i64], |row| {
                Ok((row.get::<_, i64>(4)?, stored_object(row)?))
            })?;
            rows.collect()
        })
    }

    async fn outbox_newest(&self, scope: &Scope) -> Result<i64> {
        self.read(|conn| {
            conn.prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM objects WHERE org_id = ?1 AND live_mode = ?2 AND kind = ?3")?
                .query_row(params![scope.organization_id, scope.live_mode, OUTBOX_KIND], |row| row.get(0))
        })
    }

    async fn setting(&self, name: &str) -> Result<Option<Vec<u8>>> {
        self.read(|conn| conn.prepare_cached("SELECT value FROM settings WHERE name = ?1")?.query_row([name], |row| row.get(0)).optional())
    }

    async fn replace_setting(&self, name: &str, old: &[u8], new: &[u8]) -> Result<bool> {
        // Rare (a master key rewrap): its own short connection rather than a writer job.
        let path = self.path.clone();
        let (name, old, new) = (name.to_owned(), old.to_vec(), new.to_vec());
        tokio::task::spawn_blocking(move || -> rusqlite::Result<bool> {
            let conn = Connection::open(&path)?;
            configure(&conn)?;
            Ok(conn.execute("UPDATE settings SET value = ?1 WHERE name = ?2 AND value = ?3", params![new, name, old])? == 1)
        })
        .await
        .map_err(|e| backend_error("sqlite", e))?
        .map_err(row_err)
    }

    async fn sealed_replies(&self, now: Timestamp) -> Result<Vec<StoredReply>> {
        self.read(|conn| reply_slots::starting_with(conn, secret_box::MAGIC, now))
    }

    async fn replace_reply_body(&self, api_key_id: &str, key: &str, old: &[u8], new: &[u8]) -> Result<bool> {
        // Rare (a master key rewrap), as replace_setting.
        let path = self.path.clone();
        let (api_key_id, key, old, new) = (api_key_id.to_owned(), key.to_owned(), old.to_vec(), new.to_vec());
        tokio::task::spawn_blocking(move || -> rusqlite::Result<bool> {
            let conn = Connection::open(&path)?;
            configure(&conn)?;
            reply_slots::replace_body(&conn, &api_key_id, &key, &old, &new)
        })
        .await
        .map_err(|e| backend_error("sqlite", e))?
        .map_err(row_err)
    }

    async fn purge_replies(&self, now: Timestamp, batch_max: usize) -> Result<usize> {
        // Through the writer, so the purge shares commits with requests instead of fighting them.
        let expired: Vec<(String, String)> = self.read(|conn| {
            let mut st =
                conn.prepare_cached("SELECT api_key_id, key FROM idempotency_replies WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2")?;
            let rows = st.query_map(params![now.as_micros(), batch_max as i64], |row| Ok((row.get(0)?, row.get(1)?)))?;
            rows.collect()
        })?;
        if expired.is_empty() {
            return Ok(0);
        }
        let count = expired.len();
        // Counted before the delete, so every row it deletes was in the counts (reply_keys).
        let take_back = self.reply_keys.loaded().then(|| expired.clone());
        let mut batch = WriteBatch::new();
        batch.writes.push(super::Write::PurgeReplies { keys: expired, before: now });
        self.commit(batch).await?;
        if let Some(keys) = take_back {
            self.reply_keys.purged(&keys);
        }
        Ok(count)
    }
}
