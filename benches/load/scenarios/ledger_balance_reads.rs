//! `ledger_balance_reads` (runs `ledger_balance_now`, `ledger_asof_100`, `ledger_asof_large`):
//! GET /api/ledger_accounts/{id}, current (on the large account) and as of a random instant
//! (`balances[effective_at]`) on an account with 100 entries and on one with many (full mode:
//! `--ledger-entries`, default [`LARGE_ENTRIES_FULL`]; quick mode: 1,998), on a server of its
//! own. Both accounts' entries lie evenly over the same year of effective time (the large one's
//! seeded through the API in transactions of 999 entries and one balancing entry), so an as-of
//! instant drawn from that year counts half of either account's entries on average.
//!
//! First a probe: [`PROBES`] as-of reads of each account one after the other on one
//! connection (their median is the unloaded latency, and warms the caches); then the three
//! reads, one run each at each concurrency. The as-of read of the large account runs without a
//! warm-up: at a million entries one read can take seconds, and a closed loop's warm-up would
//! leave 64 of them running into (and past) the measured window, recording nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Map, json};

use super::{Measured, Own, OwnServers, Scenario};
use crate::harness::{BoxResult, Call, Req, Requests, RunResult, call_json, connect, r1, r3, ratio};
use crate::ledger::{ENTRIES_PER_SEED_TXN, LedgerServer, balance, ledger_concurrencies, ledger_plan, rate_keys, top};
use crate::plan::{Options, Plan};
use crate::seed::Fixture;
use payrail::domain::time::Timestamp;

pub const SCENARIO: Scenario = Scenario::Own(&LedgerBalanceReads);

const NAME: &str = "ledger_balance_reads";
const NOW: &str = "ledger_balance_now";
const ASOF_SMALL: &str = "ledger_asof_100";
const ASOF_LARGE: &str = "ledger_asof_large";
/// Entries of the small account.
const SMALL_ENTRIES: u64 = 100;
/// Entries of the large account (full mode; `--ledger-entries` sets another count).
pub const LARGE_ENTRIES_FULL: u64 = 1_000_000;
const LARGE_ENTRIES_QUICK: u64 = 2 * ENTRIES_PER_SEED_TXN;
/// The effective-time span of the seeded entries: 2025 (UTC), in µs.
const SPAN: (i64, i64) = (1_735_689_600_000_000, 1_767_225_600_000_000);
/// Sequential as-of reads of each account before the runs.
const PROBES: usize = 5;

pub struct LedgerBalanceReads;

/// One of the three reads.
struct Read {
    name: &'static str,
    large: bool,
    as_of: bool,
}

static READS: [Read; 3] = [
    Read { name: NOW, large: true, as_of: false },
    Read { name: ASOF_SMALL, large: false, as_of: true },
    Read { name: ASOF_LARGE, large: true, as_of: true },
];

impl Requests for Read {
    fn call(&self, fx: &Fixture, req: &mut Req<'_>) -> Call {
        let l = &fx.ledger;
        let account = if self.large { &l.large } else { &l.small };
        if !self.as_of {
            return Call::get(format!("/api/ledger_accounts/{account}"));
        }
        let at = l.span.0 + (req.rand() % (l.span.1 - l.span.0) as u64) as i64;
        Call::get(format!("/api/ledger_accounts/{account}?balances%5Beffective_at%5D={}", Timestamp::from_micros(at)))
    }
}

#[async_trait]
impl OwnServers for LedgerBalanceReads {
    fn name(&self) -> &'static str {
        NAME
    }

    fn databases(&self) -> &'static [&'static str] {
        &[NAME]
    }

    fn baseline_of(&self, run: &str) -> Option<&'static str> {
        (run == ASOF_LARGE).then_some(ASOF_SMALL)
    }

    async fn run(&'static self, own: &Own<'_>) -> BoxResult<Measured> {
        let mut ls = LedgerServer::start(own, NAME).await?;
        let large_entries = match (own.plan.opts.quick, own.plan.opts.ledger_entries) {
            (_, Some(n)) => n,
            (true, None) => LARGE_ENTRIES_QUICK,
            (false, None) => LARGE_ENTRIES_FULL,
        };
        let mut fx = ls.seed_ledger(0).await?;
        fx.small = ls.account(&fx, "bench 100 entries").await?;
        fx.large = ls.account(&fx, "bench many entries").await?;
        fx.span = SPAN;
        ls.seed_entries(&fx, &fx.small, SMALL_ENTRIES, 1, SPAN).await?;
        let took = ls.seed_entries(&fx, &fx.large, large_entries, ENTRIES_PER_SEED_TXN, SPAN).await?.as_secs_f64();
        eprintln!(
            "bench: seeded {large_entries} entries on one account through the API in {took:.1} s ({:.0} entries/s)",
            large_entries as f64 / took
        );
        let vacuumed = ls.settle_statistics(&["VACUUM (ANALYZE) ledger_postings", "ANALYZE"]).await?;
        check_sums(&ls, &fx.small, SMALL_ENTRIES).await?;
        check_sums(&ls, &fx.large, large_entries).await?;
        let (probe_small, probe_large) = (probe(&ls, &fx.small).await?, probe(&ls, &fx.large).await?);
        eprintln!("bench: as-of reads one at a time (median of {PROBES}): {probe_small:.3} ms (100 entries), {probe_large:.3} ms ({large_entries})");
        let fixture = Arc::new(Fixture { ledger: fx, ..Fixture::default() });
        let runs = measure(&ls, &fixture, own).await;
        ls.server.stop();
        let mut keys = Map::new();
        for read in &READS {
            if let Some(run) = top(&runs, read.name) {
                rate_keys(&mut keys, read.name, run, None);
            }
        }
        if let (Some(small), Some(large)) = (top(&runs, ASOF_SMALL), top(&runs, ASOF_LARGE)) {
            keys.insert("ledger_asof_p50_large_vs_100".into(), json!(ratio(Some(large.ms(0.5)), Some(small.ms(0.5)))));
            keys.insert("ledger_asof_p99_large_vs_100".into(), json!(ratio(Some(large.ms(0.99)), Some(small.ms(0.99)))));
        }
        keys.insert("ledger_asof_single_ms_100".into(), json!(r3(probe_small)));
        keys.insert("ledger_asof_single_ms_large".into(), json!(r3(probe_large)));
        keys.insert("ledger_asof_single_large_vs_100".into(), json!(ratio(Some(probe_large), Some(probe_small))));
        keys.insert("ledger_asof_large_entries".into(), json!(large_entries));
        keys.insert("ledger_asof_seed_s".into(), json!(r1(took)));
        keys.insert("ledger_asof_seed_entries_per_s".into(), json!(r1(large_entries as f64 / took)));
        keys.insert("ledger_asof_vacuumed".into(), json!(vacuumed));
        Ok(Measured { runs, keys })
    }
}

/// The three reads at each concurrency, one run each.
async fn measure(ls: &LedgerServer, fixture: &Arc<Fixture>, own: &Own<'_>) -> Vec<RunResult> {
    let plan = ledger_plan(own.plan);
    let cold = Plan { opts: Options { warmup: Duration::ZERO, ..plan.opts.clone() }, ..plan.clone() };
    let mut runs = vec![];
    for conns in ledger_concurrencies(own.plan) {
        for read in &READS {
            let plan = if read.name == ASOF_LARGE { &cold } else { &plan };
            runs.push(ls.measure(read, read.name, fixture, conns, plan).await);
        }
    }
    runs
}

/// The median of [`PROBES`] as-of reads of `account` at random instants of the span, one after
/// the other on one connection, in ms.
async fn probe(ls: &LedgerServer, account: &str) -> BoxResult<f64> {
    let mut sender = connect(&ls.target).await?;
    let mut took = Vec::with_capacity(PROBES);
    for i in 0..PROBES {
        let at = SPAN.0 + (SPAN.1 - SPAN.0) / (PROBES as i64 + 1) * (i as i64 + 1);
        let t0 = Instant::now();
        let call = Call::get(format!("/api/ledger_accounts/{account}?balances%5Beffective_at%5D={}", Timestamp::from_micros(at)));
        call_json(&ls.target, &mut sender, call).await?;
        took.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    took.sort_by(f64::total_cmp);
    Ok(took[PROBES / 2])
}

/// The seeding landed: `entries` credits of 1 now, all of them as of the end of the span, none
/// before its start.
async fn check_sums(ls: &LedgerServer, account: &str, entries: u64) -> BoxResult<()> {
    let as_of = |at: i64| format!("?balances%5Beffective_at%5D={}", Timestamp::from_micros(at));
    for (query, expected) in [(String::new(), entries as i64), (as_of(SPAN.1), entries as i64), (as_of(SPAN.0 - 1), 0)] {
        let served = balance(&ls.read_account(account, &query).await?, "posted_balance")?;
        if served != expected {
            return Err(format!("{NAME}: account {account}{query}: posted balance {served}, {expected} expected"));
        }
    }
    Ok(())
}
