//! The payment order state machine (SPEC E3): which status may follow which, and who may move
//! an order there. Clients ask for `approved`, `needs_approval` and `cancelled`; every other
//! move is the bank's (Payrail's sandbox bank in sandbox mode). Anything not in the table is
//! refused and leaves the order unchanged.
//!
//! [`Status`] is carried typed through the domain and serialises to the SDK's wire strings.
//!
//! | from            | client may ask for                | the bank moves it to          |
//! |-----------------|-----------------------------------|-------------------------------|
//! | pending         | approved, needs_approval, cancelled | approved                    |
//! | needs_approval  | approved, cancelled                 | denied                      |
//! | approved        | needs_approval, cancelled           | processing, held            |
//! | held            | cancelled                           | approved (released), stopped|
//! | processing      | -                                   | sent, failed                |
//! | sent            | -                                   | completed, failed, returned |
//! | completed       | -                                   | returned, reversed          |
//! | cancelled, denied, failed, returned, reversed, stopped: final                    |

use crate::domain::enums::{self, PAYMENT_ORDER_STATUSES};
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    Pending,
    NeedsApproval,
    Approved,
    Held,
    Processing,
    Sent,
    Completed,
    Cancelled,
    Denied,
    Failed,
    Returned,
    Reversed,
    Stopped,
}

/// Who asks for a move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    Client,
    Bank,
}

pub const ALL: [Status; 13] = [
    Status::Pending,
    Status::NeedsApproval,
    Status::Approved,
    Status::Held,
    Status::Processing,
    Status::Sent,
    Status::Completed,
    Status::Cancelled,
    Status::Denied,
    Status::Failed,
    Status::Returned,
    Status::Reversed,
    Status::Stopped,
];

impl Status {
    /// What reaching this status does to the order's ledger transaction (SPEC G7): posted when
    /// the money moved, archived when it never will, reversed when it came back.
    pub fn ledger_follow(self) -> Option<crate::domain::ledger::transactions::Follow> {
        use crate::domain::ledger::transactions::Follow;
        match self {
            Status::Completed => Some(Follow::Post),
            Status::Cancelled | Status::Denied | Status::Failed | Status::Stopped => Some(Follow::Archive),
            Status::Returned | Status::Reversed => Some(Follow::Reverse),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::NeedsApproval => "needs_approval",
            Status::Approved => "approved",
            Status::Held => "held",
            Status::Processing => "processing",
            Status::Sent => "sent",
            Status::Completed => "completed",
            Status::Cancelled => "cancelled",
            Status::Denied => "denied",
            Status::Failed => "failed",
            Status::Returned => "returned",
            Status::Reversed => "reversed",
            Status::Stopped => "stopped",
        }
    }

    pub fn parse(text: &str) -> Option<Status> {
        ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// `text` as a status, or a 422 naming `param` as list filters word it (the first twelve
    /// statuses shown).
    pub fn parse_named(param: &str, text: &str) -> Result<Status> {
        Status::parse(text).ok_or_else(|| enums::not_one_of(param, PAYMENT_ORDER_STATUSES))
    }

    /// `text` as the status a client asks for, or a 422 that lists every status.
    pub fn parse_requested(text: &str) -> Result<Status> {
        Status::parse(text).ok_or_else(|| Error::invalid("status", format!("status must be one of {}", PAYMENT_ORDER_STATUSES.join(", "))))
    }

    /// Fields may still be edited: processing has not started.
    pub fn is_editable(self) -> bool {
        matches!(self, Status::Pending | Status::NeedsApproval | Status::Approved)
    }

    /// The moves `actor` may make from here.
    pub fn next(self, actor: Actor) -> &'static [Status] {
        use Status::*;
        match (self, actor) {
            (Pending, Actor::Client) => &[Approved, NeedsApproval, Cancelled],
            (Pending, Actor::Bank) => &[Approved],
            (NeedsApproval, Actor::Client) => &[Approved, Cancelled],
            (NeedsApproval, Actor::Bank) => &[Denied],
            (Approved, Actor::Client) => &[NeedsApproval, Cancelled],
            (Approved, Actor::Bank) => &[Processing, Held],
            (Held, Actor::Client) => &[Cancelled],
            (Held, Actor::Bank) => &[Approved, Stopped],
            (Processing, Actor::Bank) => &[Sent, Failed],
            (Sent, Actor::Bank) => &[Completed, Failed, Returned],
            (Completed, Actor::Bank) => &[Returned, Reversed],
            _ => &[],
        }
    }

    /// Checks a move; the error names `status` and says what is possible instead.
    pub fn transition(self, to: Status, actor: Actor) -> Result<Status> {
        if self.next(actor).contains(&to) {
            return Ok(to);
        }
        let allowed: Vec<&str> = self.next(Actor::Client).iter().map(|s| s.as_str()).collect();
        let hint = if !allowed.is_empty() {
            format!("from {self} you may ask for {}", allowed.join(", "))
        } else if self.next(Actor::Bank).is_empty() {
            format!("{self} is final")
        } else {
            format!("only the bank moves an order on from {self}")
        };
        Err(Error::invalid("status", format!("a payment order cannot move from {self} to {to}: {hint}")))
    }

    /// The event written when an order enters this status.
    pub fn event_name(self) -> &'static str {
        match self {
            Status::Processing => "begin_processing",
            Status::Approved => "approved",
            other => other.as_str(),
        }
    }
}

enums::wire_serde!(Status, "a payment order status", Status::parse);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e3_statuses_match_the_sdk_enum() {
        let ours: Vec<&str> = ALL.iter().map(|s| s.as_str()).collect();
        let mut sdk = crate::domain::enums::PAYMENT_ORDER_STATUSES.to_vec();
        let mut sorted = ours.clone();
        sorted.sort_unstable();
        sdk.sort_unstable();
        assert_eq!(sorted, sdk);
        for s in ALL {
            assert_eq!(Status::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn e3_cancel_only_before_processing() {
        for s in ALL {
            let can_cancel = s.transition(Status::Cancelled, Actor::Client).is_ok();
            let before_processing = matches!(s, Status::Pending | Status::NeedsApproval | Status::Approved | Status::Held);
            assert_eq!(can_cancel, before_processing, "{s}");
        }
    }

    #[test]
    fn e3_clients_ask_only_for_approval_states_and_cancel() {
        for from in ALL {
            for to in from.next(Actor::Client) {
                assert!(matches!(to, Status::Approved | Status::NeedsApproval | Status::Cancelled), "{from} -> {to}");
            }
        }
        assert!(Status::Approved.transition(Status::Processing, Actor::Client).is_err());
        assert!(Status::Approved.transition(Status::Processing, Actor::Bank).is_ok());
    }

    #[test]
    fn e3_final_states_go_nowhere() {
        for s in [Status::Cancelled, Status::Denied, Status::Failed, Status::Returned, Status::Reversed, Status::Stopped] {
            assert!(s.next(Actor::Client).is_empty() && s.next(Actor::Bank).is_empty(), "{s}");
        }
    }

    #[test]
    fn e3_every_status_is_reachable_from_pending() {
        let mut seen = vec![Status::Pending];
        let mut i = 0;
        while i < seen.len() {
            for actor in [Actor::Client, Actor::Bank] {
                for next in seen[i].next(actor) {
                    if !seen.contains(next) {
                        seen.push(*next);
                    }
                }
            }
            i += 1;
        }
        assert_eq!(seen.len(), ALL.len());
    }
}
