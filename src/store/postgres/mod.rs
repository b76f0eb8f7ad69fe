//! The PostgreSQL store, for several Payrail instances behind a load balancer (SPEC S2, I9, H1, H3).
//!
//! Everything a guarantee depends on is decided by the database: idempotency claims are rows
//! (taken with an upsert that only succeeds when the previous lease has run out), replies
//! commit in the same transaction as their effects, versioned replaces settle concurrent
//! updates from any instance, and `Require` preconditions hold a key-share lock until commit.
//! Commits are durable (`synchronous_commit=on` on every connection). A database that cannot
//! be reached, hangs or stops taking writes answers 503 with `Retry-After` within the call
//! deadline (`faults`); the pool drops the connections it broke and reconnects by itself, to the
//! next host of a multi-host URL if need be (`connect`).
//!
//! Plans. A prepared statement is planned afresh at each of its first five runs, then kept as
//! one generic plan if that looks no dearer. A statement over a parameter array (`unnest($1)`,
//! `= ANY($1)`) never passes that test: each fresh plan knows the array's length and the generic
//! one guesses ten, so it is planned at every run, and planning our grouped lookups cost three
//! times their execution. The hot lookups therefore read their arrays through a sub-select
//! (`unnest((SELECT $1::text[]))`), which hides the length from both, so the generic plan wins
//! and is kept; their shapes (a walk over the input, an index lookup per entry) do not depend
//! on the length.

mod claims;
mod connect;
mod faults;
mod group;
mod key_watch;
mod ledger;
mod ledger_reads;
mod migrations;
mod queue;
mod reads;
mod writes;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use rand::{Rng, RngCore};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::key_cache::KeyEntries;
use super::reply_cache::{self, ReplyCache};
use super::sql::{PostingValue, posting_condition};
use super::{Claim, ClaimToken, Filter, FoundKey, ListQuery, Page, Store, StoredObject, StoredReply, WriteBatch, abandoned};
use crate::base::api_key::{ApiKey, KeyHash, KeyHasher, Scope};
use crate::base::secret_box::{self, SecretBox};
use crate::base::time::Timestamp;
use crate::error::{Error, Result};
pub use connect::Options;
use connect::{Connector, PoolConnect};
pub(crate) use faults::{Db, db_err, within};

/// How long a request waits for a pooled connection before answering 503 (at most).
const POOL_WAIT: Duration = Duration::from_secs(5);
/// [`Store::bulk_in_flight`] on PostgreSQL (measured in BENCHMARKS.md, tenth round).
const BULK_IN_FLIGHT: usize = 2;
/// Outbox positions are `(transaction id << RANK_BITS) | rank of the row in its transaction`.
const RANK_BITS: u32 = 16;
const RANK_MASK: i64 = (1 << RANK_BITS) - 1;
/// The outbox read. The kind is a literal, not a parameter: `objects_outbox_events` covers
/// that kind alone (migration 0018), and only a plan that sees the literal can prove it may
/// use it.
const OUTBOX_AFTER: &str = concat!(
    "SELECT o.id, o.parent_id, o.version, o.doc, o.xid::text::bigint FROM objects o
     WHERE o.org_id = $1 AND o.live_mode = $2 AND o.kind = '",
    outbox_kind!(),
    "' AND o.xid >= $3::bigint::text::xid8
       AND o.xid < pg_snapshot_xmin(pg_current_snapshot())
     ORDER BY o.xid, o.seq LIMIT $4"
);

pub struct PostgresStore {
    db: Db,
    hasher: KeyHasher,
    /// For the key watch's own connection, started with the first authentication (a command
    /// such as `payrail keys revoke` never starts one).
    connector: Arc<Connector>,
    keys: KeyEntries,
    replies: ReplyCache,
    key_watch: OnceLock<(Arc<key_watch::KeyWatch>, tokio::sync::oneshot::Sender<()>)>,
    /// Creates of concurrent requests, committed together (see `group`).
    group: group::Queue,
    /// Idempotency claims of concurrent requests, taken together (see `claims`).
    claims: claims::Queue,
    /// Lookups by id and by parent of concurrent requests, made together (see `reads`).
    reads: reads::Queue,
    /// Balance reads of concurrent requests, made together (see `ledger_reads`).
    ledger_reads: ledger_reads::Queue,
    /// The health probe in flight, shared by `/healthz` callers. It runs to its end even when
    /// they stop waiting (they wait under a second), so a probe that must try the URL's next
    /// host, one connect timeout after the hung one, gets there: a server that no request
    /// reaches still moves on, and turns healthy again.
    probe: tokio::sync::Mutex<Option<tokio::task::JoinHandle<Result<()>>>>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}

/// The URL without its password, for messages and logs.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return "<unparseable database URL>".into() };
    let (authority, tail) = rest.split_once('/').map_or((rest, ""), |(a, t)| (a, t));
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{user}:***@{host}")
        }
        None => authority.to_owned(),
    };
    let path = tail.split('?').next().unwrap_or("");
    format!("{scheme}://{authority}/{path}")
}

impl PostgresStore {
    pub fn is_url(url: &str) -> bool {
        url.starts_with("postgres://") || url.starts_with("postgresql://")
    }

    /// Connects, applies migrations (under an advisory lock) and builds the pool, with the
    /// default limits ([`Options`]) and a pool of `pool_max`.
    pub async fn open(url: &str, pool_max: usize, secrets: &SecretBox) -> anyhow::Result<Self> {
        Self::open_with(url, &Options { pool_max, ..Options::default() }, secrets).await
    }

    /// Connects, applies migrations (under an advisory lock) and builds the pool.
    /// The key pepper is sealed under `secrets` (sealed in place if an older release left it
    /// plain).
    pub async fn open_with(url: &str, options: &Options, secrets: &SecretBox) -> anyhow::Result<Self> {
        let config = connect::config(url, options, true)?;
        let connector = Arc::new(Connector::new(&config, options.connect_timeout));
        // Migrations run without the call deadline: one may rightly take longer.
        let setup = connector.sibling(&connect::config(url, options, false)?);
        let (mut client, connection) = setup.connect().await.map_err(|e| unreachable(url, &e))?;
        let driver = tokio::spawn(connection);
        refuse_a_foreign_master_key(&client, secrets).await?;
        migrations::apply(&mut client).await?;
        let pepper = load_pepper(&client, secrets).await?;
        drop(client);
        let _ = tokio::time::timeout(options.call_timeout, driver).await;
        let manager =
            Manager::from_connect(config, PoolConnect(connector.clone()), ManagerConfig { recycling_method: RecyclingMethod::Fast });
        // Creating a connection may try every host, each for up to the connect timeout.
        let hosts = u32::try_from(connector.hosts()).unwrap_or(u32::MAX);
        let pool = Pool::builder(manager)
            .max_size(options.pool_max.max(1))
            .wait_timeout(Some(POOL_WAIT.min(options.call_timeout)))
            .create_timeout(Some(options.connect_timeout.saturating_mul(hosts) + Duration::from_secs(1)))
            .recycle_timeout(Some(options.call_timeout))
            .runtime(Runtime::Tokio1)
            .build()?;
        let db = Db { pool, deadline: options.call_timeout };
        let group = group::start(db.clone());
        let claims = claims::start(db.clone());
        let reads = reads::start(db.clone());
        let ledger_reads = ledger_reads::start(db.clone());
        Ok(PostgresStore {
            db,
            hasher: KeyHasher::new(pepper),
            connector,
            keys: KeyEntries::default(),
            replies: ReplyCache::default(),
            key_watch: OnceLock::new(),
            probe: tokio::sync::Mutex::new(None),
            group,
            claims,
            reads,
            ledger_reads,
        })
    }

    /// Only migrates (the `payrail migrate` command).
    pub async fn migrate(url: &str, options: &Options) -> anyhow::Result<()> {
        let setup = Connector::new(&connect::config(url, options, false)?, options.connect_timeout);
        let (mut client, connection) = setup.connect().await.map_err(|e| unreachable(url, &e))?;
        tokio::spawn(connection);
        migrations::apply(&mut client).await
    }

    /// One statement on a pooled connection, under the call deadline.
    async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>> {
        let client = self.db.get().await?;
        let outcome = within(self.db.deadline, async {
            let statement = client.prepare_cached(sql).await.map_err(db_err)?;
            client.query(&statement, params).await.map_err(db_err)
        })
        .await;
        self.db.settle(client, outcome)
    }

    /// One `execute` per statement of `statements`, in order, on one pooled connection under
    /// the call deadline; the rows each changed.
    async fn execute_all(&self, statements: &[(&str, &[&(dyn ToSql + Sync)])]) -> Result<Vec<u64>> {
        let client = self.db.get().await?;
        let outcome = within(self.db.deadline, async {
            let mut changed = Vec::with_capacity(statements.len());
            for (sql, params) in statements {
                changed.push(client.execute(*sql, params).await.map_err(db_err)?);
            }
            Ok(changed)
        })
        .await;
        self.db.settle(client, outcome)
    }
}

fn unreachable(url: &str, err: &tokio_postgres::Error) -> anyhow::Error {
    anyhow::anyhow!("cannot reach PostgreSQL at {}: {}", redact(url), crate::error::chain(err))
}

/// Commits one batch in its own transaction: the writes under the call deadline, then the
/// COMMIT under its own (`faults::commit`: no answer is an unknown outcome, not a failure).
async fn commit_alone(db: &Db, batch: WriteBatch) -> Result<()> {
    let client = db.get().await?;
    let deadline = db.deadline_for(batch.writes.len());
    let key_epoch = match within(deadline, write_alone(&client, &batch)).await {
        Ok(epoch) => epoch,
        Err(err) => return roll_back(db, client, err).await,
    };
    if let Err(err) = faults::commit(&client, deadline).await {
        return db.settle(client, Err(err));
    }
    // A key change returns only once no instance can still serve the old key from its cache
    // (a wait of its own, bounded by the key leases rather than the call deadline).
    let acknowledged = match key_epoch {
        Some(epoch) => key_watch::await_acknowledged(&client, epoch, db.deadline).await,
        None => Ok(()),
    };
    db.settle(client, acknowledged)
}

/// The batch's transaction, up to its COMMIT (left to the caller); the new key epoch if it
/// moved one.
async fn write_alone(client: &deadpool_postgres::Object, batch: &WriteBatch) -> Result<Option<i64>> {
    client.batch_execute("BEGIN").await.map_err(db_err)?;
    writes::apply_all(client, batch.claim.as_ref(), &batch.writes).await?;
    let key_epoch = if batch.changes_keys() { Some(key_watch::bump(client).await?) } else { None };
    // Checked last, just before the commit: after this the request's answer is the commit's.
    if let Some(gate) = &batch.gate
        && !gate.begin_commit()
    {
        return Err(abandoned());
    }
    Ok(key_epoch)
}

/// Ends the transaction open on `client` after `err`, which is the answer: rolled back, or, if
/// the connection is in doubt, dropped (the server rolls back when it sees it close).
async fn roll_back<T>(db: &Db, client: deadpool_postgres::Object, err: Error) -> Result<T> {
    if faults::breaks_connection(&err) {
        return db.settle(client, Err(err));
    }
    match within(db.deadline, async { client.batch_execute("ROLLBACK").await.map_err(db_err) }).await {
        Ok(()) => Err(err),
        // The rollback failing says the connection cannot be trusted: it is dropped, and the
        // request's answer stays its own error.
        Err(_) => {
            db.discard(client);
            Err(err)
        }
    }
}

/// Fails, before any migration runs, when the master key ring cannot open the pepper the
/// database holds (the wrong `--master-key-file`, or none and a fresh key made in the data
/// directory): such an instance cannot serve, and a migration that raised the storage layout
/// would have stopped every older instance first.
async fn refuse_a_foreign_master_key(client: &tokio_postgres::Client, secrets: &SecretBox) -> anyhow::Result<()> {
    let known: bool = client.query_one("SELECT to_regclass('settings') IS NOT NULL", &[]).await?.get(0);
    if !known {
        return Ok(()); // a database no release has migrated yet
    }
    let stored = client.query_opt("SELECT value FROM settings WHERE name = $1", &[&secret_box::PEPPER_SETTING]).await?;
    if let Some(row) = stored {
        secret_box::open_pepper(secrets, &row.get::<_, Vec<u8>>(0))?;
    }
    Ok(())
}

/// The per-database secret keys are hashed under, stored sealed; made by the first instance.
/// A plain pepper left by an older release is sealed in place by a compare-and-set, so
/// instances starting together cannot clash: one update wins, the others change nothing (and
/// all hold the same pepper either way).
async fn load_pepper(client: &tokio_postgres::Client, secrets: &SecretBox) -> anyhow::Result<Vec<u8>> {
    let mut fresh = [0u8; 32];
    rand::rng().fill_bytes(&mut fresh);
    let sealed = secrets.seal(&fresh, secret_box::PEPPER_PURPOSE);
    let name = secret_box::PEPPER_SETTING;
    client.execute("INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING", &[&name, &sealed]).await?;
    let stored: Vec<u8> = client.query_one("SELECT value FROM settings WHERE name = $1", &[&name]).await?.get(0);
    let (pepper, reseal) = secret_box::open_pepper(secrets, &stored)?;
    if let Some(sealed) = reseal {
        let n = client.execute("UPDATE settings SET value = $1 WHERE name = $2 AND value = $3", &[&sealed, &name, &stored]).await?;
        if n == 1 {
            tracing::info!(key = %secrets.newest_id(), "sealed the API key pepper under the master key (it was stored plain)");
        }
    }
    Ok(pepper)
}

fn stored_object(row: &Row) -> StoredObject {
    StoredObject { id: row.get(0), parent_id: row.get(1), version: row.get(2), doc: row.get(3) }
}

fn api_key_row(row: &Row) -> (ApiKey, KeyHash) {
    let hash: Vec<u8> = row.get(1);
    let decommissioned_at: Option<i64> = row.get(8);
    let key = ApiKey {
        id: row.get(0),
        object: "api_key",
        name: row.get(2),
        organization_id: row.get(3),
        live_mode: row.get(4),
        created_at: Timestamp::from_micros(row.get(5)),
        updated_at: Timestamp::from_micros(row.get(6)),
        expires_at: row.get::<_, Option<i64>>(7).map(Timestamp::from_micros),
        decommissioned: decommissioned_at.is_some(),
        decommissioned_at: decommissioned_at.map(Timestamp::from_micros),
        idempotency_scope: row.get(9),
    };
    (key, KeyHash(hash.try_into().unwrap_or([0; 32])))
}

/// A key written by a release without idempotency scopes has none: its scope is its own id (I2).
const API_KEY_COLUMNS: &str = "id, key_hash, name, organization_id, live_mode, created_at, updated_at, expires_at, decommissioned_at, COALESCE(idempotency_scope, id)";

/// A list query's SQL and parameters (the same shape as SQLite's, with `$n` placeholders).
fn list_sql(query: &ListQuery) -> (String, Vec<Box<dyn ToSql + Sync + Send>>) {
    let mut args: Vec<Box<dyn ToSql + Sync + Send>> =
        vec![Box::new(query.scope.organization_id.clone()), Box::new(query.scope.live_mode), Box::new(query.kind.to_owned())];
    let mut sql = String::from(
        "SELECT o.id, o.parent_id, o.version, o.doc, o.seq FROM objects o WHERE o.org_id = $1 AND o.live_mode = $2 AND o.kind = $3",
    );
    let push = |args: &mut Vec<Box<dyn ToSql + Sync + Send>>, value: Box<dyn ToSql + Sync + Send>| {
        args.push(value);
        args.len()
    };
    if let Some(seq) = query.after_seq {
        let n = push(&mut args, Box::new(-seq));
        sql.push_str(&format!(" AND -o.seq > ${n}"));
    }
    for filter in &query.filters {
        let (name, op, value) = match filter {
            Filter::Eq { name, value } => (name, "=", value.clone()),
            Filter::Contains { name, needle } => (name, "LIKE", format!("%{}%", super::sql::escape_like(needle))),
            Filter::AtLeast { name, value } => (name, ">=", value.clone()),
            Filter::AtMost { name, value } => (name, "<=", value.clone()),
            Filter::CreatedFrom(at) => {
                let n = push(&mut args, Box::new(at.as_micros()));
                sql.push_str(&format!(" AND o.created_at >= ${n}"));
                continue;
            }
            Filter::CreatedTo(at) => {
                let n = push(&mut args, Box::new(at.as_micros()));
                sql.push_str(&format!(" AND o.created_at <= ${n}"));
                continue;
            }
            Filter::IdIn(ids) => {
                let n = push(&mut args, Box::new(ids.clone()));
                sql.push_str(&format!(" AND o.id = ANY(${n})"));
                continue;
            }
            Filter::Parent(id) => {
                let n = push(&mut args, Box::new(id.clone()));
                sql.push_str(&format!(" AND o.parent_id = ${n}"));
                continue;
            }
            Filter::SettledBy { settlement_id, of_parent } => {
                let n = push(&mut args, Box::new(settlement_id.clone()));
                sql.push_str(&if *of_parent {
                    format!(
                        " AND o.id IN (SELECT e.parent_id FROM ledger_postings p JOIN objects e ON e.id = p.entry_id WHERE p.settlement_id = ${n})"
                    )
                } else {
                    format!(" AND o.id IN (SELECT entry_id FROM ledger_postings WHERE settlement_id = ${n})")
                });
                continue;
            }
            Filter::Posting { filter, of_parent } => {
                let base = args.len();
                let (condition, values) = posting_condition(filter, *of_parent, |i| format!("${}", base + i));
                sql.push_str(&condition);
                args.extend(values.into_iter().map(|value| -> Box<dyn ToSql + Sync + Send> {
                    match value {
                        PostingValue::Text(t) => Box::new(t),
                        PostingValue::Bool(b) => Box::new(b),
                        PostingValue::Int(i) => Box::new(i),
                    }
                }));
                continue;
            }
            Filter::Keys { name, values } | Filter::AnyOf { name, values } => {
                let n_name = push(&mut args, Box::new(name.clone()));
                let n_values = push(&mut args, Box::new(values.clone()));
                let terms = format!("t.name = ${n_name} AND t.value = ANY(${n_values})");
                sql.push_str(&match filter {
                    // Keys name few objects: found from the terms, not tested object by object.
                    Filter::Keys { .. } => format!(" AND o.seq IN (SELECT t.object_seq FROM object_terms t WHERE {terms})"),
                    _ => format!(" AND EXISTS (SELECT 1 FROM object_terms t WHERE t.object_seq = o.seq AND {terms})"),
                });
                continue;
            }
        };
        let n_name = push(&mut args, Box::new(name.clone()));
        let n_value = push(&mut args, Box::new(value));
        let escape = if op == "LIKE" { " ESCAPE '\\'" } else { "" };
        sql.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM object_terms t WHERE t.object_seq = o.seq AND t.name = ${n_name} AND t.value {op} ${n_value}{escape})"
        ));
    }
    let n = push(&mut args, Box::new(i64::try_from(query.limit + 1).unwrap_or(i64::MAX)));
    // `-seq`, not `seq DESC`: only the objects_newest index serves it (see migration 0003).
    sql.push_str(&format!(" ORDER BY -o.seq LIMIT ${n}"));
    (sql, args)
}

#[async_trait]
impl Store for PostgresStore {
    /// Two: each commit is one backend's work on one core, and the lease fence that orders
    /// them is taken last (`writes::Bulk`), so two write their documents side by side.
    fn bulk_in_flight(&self) -> usize {
        BULK_IN_FLIGHT
    }

    async fn commit(&self, batch: WriteBatch) -> Result<()> {
        let saved: Vec<StoredReply> = reply_cache::saved(&batch.writes).cloned().collect();
        if group::eligible(&batch) {
            group::submit(&self.group, batch).await?;
        } else {
            commit_alone(&self.db, batch).await?;
        }
        self.replies.insert_committed(&saved);
        Ok(())
    }

    async fn ledger_accounts(&self, account_ids: &[String]) -> Result<Vec<(String, crate::store::ledger::AccountState)>> {
        ledger_reads::accounts(&self.ledger_reads, account_ids).await
    }

    async fn ledger_window(&self, account_id: &str, window: &crate::base::ledger::Window) -> Result<crate::base::ledger::Totals> {
        ledger_reads::window(&self.ledger_reads, account_id, window).await
    }

    async fn ledger_entry_versions(&self, entry_ids: &[String]) -> Result<Vec<(String, i64)>> {
        let rows = self.query(ledger::ENTRY_VERSIONS, &[&entry_ids]).await?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    async fn ledger_unsettled(&self, account_id: &str, before_micros: i64, upto_version: i64) -> Result<crate::store::ledger::Claimed> {
        let rows = self.query(ledger::UNSETTLED, &[&account_id, &before_micros, &upto_version]).await?;
        rows.first().map(ledger::claimed).ok_or_else(|| Error::internal("an aggregate without a row"))
    }

    async fn get(&self, kind: &'static str, scope: &Scope, id: &str) -> Result<Option<StoredObject>> {
        if id.contains('\0') {
            return Ok(None); // PostgreSQL's text holds no NUL, so nothing has this id
        }
        Ok(reads::submit(&self.reads, reads::Read::by_id(kind, scope, id)).await?.pop())
    }

    async fn list(&self, query: &ListQuery) -> Result<Page> {
        let cleaned;
        let query = if query.filters.iter().any(Filter::names_a_nul) {
            let Some(filters) = query.filters.iter().cloned().map(Filter::without_nul).collect::<Option<Vec<_>>>() else {
                return Ok(Page { items: Vec::new(), next_seq: None }); // a value no stored text holds
            };
            cleaned = ListQuery { kind: query.kind, scope: query.scope.clone(), filters, after_seq: query.after_seq, limit: query.limit };
            &cleaned
        } else {
            query
        };
        let (sql, args) = list_sql(query);
        let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a.as_ref() as &(dyn ToSql + Sync)).collect();
        let rows = self.query(&sql, &params).await?;
        let mut items: Vec<(StoredObject, i64)> = rows.iter().map(|row| (stored_object(row), row.get(4))).collect();
        let next_seq = if items.len() > query.limit {
            items.truncate(query.limit);
            items.last().map(|(_, seq)| *seq)
        } else {
            None
        };
        Ok(Page { items: items.into_iter().map(|(item, _)| item).collect(), next_seq })
    }

    async fn children(&self, kind: &'static str, scope: &Scope, parent_ids: &[String]) -> Result<Vec<StoredObject>> {
        if parent_ids.is_empty() {
            return Ok(Vec::new());
        }
        reads::submit(&self.reads, reads::Read::children(kind, scope, parent_ids)).await
    }

    async fn api_key_by_hash(&self, hash: &KeyHash) -> Result<Option<FoundKey>> {
        let (watch, _) = self.key_watch.get_or_init(|| key_watch::start(self.connector.clone(), self.db.deadline));
        // The epoch is read before the database, so an entry is never newer than its epoch.
        let epoch = watch.epoch();
        if let Some(hit) = epoch.and_then(|epoch| self.keys.get(epoch, hash)) {
            return Ok(Some(hit));
        }
        let sql = format!("SELECT {API_KEY_COLUMNS} FROM api_keys WHERE key_hash = $1");
        let found = self.query(&sql, &[&&hash.0[..]]).await?.first().map(api_key_row).map(|(key, hash)| (Arc::new(key), hash));
        if let (Some(epoch), Some(found)) = (epoch, &found) {
            self.keys.insert(epoch, found);
        }
        Ok(found)
    }

    async fn api_key(&self, id: &str) -> Result<Option<ApiKey>> {
        let sql = format!("SELECT {API_KEY_COLUMNS} FROM api_keys WHERE id = $1");
        Ok(self.query(&sql, &[&id]).await?.first().map(|row| api_key_row(row).0))
    }

    async fn api_keys(&self) -> Result<Vec<ApiKey>> {
        let sql = format!("SELECT {API_KEY_COLUMNS} FROM api_keys ORDER BY created_at, id");
        Ok(self.query(&sql, &[]).await?.iter().map(|row| api_key_row(row).0).collect())
    }

    fn key_hasher(&self) -> &KeyHasher {
        &self.hasher
    }

    async fn claim(&self, api_key_id: &str, key: &str, now: Timestamp, lease_ms: u64) -> Result<Claim> {
        if let Some(reply) = self.replies.get(api_key_id, key, now) {
            return Ok(Claim::Replay(reply));
        }
        let nonce: i64 = rand::rng().random_range(1..i64::MAX);
        let lease_until = now.plus_micros(i64::try_from(lease_ms).unwrap_or(i64::MAX / 1000).saturating_mul(1000));
        let request = claims::Request { api_key_id: api_key_id.to_owned(), key: key.to_owned(), nonce, lease_until, now };
        claims::submit(&self.db, &self.claims, request).await
    }

    async fn renew(&self, token: &ClaimToken, now: Timestamp, lease_ms: u64) -> Result<bool> {
        let lease_until = now.plus_micros(i64::try_from(lease_ms).unwrap_or(i64::MAX / 1000).saturating_mul(1000));
        let renewed = self
            .query(
                "UPDATE idempotency_claims SET lease_until = $4 WHERE api_key_id = $1 AND key = $2 AND nonce = $3 RETURNING nonce",
                &[&token.api_key_id, &token.key, &(token.nonce as i64), &lease_until.as_micros()],
            )
            .await?;
        Ok(!renewed.is_empty())
    }

    async fn release(&self, token: &ClaimToken) {
        let nonce = token.nonce as i64;
        let released = self
            .query(
                "DELETE FROM idempotency_claims WHERE api_key_id = $1 AND key = $2 AND nonce = $3 RETURNING nonce",
                &[&token.api_key_id, &token.key, &nonce],
            )
            .await;
        if let Err(err) = released {
            // The lease frees the key anyway; until then retries answer 409 (I8).
            tracing::warn!(error = %crate::error::chain(&err), "releasing an idempotency claim failed; its lease will free it");
        }
    }

    async fn scan_due(&self, kind: &'static str, term: &str, upto: &str, limit: usize) -> Result<Vec<(Scope, StoredObject)>> {
        let rows = self
            .query(
                "SELECT o.id, o.parent_id, o.version, o.doc, o.org_id, o.live_mode FROM object_terms t
                 JOIN objects o ON o.seq = t.object_seq
                 WHERE t.name = $1 AND t.value <= $2 AND o.kind = $3 ORDER BY t.value LIMIT $4",
                &[&term, &upto, &kind, &(limit as i64)],
            )
            .await?;
        Ok(rows.iter().map(|row| (Scope { organization_id: row.get(4), live_mode: row.get(5) }, stored_object(row))).collect())
    }

    async fn scan_terms(&self, kind: &'static str, term: &str, after: &str, limit: usize) -> Result<Vec<(Scope, StoredObject)>> {
        let rows = self
            .query(
                "SELECT o.id, o.parent_id, o.version, o.doc, o.org_id, o.live_mode FROM object_terms t
                 JOIN objects o ON o.seq = t.object_seq
                 WHERE t.name = $1 AND t.value > $2 AND o.kind = $3 ORDER BY t.value LIMIT $4",
                &[&term, &after, &kind, &(limit as i64)],
            )
            .await?;
        Ok(rows.iter().map(|row| (Scope { organization_id: row.get(4), live_mode: row.get(5) }, stored_object(row))).collect())
    }

    async fn outbox_after(&self, scope: &Scope, after: i64, limit: usize) -> Result<Vec<(i64, StoredObject)>> {
        let (after_xid, after_rank) = (after.max(0) >> RANK_BITS, after.max(0) & RANK_MASK);
        // Rows of the cursor's own transaction are read from its start, so ranks come out right.
        let fetch = i64::try_from(limit).unwrap_or(i64::MAX / 2).saturating_add(after_rank);
        let rows = self.query(OUTBOX_AFTER, &[&scope.organization_id, &scope.live_mode, &after_xid, &fetch]).await?;
        let mut out = Vec::with_capacity(limit);
        let (mut current_xid, mut rank) = (-1i64, 0i64);
        for row in &rows {
            let xid: i64 = row.get(4);
            rank = if xid == current_xid { rank + 1 } else { 1 };
            current_xid = xid;
            if rank > RANK_MASK {
                return Err(Error::internal("a transaction wrote more outbox rows than a position can number"));
            }
            let position = (xid << RANK_BITS) | rank;
            if position > after && out.len() < limit {
                out.push((position, stored_object(row)));
            }
        }
        Ok(out)
    }

    async fn outbox_newest(&self, _scope: &Scope) -> Result<i64> {
        // Every transaction below the horizon has finished; anything at or above it is later.
        let rows = self.query("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint", &[]).await?;
        let horizon: i64 = rows.first().map_or(0, |row| row.get(0));
        Ok((horizon << RANK_BITS) - 1)
    }

    async fn setting(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let rows = self.query("SELECT value FROM settings WHERE name = $1", &[&name]).await?;
        Ok(rows.first().map(|row| row.get(0)))
    }

    async fn replace_setting(&self, name: &str, old: &[u8], new: &[u8]) -> Result<bool> {
        let changed = self.execute_all(&[("UPDATE settings SET value = $1 WHERE name = $2 AND value = $3", &[&new, &name, &old])]).await?;
        Ok(changed.first() == Some(&1))
    }

    async fn sealed_replies(&self, now: Timestamp) -> Result<Vec<StoredReply>> {
        let rows = self
            .query(
                "SELECT api_key_id, key, status, content_type, body, fingerprint, created_at, expires_at FROM idempotency_replies
                 WHERE expires_at > $1 AND substring(body FROM 1 FOR $2) = $3",
                &[&now.as_micros(), &(secret_box::MAGIC.len() as i32), &secret_box::MAGIC.as_slice()],
            )
            .await?;
        Ok(rows.iter().map(|row| claims::reply_from(&row.get::<_, String>(0), &row.get::<_, String>(1), row)).collect())
    }

    async fn replace_reply_body(&self, api_key_id: &str, key: &str, old: &[u8], new: &[u8]) -> Result<bool> {
        let changed = self
            .execute_all(&[(
                "UPDATE idempotency_replies SET body = $1 WHERE api_key_id = $2 AND key = $3 AND body = $4",
                &[&new, &api_key_id, &key, &old],
            )])
            .await?;
        Ok(changed.first() == Some(&1))
    }

    async fn purge_replies(&self, now: Timestamp, batch_max: usize) -> Result<usize> {
        // Expired claims of vanished owners go too, and instances gone for an hour; they are
        // harmless but need not linger.
        let (now_us, hour_ago_us, limit) = (now.as_micros(), now.plus_secs(-3600).as_micros(), batch_max as i64);
        let changed = self
            .execute_all(&[
                ("DELETE FROM idempotency_claims WHERE lease_until <= $1", &[&now_us]),
                ("DELETE FROM key_cache_instances WHERE alive_until <= $1", &[&hour_ago_us]),
                (
                    "DELETE FROM idempotency_replies WHERE ctid = ANY (ARRAY (
                       SELECT ctid FROM idempotency_replies WHERE expires_at <= $1 LIMIT $2))",
                    &[&now_us, &limit],
                ),
            ])
            .await?;
        Ok(changed.last().map_or(0, |&purged| usize::try_from(purged).unwrap_or(0)))
    }

    async fn health(&self, deadline: Duration) -> Result<()> {
        within(deadline, async {
            let mut slot = self.probe.lock().await;
            // Join a probe in flight; one that ended while nobody waited says how things were.
            if slot.as_ref().is_some_and(|probe| probe.is_finished()) {
                *slot = None;
            }
            let probe = slot.get_or_insert_with(|| tokio::spawn(probe(self.db.clone())));
            let outcome = probe.await.unwrap_or_else(|_| Err(Error::internal("the health probe panicked")));
            *slot = None;
            outcome
        })
        .await
    }
}

/// Whether a writable primary answers, on a pooled connection, under the call deadline.
async fn probe(db: Db) -> Result<()> {
    let client = db.get().await?;
    let outcome = within(db.deadline, async {
        // A standby, or a primary told to refuse writes (as a demoted one is), is not healthy.
        let row =
            client.query_one("SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'", &[]).await.map_err(db_err)?;
        if row.get::<_, bool>(0) {
            return Err(db_err_read_only());
        }
        Ok(())
    })
    .await;
    db.settle(client, outcome)
}

/// What a read-only primary answers writes with (25006), for the health probe that finds one.
fn db_err_read_only() -> Error {
    faults::unavailable_because("25006", "the database does not take writes (a standby, or set read-only)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s2_redacts_the_password() {
        assert_eq!(redact("postgres://app:s3cret@db.internal:5432/payrail?sslmode=disable"), "postgres://app:***@db.internal:5432/payrail");
        assert_eq!(redact("postgres://localhost/payrail"), "postgres://localhost/payrail");
        assert!(!redact("postgresql://u:p@h/d").contains(":p@"));
    }
}
