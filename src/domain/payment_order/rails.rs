//! Whether a payment order's rail can carry it (SPEC B3), asked when the order is created and
//! again when a PATCH edits it, so an order its rail cannot carry is refused then, with a 422
//! naming the field, and never found out at cut-off.
//!
//! The rules are the bank layer's (they are the file formats' own checks, `bank::rails`); the
//! domain only says what it asks and hands over what the creation knows, through [`RailRules`],
//! which the application wires in (`AppState::serving`). Without rules (the command line, unit
//! tests) nothing is checked.

use async_trait::async_trait;

use super::PaymentOrder;
use crate::base::api_key::Scope;
use crate::domain::common::Address;
use crate::domain::internal_account::InternalAccount;
use crate::error::Result;
use crate::store::Store;

/// The receiving account as a rail sees it.
#[derive(Debug, Clone, Default)]
pub struct ReceivingParty {
    /// How refusals name it: `receiving_account` (inline) or `receiving_account_id` (stored).
    pub field: &'static str,
    pub account_type: Option<String>,
    pub party_name: Option<String>,
    pub party_type: Option<String>,
    pub party_address: Option<Address>,
    /// `(account_number_type, account_number)` of each account detail, in order.
    pub account_details: Vec<(String, String)>,
    /// `(routing_number_type, routing_number)` of each routing detail, in order.
    pub routing_details: Vec<(String, String)>,
}

/// The rails' creation-time rules.
#[async_trait]
pub trait RailRules: Send + Sync {
    /// Ok if `order`'s rail can carry it to `receiving` from `originating`, through the bank
    /// connection of `originating` (read from `store` in `scope`); else the 422 naming the field
    /// it cannot carry.
    ///
    /// The Ok carries the calendar day (`YYYY-MM-DD`) of that connection's files of the rail at
    /// `order.created_at` (`None` for a type no file carries): the day an order created without
    /// an `effective_date` is for. The bank's day, not UTC's, so that the connection's next
    /// cut-off finds the order due (SPEC B2) however far the bank's zone is from UTC.
    async fn check(
        &self,
        store: &dyn Store,
        scope: &Scope,
        order: &PaymentOrder,
        receiving: &ReceivingParty,
        originating: &InternalAccount,
    ) -> Result<Option<String>>;
}
