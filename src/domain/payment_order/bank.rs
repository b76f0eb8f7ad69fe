//! What Payrail's sandbox bank does to a sandbox payment order next. Pure rules; the runner
//! that applies them on a clock is `sandbox/`. Live orders are never moved.
//!
//! Magic amounts drive the failure paths, so integrations can test their error handling:
//! - `1313` (13.13 in a two-decimal currency): fails at processing (`failed`,
//!   `vendor_failure_reason` set).
//! - `4040` (40.40): completes, then is returned (`returned`, `current_return` with code R01).
//!
//! Any other amount goes approved -> processing -> sent -> completed.

use super::PaymentOrder;
use super::status::Status;
use crate::domain::time::Timestamp;

pub const FAIL_AMOUNT: i64 = 1313;
pub const RETURN_AMOUNT: i64 = 4040;
pub const FAILURE_REASON: &str = "sandbox: insufficient funds (magic amount 1313)";
pub const RETURN_CODE: &str = "R01";
pub const RETURN_REASON: &str = "Insufficient Funds (sandbox magic amount 4040)";

/// The status the bank moves `order` to next, if it moves it at all.
pub fn next_move(order: &PaymentOrder) -> Option<Status> {
    if order.live_mode {
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
    next_move(order)?;
    let waiting = match (order.status(), order.process_after) {
        (Status::Approved, Some(after)) => after,
        _ => order.updated_at,
    };
    Some(waiting.max(order.updated_at))
}
