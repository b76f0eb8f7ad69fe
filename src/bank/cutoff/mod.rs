//! Cut-offs (SPEC B2, B4, B6): a connection's approved, due live payment orders carried to its
//! bank as files, each order in exactly one file, whatever crashes, retries or instances happen.
//!
//! A cut-off of one connection ([`run`]):
//! 1. takes the connection's lease (`lease`): one cut-off of a connection at a time, on every
//!    process sharing the database; every commit of the run carries the lease as a fence;
//! 2. finishes the connection's files that a crashed or failed run left unfinished (`finish`):
//!    a file recorded but not uploaded is written again byte for byte from its record and
//!    frozen parts, and uploaded under its same name, never as a second file;
//! 3. for each rail the connection can carry (`ach` with its `[ach]` section, `wire`, `rtp` and
//!    `sepa` with `[iso20022]`), records a new file and claims the due orders into it in chunks
//!    (`claim`), then writes it (`write`), uploads it (`outbox`) and marks its orders `sent`.
//!
//! Exactly once, step by step: an order moves `approved` -> `processing` in the same commit
//! that freezes its entry into a part of one file, guarded by the version read, so it enters at
//! most one file; the file's bytes are a function of its record and parts only, so every later
//! attempt makes the same bytes under the same name; the upload puts them there whole
//! (`NAME.part`, then rename) and treats an identical file already there as done.
//!
//! The scheduled runs inside `payrail serve` are `schedule`'s; `payrail bank cutoff` runs one now.

pub mod claim;
pub mod files;
pub mod finish;
pub mod items;
pub mod lease;
pub mod outbox;
pub mod schedule;
pub mod traces;
pub mod write;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};

use crate::base::api_key::Scope;
use crate::base::secret_box::SecretBox;
use crate::base::time::Timestamp;
use crate::domain::connection::Registered;
use crate::error::{Error, Result};
use crate::store::Store;

use super::connection::{self as bank_connection, Settings};
use files::BankFile;
use finish::Outcome;
use items::Rail;
use lease::Lease;
use outbox::Outbox;

/// What one cut-off works with.
pub struct Run<'a> {
    pub store: Arc<dyn Store>,
    pub scope: Scope,
    pub connection_id: String,
    pub settings: Settings,
    pub lease: &'a Lease,
    pub outbox: &'a dyn Outbox,
    /// The cut-off's instant (the clock's): due orders are those due by then, and new files
    /// carry it as their creation time.
    pub now: Timestamp,
    pub data_dir: &'a Path,
    /// Sandbox orders wait this long after their last change before a cut-off takes them (the
    /// sandbox bank's pace, `--sandbox-step-ms`); live orders only wait for `process_after`.
    pub sandbox_pace: Duration,
    /// When the run began, on this process's monotonic clock: what [`Run::at`] adds to `now`.
    pub started: std::time::Instant,
}

impl Run<'_> {
    /// The instant now, as the run's clock tells it: `now` plus the time the run has taken, so
    /// a file's `written_at` and `uploaded_at` say when those happened, on the same clock as
    /// everything else the run stamps.
    pub fn at(&self) -> Timestamp {
        self.now.plus_micros(i64::try_from(self.started.elapsed().as_micros()).unwrap_or(i64::MAX))
    }

    /// Whether this run is a cut-off of an organization's built-in sandbox connection.
    pub fn is_sandbox_bank(&self) -> bool {
        crate::domain::connection::is_builtin(&self.scope, &self.connection_id)
    }

    /// Whether `order` is due at this cut-off: a live order once its `process_after` has passed
    /// and this cut-off's file would move the money on or after its `effective_date` (an ACH
    /// file's effective entry date, an ISO file's requested execution date: the connection's
    /// local date), so an order dated ahead waits for the last cut-off that still gets its money
    /// there on that day, never earlier.
    pub fn is_due(&self, order: &crate::domain::payment_order::PaymentOrder) -> bool {
        if order.live_mode {
            return order.process_after.is_none_or(|at| at <= self.now)
                && self.value_date(order).is_some_and(|date| date.as_str() >= order.effective_date.as_str());
        }
        let pace = self.sandbox_pace.as_micros() as i64;
        crate::domain::payment_order::bank::ready_at(order).is_some_and(|at| at.plus_micros(pace) <= self.now)
    }

    /// The day (`YYYY-MM-DD`) a file made now would move `order`'s money; `None` (not due) if
    /// no file carries its type or the connection's time zone cannot be read.
    fn value_date(&self, order: &crate::domain::payment_order::PaymentOrder) -> Option<String> {
        use crate::domain::enums::Priority;
        let rail = Rail::for_type(order.payment_type)?;
        if rail == Rail::Ach {
            let high = order.priority == Priority::High;
            let date = super::calendar::effective_entry_date(items::to_offset(self.now), high).date;
            return Some(date.to_string());
        }
        business_day(rail, &self.settings.timezone, self.now).ok().map(|date| date.to_string())
    }
}

/// Which files a run takes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Every unfinished file, then new files of the due orders: a cut-off now.
    Now,
    /// The scheduled cut-off of a slot (`<connection>/<local date>T<HH:MM>`): run by whichever
    /// process first takes the slot's key under the lease; for the others, as `RetriesDue`.
    Slot(String),
    /// Only unfinished files whose retry time has come (the worker's backoff).
    RetriesDue,
}

/// What happened to one file in a run.
#[derive(Debug)]
pub struct FileReport {
    pub file: BankFile,
    /// Set when the upload failed (the file waits, written, for the next attempt).
    pub error: Option<String>,
}

/// A cut-off's outcome: the files it took on, or `None` when another run held the lease.
pub type Report = Option<Vec<FileReport>>;

/// Runs a cut-off of `connection` (`payrail bank cutoff`, or the scheduled worker), waiting up
/// to `wait` for a cut-off of it running elsewhere to finish first.
pub async fn run(
    store: Arc<dyn Store>,
    secrets: &SecretBox,
    data_dir: &Path,
    connection: &Registered,
    now: Timestamp,
    mode: Mode,
    wait: Duration,
) -> anyhow::Result<Report> {
    run_paced(store, secrets, data_dir, connection, now, mode, wait, Duration::ZERO).await
}

/// [`run`], with sandbox orders taken only `sandbox_pace` after their last change (the sandbox
/// bank's worker runs its connections' cut-offs so, SPEC B7).
#[allow(clippy::too_many_arguments)]
pub async fn run_paced(
    store: Arc<dyn Store>,
    secrets: &SecretBox,
    data_dir: &Path,
    connection: &Registered,
    now: Timestamp,
    mode: Mode,
    wait: Duration,
    sandbox_pace: Duration,
) -> anyhow::Result<Report> {
    let settings = bank_connection::settings_for(store.as_ref(), data_dir, connection).await?;
    let outbox = outbox::for_transport(&settings.transport, &connection.connection.id, secrets);
    let Some(lease) = Lease::take(store.clone(), &lease::name_of(&connection.connection.id), wait).await? else {
        return Ok(None);
    };
    let run = Run {
        store: store.clone(),
        scope: connection.scope.clone(),
        connection_id: connection.connection.id.clone(),
        settings,
        lease: &lease,
        outbox: outbox.as_ref(),
        now,
        data_dir,
        sandbox_pace,
        started: std::time::Instant::now(),
    };
    let result = run_leased(&run, mode).await;
    lease.release().await;
    result.map(Some).with_context(|| format!("cut-off of connection {}", connection.connection.id))
}

async fn run_leased(run: &Run<'_>, mode: Mode) -> Result<Vec<FileReport>> {
    let retries_only = match &mode {
        Mode::Now => false,
        Mode::Slot(slot) => !schedule::take_slot(run, slot).await?,
        Mode::RetriesDue => true,
    };
    let mut reports = Vec::new();
    for mut file in files::unfinished(run.store.as_ref(), &run.scope, &run.connection_id).await? {
        if retries_only && !finish::retry_due(&file.file, run.now) {
            continue;
        }
        tracing::info!(connection = %run.connection_id, file = %file.file.id, name = %file.file.name, status = file.file.status.as_str(), "finishing an unfinished bank file");
        reports.extend(process(run, &mut file).await?);
    }
    if retries_only {
        return Ok(reports);
    }
    claim_due_orders(run, &mut reports).await?;
    if let Mode::Slot(slot) = &mode {
        // Only a run that got this far has carried the slot: one that died before leaves the
        // slot to the next run, which claims what it did not.
        schedule::slot_finished(run, slot).await?;
    }
    Ok(reports)
}

/// New files of the due orders, rail by rail. A rail that fails (a day's NACHA file id
/// modifiers used up, say) does not hold back the others' orders; the first failure is
/// returned once every rail had its turn.
async fn claim_due_orders(run: &Run<'_>, reports: &mut Vec<FileReport>) -> Result<()> {
    let accounts = claim::accounts(run).await?;
    if accounts.is_empty() {
        return Ok(());
    }
    let mut failed = None;
    for rail in Rail::ALL {
        if !carries(&run.settings, rail) {
            warn_if_waiting(run, rail, &accounts).await?;
            continue;
        }
        if let Err(err) = claim_rail(run, rail, &accounts, reports).await {
            tracing::warn!(connection = %run.connection_id, rail = rail.as_str(), error = %err, "a rail's cut-off failed; the other rails go on");
            failed.get_or_insert(err);
        }
    }
    failed.map_or(Ok(()), Err)
}

async fn claim_rail(
    run: &Run<'_>,
    rail: Rail,
    accounts: &[crate::domain::internal_account::InternalAccount],
    reports: &mut Vec<FileReport>,
) -> Result<()> {
    while let Some(mut filled) = claim::fill(run, rail, accounts).await? {
        reports.extend(process(run, &mut filled.file).await?);
        if !filled.full {
            break;
        }
    }
    Ok(())
}

/// Takes `file` to uploaded; None when it held no order and was dropped.
async fn process(run: &Run<'_>, file: &mut files::Stored) -> Result<Option<FileReport>> {
    let error = match finish::finish(run, file).await? {
        Outcome::Uploaded => None,
        Outcome::UploadFailed(message) => Some(message),
        Outcome::Discarded => return Ok(None),
    };
    Ok(Some(FileReport { file: file.file.clone(), error }))
}

/// Whether the connection's config has the section `rail`'s files need.
fn carries(settings: &Settings, rail: Rail) -> bool {
    match rail {
        Rail::Ach => settings.ach.is_some(),
        Rail::Iso(_) => settings.iso20022.is_some(),
    }
}

/// Logs approved orders of a rail the connection has no section for: they stay approved.
async fn warn_if_waiting(run: &Run<'_>, rail: Rail, accounts: &[crate::domain::internal_account::InternalAccount]) -> Result<()> {
    let ids: Vec<String> = accounts.iter().take(200).map(|a| a.id.clone()).collect();
    let query = crate::store::ListQuery {
        kind: crate::domain::payment_order::KIND,
        scope: run.scope.clone(),
        filters: vec![
            crate::store::Filter::Eq { name: "status".into(), value: "approved".into() },
            crate::store::Filter::Eq { name: "type".into(), value: rail.payment_type().as_str().into() },
            crate::store::Filter::AnyOf { name: "originating_account_id".into(), values: ids },
        ],
        after_seq: None,
        limit: 1,
    };
    if !run.store.list(&query).await?.items.is_empty() {
        let section = if rail == Rail::Ach { "[ach]" } else { "[iso20022]" };
        tracing::warn!(
            connection = %run.connection_id, rail = rail.as_str(),
            "approved {} payment orders wait: the connection's config has no {section} section to make their files; they stay approved",
            rail.as_str()
        );
    }
    Ok(())
}

/// The day the money of an order of `rail` sent at `at`, through a connection in `timezone`,
/// is for: the day its file is of (Eastern for ACH, whose dates are the Federal Reserve's; the
/// connection's own for ISO 20022 files), moved to the rail's next business day when it is not
/// one: the Fed's for ACH and wires, TARGET2's for SEPA; RTP settles every day. It is what a
/// `pain.001` asks for (`ReqdExctnDt`), and the `effective_date` of an order created at `at`
/// without one, as Modern Treasury defaults it: today, or the next business day on a weekend or
/// holiday.
pub fn business_day(rail: Rail, timezone: &str, at: Timestamp) -> Result<time::Date> {
    use super::calendar::{banking_day_on_or_after, target_day_on_or_after, to_eastern};
    use super::formats::iso20022::Rail as Iso;
    Ok(match rail {
        Rail::Ach => banking_day_on_or_after(to_eastern(items::to_offset(at)).date()),
        Rail::Iso(Iso::Wire) => banking_day_on_or_after(local_date(timezone, at)?),
        Rail::Iso(Iso::Sepa) => target_day_on_or_after(local_date(timezone, at)?),
        Rail::Iso(Iso::Rtp) => local_date(timezone, at)?,
    })
}

/// The calendar day at `at` in `timezone`.
fn local_date(timezone: &str, at: Timestamp) -> Result<time::Date> {
    let local = local_time(timezone, at)?.date();
    let month = time::Month::try_from(local.month() as u8).map_err(|e| Error::internal(format!("month of {local}: {e}")))?;
    time::Date::from_calendar_date(i32::from(local.year()), month, local.day() as u8)
        .map_err(|e| Error::internal(format!("date {local}: {e}")))
}

/// `at` in the connection's time zone.
pub fn local_time(timezone: &str, at: Timestamp) -> Result<jiff::Zoned> {
    let tz = jiff::tz::TimeZone::get(timezone).map_err(|e| Error::internal(format!("time zone {timezone:?}: {e}")))?;
    let instant = jiff::Timestamp::from_microsecond(at.as_micros()).map_err(|e| Error::internal(format!("instant {at}: {e}")))?;
    Ok(instant.to_zoned(tz))
}

/// The connection `id` (any tenant), or an error naming it.
pub async fn connection(store: &dyn Store, id: &str) -> anyhow::Result<Registered> {
    if let Some(found) = crate::domain::connection::find(store, id).await? {
        return Ok(found);
    }
    match crate::domain::connection::find_listed(store, id).await? {
        Some(builtin) => Err(anyhow!(
            "connection {id} is organization {}'s built-in sandbox connection: the sandbox bank takes its orders as they fall due and answers by itself, so there is no cut-off or inbound folder to run by hand (its files: payrail bank files --connection {id})",
            builtin.scope.organization_id
        )),
        None => Err(anyhow!("no connection {id} (payrail connections list)")),
    }
}

/// The connection `id` as `payrail connections list` shows it (the built-in sandbox ones
/// included: their files are listed like any), or an error naming it.
pub async fn listed_connection(store: &dyn Store, id: &str) -> anyhow::Result<Registered> {
    crate::domain::connection::find_listed(store, id).await?.ok_or_else(|| anyhow!("no connection {id} (payrail connections list)"))
}

/// A file as `payrail bank files --json` shows it and its events carry it (SPEC B6): no header
/// or groups, no secret.
pub fn file_json(scope: &Scope, f: &BankFile) -> serde_json::Value {
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
        "rail": f.rail,
        "status": f.status.as_str(),
        "trace_start": f.trace_start,
        "order_count": f.order_count,
        "credit_total": f.credit_total,
        "debit_total": f.debit_total,
        "upload_attempts": f.upload_attempts,
        "last_error": f.last_error,
        "next_attempt_at": f.next_attempt_at,
        "created_at": f.created_at,
        "written_at": f.written_at,
        "uploaded_at": f.uploaded_at,
    })
}

/// A file as `payrail bank files --json` lists it: [`file_json`] with `orders`, the ids of the
/// orders it carries in the file's order (SPEC B6). Events carry [`file_json`] alone, so that a
/// file of 100,000 orders does not make every event of it megabytes long.
pub async fn listed_json(store: &dyn Store, stored: &files::Stored) -> Result<serde_json::Value> {
    let mut json = file_json(&stored.scope, &stored.file);
    json["orders"] = files::order_ids(store, &stored.scope, &stored.file).await?.into();
    Ok(json)
}

/// The files `payrail bank files` lists: one connection's (newest first) or every tenant's
/// (oldest first).
pub async fn list_files(store: &dyn Store, connection_id: Option<&str>) -> anyhow::Result<Vec<files::Stored>> {
    match connection_id {
        Some(id) => {
            let listed = listed_connection(store, id).await?;
            Ok(files::of_connection(store, &listed.scope, id).await?)
        }
        None => Ok(files::all(store).await?),
    }
}

/// Copies the bytes of the written file `id`, exactly as uploaded, to `out` (`payrail bank
/// files show`): the kept spool file, written again from the file's record if this instance has
/// none, checked against the recorded sha256 either way.
pub async fn show_file(store: &dyn Store, data_dir: &Path, id: &str, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let stored = files::find(store, id).await?.ok_or_else(|| anyhow!("no bank file {id} (payrail bank files)"))?;
    let path = finish::spool_of_written(store, &stored.scope, data_dir, &stored.file).await?;
    let mut file = std::fs::File::open(&path).with_context(|| format!("reading {}", path.display()))?;
    std::io::copy(&mut file, out)?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bank::formats::iso20022::Rail as Iso;

    fn day(rail: Rail, timezone: &str, at: &str) -> String {
        business_day(rail, timezone, Timestamp::parse_rfc3339(at).unwrap()).unwrap().to_string()
    }

    #[test]
    fn b3_an_order_s_money_moves_on_its_rail_s_next_business_day() {
        let ny = "America/New_York";
        // Thanksgiving, 10:00 in New York: the Fed is closed, TARGET2 open, RTP always.
        let thanksgiving = "2026-11-26T15:00:00Z";
        assert_eq!(day(Rail::Ach, ny, thanksgiving), "2026-11-27");
        assert_eq!(day(Rail::Iso(Iso::Wire), ny, thanksgiving), "2026-11-27");
        assert_eq!(day(Rail::Iso(Iso::Sepa), "Europe/Berlin", thanksgiving), "2026-11-26");
        assert_eq!(day(Rail::Iso(Iso::Rtp), ny, thanksgiving), "2026-11-26");
        // Sunday 19:10 in New York is Monday in UTC and in Tokyo: each connection's own day.
        let sunday_evening = "2026-11-30T00:10:00Z";
        assert_eq!(day(Rail::Iso(Iso::Wire), ny, sunday_evening), "2026-11-30", "Sunday, moved to Monday");
        assert_eq!(day(Rail::Iso(Iso::Rtp), ny, sunday_evening), "2026-11-29");
        assert_eq!(day(Rail::Iso(Iso::Rtp), "Asia/Tokyo", sunday_evening), "2026-11-30");
        assert_eq!(day(Rail::Ach, "Asia/Tokyo", "2026-11-25T20:00:00Z"), "2026-11-25", "ACH's day is Eastern whatever the zone");
        // Good Friday 2027 in Frankfurt: SEPA waits for Tuesday, a wire goes that day.
        let good_friday = "2027-03-26T09:00:00Z";
        assert_eq!(day(Rail::Iso(Iso::Sepa), "Europe/Berlin", good_friday), "2027-03-30");
        assert_eq!(day(Rail::Iso(Iso::Wire), ny, good_friday), "2027-03-26");
    }
}
