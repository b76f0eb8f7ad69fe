//! The balance monitor evaluator: a background task that judges every ledger account balance
//! monitor against its account's current balances, every [`PASS_INTERVAL`], and commits each
//! crossing it finds (the monitor's new reported state and its `triggered` or `resolved` event,
//! together: `domain::ledger::monitors::flip`).
//!
//! Several servers on one database may all run it: a crossing is committed as a replace of the
//! monitor at the version read, so one evaluator reports it and the others are refused and find
//! it reported on their next pass. It knows nothing of HTTP.

use std::time::Duration;

use tokio::sync::watch;

use crate::app::AppState;
use crate::domain::ledger::monitors;
use crate::error::{Error, Result};

/// How often every monitor is judged again.
pub const PASS_INTERVAL: Duration = Duration::from_millis(250);
/// Monitors read (and their accounts' states) per store call.
const PAGE_MAX: usize = 500;

pub async fn run(state: AppState, mut stop: watch::Receiver<bool>) {
    loop {
        if let Err(err) = pass(&state).await {
            tracing::warn!(%err, "balance monitor pass failed");
        }
        tokio::select! {
            () = tokio::time::sleep(PASS_INTERVAL) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Judges every monitor once; returns how many crossings it reported.
pub async fn pass(state: &AppState) -> Result<usize> {
    let mut after = String::new();
    let mut reported = 0;
    loop {
        let page = state.store.scan_terms(monitors::KIND, monitors::SCAN_TERM, &after, PAGE_MAX).await?;
        let Some((_, last)) = page.last() else { break };
        after = last.id.clone();
        let states = state.store.ledger_accounts(&monitors::accounts_watched(&page)?).await?;
        for (scope, stored) in &page {
            let account = monitors::parse(stored)?.ledger_account_id;
            let current = states.iter().find(|(id, _)| *id == account).map(|(_, s)| s);
            let Some(batch) = monitors::flip(scope, stored, current, state.clock.now())? else { continue };
            match state.store.commit(batch).await {
                Ok(()) => reported += 1,
                // Another evaluator reported it, or a client changed or deleted the monitor
                // meanwhile: judged again next pass.
                Err(Error::Conflict { .. } | Error::NotFound { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        if page.len() < PAGE_MAX {
            break;
        }
    }
    Ok(reported)
}
