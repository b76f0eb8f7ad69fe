//! The inbound half of a bank connection (SPEC B5, B6): the bank's answers in the connection's
//! inbound folder are fetched, read, and applied, each file exactly once and whole.
//!
//! A poll takes the connection's inbound lease (`bank_inbound/<connection>`: one poller per
//! connection at a time across instances, and a fence in every commit), lists the folder, and
//! for each file, oldest name first:
//!
//! 1. fetches it to a spool file and hashes it; a file already recorded (same connection, same
//!    SHA-256, any name) was applied before: it is only removed from the folder;
//! 2. reads it (`bank::formats::answers`). A file that cannot be read is recorded as `rejected`
//!    with the reason (an event `rejected` on the `bank_file`, a log line), then moved aside at
//!    the bank (`rejected/NAME`): nothing else changes;
//! 3. stages every effect of the file ([`apply`]) and commits them in ONE batch with the file's
//!    record, its kept bytes and the unique key of its content: all of the file or none of it,
//!    exactly once whatever crashes or instances happen (a racing instance's commit fails on the
//!    key, and it only removes the file). A file with an answer Payrail refuses to apply is
//!    rejected and moved aside as in step 2, so one bad file never stops the files after it;
//! 4. removes the file from the bank's folder. A crash before this step leaves the file there;
//!    the next poll finds it recorded and only removes it.
//!
//! Limits: a file over [`MAX_FILE_BYTES`] is rejected unread; a poll handles at most
//! [`FILES_PER_POLL`] files (the rest wait for the next poll).

pub mod apply;
pub mod record;

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use sha2::Digest as _;

use crate::bank::connection as bank_connection;
use crate::bank::cutoff::lease::Lease;
use crate::bank::transport::{self, RemoteFile, Transport};
use crate::base::secret_box::SecretBox;
use crate::base::time::Timestamp;
use crate::domain::connection::Registered;
use crate::domain::{Ctx, event};
use crate::error::Error;
use crate::store::{Store, Write, WriteBatch};
use record::{Effects, InboundFile, InboundStatus};

/// Largest inbound file read (bigger ones are rejected unread).
pub const MAX_FILE_BYTES: u64 = 512 << 20;
/// Files handled per poll at most.
pub const FILES_PER_POLL: usize = 100;
/// Where rejected files are moved at the bank, under the inbound folder.
pub const ASIDE_FOLDER: &str = "rejected";

/// What one poll did with one file.
#[derive(Debug, Clone)]
pub struct Received {
    pub name: String,
    pub file_id: Option<String>,
    pub status: InboundStatus,
    /// The file had been applied before (a retry after a crash, or the same bytes again).
    pub already_applied: bool,
    pub effects: Effects,
    pub error: Option<String>,
}

/// Polls the connection's inbound folder once, waiting up to `wait` for a poll of it running
/// elsewhere to finish. `Ok(None)` when another process still holds the connection's inbound
/// lease.
pub async fn poll(
    store: Arc<dyn Store>,
    secrets: &SecretBox,
    data_dir: &Path,
    registered: &Registered,
    now: Timestamp,
    wait: std::time::Duration,
) -> anyhow::Result<Option<Vec<Received>>> {
    let settings = bank_connection::settings_for(store.as_ref(), data_dir, registered).await?;
    let id = &registered.connection.id;
    let transport = transport::for_connection(&settings.transport, id, secrets).map_err(|reason| anyhow::anyhow!(reason))?;
    let Some(lease) = Lease::take(store.clone(), &format!("bank_inbound/{id}"), wait).await? else { return Ok(None) };
    let outcome = poll_under(store.as_ref(), secrets, data_dir, registered, transport.as_ref(), &lease, now).await;
    lease.release().await;
    outcome.map(Some)
}

async fn poll_under(
    store: &dyn Store,
    secrets: &SecretBox,
    data_dir: &Path,
    registered: &Registered,
    transport: &dyn Transport,
    lease: &Lease,
    now: Timestamp,
) -> anyhow::Result<Vec<Received>> {
    let mut listed = transport.list_inbound().await?;
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    let spool_dir = data_dir.join("bank").join("inbound").join(&registered.connection.id);
    crate::base::private_fs::ensure_private_dir(&spool_dir).with_context(|| format!("creating {}", spool_dir.display()))?;
    let mut out = Vec::new();
    for remote in listed.into_iter().take(FILES_PER_POLL) {
        lease.check()?;
        let received = receive(store, secrets, &spool_dir, registered, transport, lease, &remote, now).await?;
        log(registered, &received);
        out.push(received);
    }
    Ok(out)
}

/// Fetches, reads, applies and removes one file.
#[allow(clippy::too_many_arguments)]
async fn receive(
    store: &dyn Store,
    secrets: &SecretBox,
    spool_dir: &Path,
    registered: &Registered,
    transport: &dyn Transport,
    lease: &Lease,
    remote: &RemoteFile,
    now: Timestamp,
) -> anyhow::Result<Received> {
    let scope = &registered.scope;
    let connection_id = &registered.connection.id;
    let spool = spool_dir.join(format!("{}.fetch", remote.name));
    if remote.size > MAX_FILE_BYTES {
        let reason = format!("the file is {} bytes; the most Payrail reads is {MAX_FILE_BYTES}", remote.size);
        return reject(store, registered, transport, lease, remote, &format!("unread:{}:{}", remote.name, remote.size), &[], reason, now)
            .await;
    }
    let digest = transport.fetch(&remote.name, &spool).await?;
    let bytes = tokio::fs::read(&spool).await.with_context(|| format!("reading {}", spool.display()))?;
    let _ = tokio::fs::remove_file(&spool).await;
    let sha256 = crate::bank::cutoff::write::hex(&sha2::Sha256::digest(&bytes));
    if sha256 != digest.sha256 {
        anyhow::bail!("the fetched copy of {} changed while it was read; it is fetched again at the next poll", remote.name);
    }
    if let Some(seen) = record::seen(store, scope, connection_id, &sha256).await? {
        finish_seen(transport, &seen.file, &remote.name).await?;
        return Ok(Received {
            name: remote.name.clone(),
            file_id: Some(seen.file.id.clone()),
            status: seen.file.status,
            already_applied: true,
            effects: seen.file.effects.clone(),
            error: seen.file.error.clone(),
        });
    }
    let answers = match crate::bank::formats::read(&bytes) {
        Ok(answers) => answers,
        Err(err) => return reject(store, registered, transport, lease, remote, &sha256, &bytes, err.to_string(), now).await,
    };
    let ctx = Ctx { store, rails: None, secrets, scope, now };
    let mut file = new_record(registered, &remote.name, &sha256, &bytes, InboundStatus::Applied, now);
    file.format = Some(answers.format.as_str().to_owned());
    // A client's edit of an object the file changes (a PATCH of an expected payment it
    // reconciles) makes the commit a conflict, which nothing committed: the file is staged again
    // from the new state, as a request would be, rather than held back to the next poll.
    let applied = crate::domain::retry_on_conflict(|| async {
        let mut batch = WriteBatch::new();
        batch.push(lease.fence());
        let effects = apply::stage(&ctx, &mut batch, connection_id, &answers).await?;
        let mut file = file.clone();
        file.effects = effects;
        for write in file.writes(scope, &bytes)? {
            batch.push(write);
        }
        batch.push(Write::Insert(event::record(scope, record::KIND, "applied", &file.id, &file.to_json()?, now)?));
        Ok((commit_once(store, batch).await?, file.effects))
    })
    .await;
    let already_applied = match applied {
        Ok((already_applied, effects)) => {
            file.effects = effects;
            already_applied
        }
        // The file reads, but the domain refuses an answer in it (none that reads is known to
        // reach this today: a guard): applying part of it would break "all or none", and
        // retrying cannot change it, so it is set aside like a file that cannot be read.
        Err(Error::Invalid { parameter, message, .. }) => {
            let reason = format!("an answer in it cannot be applied ({parameter}: {message}); nothing of the file was applied");
            return reject(store, registered, transport, lease, remote, &sha256, &bytes, reason, now).await;
        }
        Err(err) => return Err(err.into()),
    };
    transport.remove(&remote.name).await?;
    Ok(Received {
        name: remote.name.clone(),
        file_id: Some(file.id.clone()),
        status: InboundStatus::Applied,
        already_applied,
        effects: file.effects,
        error: None,
    })
}

/// Commits a file's batch; `true` when its content key was taken meanwhile (another process
/// applied the same bytes first, so this one changes nothing).
async fn commit_once(store: &dyn Store, batch: WriteBatch) -> crate::error::Result<bool> {
    match store.commit(batch).await {
        Ok(()) => Ok(false),
        Err(Error::Invalid { parameter, .. }) if parameter == record::UNIQUE_PARAMETER => Ok(true),
        Err(err) => Err(err),
    }
}

/// A file seen before: applied ones are removed from the folder, rejected ones moved aside.
async fn finish_seen(transport: &dyn Transport, file: &InboundFile, name: &str) -> anyhow::Result<()> {
    match file.status {
        InboundStatus::Applied => transport.remove(name).await?,
        InboundStatus::Rejected => {
            transport.move_aside(name, ASIDE_FOLDER).await?;
        }
    }
    Ok(())
}

/// Records a file that cannot be read (with its event and a log line), then moves it aside.
#[allow(clippy::too_many_arguments)]
async fn reject(
    store: &dyn Store,
    registered: &Registered,
    transport: &dyn Transport,
    lease: &Lease,
    remote: &RemoteFile,
    key: &str,
    bytes: &[u8],
    reason: String,
    now: Timestamp,
) -> anyhow::Result<Received> {
    let scope = &registered.scope;
    let mut file = new_record(registered, &remote.name, key, bytes, InboundStatus::Rejected, now);
    file.size_bytes = remote.size;
    file.error = Some(reason.clone());
    file.aside_name = Some(format!("{ASIDE_FOLDER}/{}", remote.name));
    let mut batch = WriteBatch::new();
    batch.push(lease.fence());
    for write in file.writes(scope, bytes)? {
        batch.push(write);
    }
    batch.push(Write::Insert(event::record(scope, record::KIND, "rejected", &file.id, &file.to_json()?, now)?));
    commit_once(store, batch).await?;
    let aside = transport.move_aside(&remote.name, ASIDE_FOLDER).await?;
    Ok(Received {
        name: remote.name.clone(),
        file_id: Some(file.id),
        status: InboundStatus::Rejected,
        already_applied: false,
        effects: Effects::default(),
        error: Some(format!("{reason} (moved aside to {ASIDE_FOLDER}/{aside})")),
    })
}

fn new_record(registered: &Registered, name: &str, sha256: &str, bytes: &[u8], status: InboundStatus, now: Timestamp) -> InboundFile {
    InboundFile {
        id: crate::domain::common::new_id(),
        object: "bank_file".into(),
        live_mode: registered.scope.live_mode,
        connection_id: registered.connection.id.clone(),
        name: name.to_owned(),
        direction: "inbound".into(),
        format: None,
        status,
        sha256: sha256.to_owned(),
        size_bytes: bytes.len() as u64,
        effects: Effects::default(),
        error: None,
        aside_name: None,
        chunks: record::chunk_count(bytes.len()),
        created_at: now,
        updated_at: now,
    }
}

fn log(registered: &Registered, received: &Received) {
    let connection = &registered.connection.id;
    let e = &received.effects;
    match (&received.status, &received.error) {
        (InboundStatus::Rejected, error) => tracing::warn!(
            %connection, name = %received.name, error = error.as_deref().unwrap_or(""),
            "a bank file could not be read; it was moved aside and changed nothing"
        ),
        (InboundStatus::Applied, _) if received.already_applied => {
            tracing::info!(%connection, name = %received.name, "a bank file applied before was removed from the inbound folder")
        }
        (InboundStatus::Applied, _) => tracing::info!(
            %connection, name = %received.name, answers = e.answers, orders = e.orders, transactions = e.transactions,
            returns = e.returns, balance_reports = e.balance_reports, unmatched = e.notes_total, "a bank file was applied"
        ),
    }
}

/// Files `payrail bank files` lists at most.
pub const LIST_MAX: usize = 10_000;

/// The received files `payrail bank files` lists: one connection's (newest first) or every
/// tenant's (oldest first).
pub async fn list_files(store: &dyn Store, connection_id: Option<&str>) -> anyhow::Result<Vec<record::Stored>> {
    match connection_id {
        Some(id) => {
            let listed = crate::bank::cutoff::listed_connection(store, id).await?;
            Ok(record::of_connection(store, &listed.scope, id, LIST_MAX).await?)
        }
        None => Ok(record::all(store, LIST_MAX).await?),
    }
}

/// A received file as `payrail bank files --json` shows it: the keys of a sent file
/// (`rail` is the format, `orders` the orders it moved) and what it did.
pub fn file_json(scope: &crate::base::api_key::Scope, f: &InboundFile) -> serde_json::Value {
    serde_json::json!({
        "id": f.id,
        "object": f.object,
        "live_mode": f.live_mode,
        "organization_id": scope.organization_id,
        "connection_id": f.connection_id,
        "name": f.name,
        "sha256": f.sha256,
        "size_bytes": f.size_bytes,
        "direction": f.direction,
        "rail": f.format,
        "status": f.status.as_str(),
        "orders": f.effects.order_ids,
        "order_count": f.effects.orders,
        "effects": f.effects,
        "error": f.error,
        "aside_name": f.aside_name,
        "created_at": f.created_at,
    })
}

/// Copies the bytes of the received file `id`, exactly as received, to `out`; `Ok(false)` when
/// no received file has that id.
pub async fn show_file(store: &dyn Store, id: &str, out: &mut dyn std::io::Write) -> anyhow::Result<bool> {
    let Some(stored) = record::find(store, id, LIST_MAX).await? else { return Ok(false) };
    out.write_all(&record::content(store, &stored).await?)?;
    out.flush()?;
    Ok(true)
}
