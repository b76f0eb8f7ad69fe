//! `mix`: 20 % create_counterparty, 40 % get, 40 % list, drawn at random per request.

use super::{OnShared, Scenario};
use crate::harness::{Call, Req, Requests};
use crate::seed::Fixture;

pub const SCENARIO: Scenario = Scenario::Shared(&Mix);

pub struct Mix;

impl Requests for Mix {
    fn call(&self, fx: &Fixture, req: &mut Req<'_>) -> Call {
        match req.rand() % 10 {
            0 | 1 => Call::post("/api/counterparties", format!(r#"{{"name":"bench mix {}-{}"}}"#, req.conn, req.seq), req.fresh_key()),
            2..=5 => Call::get(format!("/api/counterparties/{}", req.pick(&fx.counterparty_ids))),
            _ => Call::get("/api/counterparties?per_page=25"),
        }
    }
}

impl OnShared for Mix {
    fn name(&self) -> &'static str {
        "mix"
    }

    fn reads_seeded(&self) -> bool {
        true
    }
}
