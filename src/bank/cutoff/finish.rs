//! Taking a recorded file the rest of the way: written, uploaded, its orders `sent` (SPEC B2,
//! B4). Every step is recorded before the next starts, and each can be run again after a crash:
//!
//! 1. `claimed` -> `written`: the file is written from its record and parts into the spool
//!    (`<data-dir>/bank/outbound/<file id>`), and its sha256 and size recorded.
//! 2. upload: the spool file (written again from the record if this instance has none, and
//!    checked against the recorded sha256) is uploaded under the file's name. The outbox treats
//!    an identical file already there as done, so a retry never makes a second file.
//! 3. `sent`: the file's orders move to `sent` (event `sent`), a part at a time, each ACH order
//!    with its trace number; then the file is `uploaded`.
//!
//! An upload that fails leaves the file `written` and its orders `processing`, records the
//! attempt (with the next one's time, backing off), and writes an event (resource `bank_file`,
//! `upload_failed`) and a log line.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use super::Run;
use super::files::{self, BankFile, FileStatus};
use super::items::Rail;
use super::traces;
use super::write::{self, Written};
use crate::bank::formats::nacha::TraceNumber;
use crate::base::api_key::Scope;
use crate::base::time::Timestamp;
use crate::domain::event;
use crate::domain::payment_order::{self, carry};
use crate::error::{Error, Result};
use crate::store::{Filter, ListQuery, Store, WriteBatch};

/// The first retry of a failed upload waits this long; each further one twice as long.
const RETRY_BASE_SECS: i64 = 30;
/// The longest wait between two upload attempts.
const RETRY_MAX_SECS: i64 = 3_600;

/// The folder of a data directory that keeps the files sent (SPEC B6).
pub fn spool_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("bank").join("outbound")
}

/// Where a file's bytes are kept.
pub fn spool_path(data_dir: &Path, file: &BankFile) -> PathBuf {
    spool_dir(data_dir).join(&file.id)
}

/// How a file's processing ended.
#[derive(Debug)]
pub enum Outcome {
    Uploaded,
    /// The file held no order (its run crashed before its first claim landed, or clients
    /// cancelled every order it was made for): its record is dropped, nothing is sent.
    Discarded,
    /// The upload failed; the file waits, written, for the next attempt.
    UploadFailed(String),
}

/// Takes `file` from where it is to uploaded.
pub async fn finish(run: &Run<'_>, file: &mut files::Stored) -> Result<Outcome> {
    if file.file.status == FileStatus::Claimed && file.file.order_count == 0 {
        discard(run, file).await?;
        return Ok(Outcome::Discarded);
    }
    if file.file.status == FileStatus::Claimed {
        write_file(run, file).await?;
    }
    if file.file.status == FileStatus::Written {
        let path = ensure_spool(run, &file.file).await?;
        run.lease.check()?;
        let started = std::time::Instant::now();
        if let Err(err) = run.outbox.upload(&file.file.name, &path).await {
            let message = format!("{err:#}");
            record_failure(run, file, &message).await?;
            return Ok(Outcome::UploadFailed(message));
        }
        let upload_ms = started.elapsed().as_millis() as u64;
        tracing::info!(connection = %run.connection_id, file = %file.file.id, name = %file.file.name, bytes = file.file.size_bytes, upload_ms, "bank file delivered; marking its orders sent");
        mark_sent(run, &file.file).await?;
        record_uploaded(run, file).await?;
    }
    Ok(Outcome::Uploaded)
}

/// Drops a claimed file that holds no order, and gives its name back: a bank is never sent an
/// empty file, and a day's NACHA file id modifiers are not spent on one.
async fn discard(run: &Run<'_>, file: &files::Stored) -> Result<()> {
    let mut batch = WriteBatch::new();
    batch.push(run.lease.fence());
    batch.push(crate::store::Write::Delete { kind: files::KIND, scope: run.scope.clone(), id: file.file.id.clone() });
    batch.push(crate::store::Write::ReleaseUnique { key: files::name_key(&run.connection_id, &file.file.name) });
    run.store.commit(batch).await?;
    tracing::info!(connection = %run.connection_id, file = %file.file.id, name = %file.file.name, "bank file held no order: dropped, not sent");
    Ok(())
}

/// Writes the spool file and records the file `written`; an ACH file takes its range of trace
/// numbers from the connection's counter in the same commit.
async fn write_file(run: &Run<'_>, file: &mut files::Stored) -> Result<()> {
    let mut next = file.file.clone();
    let mut batch = WriteBatch::new();
    if Rail::parse(&next.rail) == Some(Rail::Ach) && next.trace_start.is_none() {
        let (start, take) = traces::reserve(run.store.as_ref(), &run.scope, &run.connection_id, next.order_count, run.now).await?;
        next.trace_start = Some(start);
        batch.push(take);
    }
    let written = spool(run.store.as_ref(), &run.scope, run.data_dir, &next).await?;
    next.status = FileStatus::Written;
    next.sha256 = Some(written.sha256);
    next.size_bytes = Some(written.size_bytes);
    let at = run.at();
    next.written_at = Some(at);
    next.updated_at = at;
    save_with(run, file, next, None, batch).await?;
    tracing::info!(connection = %run.connection_id, file = %file.file.id, name = %file.file.name, orders = file.file.order_count, "bank file written");
    Ok(())
}

async fn spool(store: &dyn Store, scope: &Scope, data_dir: &Path, file: &BankFile) -> Result<Written> {
    let dir = spool_dir(data_dir);
    crate::base::private_fs::ensure_private_dir(&dir).map_err(|e| Error::internal(format!("making {}: {e}", dir.display())))?;
    write::to_path(store, scope, file, &spool_path(data_dir, file)).await
}

/// The spool file of a written file, written again from its record when this instance has none
/// (or a damaged one); refused if the bytes would differ from those recorded.
pub async fn ensure_spool(run: &Run<'_>, file: &BankFile) -> Result<PathBuf> {
    spool_of_written(run.store.as_ref(), &run.scope, run.data_dir, file).await
}

/// [`ensure_spool`] for any reader (`payrail bank files show`): no lease needed, since the
/// bytes are the same whoever writes them, and each writer writes its own temporary file.
pub async fn spool_of_written(store: &dyn Store, scope: &Scope, data_dir: &Path, file: &BankFile) -> Result<PathBuf> {
    let path = spool_path(data_dir, file);
    let recorded = file.sha256.clone().ok_or_else(|| Error::invalid("file_id", format!("bank file {} is not written yet", file.id)))?;
    let matches = |path: &Path| super::outbox::digest(path).map(|d| write::hex(&d) == recorded).unwrap_or(false);
    if path.exists() && matches(&path) {
        return Ok(path);
    }
    let written = spool(store, scope, data_dir, file).await?;
    if written.sha256 != recorded {
        let _ = std::fs::remove_file(&path);
        return Err(Error::internal(format!(
            "bank file {} written again does not match its recorded sha256 ({} != {recorded}); it is not used",
            file.id, written.sha256
        )));
    }
    Ok(path)
}

/// Moves the file's orders that are still `processing` in it to `sent`, a part at a time, in
/// the file's order (which gives each ACH order its trace number). Parts' commits are
/// independent (each order guarded by the version read), so up to the store's
/// [`Store::bulk_in_flight`] of them are in flight while the next part is read and prepared. A
/// failed one fails the step; the parts that committed stay `sent` and a retry skips them.
async fn mark_sent(run: &Run<'_>, file: &BankFile) -> Result<()> {
    let odfi = match Rail::parse(&file.rail) {
        Some(Rail::Ach) => Some(write::ach_header(file)?.immediate_destination.institution().to_owned()),
        _ => None,
    };
    let depth = run.store.bulk_in_flight().max(1);
    let mut in_flight: VecDeque<tokio::task::JoinHandle<Result<()>>> = VecDeque::with_capacity(depth);
    let sent = send_parts(run, file, odfi.as_deref(), depth, &mut in_flight).await;
    // Every commit still in flight ends before the step does (and before the run gives its
    // lease back), whatever failed.
    let mut landed_all = Ok(());
    for commit in in_flight {
        let outcome = landed(commit).await;
        landed_all = landed_all.and(outcome);
    }
    sent.and(landed_all)
}

async fn send_parts(
    run: &Run<'_>,
    file: &BankFile,
    odfi: Option<&str>,
    depth: usize,
    in_flight: &mut VecDeque<tokio::task::JoinHandle<Result<()>>>,
) -> Result<()> {
    let mut sequence: u32 = write::first_trace(file) - 1;
    for group in &file.groups {
        for n in 0..group.parts {
            run.lease.check()?;
            let part = files::part(run.store.as_ref(), &run.scope, file, group.index, n).await?;
            let batch = sent_batch(run, file, &part, odfi, &mut sequence).await?;
            if in_flight.len() >= depth
                && let Some(commit) = in_flight.pop_front()
            {
                landed(commit).await?;
            }
            if batch.writes.len() > 1 {
                let store = run.store.clone();
                in_flight.push_back(tokio::spawn(async move { store.commit(batch).await }));
            }
        }
    }
    Ok(())
}

async fn landed(commit: tokio::task::JoinHandle<Result<()>>) -> Result<()> {
    commit.await.map_err(|e| Error::internal(format!("a commit task failed: {e}")))?
}

/// The batch moving a part's orders to `sent`; `sequence` counts the file's entries so far.
async fn sent_batch(run: &Run<'_>, file: &BankFile, part: &files::Part, odfi: Option<&str>, sequence: &mut u32) -> Result<WriteBatch> {
    let ids: Vec<String> = part.items.iter().map(|i| i.order_id.clone()).collect();
    let limit = ids.len();
    let query =
        ListQuery { kind: payment_order::KIND, scope: run.scope.clone(), filters: vec![Filter::IdIn(ids.clone())], after_seq: None, limit };
    let mut stored: HashMap<String, _> = run.store.list(&query).await?.items.into_iter().map(|s| (s.id.clone(), s)).collect();
    let mut batch = WriteBatch::new();
    batch.push(run.lease.fence());
    for id in &ids {
        *sequence += 1;
        let trace = odfi.and_then(|odfi| TraceNumber::new(odfi, *sequence)).map(|t| t.to_string());
        let reference = trace.as_deref().map(|number| carry::Reference { number, kind: carry::ACH_TRACE_NUMBER });
        let Some(order) = stored.remove(id) else { continue };
        if let Some(writes) = carry::sent(&run.scope, &order, &file.id, reference, run.now)? {
            batch.writes.extend(writes);
        }
    }
    Ok(batch)
}

async fn record_uploaded(run: &Run<'_>, file: &mut files::Stored) -> Result<()> {
    let mut next = file.file.clone();
    let at = run.at();
    next.status = FileStatus::Uploaded;
    next.uploaded_at = Some(at);
    next.upload_attempts += 1;
    next.last_error = None;
    next.next_attempt_at = None;
    next.updated_at = at;
    save(run, file, next, None).await?;
    tracing::info!(connection = %run.connection_id, file = %file.file.id, name = %file.file.name, orders = file.file.order_count, "bank file uploaded");
    Ok(())
}

/// The wait before upload attempt `attempts + 1`.
pub fn backoff_secs(attempts: u32) -> i64 {
    (RETRY_BASE_SECS << attempts.saturating_sub(1).min(16)).min(RETRY_MAX_SECS)
}

async fn record_failure(run: &Run<'_>, file: &mut files::Stored, message: &str) -> Result<()> {
    let mut next = file.file.clone();
    next.upload_attempts += 1;
    next.last_error = Some(message.to_owned());
    let wait = backoff_secs(next.upload_attempts);
    next.next_attempt_at = Some(run.now.plus_secs(wait));
    next.updated_at = run.now;
    let attempts = next.upload_attempts;
    save(run, file, next, Some("upload_failed")).await?;
    tracing::warn!(
        connection = %run.connection_id, file = %file.file.id, name = %file.file.name, attempts, retry_in_s = wait, error = %message,
        "uploading a bank file failed; its orders stay processing and it is uploaded again later"
    );
    Ok(())
}

/// Replaces the file's record by `next` (with its event, if any), under the run's lease.
async fn save(run: &Run<'_>, file: &mut files::Stored, next: BankFile, event_name: Option<&str>) -> Result<()> {
    save_with(run, file, next, event_name, WriteBatch::new()).await
}

/// [`save`] with other writes of the same commit.
async fn save_with(run: &Run<'_>, file: &mut files::Stored, next: BankFile, event_name: Option<&str>, mut batch: WriteBatch) -> Result<()> {
    batch.writes.insert(0, run.lease.fence());
    batch.push(file.replace(&next)?);
    if let Some(name) = event_name {
        let data = super::file_json(&run.scope, &next).to_string();
        batch.push(crate::store::Write::Insert(event::record(&run.scope, files::KIND, name, &next.id, &data, run.now)?));
    }
    run.store.commit(batch).await?;
    file.file = next;
    file.version += 1;
    Ok(())
}

/// The instant the scheduled worker retries `file`'s upload, if it waits for one.
pub fn retry_due(file: &BankFile, now: Timestamp) -> bool {
    file.status != FileStatus::Uploaded && file.next_attempt_at.is_none_or(|at| at <= now)
}
