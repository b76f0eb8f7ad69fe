//! The payment orders an external account still has to carry money to (SPEC B3).
//!
//! An order reads its receiving account when its cut-off comes, not when it is created, so an
//! account edited or deleted in between would leave the order waiting, approved, at every
//! cut-off. Instead the account's change is checked against those orders: an edit their rails
//! cannot carry is refused with a 422 naming the account's field, and deleting the account (or
//! its counterparty) is refused with a 409 while one of them is still to be sent. Once an order
//! is in a file its account is frozen with it, so only orders before that count.
//!
//! The orders are found through their counterparty (an order's `counterparty_id` is its
//! receiving account's owner), or, for an account created inline without a counterparty, through
//! the order's [`UNOWNED_RECEIVING_TERM`]. An order written before that term existed is found
//! once it is written again; until then its cut-off check is the only one.

use async_trait::async_trait;

use super::ops::{parse, party_of};
use super::status::Status;
use super::{KIND, PaymentOrder, UNOWNED_RECEIVING_TERM};
use crate::domain::external_account::{AccountUses, ExternalAccount};
use crate::domain::{Ctx, internal_account};
use crate::error::{Error, Result};
use crate::store::{Filter, ListQuery};

/// Orders of one counterparty read at a time.
const PAGE: usize = 500;

/// The rule above, as `external_account` asks for it.
#[derive(Debug, Clone, Copy, Default)]
pub struct OrdersToSend;

#[async_trait]
impl AccountUses for OrdersToSend {
    async fn allow(&self, ctx: &Ctx<'_>, account: &ExternalAccount, changed: Option<&ExternalAccount>) -> Result<()> {
        let orders = unsent_to(ctx, account).await?;
        let Some(changed) = changed else {
            return match orders.first() {
                None => Ok(()),
                Some(order) => Err(Error::Conflict {
                    message: format!(
                        "payment order {} ({}) pays to external account {} and is not sent yet: cancel it, or wait until it is sent, before deleting the account",
                        order.id, order.status, account.id
                    ),
                    parameter: Some("id".into()),
                    retry_after_s: None,
                }),
            };
        };
        let Some(rails) = ctx.rails else { return Ok(()) };
        let party = party_of(changed, "receiving_account_id");
        for order in &orders {
            let Some(originating) = ctx.store.get(internal_account::KIND, ctx.scope, order.originating_account_id.as_str()).await? else {
                continue;
            };
            let originating = internal_account::parse(&originating)?;
            match rails.check(ctx.store, ctx.scope, order, &party, &originating).await {
                Err(Error::Invalid { code, parameter, message }) if parameter.starts_with("receiving_account_id") => {
                    let field = parameter.trim_start_matches("receiving_account_id").trim_start_matches('.');
                    let field = if field.is_empty() { "id" } else { field };
                    return Err(Error::Invalid {
                        code,
                        parameter: field.to_owned(),
                        message: format!(
                            "payment order {} ({}) pays to this account and its {} file could not carry the change: {message}",
                            order.id,
                            order.status,
                            order.payment_type.as_str()
                        ),
                    });
                }
                // Only the account's part is this change's; the rest was checked with the order.
                _ => continue,
            }
        }
        Ok(())
    }
}

/// The orders not yet in a file (pending, awaiting approval, approved, held) that pay to
/// `account`.
async fn unsent_to(ctx: &Ctx<'_>, account: &ExternalAccount) -> Result<Vec<PaymentOrder>> {
    let owner = match &account.counterparty_id {
        Some(counterparty_id) => Filter::Eq { name: "counterparty_id".into(), value: counterparty_id.clone() },
        None => Filter::Eq { name: UNOWNED_RECEIVING_TERM.into(), value: account.id.clone() },
    };
    let statuses = [Status::Pending, Status::NeedsApproval, Status::Approved, Status::Held];
    let mut query = ListQuery {
        kind: KIND,
        scope: ctx.scope.clone(),
        filters: vec![owner, Filter::AnyOf { name: "status".into(), values: statuses.iter().map(|s| s.as_str().to_owned()).collect() }],
        after_seq: None,
        limit: PAGE,
    };
    let mut out = Vec::new();
    loop {
        let page = ctx.store.list(&query).await?;
        for stored in &page.items {
            let order = parse(stored)?;
            if order.receiving_account_id.as_str() == account.id {
                out.push(order);
            }
        }
        match page.next_seq {
            Some(seq) => query.after_seq = Some(seq),
            None => return Ok(out),
        }
    }
}
