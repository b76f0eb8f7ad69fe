//! Scheduled cut-offs inside `payrail serve` (SPEC B2): a background worker that runs each live
//! connection's cut-off at its local cut-off times, retries failed uploads as their backoff
//! comes due, and reads each connection's inbound folder every tick (SPEC B5,
//! `bank::inbound`). It uses the store and the domain, never HTTP.
//!
//! Finding connections: every tick (`bank_tick_ms`, 15 s by default) the worker reads every
//! registered connection of every tenant (`domain::connection::all`), so a connection added by
//! `payrail connections add` beside a running server is picked up by the next tick, with no
//! restart and no list kept in memory beyond the last slot seen per connection.
//!
//! Slots: a connection's cut-off times are local times in its time zone (the tz database, so a
//! `16:45` stays 16:45 local across daylight saving; a time that does not exist on a spring-
//! forward day runs as if the clocks had not moved: 02:30 is then 03:30 daylight time). A slot is one time on one local day;
//! the latest slot at or before now is due if it came after the connection was registered and
//! at most [`CATCH_UP_SECS`] ago (a server that was down at 16:45 runs it when it comes back).
//!
//! Exactly one run per slot across instances: the run takes the connection's lease, then the
//! slot's unique key (`bank_cutoff_slot/<connection>/<slot>`); only the process that took the
//! key runs the cut-off, the others only retry due uploads. A run that crashed mid-slot leaves
//! the slot unfinished: the next run finishes its files first, then claims the orders it did
//! not.

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::watch;

use super::{Mode, Run, files, finish};
use crate::app::AppState;
use crate::bank::connection::{self as bank_connection, Settings};
use crate::base::time::Timestamp;
use crate::domain::connection::{self, Registered};
use crate::error::{Error, Result};
use crate::store::{Write, WriteBatch};

/// How long after a slot a worker that missed it (down, busy) still runs it.
pub const CATCH_UP_SECS: i64 = 24 * 3600;

/// One cut-off time on one local day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// `<local date>T<HH:MM>`, such as `2026-07-02T16:45`.
    pub id: String,
    pub at: Timestamp,
}

/// The latest slot of `settings` at or before `now`, if it is due: after `since` (the
/// connection's registration) and at most [`CATCH_UP_SECS`] ago.
pub fn due_slot(settings: &Settings, since: Timestamp, now: Timestamp) -> Result<Option<Slot>> {
    let today = super::local_time(&settings.timezone, now)?.date();
    let tz = jiff::tz::TimeZone::get(&settings.timezone).map_err(|e| Error::internal(format!("time zone: {e}")))?;
    let mut latest: Option<Slot> = None;
    for day in [today.yesterday().ok(), Some(today)].into_iter().flatten() {
        for cutoff in &settings.cutoffs {
            let (hour, minute) = cutoff.split_once(':').ok_or_else(|| Error::internal(format!("cut-off time {cutoff:?}")))?;
            let (hour, minute) = (hour.parse::<i8>().unwrap_or(0), minute.parse::<i8>().unwrap_or(0));
            let zoned = day.at(hour, minute, 0, 0).to_zoned(tz.clone()).map_err(|e| Error::internal(format!("cut-off time: {e}")))?;
            let at = Timestamp::from_micros(zoned.timestamp().as_microsecond());
            if at <= now && latest.as_ref().is_none_or(|l| at > l.at) {
                latest = Some(Slot { id: format!("{day}T{cutoff}"), at });
            }
        }
    }
    Ok(latest.filter(|slot| slot.at > since && slot.at.as_micros() >= now.as_micros() - CATCH_UP_SECS * 1_000_000))
}

/// Whether this run (under the connection's lease) is to run `slot`'s cut-off: the slot's
/// first run takes its key and its unfinished key together; a later run runs it again only if
/// that unfinished key is still held, that is if every earlier run of the slot died before
/// [`slot_finished`] (a crash mid-cut-off must not leave its orders for the next slot).
pub async fn take_slot(run: &Run<'_>, slot: &str) -> Result<bool> {
    let (key, unfinished) = (format!("bank_cutoff_slot/{}/{slot}", run.connection_id), unfinished_key(run, slot));
    if take_keys(run, &[key, unfinished.clone()]).await? {
        return Ok(true);
    }
    if take_keys(run, std::slice::from_ref(&unfinished)).await? {
        // It was free: the slot's last run finished. Give it back as it was.
        slot_finished(run, slot).await?;
        return Ok(false);
    }
    tracing::warn!(connection = %run.connection_id, slot, "the last run of this cut-off did not finish (a crash?): running it again");
    Ok(true)
}

/// Marks `slot`'s cut-off as carried: later runs of the slot only retry uploads.
pub async fn slot_finished(run: &Run<'_>, slot: &str) -> Result<()> {
    let mut batch = WriteBatch::new();
    batch.push(run.lease.fence());
    batch.push(Write::ReleaseUnique { key: unfinished_key(run, slot) });
    run.store.commit(batch).await
}

fn unfinished_key(run: &Run<'_>, slot: &str) -> String {
    format!("bank_cutoff_slot_unfinished/{}/{slot}", run.connection_id)
}

/// Takes every key of `keys` in one commit under the lease; false if one was taken already.
async fn take_keys(run: &Run<'_>, keys: &[String]) -> Result<bool> {
    let mut batch = WriteBatch::new();
    batch.push(run.lease.fence());
    for key in keys {
        batch.push(Write::Unique { key: key.clone(), parameter: "slot".into(), message: format!("{key} is taken") });
    }
    match run.store.commit(batch).await {
        Ok(()) => Ok(true),
        Err(Error::Invalid { .. }) => Ok(false),
        Err(err) => Err(err),
    }
}

/// The worker: ticks until `stop`.
pub async fn run(state: AppState, mut stop: watch::Receiver<bool>) {
    let tick_ms = state.config.bank_tick_ms;
    if tick_ms == 0 {
        tracing::info!("scheduled bank cut-offs are off (bank_tick_ms = 0)");
        return;
    }
    let mut seen: HashMap<String, String> = HashMap::new();
    loop {
        match connection::all(state.store.as_ref()).await {
            Ok(all) => {
                for registered in all.iter().filter(|r| r.scope.live_mode) {
                    // Stopping: no new cut-off or read starts (the server waits for this one).
                    if *stop.borrow() {
                        return;
                    }
                    if let Err(err) = tick(&state, registered, &mut seen).await {
                        tracing::warn!(connection = %registered.connection.id, error = %format!("{err:#}"), "a scheduled cut-off failed; the next tick tries again");
                    }
                    let (store, data_dir, now) = (state.store.clone(), &state.config.data_dir, state.clock.now());
                    if let Err(err) = crate::bank::inbound::poll(store, &state.secrets, data_dir, registered, now, Duration::ZERO).await {
                        tracing::warn!(connection = %registered.connection.id, error = %format!("{err:#}"), "reading the bank's inbound folder failed; the next tick tries again");
                    }
                }
            }
            Err(err) => tracing::warn!(%err, "the bank worker could not read the connections"),
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(tick_ms)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// One connection's turn: its due slot if this worker has not handled it, else its due retries.
async fn tick(state: &AppState, registered: &Registered, seen: &mut HashMap<String, String>) -> anyhow::Result<()> {
    let now = state.clock.now();
    let settings = bank_connection::settings(state.store.as_ref(), registered).await?;
    let id = &registered.connection.id;
    let slot = due_slot(&settings, registered.connection.created_at, now)?.filter(|slot| seen.get(id) != Some(&slot.id));
    let mode = match slot {
        Some(slot) => Mode::Slot(slot.id),
        None if retries_due(state, registered, now).await? => Mode::RetriesDue,
        None => return Ok(()),
    };
    let data_dir = state.config.data_dir.clone();
    let report = super::run(state.store.clone(), &state.secrets, &data_dir, registered, now, mode.clone(), Duration::ZERO).await?;
    if let (Some(reports), Mode::Slot(slot)) = (report, mode) {
        for file in &reports {
            log_file(registered, file);
        }
        seen.insert(id.clone(), slot);
    }
    Ok(())
}

async fn retries_due(state: &AppState, registered: &Registered, now: Timestamp) -> Result<bool> {
    let unfinished = files::unfinished(state.store.as_ref(), &registered.scope, &registered.connection.id).await?;
    Ok(unfinished.iter().any(|f| finish::retry_due(&f.file, now)))
}

fn log_file(registered: &Registered, report: &super::FileReport) {
    let f = &report.file;
    match &report.error {
        None => {
            tracing::info!(connection = %registered.connection.id, file = %f.id, name = %f.name, orders = f.order_count, "scheduled cut-off: file uploaded")
        }
        Some(err) => {
            tracing::warn!(connection = %registered.connection.id, file = %f.id, name = %f.name, error = %err, "scheduled cut-off: upload failed; retried later")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bank::connection::TransportSettings;

    fn settings(timezone: &str, cutoffs: &[&str]) -> Settings {
        Settings {
            timezone: timezone.into(),
            cutoffs: cutoffs.iter().map(|c| c.to_string()).collect(),
            transport: TransportSettings::Directory { outbound_dir: "/tmp/o".into(), inbound_dir: "/tmp/i".into() },
            ach: None,
            iso20022: None,
        }
    }

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    #[test]
    fn b2_the_latest_local_cutoff_is_due_across_daylight_saving() {
        let s = settings("America/New_York", &["10:30", "16:45"]);
        let since = at("2026-01-01T00:00:00Z");
        // Summer, EDT (UTC-4): 16:45 local is 20:45 UTC.
        let slot = due_slot(&s, since, at("2026-07-02T20:45:00Z")).unwrap().unwrap();
        assert_eq!((slot.id.as_str(), slot.at), ("2026-07-02T16:45", at("2026-07-02T20:45:00Z")));
        assert_eq!(due_slot(&s, since, at("2026-07-02T20:44:59Z")).unwrap().unwrap().id, "2026-07-02T10:30");
        // Winter, EST (UTC-5): 10:30 local is 15:30 UTC; before it, yesterday's 16:45.
        assert_eq!(due_slot(&s, since, at("2026-12-04T15:30:00Z")).unwrap().unwrap().id, "2026-12-04T10:30");
        assert_eq!(due_slot(&s, since, at("2026-12-04T15:29:00Z")).unwrap().unwrap().id, "2026-12-03T16:45");
        // The day clocks spring forward, 02:30 does not exist: it runs at 03:30 EDT (07:30 UTC).
        let gap = settings("America/New_York", &["02:30"]);
        assert_eq!(due_slot(&gap, since, at("2026-03-08T07:30:00Z")).unwrap().unwrap().id, "2026-03-08T02:30");
        assert_eq!(due_slot(&gap, since, at("2026-03-08T07:29:59Z")).unwrap().unwrap().id, "2026-03-07T02:30");
    }

    #[test]
    fn b2_slots_before_registration_or_long_past_are_not_due() {
        let s = settings("Europe/Berlin", &["09:00"]);
        let now = at("2026-07-02T08:00:00Z"); // 10:00 in Berlin
        assert_eq!(due_slot(&s, at("2026-07-02T07:30:00Z"), now).unwrap(), None, "registered after 09:00 local");
        assert_eq!(due_slot(&s, at("2026-07-01T00:00:00Z"), now).unwrap().unwrap().id, "2026-07-02T09:00");
        // Before today's slot, yesterday's is still due (23 hours ago: within the catch-up window).
        assert_eq!(due_slot(&s, at("2026-06-01T00:00:00Z"), at("2026-07-02T06:00:00Z")).unwrap().unwrap().id, "2026-07-01T09:00");
    }
}
