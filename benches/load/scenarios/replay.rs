//! `replay`: one key created right before each run, then replayed again and again (each reply
//! must carry `Idempotent-Replayed: true`).

use std::sync::Arc;

use async_trait::async_trait;

use super::{OnShared, Scenario, SharedServer};
use crate::harness::{BoxResult, Call, Req, Requests, Results, Target, call_json, connect, unix_micros};
use crate::seed::Fixture;

pub const SCENARIO: Scenario = Scenario::Shared(&Replay);

pub struct Replay;

impl Requests for Replay {
    fn call(&self, fx: &Fixture, _req: &mut Req<'_>) -> Call {
        Call::post("/api/counterparties", r#"{"name":"bench replay"}"#.into(), Some(fx.replay_key.clone())).replayed()
    }
}

#[async_trait]
impl OnShared for Replay {
    fn name(&self) -> &'static str {
        "replay"
    }

    fn baseline(&self) -> Option<&'static str> {
        Some("ping")
    }

    async fn measure(&'static self, shared: &SharedServer<'_>, conns: usize, results: &mut Results) -> BoxResult<()> {
        // A replay measures a retry, which follows its original closely: the key is created
        // right before its run. (replay_10k / replay_1m measure keys the server did not
        // answer itself, i.e. the database path.)
        let fixture = fresh_replay_key(&shared.target, &shared.fixture).await?;
        results.push(shared.measure(self, self.name(), &fixture, conns).await);
        Ok(())
    }
}

/// The fixture with a replay key created just now.
async fn fresh_replay_key(target: &Arc<Target>, fixture: &Arc<Fixture>) -> BoxResult<Arc<Fixture>> {
    let mut sender = connect(target).await?;
    let replay_key = format!("replay-{}-{}", std::process::id(), unix_micros());
    call_json(target, &mut sender, Call::post("/api/counterparties", r#"{"name":"bench replay"}"#.into(), Some(replay_key.clone())))
        .await?;
    Ok(Arc::new(Fixture { replay_key, ..fixture.as_ref().clone() }))
}
