//! The rails' creation-time rules (SPEC B3), as the domain asks for them
//! (`domain::payment_order::rails::RailRules`): an `ach` order must make a NACHA entry
//! ([`super::ach::validate_order_for_ach`]), a `wire`, `rtp` or `sepa` one a `pain.001` credit
//! transfer ([`super::formats::iso20022::rules::check_order`]). Other payment types have no
//! file here and are not checked.
//!
//! Only the receiving side is checked at creation: the paying internal account's BIC may come
//! from its connection's `[iso20022] debtor_agent_bic`, which the cut-off checks with the file.

use super::ach::{AchOrder, validate_order_for_ach};
use super::formats::iso20022::rules::{AccountView, OrderView, check_order};
use super::formats::iso20022::{PostalAddress, Rail};
use crate::domain::common::Address;
use crate::domain::enums::PaymentType;
use crate::domain::internal_account::InternalAccount;
use crate::domain::payment_order::PaymentOrder;
use crate::domain::payment_order::rails::{RailRules, ReceivingParty};
use crate::error::Result;

/// The rules of the rails Payrail writes files for.
#[derive(Debug, Clone, Copy, Default)]
pub struct BankRails;

impl RailRules for BankRails {
    fn check(&self, order: &PaymentOrder, receiving: &ReceivingParty, _originating: &InternalAccount) -> Result<()> {
        let rail = match order.payment_type {
            PaymentType::Ach => return check_ach(order, receiving),
            PaymentType::Wire => Rail::Wire,
            PaymentType::Rtp => Rail::Rtp,
            PaymentType::Sepa => Rail::Sepa,
            _ => return Ok(()),
        };
        let view = OrderView {
            rail,
            amount: order.amount,
            currency: order.currency,
            remittance_information: order.remittance_information.as_deref(),
            charge_bearer: order.charge_bearer.as_deref(),
            receiving: account_view(receiving),
            receiving_field: receiving.field,
        };
        check_order(&view).map(|_| ())
    }
}

fn check_ach(order: &PaymentOrder, receiving: &ReceivingParty) -> Result<()> {
    let routing = receiving.routing_details.iter().find(|(kind, _)| kind == "aba").map(|(_, n)| n.as_str());
    let account = receiving.account_details.first().map(|(_, n)| n.as_str());
    let ach = AchOrder {
        subtype: order.subtype.as_deref(),
        direction: order.direction,
        amount: order.amount,
        currency: order.currency,
        routing_number: routing.unwrap_or(""),
        account_number: account.unwrap_or(""),
        account_type: receiving.account_type.as_deref(),
        party_name: receiving.party_name.as_deref(),
        party_type: receiving.party_type.as_deref(),
        remittance_information: order.remittance_information.as_deref(),
    };
    validate_order_for_ach(&ach).map(|_| ())
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
