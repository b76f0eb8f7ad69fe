//! The sandbox bank (SPEC B7): the bank at the other end of every sandbox organization's
//! built-in connection. Sandbox orders go through the very pipeline live ones do:
//!
//! 1. an approved `ach`, `wire`, `rtp` or `sepa` order, one step (`sandbox_step_ms`) after its
//!    last change (and not before `process_after`), is carried by a cut-off of its
//!    organization's sandbox connection (`bank::cutoff`): a NACHA or `pain.001` file in the
//!    connection's outbound folder, `approved` -> `processing` -> `sent`;
//! 2. the bank ([`bank_side`]) reads each file it received a step earlier and answers in the
//!    inbound folder with real files, as [`outcomes`] decides per payment: a `pain.002`
//!    rejection for failures, a `camt.054` notification booking the settled ones, and a step
//!    later the returns (a NACHA return file for ACH, a `camt.054` return entry otherwise);
//!    it also books a matching payment for each unreconciled expected payment;
//! 3. the connection's inbound folder is read (`bank::inbound`), which moves the orders to
//!    `failed`, `completed` and `returned` and makes the transactions, returns and
//!    reconciliations, exactly as for a live bank.
//!
//! Other payment types (book, check, ...) travel in no file: this worker moves them one step
//! at a time (`domain::payment_order::bank::next_move`). Each step is an event either way.
//!
//! The connection's folders live under the data directory (`<data-dir>/sandbox-bank/<id>/`),
//! so on PostgreSQL with several instances each instance's sandbox bank answers the files its
//! own cut-offs made. Live orders are never touched.

pub mod answers;
pub mod bank_side;
pub mod outcomes;
pub mod payments;

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::watch;

use crate::app::AppState;
use crate::base::api_key::Scope;
use crate::base::log_limit::LogLimit;
use crate::domain::connection::{self, Registered};
use crate::domain::payment_order::{self, bank, carry, ops};

/// Orders moved per pass at most; the rest wait for the next pass.
const PASS_ORDERS_MAX: usize = 200;
/// A failure that repeats every pass is logged once a minute per organization and kind, with
/// how many were held back.
const LOG_REPEAT_WINDOW: Duration = Duration::from_secs(60);

/// How often the bank looks for due orders: a quarter step, between 10 ms and 500 ms.
fn tick(step_ms: u64) -> Duration {
    Duration::from_millis((step_ms / 4).clamp(10, 500))
}

pub async fn run(state: AppState, mut stop: watch::Receiver<bool>) {
    let step_ms = state.config.sandbox_step_ms;
    let log = LogLimit::new(LOG_REPEAT_WINDOW);
    loop {
        if let Err(err) = pass(&state, step_ms, &log, &stop).await {
            warn_of(&log, "every organization", "sandbox bank pass failed", &err);
        }
        tokio::select! {
            () = tokio::time::sleep(tick(step_ms)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// One pass: the due steps of orders that travel in no file, the cut-offs of the sandbox
/// connections with due orders, the bank's answers, and the inbound folders read. Returns how
/// many orders the steps moved. Once the server is stopping, no new cut-off starts (one that
/// started runs to its end, and the server waits for it): another instance carries the orders.
async fn pass(state: &AppState, step_ms: u64, log: &LogLimit, stop: &watch::Receiver<bool>) -> anyhow::Result<usize> {
    let upto = state.clock.now().plus_micros(-((step_ms as i64) * 1000)).to_string();
    let due = state.store.scan_due(payment_order::KIND, payment_order::SANDBOX_DUE_TERM, &upto, PASS_ORDERS_MAX).await?;
    let mut moved = 0;
    let mut to_cut: BTreeMap<String, Scope> = BTreeMap::new();
    for (scope, stored) in due {
        if scope.live_mode {
            continue;
        }
        if bank::carried_by_files(&carry::read(&stored)?) {
            to_cut.insert(scope.organization_id.clone(), scope);
            continue;
        }
        match step(state, &scope, &stored).await {
            Ok(true) => moved += 1,
            Ok(false) => {}
            Err(err) => warn_of(log, &scope.organization_id, "a payment order's sandbox step failed", &err.into()),
        }
    }
    // One organization's failure is logged and never holds back the others'.
    for scope in to_cut.into_values() {
        if *stop.borrow() {
            return Ok(moved);
        }
        if let Err(err) = cut_off(state, scope.clone(), step_ms).await {
            warn_of(log, &scope.organization_id, "a sandbox cut-off failed; it is tried again next pass", &err);
        }
    }
    if *stop.borrow() {
        return Ok(moved);
    }
    open_expecting(state, &upto).await?;
    bank_side::answer_all(state, step_ms, log).await?;
    Ok(moved)
}

/// Moves an order that travels in no file one step; whether it moved.
async fn step(state: &AppState, scope: &Scope, stored: &crate::store::StoredObject) -> crate::error::Result<bool> {
    let Some(batch) = ops::bank_move(&state.ctx(scope), stored).await? else { return Ok(false) };
    match state.store.commit(batch).await {
        Ok(()) => Ok(true),
        // A client changed the order meanwhile (a cancel won the race): look again next pass.
        Err(crate::error::Error::Conflict { .. }) => Ok(false),
        Err(err) => Err(err),
    }
}

/// Logs a failure of one organization's (or connection's) sandbox work, held back by `log`
/// when it repeats.
pub(crate) fn warn_of(log: &LogLimit, owner: &str, what: &str, err: &anyhow::Error) {
    if let Some(suppressed) = log.admit(&format!("{owner}/{what}"), std::time::Instant::now()) {
        tracing::warn!(owner, error = %format!("{err:#}"), suppressed, "{what}");
    }
}

/// Opens the sandbox connection folders of the tenants with expected payments unchanged since
/// `upto` (a step ago), so the bank books them even where no order ever went out.
async fn open_expecting(state: &AppState, upto: &str) -> anyhow::Result<()> {
    use crate::domain::expected_payment::{KIND, SANDBOX_WAITING_TERM};
    let waiting = state.store.scan_due(KIND, SANDBOX_WAITING_TERM, upto, PASS_ORDERS_MAX).await?;
    let mut seen = std::collections::BTreeSet::new();
    for (scope, _) in waiting.into_iter().filter(|(scope, _)| !scope.live_mode) {
        if seen.insert(scope.organization_id.clone()) {
            bank_side::open(&state.config.data_dir, &connection_of(scope))?;
        }
    }
    Ok(())
}

/// The organization's sandbox connection.
pub fn connection_of(scope: Scope) -> Registered {
    let connection = connection::builtin(&scope);
    Registered { scope, connection }
}

/// Runs the cut-off of `scope`'s sandbox connection for the orders a step old.
async fn cut_off(state: &AppState, scope: Scope, step_ms: u64) -> anyhow::Result<()> {
    let now = state.clock.now();
    let registered = connection_of(scope);
    bank_side::open(&state.config.data_dir, &registered)?;
    let pace = Duration::from_millis(step_ms);
    let data_dir = &state.config.data_dir;
    let report = crate::bank::cutoff::run_paced(
        state.store.clone(),
        &state.secrets,
        data_dir,
        &registered,
        now,
        crate::bank::cutoff::Mode::Now,
        Duration::ZERO,
        pace,
    )
    .await?;
    for file in report.into_iter().flatten().filter(|f| f.error.is_some()) {
        tracing::warn!(connection = %registered.connection.id, file = %file.file.id, error = file.error.as_deref().unwrap_or(""), "a sandbox file was not delivered; retried next pass");
    }
    Ok(())
}
