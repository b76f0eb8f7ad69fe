//! The rails' creation-time rules (SPEC B3), as the domain asks for them
//! (`domain::payment_order::rails::RailRules`) when an order is created and when a PATCH edits
//! it: an `ach` order must make a NACHA entry ([`super::ach::validate_order_for_ach`]), a
//! `wire`, `rtp` or `sepa` one a `pain.001` credit transfer
//! ([`super::formats::iso20022::rules::check_order`]). Other payment types have no file here: a
//! live order of one is refused at creation
//! (`domain::payment_order::bank::type_carried_by_files`), since it could never reach a bank; a sandbox one goes to the sandbox bank, which moves every type.
//!
//! Both sides are checked, with what the cut-off will use: the receiving account, the paying
//! internal account (its party and account, with its connection's `debtor_agent_bic` as the
//! BIC it may lack), and the connection itself, which must have the config section the rail's
//! files need (`[ach]` or `[iso20022]`). What can still change after creation (an external
//! account edited, a connection's settings) the cut-off checks again; an order it cannot carry
//! then stays `approved` and the cut-off says so.

use async_trait::async_trait;

use super::ach::{AchOrder, SAME_DAY_AMOUNT_MAX_CENTS, entry_numbers, validate_order_for_ach};
use super::connection::{SANDBOX_TIMEZONE, sandbox_identities, stored_settings};
use super::cutoff::business_day;
use super::cutoff::items::{AccountSnap, Rail as FileRail};
use super::formats::iso20022::rules::{AccountView, OrderView, check_order, check_originating};
use super::formats::iso20022::{PostalAddress, Rail};
use crate::base::api_key::Scope;
use crate::domain::bank_id::Bic;
use crate::domain::common::Address;
use crate::domain::connection;
use crate::domain::enums::{Direction, Priority};
use crate::domain::internal_account::InternalAccount;
use crate::domain::payment_order::PaymentOrder;
use crate::domain::payment_order::rails::{RailRules, ReceivingParty};
use crate::error::{Error, Result};
use crate::store::Store;

/// The rules of the rails Payrail writes files for.
#[derive(Debug, Clone, Copy, Default)]
pub struct BankRails;

#[async_trait]
impl RailRules for BankRails {
    async fn check(
        &self,
        store: &dyn Store,
        scope: &Scope,
        order: &PaymentOrder,
        receiving: &ReceivingParty,
        originating: &InternalAccount,
    ) -> Result<Option<String>> {
        let Some(rail) = FileRail::for_type(order.payment_type) else { return Ok(None) };
        let sections = Sections::of(store, scope, originating).await?;
        match rail {
            FileRail::Ach => {
                sections.require(order, sections.ach, "[ach]")?;
                check_ach(order, receiving)?;
            }
            FileRail::Iso(iso) => {
                sections.require(order, sections.debtor_bic.is_some(), "[iso20022]")?;
                check_iso(iso, order, receiving, originating, sections.debtor_bic.as_deref())?;
            }
        }
        business_day(rail, &sections.timezone, order.created_at).map(|day| Some(day.to_string()))
    }
}

/// Which files the paying account's connection can make: the config sections it has.
struct Sections {
    /// The connection's name, for the refusal.
    name: String,
    ach: bool,
    /// `[iso20022] debtor_agent_bic`, when the section is there.
    debtor_bic: Option<String>,
    /// The connection's time zone: the day of its files.
    timezone: String,
}

impl Sections {
    async fn of(store: &dyn Store, scope: &Scope, originating: &InternalAccount) -> Result<Sections> {
        let name = originating.connection.vendor_name.clone();
        let id = &originating.connection.id;
        let (ach, iso, timezone) = match connection::is_builtin(scope, id) {
            true => {
                let (ach, iso) = sandbox_identities();
                (Some(ach), Some(iso), SANDBOX_TIMEZONE.to_owned())
            }
            false => {
                let settings = stored_settings(store, scope, id).await?;
                (settings.ach, settings.iso20022, settings.timezone)
            }
        };
        Ok(Sections { name, ach: ach.is_some(), debtor_bic: iso.map(|iso| iso.debtor_agent_bic), timezone })
    }

    fn require(&self, order: &PaymentOrder, present: bool, section: &str) -> Result<()> {
        if present {
            return Ok(());
        }
        Err(Error::invalid(
            "originating_account_id",
            format!(
                "the originating account's connection ({}) cannot send {} payment orders: its config has no {section} section",
                self.name,
                order.payment_type.as_str()
            ),
        ))
    }
}

fn check_ach(order: &PaymentOrder, receiving: &ReceivingParty) -> Result<()> {
    let (routing_number, account_number, account_type) =
        entry_numbers(&receiving.account_details, &receiving.routing_details, receiving.account_type.as_deref());
    let ach = AchOrder {
        subtype: order.subtype.as_deref(),
        direction: order.direction,
        amount: order.amount,
        currency: order.currency,
        routing_number,
        account_number,
        account_type,
        party_name: receiving.party_name.as_deref(),
        party_type: receiving.party_type.as_deref(),
        remittance_information: order.remittance_information.as_deref(),
        receiving_field: receiving.field,
    };
    validate_order_for_ach(&ach)?;
    check_same_day(order)
}

/// Same Day ACH carries at most $1,000,000.00 an entry (NACHA's per-payment limit).
fn check_same_day(order: &PaymentOrder) -> Result<()> {
    if order.priority == Priority::High && order.amount.minor_units() > SAME_DAY_AMOUNT_MAX_CENTS {
        return Err(Error::invalid(
            "amount",
            "a same-day ach payment (priority high) carries at most 1,000,000.00: send it with priority normal",
        ));
    }
    Ok(())
}

fn check_iso(
    rail: Rail,
    order: &PaymentOrder,
    receiving: &ReceivingParty,
    originating: &InternalAccount,
    debtor_bic: Option<&str>,
) -> Result<()> {
    if order.direction == Direction::Debit {
        return Err(Error::invalid(
            "direction",
            format!("{} payment orders are credit transfers: a debit cannot be sent in a pain.001 file", order.payment_type.as_str()),
        ));
    }
    let view = OrderView {
        rail,
        amount: order.amount,
        currency: order.currency,
        remittance_information: order.remittance_information.as_deref(),
        charge_bearer: order.charge_bearer.as_deref(),
        receiving: account_view(receiving),
        receiving_field: receiving.field,
    };
    check_order(&view)?;
    let bic = debtor_bic.map(|b| Bic::parse("debtor_agent_bic", b)).transpose()?;
    let debtor = AccountSnap::of_internal(originating);
    check_originating(rail, &debtor.view(), bic.as_ref()).map(|_| ())
}

fn account_view(party: &ReceivingParty) -> AccountView<'_> {
    AccountView {
        party_name: party.party_name.as_deref(),
        party_address: party.party_address.as_ref().map(postal),
        account_details: party.account_details.iter().map(|(k, n)| (k.as_str(), n.as_str())).collect(),
        routing_details: party.routing_details.iter().map(|(k, n)| (k.as_str(), n.as_str())).collect(),
    }
}

fn postal(address: &Address) -> PostalAddress {
    PostalAddress {
        line1: address.line1.clone(),
        line2: address.line2.clone(),
        locality: address.locality.clone(),
        region: address.region.clone(),
        postal_code: address.postal_code.clone(),
        country: address.country.clone(),
    }
}
