//! `create_counterparty`: POST /api/counterparties with a fresh Idempotency-Key each, each run
//! right after a commit ceiling run at its concurrency.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{OnShared, Scenario, SharedServer};
use crate::ceilings::commit_ceiling;
use crate::harness::{BoxResult, Call, Req, Requests, Results, r1, ratio};
use crate::plan::Plan;
use crate::seed::Fixture;

pub const SCENARIO: Scenario = Scenario::Shared(&CreateCounterparty);

pub struct CreateCounterparty;

impl Requests for CreateCounterparty {
    fn call(&self, _fixture: &Fixture, req: &mut Req<'_>) -> Call {
        Call::post("/api/counterparties", format!(r#"{{"name":"bench {}-{}"}}"#, req.conn, req.seq), req.fresh_key())
    }
}

#[async_trait]
impl OnShared for CreateCounterparty {
    fn name(&self) -> &'static str {
        "create_counterparty"
    }

    fn concurrencies(&self, plan: &Plan) -> Vec<usize> {
        plan.create_concurrencies()
    }

    fn baseline(&self) -> Option<&'static str> {
        Some("commit_ceiling")
    }

    /// On PostgreSQL, the figures at 32 connections too (its target is set there).
    fn report(&self, r: &Results, plan: &Plan, out: &mut Map<String, Value>) {
        if plan.postgres && r.find("create_counterparty", 32).is_some() {
            let (create, ceiling) = (r.rps("create_counterparty", 32), r.rps("commit_ceiling", 32));
            out.insert("create_rps_c32".into(), json!(create.map(r1)));
            out.insert("commit_ceiling_tps_c32".into(), json!(ceiling.map(r1)));
            out.insert("create_vs_commit_ceiling_c32".into(), json!(ratio(create, ceiling)));
        }
    }

    async fn measure(&'static self, shared: &SharedServer<'_>, conns: usize, results: &mut Results) -> BoxResult<()> {
        // Measured right before each create run, so both see the same disk weather.
        results.push(commit_ceiling(shared.store, shared.dir, conns, shared.plan).await?);
        results.push(shared.measure(self, self.name(), &shared.fixture, conns).await);
        Ok(())
    }
}
