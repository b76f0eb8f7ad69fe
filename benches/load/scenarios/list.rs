//! `list`: GET /api/counterparties?per_page=25.

use super::{OnShared, Scenario};
use crate::harness::{Call, Req, Requests};
use crate::seed::Fixture;

pub const SCENARIO: Scenario = Scenario::Shared(&List);

pub struct List;

impl Requests for List {
    fn call(&self, _fixture: &Fixture, _req: &mut Req<'_>) -> Call {
        Call::get("/api/counterparties?per_page=25")
    }
}

impl OnShared for List {
    fn name(&self) -> &'static str {
        "list"
    }

    fn reads_seeded(&self) -> bool {
        true
    }

    fn baseline(&self) -> Option<&'static str> {
        Some("ping")
    }
}
