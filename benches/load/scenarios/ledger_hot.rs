//! `ledger_hot`: posted two-entry ledger transactions that all debit one hot account and credit
//! a random one of 10,000 (quick mode: 100), a fresh Idempotency-Key each, on a server of its
//! own; each run right after the store's commit ceiling at its concurrency (`commit_ceiling_hot`).

use async_trait::async_trait;

use super::{Measured, Own, OwnServers, Scenario};
use crate::harness::{BoxResult, Call, Req, Requests};
use crate::ledger::{run_writes, transfer};
use crate::seed::Fixture;

pub const SCENARIO: Scenario = Scenario::Own(&LedgerHot);

const CEILING: &str = "commit_ceiling_hot";

pub struct LedgerHot;

impl Requests for LedgerHot {
    fn call(&self, fx: &Fixture, req: &mut Req<'_>) -> Call {
        let other = req.pick(&fx.ledger.accounts).to_owned();
        let amount = 1 + req.rand() % 1_000;
        Call::post("/api/ledger_transactions", transfer(&fx.ledger.hot, &other, amount, false), req.fresh_key())
    }
}

#[async_trait]
impl OwnServers for LedgerHot {
    fn name(&self) -> &'static str {
        "ledger_hot"
    }

    fn databases(&self) -> &'static [&'static str] {
        &["ledger_hot"]
    }

    fn baseline_of(&self, run: &str) -> Option<&'static str> {
        (run == self.name()).then_some(CEILING)
    }

    async fn run(&'static self, own: &Own<'_>) -> BoxResult<Measured> {
        run_writes(own, self, self.name(), CEILING).await
    }
}
