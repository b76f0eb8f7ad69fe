//! `ledger_hot_guarded` (runs `ledger_hot_guarded` and `ledger_guarded_drain`): the
//! no-overdraft race, on a server of its own. Posted two-entry ledger transactions that all
//! debit one hot account, each debit (1 to 100, at random) carrying
//! `available_balance_amount: {"gte": 0}`, and credit a random one of 10,000 accounts (quick
//! mode: 100). Two runs at each concurrency, each on a fresh hot account:
//! - `ledger_hot_guarded`, right after the commit ceiling (`commit_ceiling_guarded`): funded
//!   for far more than it can spend, so every condition is checked and holds: the rate of
//!   guarded postings, against the ceiling;
//! - `ledger_guarded_drain`: funded for the warm-up and half the measured window at the rate
//!   the first run reached, so the funds run out while the writers race for them; a 201 and a
//!   422 (the condition refused, naming it) are both right answers, counted apart.
//!
//! After each run the account is read through the API: its available balance must be >= 0 and
//! equal the funding minus every debit answered 201 (warm-up included), and every refusal must
//! have been right; the benchmark fails if not.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use hyper::StatusCode;
use serde_json::{Map, Value, json};

use super::{Measured, Own, OwnServers, Scenario};
use crate::harness::{BoxResult, Call, Reply, Req, Requests, RunResult};
use crate::ledger::{LedgerFixture, LedgerServer, Tally, accounts_for, balance, ledger_concurrencies, ledger_plan, rate_keys, transfer};
use crate::plan::Plan;
use crate::seed::Fixture;

pub const SCENARIO: Scenario = Scenario::Own(&LedgerHotGuarded);

const NAME: &str = "ledger_hot_guarded";
const CEILING: &str = "commit_ceiling_guarded";
const DRAIN: &str = "ledger_guarded_drain";
/// Debits are 1 to this many minor units, at random.
const DEBIT_MAX: u64 = 100;
/// The first run's funding: more than any run here can spend (10^8 debits at the largest).
const FUNDING_AMPLE: u64 = 100_000_000 * DEBIT_MAX;

pub struct LedgerHotGuarded;

impl Requests for LedgerHotGuarded {
    fn call(&self, fx: &Fixture, req: &mut Req<'_>) -> Call {
        let other = req.pick(&fx.ledger.accounts).to_owned();
        let amount = 1 + req.rand() % DEBIT_MAX;
        fx.ledger.tally.sent.fetch_add(1, Ordering::SeqCst);
        Call::post("/api/ledger_transactions", transfer(&fx.ledger.hot, &other, amount, true), req.fresh_key())
            .or_refused(StatusCode::UNPROCESSABLE_ENTITY, amount)
    }

    fn observe(&self, fx: &Fixture, call: &Call, reply: &Reply) {
        let tally = &fx.ledger.tally;
        if reply.status == StatusCode::CREATED {
            tally.accepted.fetch_add(1, Ordering::SeqCst);
            tally.accepted_sum.fetch_add(call.weight, Ordering::SeqCst);
        } else if reply.status == StatusCode::UNPROCESSABLE_ENTITY {
            tally.refused.fetch_add(1, Ordering::SeqCst);
            tally.min_refused.fetch_min(call.weight, Ordering::SeqCst);
            // The refusal must be the balance condition's, naming it.
            if !String::from_utf8_lossy(&reply.body).contains("ledger_entries[0].available_balance_amount[gte]") {
                tally.wrong_refusals.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

#[async_trait]
impl OwnServers for LedgerHotGuarded {
    fn name(&self) -> &'static str {
        NAME
    }

    fn databases(&self) -> &'static [&'static str] {
        &[NAME]
    }

    fn baseline_of(&self, run: &str) -> Option<&'static str> {
        (run == NAME).then_some(CEILING)
    }

    async fn run(&'static self, own: &Own<'_>) -> BoxResult<Measured> {
        let mut ls = LedgerServer::start(own, NAME).await?;
        let outcome = self.runs(&ls, own).await;
        ls.server.stop();
        outcome
    }
}

impl LedgerHotGuarded {
    /// Both runs at each concurrency, each verified; the keys at the largest.
    async fn runs(&'static self, ls: &LedgerServer, own: &Own<'_>) -> BoxResult<Measured> {
        let base = ls.seed_ledger(accounts_for(own.plan)).await?;
        let plan = ledger_plan(own.plan);
        let (mut runs, mut keys) = (vec![], Map::new());
        let top = ledger_concurrencies(own.plan).into_iter().max();
        for conns in ledger_concurrencies(own.plan) {
            let ceiling = ls.ceiling(CEILING, conns, &plan).await?;
            let (run, summary) = self.verified_run(ls, &base, NAME, FUNDING_AMPLE, conns, &plan).await?;
            let funding = drain_funding(run.rps(), &plan);
            let (drain, drained) = self.verified_run(ls, &base, DRAIN, funding, conns, &plan).await?;
            if Some(conns) == top {
                guarded_keys(&mut keys, NAME, &run, Some(&ceiling), &summary);
                guarded_keys(&mut keys, DRAIN, &drain, None, &drained);
            }
            runs.extend([ceiling, run, drain]);
        }
        Ok(Measured { runs, keys })
    }

    /// One run on a fresh hot account funded with `funding`, then its verification (which
    /// fails the whole benchmark, loudly, on one overrun or one wrong answer).
    async fn verified_run(
        &'static self,
        ls: &LedgerServer,
        base: &LedgerFixture,
        name: &'static str,
        funding: u64,
        conns: usize,
        plan: &Plan,
    ) -> BoxResult<(RunResult, Value)> {
        let hot = ls.account(base, &format!("bench {name} {conns}")).await?;
        ls.fund(base, &hot, funding).await?;
        let ledger = LedgerFixture { hot, tally: Arc::new(Tally::new()), ..base.clone() };
        let fixture = Arc::new(Fixture { ledger, ..Fixture::default() });
        let run = ls.measure(self, name, &fixture, conns, plan).await;
        let summary = verify(ls, name, &fixture.ledger, funding).await?;
        Ok((run, summary))
    }
}

/// Enough for the warm-up and half the measured window at `rate` debits a second, at the mean
/// debit.
fn drain_funding(rate: f64, plan: &Plan) -> u64 {
    let seconds = (plan.opts.warmup + plan.opts.duration / 2).as_secs_f64();
    ((rate * seconds * (1 + DEBIT_MAX) as f64 / 2.0).ceil() as u64).max(DEBIT_MAX * 10)
}

/// Reads the hot account back through the API and checks it against what the server
/// answered: never below zero, exactly the funding minus the debits answered 201, one entry
/// per accepted debit, and every refusal right (the balance is below the smallest refused
/// debit). Requests without an answer (a broken connection, a 5xx) widen the exact checks
/// by what they could have written. Returns the figures, or why the run fails.
async fn verify(ls: &LedgerServer, name: &str, fx: &LedgerFixture, funding: u64) -> BoxResult<Value> {
    let account = ls.read_account(&fx.hot, "").await?;
    let (available, posted, pending) =
        (balance(&account, "available_balance")?, balance(&account, "posted_balance")?, balance(&account, "pending_balance")?);
    let lock_version = account["lock_version"].as_i64().ok_or("no lock_version")?;
    let t = &fx.tally;
    let get = Tally::get;
    let (sent, accepted, accepted_sum, refused) = (get(&t.sent), get(&t.accepted), get(&t.accepted_sum), get(&t.refused));
    let (min_refused, wrong_refusals) = (get(&t.min_refused), get(&t.wrong_refusals));
    let unanswered = sent.saturating_sub(accepted + refused);
    let expected = funding as i64 - accepted_sum as i64;
    let (missing, extra_entries) = (expected - available, lock_version - 1 - accepted as i64);
    let mut problems = vec![];
    if available < 0 {
        problems.push(format!("OVERRUN: the available balance is {available}, below zero"));
    }
    if posted != available || pending != available {
        problems.push(format!("pending {pending}, posted {posted} and available {available} differ (every entry was posted)"));
    }
    if !(0..=(DEBIT_MAX * unanswered) as i64).contains(&missing) {
        problems.push(format!(
            "the available balance is {available}, the funding {funding} minus the debits answered 201 ({accepted_sum}) is {expected} \
             ({unanswered} requests unanswered)"
        ));
    }
    if !(0..=unanswered as i64).contains(&extra_entries) {
        problems.push(format!("lock_version {lock_version}: 1 funding entry + {accepted} accepted debits expected ({unanswered} unanswered)"));
    }
    if refused > 0 && available >= min_refused as i64 {
        problems.push(format!("a debit of {min_refused} was refused but the balance is still {available}"));
    }
    if wrong_refusals > 0 {
        problems.push(format!("{wrong_refusals} 422s did not name ledger_entries[0].available_balance_amount[gte]"));
    }
    if !problems.is_empty() {
        return Err(format!("{name}: the hot account's balance is wrong: {}", problems.join("; ")));
    }
    eprintln!(
        "bench: {name}: verified: funding {funding}, {accepted} debits accepted ({accepted_sum}), {refused} refused, available {available} >= 0, \
         {unanswered} unanswered"
    );
    Ok(json!({
        "funding": funding,
        "final_available": available,
        "accepted_all": accepted,
        "refused_all": refused,
        "unanswered": unanswered,
        "exhausted": refused > 0,
        "no_overrun": true,
    }))
}

/// A run's keys: its rate (201s and 422s: both decided under the account's lock) against the
/// ceiling, the 201s and 422s of its measured window, and what the verification found.
fn guarded_keys(out: &mut Map<String, Value>, name: &str, run: &RunResult, ceiling: Option<&RunResult>, summary: &Value) {
    rate_keys(out, name, run, ceiling);
    out.insert(format!("{name}_201"), json!(run.ok - run.refused));
    out.insert(format!("{name}_422"), json!(run.refused));
    for (key, value) in summary.as_object().into_iter().flatten() {
        out.insert(format!("{name}_{key}"), value.clone());
    }
}
