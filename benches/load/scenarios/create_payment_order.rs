//! `create_payment_order`: POST /api/payment_orders (ach credit from the seeded internal
//! account to the seeded external account), a fresh Idempotency-Key each.

use super::{OnShared, Scenario};
use crate::harness::{Call, Req, Requests};
use crate::seed::Fixture;

pub const SCENARIO: Scenario = Scenario::Shared(&CreatePaymentOrder);

pub struct CreatePaymentOrder;

impl Requests for CreatePaymentOrder {
    fn call(&self, fx: &Fixture, req: &mut Req<'_>) -> Call {
        Call::post(
            "/api/payment_orders",
            format!(
                r#"{{"type":"ach","amount":100,"direction":"credit","originating_account_id":"{}","receiving_account_id":"{}"}}"#,
                fx.internal_account, fx.external_account
            ),
            req.fresh_key(),
        )
    }
}

impl OnShared for CreatePaymentOrder {
    fn name(&self) -> &'static str {
        "create_payment_order"
    }

    fn baseline(&self) -> Option<&'static str> {
        Some("commit_ceiling")
    }
}
