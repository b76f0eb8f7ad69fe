//! `replay_scale` (runs `replay_10k` and `replay_1m`): idempotency lookups at scale. Replays
//! random keys among 10,000 stored replies and among 1,000,000 (full mode only), each size on
//! its own fresh store and server (stored replies seeded directly while it is stopped), both
//! servers up at once and measured in alternating rounds.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use serde_json::{Map, json};

use super::{Measured, Own, OwnServers, Scenario};
use crate::harness::results::report_progress;
use crate::harness::{BoxResult, Call, Req, Requests, RunResult, ServerProcess, Store, Target, create_key, measure_http, r1, ratio};
use crate::plan::Plan;
use crate::seed::{Fixture, seed_key, seed_replies};

pub const SCENARIO: Scenario = Scenario::Own(&ReplayScale);

/// Stored replies for the idempotency-at-scale check.
const SCALE_SMALL: u64 = 10_000;
const SCALE_LARGE: u64 = 1_000_000;

/// Rounds of replay_10k and replay_1m, alternating, each a share of the run's duration (as
/// ping and its ceiling: one size measured minutes after the other could differ by 40 % on
/// this machine with nothing changed).
const SCALE_ROUNDS: u32 = 4;

pub struct ReplayScale;

impl Requests for ReplayScale {
    fn call(&self, fx: &Fixture, req: &mut Req<'_>) -> Call {
        let key = seed_key(req.rand() % fx.scale_keys.max(1));
        Call::post("/api/counterparties", r#"{"name":"bench replay"}"#.into(), Some(key)).replayed()
    }
}

#[async_trait]
impl OwnServers for ReplayScale {
    fn name(&self) -> &'static str {
        "replay_scale"
    }

    /// The stores of the two sizes (on PostgreSQL, two fresh databases; on SQLite, two
    /// directories).
    fn databases(&self) -> &'static [&'static str] {
        &["scale_10k", "scale_1m"]
    }

    async fn run(&'static self, own: &Own<'_>) -> BoxResult<Measured> {
        let body = &own.fixture.replay_body;
        let mut note = None;
        let mut sides = vec![ScaleSide::start(&own.root.join("scale-10k"), &own.store("scale_10k"), SCALE_SMALL, body).await?];
        if own.plan.opts.quick {
            let skipped = "quick mode: the 1,000,000-reply check is skipped (run the full mode)";
            eprintln!("bench: NOTE {skipped}");
            note = Some(skipped);
        } else {
            sides.push(ScaleSide::start(&own.root.join("scale-1m"), &own.store("scale_1m"), SCALE_LARGE, body).await?);
        }
        let (runs, rss_large_mb) = self.measure(own.plan, &sides).await;
        // The headline figures are at the largest concurrency.
        let top = runs.iter().map(|run| run.connections).max();
        let rps = |size: u64| {
            runs.iter().rev().find(|run| run.scenario == ScaleSide::scenario_of(size) && Some(run.connections) == top).map(RunResult::rps)
        };
        let (rps_small, rps_large) = (rps(SCALE_SMALL), rps(SCALE_LARGE));
        for side in &mut sides {
            side.server.stop();
        }
        let mut headline = Map::new();
        headline.insert("replay_rps_10k".into(), json!(rps_small.map(r1)));
        headline.insert("replay_rps_1m".into(), json!(rps_large.map(r1)));
        headline.insert("replay_1m_vs_10k".into(), json!(ratio(rps_large, rps_small)));
        headline.insert("scale_rss_mb_1m".into(), json!(rss_large_mb.map(r1)));
        headline.insert(
            "scale_seeding".into(),
            json!("direct INSERT into idempotency_replies (server stopped meanwhile), real reply body, keys seed-NNNNNNN"),
        );
        if let Some(note) = note {
            headline.insert("scale_note".into(), json!(note));
        }
        Ok(Measured { runs, keys: headline })
    }
}

impl ReplayScale {
    /// Every size at each concurrency, in alternating rounds; and the peak memory of the
    /// 1,000,000-reply server after the runs at the largest concurrency.
    async fn measure(&'static self, plan: &Plan, sides: &[ScaleSide]) -> (Vec<RunResult>, Option<f64>) {
        let conns = plan.opts.connections.clone().unwrap_or_else(|| vec![64]);
        let round_plan = plan.rounds(SCALE_ROUNDS);
        let (mut runs, mut rss_large_mb) = (vec![], None);
        for &c in &conns {
            let mut totals: Vec<RunResult> = sides.iter().map(|side| RunResult::empty(side.scenario(), c)).collect();
            for _ in 0..SCALE_ROUNDS {
                for (side, total) in sides.iter().zip(&mut totals) {
                    let server = Some(&side.server);
                    total.absorb(measure_http(&side.target, server, "replay_scale", self, &side.fixture, c, &round_plan).await);
                }
            }
            for total in totals {
                report_progress(&total);
                runs.push(total);
            }
            if Some(&c) == conns.iter().max() {
                rss_large_mb = sides.iter().find(|side| side.size == SCALE_LARGE).and_then(|side| side.server.peak_rss_mb());
            }
        }
        (runs, rss_large_mb)
    }
}

/// One size of the scale check: its own store holding only its stored replies, its own server.
struct ScaleSide {
    size: u64,
    server: ServerProcess,
    target: Arc<Target>,
    fixture: Arc<Fixture>,
}

impl ScaleSide {
    async fn start(dir: &Path, store: &Store, size: u64, body: &Bytes) -> BoxResult<Self> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let (key_id, secret) = create_key(dir, store)?;
        let t0 = Instant::now();
        seed_replies(store, dir, &key_id, body, 0, size).await?;
        eprintln!("bench: seeded {size} stored replies directly in {:.1} s", t0.elapsed().as_secs_f64());
        let mut server = ServerProcess::start(dir, store, &format!("server-scale-{size}.log"))?;
        let target = server.ready(&secret).await?;
        let fixture = Arc::new(Fixture { scale_keys: size, ..Fixture::default() });
        Ok(ScaleSide { size, server, target, fixture })
    }

    fn scenario(&self) -> &'static str {
        Self::scenario_of(self.size)
    }

    fn scenario_of(size: u64) -> &'static str {
        if size == SCALE_SMALL { "replay_10k" } else { "replay_1m" }
    }
}
