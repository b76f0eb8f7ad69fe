//! Whether a rail can carry an order (SPEC B3): called when a `wire`, `rtp` or `sepa` payment
//! order is created, so an order its rail cannot carry is refused then with a 422 naming the
//! field, never at cut-off. The same checks run again when a file is written ([`check_transfer`],
//! [`check_group`]), so what creation accepted is exactly what the writer accepts.
//!
//! [`check_order`] turns what the creation knows (the views below, in Modern Treasury's words)
//! into the typed [`Counterpart`] a file carries; [`check_originating`] does the same for the
//! internal account that pays. Field -> refusal (`R` is the receiving prefix the caller gives:
//! `receiving_account` for an inline account, `receiving_account_id` for a stored one):
//!
//! | field | refused when |
//! |---|---|
//! | `currency` | sepa: not EUR; rtp: not USD; wire: not an ISO 4217 currency with at most 5 decimals (the XSD's amount type) |
//! | `amount` | rtp: above the RTP network's per-transaction limit, USD 10,000,000.00 (The Clearing House, limit raised from 1 million in February 2025; a bank may set a lower one) |
//! | `R.party_name` | missing (every rail names the creditor), blank, too long (sepa 70, others 140) or outside the rail's character set (`text`) |
//! | `R.party_address.*` | a given line too long or outside the character set; `country` not two capital letters |
//! | `R.account_details` | sepa: no IBAN (or the IBAN's checksum fails); rtp: no non-IBAN account number; wire: none at all; a number over 34 characters |
//! | `R.routing_details` | sepa: no `swift` BIC; rtp: no `aba` routing number; wire: neither; an ABA with a bad check digit or a malformed BIC |
//! | `remittance_information` | over 140 characters or outside the character set (one `Ustrd`) |
//! | `charge_bearer` | sepa: `sender` or `receiver` (SEPA shares charges: `SLEV`) |
//! | `originating_account_id` | the paying internal account fails the same account / routing rules (its BIC may come from the connection's `debtor_agent_bic`) |

use super::text::{self, Charset};
use super::{Account, Agent, ChargeBearer, Counterpart, CreditTransfer, Party, PaymentGroup, PostalAddress, Rail};
use crate::domain::bank_id::{AbaRoutingNumber, Bic, Iban};
use crate::domain::money::{Amount, Currency};
use crate::error::{Error, Result};

/// The RTP network's per-transaction limit in cents: USD 10,000,000.00 (The Clearing House
/// raised it from USD 1,000,000 in February 2025).
pub const RTP_LIMIT_CENTS: i64 = 1_000_000_000;

/// Most decimals an amount may have: the XSD's `ActiveOrHistoricCurrencyAndAmount` allows 5.
const AMOUNT_DECIMALS_MAX: u8 = 5;

/// An account as the creation of an order knows it (an external or internal account's fields).
#[derive(Debug, Clone, Default)]
pub struct AccountView<'a> {
    pub party_name: Option<&'a str>,
    pub party_address: Option<PostalAddress>,
    /// `(account_number_type, account_number)` of each account detail, in order.
    pub account_details: Vec<(&'a str, &'a str)>,
    /// `(routing_number_type, routing_number)` of each routing detail, in order.
    pub routing_details: Vec<(&'a str, &'a str)>,
}

/// A payment order being created, as far as its rail cares.
#[derive(Debug, Clone)]
pub struct OrderView<'a> {
    pub rail: Rail,
    pub amount: Amount,
    pub currency: Currency,
    pub remittance_information: Option<&'a str>,
    pub charge_bearer: Option<&'a str>,
    pub receiving: AccountView<'a>,
    /// How errors name the receiving account: `receiving_account` or `receiving_account_id`.
    pub receiving_field: &'a str,
}

/// The creditor the rail would carry for `order`, or a 422 naming the order field it cannot.
pub fn check_order(order: &OrderView) -> Result<Counterpart> {
    let rail = order.rail;
    check_currency(rail, order.currency)?;
    check_amount(rail, order.amount)?;
    if let Some(remittance) = order.remittance_information {
        text::check("remittance_information", remittance, 140, rail.charset())?;
    }
    if let Some(bearer) = order.charge_bearer {
        check_charge_bearer(rail, ChargeBearer::from_order("charge_bearer", bearer)?)?;
    }
    counterpart(rail, order.receiving_field, &order.receiving, None)
}

/// The debtor side for an order paid from `account` (the internal account): its BIC may come
/// from the connection (`[iso20022] debtor_agent_bic`) when the account has none.
pub fn check_originating(rail: Rail, account: &AccountView, connection_bic: Option<&Bic>) -> Result<Counterpart> {
    counterpart(rail, "originating_account_id", account, connection_bic)
}

fn counterpart(rail: Rail, prefix: &str, view: &AccountView, fallback_bic: Option<&Bic>) -> Result<Counterpart> {
    let name_field = format!("{prefix}.party_name");
    let name = view.party_name.ok_or_else(|| Error::missing(&name_field))?;
    let party = Party { name: name.to_owned(), address: view.party_address.clone() };
    let account = account_of(rail, &format!("{prefix}.account_details"), &view.account_details)?;
    let agent = agent_of(rail, &format!("{prefix}.routing_details"), &view.routing_details, fallback_bic)?;
    let counterpart = Counterpart { party, account, agent };
    check_counterpart(rail, prefix, &counterpart)?;
    Ok(counterpart)
}

fn account_of(rail: Rail, field: &str, details: &[(&str, &str)]) -> Result<Account> {
    let iban = details.iter().find(|(kind, _)| *kind == "iban");
    let other = details.iter().find(|(kind, _)| *kind != "iban");
    match (rail, iban, other) {
        (Rail::Sepa, Some((_, number)), _) | (Rail::Wire, Some((_, number)), _) => Ok(Account::Iban(Iban::parse(field, number)?)),
        (Rail::Sepa, None, _) => Err(Error::invalid(field, format!("{field} must include an IBAN for a sepa payment"))),
        (Rail::Rtp, _, None) => Err(Error::invalid(field, format!("{field} must include a US account number for an rtp payment"))),
        (_, _, Some((_, number))) => Ok(Account::Other((*number).to_owned())),
        (Rail::Wire, None, None) => Err(Error::invalid(field, format!("{field} must include an account number for a wire"))),
    }
}

fn agent_of(rail: Rail, field: &str, details: &[(&str, &str)], fallback_bic: Option<&Bic>) -> Result<Agent> {
    let number = |kind: &str| details.iter().find(|(k, _)| *k == kind).map(|(_, n)| *n);
    let aba = number("aba").map(|n| AbaRoutingNumber::parse(field, n)).transpose()?;
    let bic = number("swift").map(|n| Bic::parse(field, n)).transpose()?.or_else(|| fallback_bic.cloned());
    match (rail, bic, aba) {
        (Rail::Sepa, Some(bic), _) => Ok(Agent::Bic(bic)),
        (Rail::Sepa, None, _) => Err(Error::invalid(field, format!("{field} must include a swift (BIC) code for a sepa payment"))),
        (Rail::Rtp, _, Some(aba)) => Ok(Agent::Aba(aba)),
        (Rail::Rtp, _, None) => Err(Error::invalid(field, format!("{field} must include an aba routing number for an rtp payment"))),
        (Rail::Wire, Some(bic), Some(aba)) => Ok(Agent::BicAndAba(bic, aba)),
        (Rail::Wire, Some(bic), None) => Ok(Agent::Bic(bic)),
        (Rail::Wire, None, Some(aba)) => Ok(Agent::Aba(aba)),
        (Rail::Wire, None, None) => {
            Err(Error::invalid(field, format!("{field} must include an aba routing number or a swift code for a wire")))
        }
    }
}

/// A written group: its id and the debtor it pays from fit the rail.
pub fn check_group(group: &PaymentGroup) -> Result<()> {
    text::check_id("payment_information_id", &group.id, group.rail.charset())?;
    if let Some(purpose) = &group.category_purpose {
        let ok = (1..=4).contains(&purpose.len()) && purpose.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
        if !ok {
            return Err(Error::invalid("category_purpose", "category_purpose must be an ISO category purpose code of 1 to 4 capitals"));
        }
    }
    check_counterpart(group.rail, "originating_account_id", &group.debtor)
}

/// A written transaction: everything [`check_order`] checks, on the typed values.
pub fn check_transfer(rail: Rail, transfer: &CreditTransfer) -> Result<()> {
    check_currency(rail, transfer.currency)?;
    check_amount(rail, transfer.amount)?;
    if let Some(remittance) = &transfer.remittance_information {
        text::check("remittance_information", remittance, 140, rail.charset())?;
    }
    if let Some(bearer) = transfer.charge_bearer {
        check_charge_bearer(rail, bearer)?;
    }
    check_counterpart(rail, "receiving_account", &transfer.creditor)
}

fn check_currency(rail: Rail, currency: Currency) -> Result<()> {
    let refused = |why: &str| Err(Error::invalid("currency", format!("currency {currency} cannot be sent by {}: {why}", rail_name(rail))));
    match rail {
        Rail::Sepa if currency.code() != "EUR" => refused("SEPA carries EUR only"),
        Rail::Rtp if currency.code() != "USD" => refused("RTP carries USD only"),
        _ if iso_currency::Currency::from_code(currency.code()).is_none() => refused("not an ISO 4217 currency"),
        _ if currency.exponent() > AMOUNT_DECIMALS_MAX => refused("more decimals than an ISO 20022 amount holds"),
        _ => Ok(()),
    }
}

fn check_amount(rail: Rail, amount: Amount) -> Result<()> {
    if rail == Rail::Rtp && amount.minor_units() > RTP_LIMIT_CENTS {
        return Err(Error::invalid("amount", "amount is above the RTP network's limit of USD 10,000,000.00 per payment"));
    }
    Ok(())
}

fn check_charge_bearer(rail: Rail, bearer: ChargeBearer) -> Result<()> {
    let fits = match rail {
        Rail::Sepa => matches!(bearer, ChargeBearer::Shared | ChargeBearer::FollowingServiceLevel),
        Rail::Wire | Rail::Rtp => bearer != ChargeBearer::FollowingServiceLevel,
    };
    if fits { Ok(()) } else { Err(Error::invalid("charge_bearer", format!("charge_bearer cannot be {bearer:?} for {}", rail_name(rail)))) }
}

/// Name, address, account and bank of one side fit the rail's character set, lengths and
/// identifier kinds (`prefix` names the account in errors).
fn check_counterpart(rail: Rail, prefix: &str, side: &Counterpart) -> Result<()> {
    let charset = rail.charset();
    text::check(&format!("{prefix}.party_name"), &side.party.name, rail.name_max(), charset)?;
    if let Some(address) = &side.party.address {
        check_address(&format!("{prefix}.party_address"), address, charset)?;
    }
    let account_field = format!("{prefix}.account_details");
    match (&side.account, rail) {
        (Account::Iban(_), Rail::Rtp) => return Err(Error::invalid(account_field, "rtp payments go to US account numbers, not IBANs")),
        (Account::Other(_), Rail::Sepa) => return Err(Error::invalid(account_field, "sepa payments need an IBAN")),
        (Account::Other(number), _) => text::check(&account_field, number, 34, charset)?,
        (Account::Iban(_), _) => {}
    }
    let routing_field = format!("{prefix}.routing_details");
    match rail {
        Rail::Sepa if side.agent.bic().is_none() => Err(Error::invalid(routing_field, "sepa payments need the bank's BIC")),
        Rail::Rtp if side.agent.aba().is_none() => Err(Error::invalid(routing_field, "rtp payments need the bank's ABA routing number")),
        _ => Ok(()),
    }
}

fn check_address(prefix: &str, address: &PostalAddress, charset: Charset) -> Result<()> {
    let lines = [
        ("line1", &address.line1, 70),
        ("line2", &address.line2, 70),
        ("locality", &address.locality, 35),
        ("region", &address.region, 35),
        ("postal_code", &address.postal_code, 16),
    ];
    for (name, value, max) in lines {
        if let Some(value) = value {
            text::check(&format!("{prefix}.{name}"), value, max, charset)?;
        }
    }
    match &address.country {
        Some(c) if c.len() != 2 || !c.bytes().all(|b| b.is_ascii_uppercase()) => {
            let field = format!("{prefix}.country");
            Err(Error::invalid(&field, format!("{field} must be an ISO 3166 two-letter code such as US")))
        }
        _ => Ok(()),
    }
}

fn rail_name(rail: Rail) -> &'static str {
    match rail {
        Rail::Wire => "wire",
        Rail::Rtp => "rtp",
        Rail::Sepa => "sepa",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn currency(code: &str) -> Currency {
        Currency::parse("currency", code).unwrap()
    }

    fn sepa_account() -> AccountView<'static> {
        AccountView {
            party_name: Some("Jean Dupont"),
            account_details: vec![("iban", "DE89370400440532013000")],
            routing_details: vec![("swift", "COBADEFFXXX")],
            ..AccountView::default()
        }
    }

    fn us_account() -> AccountView<'static> {
        AccountView {
            party_name: Some("Jane Doe"),
            account_details: vec![("other", "123456789")],
            routing_details: vec![("aba", "021000021")],
            ..AccountView::default()
        }
    }

    fn order(rail: Rail, code: &str, receiving: AccountView<'static>) -> OrderView<'static> {
        OrderView {
            rail,
            amount: Amount::parse("amount", 12_500).unwrap(),
            currency: currency(code),
            remittance_information: None,
            charge_bearer: None,
            receiving,
            receiving_field: "receiving_account",
        }
    }

    fn refused(view: &OrderView) -> String {
        match check_order(view) {
            Err(Error::Invalid { parameter, .. }) => parameter,
            other => panic!("expected a 422, got {other:?}"),
        }
    }

    #[test]
    fn b3_sepa_needs_eur_iban_bic_and_a_name() {
        let ok = check_order(&order(Rail::Sepa, "EUR", sepa_account())).unwrap();
        assert!(matches!(ok.account, Account::Iban(_)) && ok.agent.bic().is_some());
        assert_eq!(refused(&order(Rail::Sepa, "USD", sepa_account())), "currency");
        let mut no_iban = sepa_account();
        no_iban.account_details = vec![("other", "123")];
        assert_eq!(refused(&order(Rail::Sepa, "EUR", no_iban)), "receiving_account.account_details");
        let mut bad_iban = sepa_account();
        bad_iban.account_details = vec![("iban", "DE89370400440532013001")];
        assert_eq!(refused(&order(Rail::Sepa, "EUR", bad_iban)), "receiving_account.account_details");
        let mut no_bic = sepa_account();
        no_bic.routing_details.clear();
        assert_eq!(refused(&order(Rail::Sepa, "EUR", no_bic)), "receiving_account.routing_details");
        let mut no_name = sepa_account();
        no_name.party_name = None;
        assert_eq!(refused(&order(Rail::Sepa, "EUR", no_name)), "receiving_account.party_name");
        let mut umlaut = sepa_account();
        umlaut.party_name = Some("Jürgen");
        assert_eq!(refused(&order(Rail::Sepa, "EUR", umlaut)), "receiving_account.party_name");
        let mut sender_pays = order(Rail::Sepa, "EUR", sepa_account());
        sender_pays.charge_bearer = Some("sender");
        assert_eq!(refused(&sender_pays), "charge_bearer");
    }

    #[test]
    fn b3_rtp_needs_usd_aba_and_stays_under_the_network_limit() {
        assert!(check_order(&order(Rail::Rtp, "USD", us_account())).is_ok());
        assert_eq!(refused(&order(Rail::Rtp, "EUR", us_account())), "currency");
        let mut no_aba = us_account();
        no_aba.routing_details = vec![("swift", "CHASUS33")];
        assert_eq!(refused(&order(Rail::Rtp, "USD", no_aba)), "receiving_account.routing_details");
        let mut bad_aba = us_account();
        bad_aba.routing_details = vec![("aba", "021000022")];
        assert_eq!(refused(&order(Rail::Rtp, "USD", bad_aba)), "receiving_account.routing_details");
        let mut at_limit = order(Rail::Rtp, "USD", us_account());
        at_limit.amount = Amount::parse("amount", RTP_LIMIT_CENTS).unwrap();
        assert!(check_order(&at_limit).is_ok());
        at_limit.amount = Amount::parse("amount", RTP_LIMIT_CENTS + 1).unwrap();
        assert_eq!(refused(&at_limit), "amount");
    }

    #[test]
    fn b3_wire_needs_a_name_an_account_and_a_bank() {
        let both = AccountView { routing_details: vec![("aba", "021000021"), ("swift", "CHASUS33")], ..us_account() };
        assert!(matches!(check_order(&order(Rail::Wire, "USD", both)).unwrap().agent, Agent::BicAndAba(..)));
        assert!(check_order(&order(Rail::Wire, "GBP", sepa_account())).is_ok(), "wires carry any ISO currency, IBANs too");
        let mut no_account = us_account();
        no_account.account_details.clear();
        assert_eq!(refused(&order(Rail::Wire, "USD", no_account)), "receiving_account.account_details");
        let mut no_bank = us_account();
        no_bank.routing_details.clear();
        assert_eq!(refused(&order(Rail::Wire, "USD", no_bank)), "receiving_account.routing_details");
        let mut no_name = us_account();
        no_name.party_name = None;
        assert_eq!(refused(&order(Rail::Wire, "USD", no_name)), "receiving_account.party_name");
        assert_eq!(refused(&order(Rail::Wire, "BTC", us_account())), "currency", "8 decimals do not fit the XSD");
        let mut long_remittance = order(Rail::Wire, "USD", us_account());
        long_remittance.remittance_information = Some(Box::leak("x".repeat(141).into_boxed_str()));
        assert_eq!(refused(&long_remittance), "remittance_information");
    }

    #[test]
    fn b3_addresses_are_checked_line_by_line() {
        let mut view = us_account();
        view.party_address = Some(PostalAddress { country: Some("usa".into()), ..PostalAddress::default() });
        assert_eq!(refused(&order(Rail::Wire, "USD", view.clone())), "receiving_account.party_address.country");
        view.party_address = Some(PostalAddress { locality: Some("x".repeat(36)), ..PostalAddress::default() });
        assert_eq!(refused(&order(Rail::Wire, "USD", view)), "receiving_account.party_address.locality");
    }

    #[test]
    fn b3_the_debtor_bic_may_come_from_the_connection() {
        let mut internal = sepa_account();
        internal.routing_details.clear();
        assert!(check_originating(Rail::Sepa, &internal, None).is_err());
        let bic = Bic::parse("debtor_agent_bic", "ACMEDEFF").unwrap();
        assert_eq!(check_originating(Rail::Sepa, &internal, Some(&bic)).unwrap().agent, Agent::Bic(bic));
    }
}
