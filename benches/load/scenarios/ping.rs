//! `ping`: GET /api/ping, measured in rounds alternating with the same requests to the
//! in-process `http_ceiling` server.

use async_trait::async_trait;

use super::{OnShared, Scenario, SharedServer};
use crate::harness::{BoxResult, Call, Req, Requests, Results, RunResult, measure_http};
use crate::seed::Fixture;

pub const SCENARIO: Scenario = Scenario::Shared(&Ping);

/// Rounds of http_ceiling and ping, alternating, each a share of the run's duration.
const PING_ROUNDS: u32 = 4;

pub struct Ping;

impl Requests for Ping {
    fn call(&self, _fixture: &Fixture, _req: &mut Req<'_>) -> Call {
        Call::get("/api/ping")
    }
}

#[async_trait]
impl OnShared for Ping {
    fn name(&self) -> &'static str {
        "ping"
    }

    fn baseline(&self) -> Option<&'static str> {
        Some("http_ceiling")
    }

    /// Its figures head the JSON line (`ping_rps`, `ping_vs_ceiling`).
    fn headline_rates(&self) -> bool {
        false
    }

    async fn measure(&'static self, shared: &SharedServer<'_>, conns: usize, results: &mut Results) -> BoxResult<()> {
        // Interleaved rounds, so that the ceiling and ping share the machine's weather
        // (on a shared 2-core machine one back-to-back pair could differ by 40 %).
        let round_plan = shared.plan.rounds(PING_ROUNDS);
        let (mut ceiling_total, mut ping_total) = (RunResult::empty("http_ceiling", conns), RunResult::empty("ping", conns));
        for _ in 0..PING_ROUNDS {
            let run = measure_http(&shared.http_ceiling, None, "http_ceiling", self, &shared.fixture, conns, &round_plan).await;
            ceiling_total.absorb(run);
            let run = measure_http(&shared.target, Some(shared.server), "ping", self, &shared.fixture, conns, &round_plan).await;
            ping_total.absorb(run);
        }
        results.push(ceiling_total);
        ping_total.rss_mb = shared.server.rss_mb();
        results.push(ping_total);
        Ok(())
    }
}
