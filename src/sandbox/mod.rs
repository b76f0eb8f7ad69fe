//! The sandbox bank: a background task that moves sandbox payment orders through their life
//! (approved -> processing -> sent -> completed, or the failure paths the magic amounts in
//! `domain::payment_order::bank` choose), one step every `sandbox_step_ms`, each step an event.
//!
//! Several servers on one database may all run it: every step is a versioned replace, so one
//! wins and the others see a conflict and move on. Live orders are never touched.

use std::time::Duration;

use tokio::sync::watch;

use crate::app::AppState;
use crate::domain::payment_order::{self, ops};

/// Orders moved per pass at most; the rest wait for the next pass.
const PASS_ORDERS_MAX: usize = 200;

/// How often the bank looks for due orders: a quarter step, between 10 ms and 500 ms.
fn tick(step_ms: u64) -> Duration {
    Duration::from_millis((step_ms / 4).clamp(10, 500))
}

pub async fn run(state: AppState, mut stop: watch::Receiver<bool>) {
    let step_ms = state.config.sandbox_step_ms;
    loop {
        if let Err(err) = pass(&state, step_ms).await {
            tracing::warn!(%err, "sandbox bank pass failed");
        }
        tokio::select! {
            () = tokio::time::sleep(tick(step_ms)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Makes every move that is due now; returns how many orders moved.
pub async fn pass(state: &AppState, step_ms: u64) -> crate::error::Result<usize> {
    let upto = state.clock.now().plus_micros(-((step_ms as i64) * 1000)).to_string();
    let due = state.store.scan_due(payment_order::KIND, payment_order::SANDBOX_DUE_TERM, &upto, PASS_ORDERS_MAX).await?;
    let mut moved = 0;
    for (scope, stored) in due {
        if scope.live_mode {
            continue;
        }
        let ctx = state.ctx(&scope);
        let Some(batch) = ops::bank_move(&ctx, &stored).await? else { continue };
        match state.store.commit(batch).await {
            Ok(()) => moved += 1,
            // A client changed the order meanwhile (a cancel won the race): look again next pass.
            Err(crate::error::Error::Conflict { .. }) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(moved)
}
