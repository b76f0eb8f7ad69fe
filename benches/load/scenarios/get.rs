//! `get`: GET /api/counterparties/{id} of a random one of the seeded counterparties.

use super::{OnShared, Scenario};
use crate::harness::{Call, Req, Requests};
use crate::seed::Fixture;

pub const SCENARIO: Scenario = Scenario::Shared(&Get);

pub struct Get;

impl Requests for Get {
    fn call(&self, fx: &Fixture, req: &mut Req<'_>) -> Call {
        Call::get(format!("/api/counterparties/{}", req.pick(&fx.counterparty_ids)))
    }
}

impl OnShared for Get {
    fn name(&self) -> &'static str {
        "get"
    }

    fn reads_seeded(&self) -> bool {
        true
    }

    fn baseline(&self) -> Option<&'static str> {
        Some("ping")
    }
}
