//! Applying a write batch inside one PostgreSQL transaction.
//!
//! Round trips, not the database, bound a create here: a batch of single-statement writes is
//! sent as one pipeline (PostgreSQL runs the statements in the order sent, so the effect is the
//! same as one after the other), and every statement is prepared once per connection.

use std::collections::HashSet;

use deadpool_postgres::Object;
use futures_util::future::join_all;
use tokio_postgres::Statement;
use tokio_postgres::types::ToSql;

use super::{db_err, ledger};
use crate::base::api_key::{ApiKey, KeyHash};
use crate::error::{Error, Result};
use crate::store::sql::kind_str;
use crate::store::{ClaimToken, ObjectRecord, StoredReply, Write, claim_lost, lease_held};

/// Releases the request's claim inside the commit's transaction; no row means the claim is no
/// longer ours, and the commit must not happen (see migration 0004).
const RELEASE_OWN_CLAIM: &str = "DELETE FROM idempotency_claims WHERE api_key_id = $1 AND key = $2 AND nonce = $3";

/// Batches of at least this many writes go as a few set-based statements when they can
/// ([`Bulk`]); smaller ones (a request's) are pipelined one statement a write.
const BULK_MIN: usize = 64;

/// Applies `writes` (and releases `claim`) on `tx`, a connection with a transaction open, in
/// order; the first failure wins.
pub async fn apply_all(tx: &Object, claim: Option<&ClaimToken>, writes: &[Write]) -> Result<()> {
    if writes.len() >= BULK_MIN
        && let Some(bulk) = Bulk::of(writes)
    {
        if let Some(token) = claim {
            release_own_claim(tx, token).await?;
        }
        return bulk.apply(tx).await;
    }
    // A replace or a cap is several dependent statements; batches holding one go one write at a time.
    let pipelined = writes.iter().all(|write| single_statement(write).is_some());
    // Prepared first, in order, so that the pipeline's statements leave in the batch's order.
    for write in writes {
        if let Some(sql) = single_statement(write) {
            tx.prepare_cached(sql).await.map_err(db_err)?;
        }
    }
    if claim.is_some() {
        tx.prepare_cached(RELEASE_OWN_CLAIM).await.map_err(db_err)?;
    }
    let release = async {
        match claim {
            Some(token) => release_own_claim(tx, token).await,
            None => Ok(()),
        }
    };
    if !pipelined {
        release.await?;
        for write in lock_order(tx, writes).await? {
            apply(tx, write).await?;
        }
        return Ok(());
    }
    let (released, applied) = tokio::join!(release, join_all(writes.iter().map(|write| apply(tx, write))));
    released?;
    applied.into_iter().collect()
}

/// The order a batch's writes are applied in: as given, except that the unique keys of a batch
/// that posts to a ledger are taken after its accounts are locked. The group commit can only
/// take them in that order (it locks the accounts, then learns which postings pass and so which
/// keys to take), and a batch committed alone that took its key first could deadlock against a
/// group, which a client racing another on one `external_id` would see as a 409. A key already
/// taken still refuses the batch before anything is locked, as in the group.
async fn lock_order<'a>(tx: &Object, writes: &'a [Write]) -> Result<Vec<&'a Write>> {
    let keys: Vec<(&str, &str, &str)> = unique_keys(writes).collect();
    let posts = writes.iter().any(|w| matches!(w, Write::LedgerPost { .. } | Write::LedgerSettle { .. }));
    if !posts || keys.is_empty() {
        return Ok(writes.iter().collect());
    }
    let taken = ledger::taken_keys(tx, &keys.iter().map(|(key, _, _)| *key).collect::<Vec<_>>()).await?;
    if let Some((_, parameter, message)) = keys.iter().find(|(key, _, _)| taken.iter().any(|t| t == key)) {
        return Err(Error::invalid(*parameter, *message));
    }
    let (uniques, rest): (Vec<&Write>, Vec<&Write>) = writes.iter().partition(|w| matches!(w, Write::Unique { .. }));
    Ok(rest.into_iter().chain(uniques).collect())
}

/// The unique keys among `writes`: (key, parameter, message).
pub(super) fn unique_keys(writes: &[Write]) -> impl Iterator<Item = (&str, &str, &str)> {
    writes.iter().filter_map(|w| match w {
        Write::Unique { key, parameter, message } => Some((key.as_str(), parameter.as_str(), message.as_str())),
        _ => None,
    })
}

async fn release_own_claim(tx: &Object, token: &ClaimToken) -> Result<()> {
    let statement = tx.prepare_cached(RELEASE_OWN_CLAIM).await.map_err(db_err)?;
    let released = tx.execute(&statement, &[&token.api_key_id, &token.key, &(token.nonce as i64)]).await.map_err(db_err)?;
    if released == 0 {
        return Err(claim_lost());
    }
    Ok(())
}

const INSERT_OBJECT: &str = "WITH o AS (
       INSERT INTO objects (id, kind, org_id, live_mode, parent_id, created_at, version, doc)
       VALUES ($1, $2, $3, $4, $5, $6, 1, $7) RETURNING seq)
     INSERT INTO object_terms (object_seq, name, value)
     SELECT o.seq, t.n, t.v FROM o, unnest($8::text[], $9::text[]) AS t(n, v)";
// Terms go with their objects (no foreign key since migration 0007); the count is the objects'.
const DELETE_OBJECT: &str = "WITH gone AS (
       DELETE FROM objects WHERE id = $1 AND kind = $2 AND org_id = $3 AND live_mode = $4 RETURNING seq),
     terms AS (DELETE FROM object_terms WHERE object_seq IN (SELECT seq FROM gone))
     SELECT count(*) FROM gone";
const DELETE_CHILDREN: &str = "WITH gone AS (
       DELETE FROM objects WHERE kind = $1 AND org_id = $2 AND live_mode = $3 AND parent_id = $4 RETURNING seq),
     terms AS (DELETE FROM object_terms WHERE object_seq IN (SELECT seq FROM gone))
     SELECT count(*) FROM gone";
// KEY SHARE locks the row until commit: a concurrent delete waits for us.
const REQUIRE: &str = "SELECT 1 FROM objects WHERE id = $1 AND kind = $2 AND org_id = $3 AND live_mode = $4 FOR KEY SHARE";
const INSERT_API_KEY: &str =
    "INSERT INTO api_keys (id, key_hash, name, organization_id, live_mode, created_at, updated_at, expires_at, decommissioned_at,
       idempotency_scope)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";
const UPDATE_API_KEY: &str = "UPDATE api_keys SET name = $2, updated_at = $3, expires_at = $4, decommissioned_at = $5 WHERE id = $1";
const SAVE_REPLY: &str =
    "INSERT INTO idempotency_replies (api_key_id, key, status, content_type, body, fingerprint, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (api_key_id, key) DO UPDATE SET status = EXCLUDED.status, content_type = EXCLUDED.content_type,
       body = EXCLUDED.body, fingerprint = EXCLUDED.fingerprint, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at";
// One statement, so that batches of replaces are pipelined like inserts. Only the terms that
// changed are touched: the delete removes the old ones not in the new set and the insert adds
// the new ones not already there, two disjoint sets, so the order in which PostgreSQL runs the
// two (it does not say) cannot matter. No row means the version moved on or the object is gone.
const REPLACE_OBJECT: &str = "WITH o AS (
       UPDATE objects SET doc = $1, parent_id = $2, version = version + 1
       WHERE id = $3 AND kind = $4 AND org_id = $5 AND live_mode = $6 AND version = $7 RETURNING seq),
     new_terms AS (SELECT t.n, t.v FROM unnest($8::text[], $9::text[]) AS t(n, v)),
     gone AS (DELETE FROM object_terms x USING o
       WHERE x.object_seq = o.seq AND (x.name, x.value) NOT IN (SELECT n, v FROM new_terms)),
     added AS (INSERT INTO object_terms (object_seq, name, value)
       SELECT o.seq, new_terms.n, new_terms.v FROM o, new_terms ON CONFLICT DO NOTHING)
     SELECT count(*) FROM o";
// WITH ORDINALITY keeps the records' order in `seq`, which lists and the outbox follow.
const INSERT_MANY: &str = "WITH o AS (
       INSERT INTO objects (id, kind, org_id, live_mode, parent_id, created_at, version, doc)
       SELECT id, kind, org_id, live_mode, parent_id, created_at, 1, doc
       FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::text[], $6::bigint[], $7::text[])
         WITH ORDINALITY AS r(id, kind, org_id, live_mode, parent_id, created_at, doc, n)
       ORDER BY n
       RETURNING seq, id)
     INSERT INTO object_terms (object_seq, name, value)
     SELECT o.seq, t.name, t.value FROM o JOIN unnest($8::text[], $9::text[], $10::text[]) AS t(id, name, value) ON t.id = o.id";
// REPLACE_OBJECT for many objects at once (ids distinct): the same disjoint term changes, both
// set differences (EXCEPT, hashed) between the objects' terms as they were and as they are to
// be. A generic plan of NOT EXISTS against the CTE was a nested loop, quadratic in the batch (4 s
// for 1,000 objects); inserting every new term and letting ON CONFLICT skip the unchanged ones
// cost an index probe apiece (the cut-off's parts keep 5 of 8 terms; half the statement's time).
// The terms read are the statement's snapshot, and those of an updated object are its locker's
// alone: every change of terms comes with a change of version (an object changed since the
// snapshot fails its version check and is not updated). So the terms added are never there
// already, and the insert needs no ON CONFLICT: its speculative insertion (an extra index probe
// and WAL record a term) made that insert about a third slower (15,000 terms: 139 to 156 ms
// against 103 to 112), and a cut-off adds five terms an order this way.
const REPLACE_MANY: &str = "WITH input AS (
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::bigint[], $6::text[], $7::text[])
         AS i(id, kind, org_id, live_mode, version, doc, parent_id)),
     o AS (UPDATE objects x SET doc = i.doc, parent_id = i.parent_id, version = x.version + 1 FROM input i
       WHERE x.id = i.id AND x.kind = i.kind AND x.org_id = i.org_id AND x.live_mode = i.live_mode AND x.version = i.version
       RETURNING x.seq, x.id),
     new_terms AS (SELECT o.seq, t.name, t.value
       FROM o JOIN unnest($8::text[], $9::text[], $10::text[]) AS t(id, name, value) ON t.id = o.id),
     old_terms AS (SELECT k.object_seq AS seq, k.name, k.value FROM object_terms k JOIN o ON k.object_seq = o.seq),
     gone AS (DELETE FROM object_terms x USING (SELECT * FROM old_terms EXCEPT SELECT * FROM new_terms) d
       WHERE x.object_seq = d.seq AND x.name = d.name AND x.value = d.value),
     added AS (INSERT INTO object_terms (object_seq, name, value)
       SELECT * FROM new_terms EXCEPT SELECT * FROM old_terms)
     SELECT id FROM o";
// Waits for every transaction writing one of the rows (and then holds them), in id order so that
// two such waits lock alike.
const WAIT_FOR_WRITERS: &str = "SELECT 1 FROM objects WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE";
const LEASE: &str = "INSERT INTO leases (name, holder, until) VALUES ($1, $2, $3)
     ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until
     WHERE leases.holder = EXCLUDED.holder OR leases.until < $4";
const UNLEASE: &str = "DELETE FROM leases WHERE name = $1 AND holder = $2";
const PURGE_REPLIES: &str = "DELETE FROM idempotency_replies r USING unnest($1::text[], $2::text[]) AS k(api_key_id, key)
     WHERE r.api_key_id = k.api_key_id AND r.key = k.key AND r.expires_at <= $3";

/// The one statement a write is, if it is one.
fn single_statement(write: &Write) -> Option<&'static str> {
    Some(match write {
        Write::Insert(_) => INSERT_OBJECT,
        Write::Replace { .. } => REPLACE_OBJECT,
        Write::Lease { .. } => LEASE,
        Write::Unlease { .. } => UNLEASE,
        Write::Cap { .. }
        | Write::Unique { .. }
        | Write::ReleaseUnique { .. }
        | Write::LedgerOpen { .. }
        | Write::LedgerPost { .. }
        | Write::LedgerSettle { .. }
        | Write::LedgerClaim(_)
        | Write::LedgerUnclaim { .. } => return None,
        Write::Delete { .. } => DELETE_OBJECT,
        Write::DeleteChildren { .. } => DELETE_CHILDREN,
        Write::Require { .. } => REQUIRE,
        Write::InsertApiKey { .. } => INSERT_API_KEY,
        Write::UpdateApiKey(_) => UPDATE_API_KEY,
        Write::SaveReply(_) => SAVE_REPLY,
        Write::PurgeReplies { .. } => PURGE_REPLIES,
    })
}

/// A large batch of inserts and replaces (a cut-off's part, a bank file's effects) written as
/// a few statements instead of one per write: unique keys first, in order, then every insert in
/// one statement (in the batch's order, which `seq` keeps), then every replace in one, and the
/// lease fences last. Within one transaction the result is the batch's, one write after the
/// other, as long as no replace touches an object the batch inserts or replaces twice; a batch
/// that does is not bulk. Nothing in the batch depends on its fence, and a fence locks the
/// lease's row until the commit: taken last, a worker's bulk commits under one lease write
/// their documents side by side and queue only for the fence and the flush.
struct Bulk<'a> {
    uniques: Vec<&'a Write>,
    inserts: Vec<&'a ObjectRecord>,
    replaces: Vec<(&'a ObjectRecord, i64)>,
    fences: Vec<&'a Write>,
}

impl<'a> Bulk<'a> {
    fn of(writes: &'a [Write]) -> Option<Self> {
        let mut bulk = Bulk { uniques: Vec::new(), inserts: Vec::new(), replaces: Vec::new(), fences: Vec::new() };
        for write in writes {
            match write {
                Write::Insert(record) => bulk.inserts.push(record),
                Write::Replace { record, expected_version } => bulk.replaces.push((record, *expected_version)),
                Write::Unique { .. } => bulk.uniques.push(write),
                Write::Lease { .. } => bulk.fences.push(write),
                _ => return None,
            }
        }
        let mut ids: HashSet<&str> = bulk.inserts.iter().map(|r| r.id.as_str()).collect();
        bulk.replaces.iter().all(|(r, _)| ids.insert(r.id.as_str())).then_some(bulk)
    }

    async fn apply(self, tx: &Object) -> Result<()> {
        for write in &self.uniques {
            apply(tx, write).await?;
        }
        for chunk in chunks(&self.inserts, |r| r.doc.len()) {
            insert_many(tx, chunk).await?;
        }
        for chunk in chunks(&self.replaces, |(r, _)| r.doc.len()) {
            replace_many(tx, chunk).await?;
        }
        for write in &self.fences {
            apply(tx, write).await?;
        }
        Ok(())
    }
}

/// Documents a bulk statement carries at most, in bytes: its parameters are encoded whole into
/// one message, so a bank file's 50,000 transactions go as several statements, not one of
/// hundreds of megabytes held twice in memory.
const BULK_BYTES: usize = 4 << 20;

/// `items` cut, in order, into runs of at most [`BULK_BYTES`] of documents (at least one item each).
fn chunks<T>(items: &[T], size: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let (mut out, mut start, mut bytes) = (Vec::new(), 0, 0);
    for (i, item) in items.iter().enumerate() {
        if i > start && bytes + size(item) > BULK_BYTES {
            out.push(&items[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size(item);
    }
    if start < items.len() {
        out.push(&items[start..]);
    }
    out
}

/// What a bulk statement takes of its records, one array a column.
struct Columns<'a> {
    ids: Vec<&'a str>,
    kinds: Vec<&'a str>,
    orgs: Vec<&'a str>,
    lives: Vec<bool>,
    parents: Vec<Option<&'a str>>,
    docs: Vec<&'a str>,
    /// The records' distinct terms: owner id, name, value.
    term_owners: Vec<&'a str>,
    term_names: Vec<&'a str>,
    term_values: Vec<&'a str>,
}

impl<'a> Columns<'a> {
    fn of(records: impl Iterator<Item = &'a ObjectRecord>) -> Self {
        let mut c = Columns {
            ids: Vec::new(),
            kinds: Vec::new(),
            orgs: Vec::new(),
            lives: Vec::new(),
            parents: Vec::new(),
            docs: Vec::new(),
            term_owners: Vec::new(),
            term_names: Vec::new(),
            term_values: Vec::new(),
        };
        for r in records {
            c.ids.push(&r.id);
            c.kinds.push(r.kind);
            c.orgs.push(&r.scope.organization_id);
            c.lives.push(r.scope.live_mode);
            c.parents.push(r.parent_id.as_deref());
            c.docs.push(&r.doc);
            for (name, value) in distinct_terms(r) {
                c.term_owners.push(&r.id);
                c.term_names.push(name);
                c.term_values.push(value);
            }
        }
        c
    }
}

/// Inserts `records` in one statement, `seq` in their order.
pub async fn insert_many(tx: &Object, records: &[&ObjectRecord]) -> Result<()> {
    if records.is_empty() {
        return Ok(());
    }
    let c = Columns::of(records.iter().copied());
    let created: Vec<i64> = records.iter().map(|r| r.created_at.as_micros()).collect();
    let statement = tx.prepare_cached(INSERT_MANY).await.map_err(db_err)?;
    let params: [&(dyn ToSql + Sync); 10] =
        [&c.ids, &c.kinds, &c.orgs, &c.lives, &c.parents, &created, &c.docs, &c.term_owners, &c.term_names, &c.term_values];
    tx.execute(&statement, &params).await.map_err(db_err)?;
    Ok(())
}

/// Replaces each record guarded by its expected version, in one statement; the first that
/// changed no row fails the batch as its own replace would (404 gone, 409 changed).
///
/// A statement sees the rows as its snapshot has them, so a record whose expected version is
/// the one another transaction is writing (a worker's next commit, prepared on the one still in
/// flight) is not there yet: those are tried once more after waiting for their writers (a
/// lock), under a fresh snapshot. Only then is a version that does not match a conflict.
async fn replace_many(tx: &Object, replaces: &[(&ObjectRecord, i64)]) -> Result<()> {
    if replaces.is_empty() {
        return Ok(());
    }
    let replaced = replace_once(tx, replaces).await?;
    if replaced.len() == replaces.len() {
        return Ok(());
    }
    let missed: Vec<(&ObjectRecord, i64)> = replaces.iter().filter(|(r, _)| !replaced.contains(&r.id)).copied().collect();
    let ids: Vec<&str> = missed.iter().map(|(r, _)| r.id.as_str()).collect();
    tx.execute(WAIT_FOR_WRITERS, &[&ids]).await.map_err(db_err)?;
    let replaced = replace_once(tx, &missed).await?;
    match missed.iter().find(|(r, _)| !replaced.contains(&r.id)) {
        Some((record, _)) => Err(replace_refused(tx, record).await),
        None => Ok(()),
    }
}

/// The ids [`REPLACE_MANY`] replaced.
async fn replace_once(tx: &Object, replaces: &[(&ObjectRecord, i64)]) -> Result<HashSet<String>> {
    let c = Columns::of(replaces.iter().map(|(r, _)| *r));
    let versions: Vec<i64> = replaces.iter().map(|(_, v)| *v).collect();
    let statement = tx.prepare_cached(REPLACE_MANY).await.map_err(db_err)?;
    let params: [&(dyn ToSql + Sync); 10] =
        [&c.ids, &c.kinds, &c.orgs, &c.lives, &versions, &c.docs, &c.parents, &c.term_owners, &c.term_names, &c.term_values];
    let rows = tx.query(&statement, &params).await.map_err(db_err)?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Applies one write: a statement of its own, or (a replace, a cap) a few dependent ones.
async fn apply(tx: &Object, write: &Write) -> Result<()> {
    let Some(sql) = single_statement(write) else {
        return match write {
            Write::Cap { kind, scope, max, parameter, message } => {
                within_cap(tx, kind, scope, *max).await?.then_some(()).ok_or_else(|| Error::invalid(parameter.clone(), message.clone()))
            }
            Write::Unique { key, parameter, message } => ledger::unique(tx, key, parameter, message).await,
            Write::ReleaseUnique { key } => ledger::release_unique(tx, key).await,
            Write::LedgerOpen { account_id, credit_normal } => ledger::open(tx, account_id, *credit_normal).await,
            Write::LedgerPost { lines, guards } => ledger::post(tx, lines, guards).await,
            Write::LedgerSettle { lines, post } => ledger::settle(tx, lines, *post).await,
            Write::LedgerClaim(claim) => ledger::claim(tx, claim).await,
            Write::LedgerUnclaim { account_id, settlement_id } => ledger::unclaim(tx, account_id, settlement_id).await,
            _ => Err(Error::internal("a write without a statement")),
        };
    };
    let statement = tx.prepare_cached(sql).await.map_err(db_err)?;
    let affected = execute(tx, &statement, write).await.map_err(db_err)?;
    if let Write::Replace { record, .. } = write
        && affected == 0
    {
        return Err(replace_refused(tx, record).await);
    }
    check_affected(write, affected)
}

/// Runs a single-statement write; how many rows it touched.
async fn execute(tx: &Object, statement: &Statement, write: &Write) -> Result<u64, tokio_postgres::Error> {
    match write {
        Write::Insert(record) => insert_object(tx, statement, record).await,
        Write::Delete { kind, scope, id } => deleted(tx.query_one(statement, &[id, kind, &scope.organization_id, &scope.live_mode]).await),
        Write::Require { kind, scope, id, .. } => tx.execute(statement, &[id, kind, &scope.organization_id, &scope.live_mode]).await,
        Write::DeleteChildren { kind, scope, parent_id } => {
            deleted(tx.query_one(statement, &[kind, &scope.organization_id, &scope.live_mode, parent_id]).await)
        }
        Write::InsertApiKey { key, hash } => insert_api_key(tx, statement, key, hash).await,
        Write::UpdateApiKey(key) => update_api_key(tx, statement, key).await,
        Write::SaveReply(reply) => save_reply(tx, statement, reply).await,
        Write::Replace { record, expected_version } => {
            let (names, values) = term_columns(record);
            let scope = &record.scope;
            let params: [&(dyn ToSql + Sync); 9] = [
                &record.doc,
                &record.parent_id,
                &record.id,
                &record.kind,
                &scope.organization_id,
                &scope.live_mode,
                expected_version,
                &names,
                &values,
            ];
            deleted(tx.query_one(statement, &params).await)
        }
        Write::Lease { name, holder, now, until } => tx.execute(statement, &[name, holder, &until.as_micros(), &now.as_micros()]).await,
        Write::Unlease { name, holder } => tx.execute(statement, &[name, holder]).await,
        Write::PurgeReplies { keys, before } => {
            let (ids, names): (Vec<String>, Vec<String>) = keys.iter().cloned().unzip();
            tx.execute(statement, &[&ids, &names, &before.as_micros()]).await
        }
        // `single_statement` gives these none, so `apply` never sends them here.
        _ => unreachable!("a write of several statements has no single statement"),
    }
}

/// What a write that touched no row means: a 404, a 422 naming the missing reference, or nothing.
fn check_affected(write: &Write, affected: u64) -> Result<()> {
    match write {
        Write::Delete { kind, .. } if affected == 0 => Err(Error::not_found(&kind_str(kind))),
        Write::Require { kind, parameter, .. } if affected == 0 => {
            Err(Error::invalid(parameter.clone(), format!("{parameter} does not name an existing {}", kind_str(kind))))
        }
        Write::UpdateApiKey(_) if affected == 0 => Err(Error::not_found("api key")),
        Write::Lease { name, .. } if affected == 0 => Err(lease_held(name)),
        _ => Ok(()),
    }
}

async fn insert_object(tx: &Object, statement: &Statement, record: &ObjectRecord) -> Result<u64, tokio_postgres::Error> {
    let (names, values) = term_columns(record);
    let scope = &record.scope;
    let created_at = record.created_at.as_micros();
    let params: [&(dyn ToSql + Sync); 9] =
        [&record.id, &record.kind, &scope.organization_id, &scope.live_mode, &record.parent_id, &created_at, &record.doc, &names, &values];
    tx.execute(statement, &params).await
}

async fn insert_api_key(tx: &Object, statement: &Statement, key: &ApiKey, hash: &KeyHash) -> Result<u64, tokio_postgres::Error> {
    let params: [&(dyn ToSql + Sync); 10] = [
        &key.id,
        &&hash.0[..],
        &key.name,
        &key.organization_id,
        &key.live_mode,
        &key.created_at.as_micros(),
        &key.updated_at.as_micros(),
        &key.expires_at.map(|t| t.as_micros()),
        &key.decommissioned_at.map(|t| t.as_micros()),
        &key.idempotency_scope,
    ];
    tx.execute(statement, &params).await
}

async fn update_api_key(tx: &Object, statement: &Statement, key: &ApiKey) -> Result<u64, tokio_postgres::Error> {
    let params: [&(dyn ToSql + Sync); 5] = [
        &key.id,
        &key.name,
        &key.updated_at.as_micros(),
        &key.expires_at.map(|t| t.as_micros()),
        &key.decommissioned_at.map(|t| t.as_micros()),
    ];
    tx.execute(statement, &params).await
}

async fn save_reply(tx: &Object, statement: &Statement, reply: &StoredReply) -> Result<u64, tokio_postgres::Error> {
    let params: [&(dyn ToSql + Sync); 8] = [
        &reply.api_key_id,
        &reply.key,
        &i32::from(reply.status),
        &reply.content_type,
        &&reply.body[..],
        &&reply.fingerprint[..],
        &reply.created_at.as_micros(),
        &reply.expires_at.as_micros(),
    ];
    tx.execute(statement, &params).await
}

/// How many objects a delete statement removed (its one row is their count).
fn deleted(row: std::result::Result<tokio_postgres::Row, tokio_postgres::Error>) -> std::result::Result<u64, tokio_postgres::Error> {
    row.map(|row| u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
}

/// The record's terms, each (name, value) once: the table's key, and inserts no longer skip
/// duplicates (migration 0007).
pub fn distinct_terms(record: &ObjectRecord) -> Vec<(&str, &str)> {
    let mut terms: Vec<(&str, &str)> = record.terms.iter().map(|t| (t.name.as_str(), t.value.as_str())).collect();
    terms.sort_unstable();
    terms.dedup();
    terms
}

fn term_columns(record: &ObjectRecord) -> (Vec<&str>, Vec<&str>) {
    distinct_terms(record).into_iter().unzip()
}

/// Whether `scope` holds fewer than `max` objects of `kind`. The transaction first takes an
/// advisory lock on (kind, scope), held until it ends: a concurrent batch with the same cap, on
/// any instance, waits here until this one commits, and its count (a new statement, so a new
/// snapshot under READ COMMITTED) then sees this one's insert. Nothing races past the cap.
async fn within_cap(tx: &Object, kind: &str, scope: &crate::base::api_key::Scope, max: usize) -> Result<bool> {
    let lock_name = format!("payrail.cap/{kind}/{}/{}", scope.live_mode, scope.organization_id);
    tx.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", &[&lock_name]).await.map_err(db_err)?;
    let limit = i64::try_from(max).unwrap_or(i64::MAX);
    let row = tx
        .query_one(
            "SELECT count(*) FROM (SELECT 1 FROM objects WHERE org_id = $1 AND live_mode = $2 AND kind = $3 LIMIT $4) AS held",
            &[&scope.organization_id, &scope.live_mode, &kind, &limit],
        )
        .await
        .map_err(db_err)?;
    Ok(row.get::<_, i64>(0) < limit)
}

/// Why a replace changed no row: the object is gone (404) or changed since it was read (409).
async fn replace_refused(tx: &Object, record: &ObjectRecord) -> Error {
    let scope = &record.scope;
    let exists = tx
        .query_opt(
            "SELECT 1 FROM objects WHERE id = $1 AND kind = $2 AND org_id = $3 AND live_mode = $4",
            &[&record.id, &record.kind, &scope.organization_id, &scope.live_mode],
        )
        .await;
    match exists {
        Err(err) => db_err(err),
        Ok(None) => Error::not_found(&kind_str(record.kind)),
        Ok(Some(_)) => Error::Conflict {
            message: format!("the {} was changed by another request; retry", kind_str(record.kind)),
            parameter: None,
            retry_after_s: Some(0),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::{BULK_BYTES, chunks};

    #[test]
    fn bulk_chunks_keep_order_and_stay_under_the_byte_bound() {
        let sizes = [BULK_BYTES / 2, BULK_BYTES / 2, 1, BULK_BYTES * 2, 3];
        let cut = chunks(&sizes, |s| *s);
        assert_eq!(cut, [&sizes[0..2], &sizes[2..3], &sizes[3..4], &sizes[4..5]], "an item over the bound goes alone");
        assert!(chunks(&[] as &[usize], |s| *s).is_empty());
        assert_eq!(chunks(&[1usize; 10], |s| *s), [&[1usize; 10][..]]);
    }
}
