//! `ledger_spread`: posted two-entry ledger transactions between two random accounts of 10,000
//! (quick mode: 100), a fresh Idempotency-Key each, on a server of its own; each run right
//! after the store's commit ceiling at its concurrency (`commit_ceiling_spread`).

use async_trait::async_trait;

use super::{Measured, Own, OwnServers, Scenario};
use crate::harness::{BoxResult, Call, Req, Requests};
use crate::ledger::{run_writes, transfer};
use crate::seed::Fixture;

pub const SCENARIO: Scenario = Scenario::Own(&LedgerSpread);

const CEILING: &str = "commit_ceiling_spread";

pub struct LedgerSpread;

impl Requests for LedgerSpread {
    fn call(&self, fx: &Fixture, req: &mut Req<'_>) -> Call {
        let accounts = &fx.ledger.accounts;
        let n = accounts.len().max(2) as u64;
        let a = req.rand() % n;
        // Another account than `a`, uniformly.
        let b = (a + 1 + req.rand() % (n - 1)) % n;
        let amount = 1 + req.rand() % 1_000;
        let (a, b) = (&accounts[a as usize], &accounts[b as usize]);
        Call::post("/api/ledger_transactions", transfer(a, b, amount, false), req.fresh_key())
    }
}

#[async_trait]
impl OwnServers for LedgerSpread {
    fn name(&self) -> &'static str {
        "ledger_spread"
    }

    fn databases(&self) -> &'static [&'static str] {
        &["ledger_spread"]
    }

    fn baseline_of(&self, run: &str) -> Option<&'static str> {
        (run == self.name()).then_some(CEILING)
    }

    async fn run(&'static self, own: &Own<'_>) -> BoxResult<Measured> {
        run_writes(own, self, self.name(), CEILING).await
    }
}
