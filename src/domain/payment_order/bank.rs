//! What Payrail's sandbox bank does to a sandbox payment order next. Pure rules; the runner
//! that applies them on a clock is `sandbox/`. Live orders are never moved.
//!
//! Orders of the rails that travel as bank files (`ach`, `wire`, `rtp`, `sepa`) go through the
//! same pipeline as live ones (SPEC B7): once due they are carried by a cut-off of the
//! organization's sandbox connection, and the sandbox bank answers the files; [`next_move`]
//! never moves them, [`ready_at`] only says when their cut-off may take them. Other payment
//! types (book, check, ...) are moved here, one step at a time.
//!
//! Magic amounts drive the failure paths, so integrations can test their error handling:
//! - `1313` (13.13 in a two-decimal currency): fails at processing (`failed`,
//!   `vendor_failure_reason` set).
//! - `4040` (40.40): completes, then is returned (`returned`, `current_return` with code R01).
//!
//! Any other amount goes approved -> processing -> sent -> completed.

use super::status::Status;
use super::{PaymentOrder, PaymentType};
use crate::domain::time::Timestamp;

pub const FAIL_AMOUNT: i64 = 1313;
pub const RETURN_AMOUNT: i64 = 4040;
pub const FAILURE_REASON: &str = "sandbox: insufficient funds (magic amount 1313)";
pub const RETURN_CODE: &str = "R01";
pub const RETURN_REASON: &str = "Insufficient Funds (sandbox magic amount 4040)";

/// Whether `order` travels in a bank file (and so through the sandbox bank's files).
pub fn carried_by_files(order: &PaymentOrder) -> bool {
    type_carried_by_files(order.payment_type)
}

/// Whether orders of `payment_type` travel in bank files: the rails Payrail writes files for.
pub fn type_carried_by_files(payment_type: PaymentType) -> bool {
    matches!(payment_type, PaymentType::Ach | PaymentType::Wire | PaymentType::Rtp | PaymentType::Sepa)
}

/// The status the bank moves `order` to next, if it moves it at all (never one carried by
/// files: their bank's answers move them).
pub fn next_move(order: &PaymentOrder) -> Option<Status> {
    if order.live_mode || carried_by_files(order) {
        return None;
    }
    match order.status() {
        Status::Approved => Some(Status::Processing),
        Status::Processing if order.amount.minor_units() == FAIL_AMOUNT => Some(Status::Failed),
        Status::Processing => Some(Status::Sent),
        Status::Sent => Some(Status::Completed),
        Status::Completed if order.amount.minor_units() == RETURN_AMOUNT => Some(Status::Returned),
        _ => None,
    }
}

/// From when the bank may make its next move: after the last change, and not before
/// `process_after` for an order that has not started processing.
pub fn ready_at(order: &PaymentOrder) -> Option<Timestamp> {
    let file_due = !order.live_mode && carried_by_files(order) && order.status() == Status::Approved;
    if !file_due {
        next_move(order)?;
    }
    let waiting = match (order.status(), order.process_after) {
        (Status::Approved, Some(after)) => after,
        _ => order.updated_at,
    };
    Some(waiting.max(order.updated_at))
}
