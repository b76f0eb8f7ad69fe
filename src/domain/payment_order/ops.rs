//! Creating, reading, listing and updating payment orders, and the bank's moves. A create or
//! update request is parsed here, field by field in a fixed order (so the first refusal a
//! client sees does not change), into the typed [`PaymentOrder`].

use time::Date;
use time::macros::format_description;

use super::rails::ReceivingParty;
use super::status::{Actor, Status};
use super::{
    CHARGE_BEARERS, FX_INDICATORS, KIND, PartyAddress, PaymentOrder, PaymentOrderInput, PaymentOrderPatch, RECONCILIATION_STATUSES,
    ReturnObject, bank,
};
use crate::domain::common::Stamp;
use crate::domain::enums::{Direction, PaymentType, Priority};
use crate::domain::id::Id;
use crate::domain::ledger::transactions as ledger_transactions;
use crate::domain::listing::{self, ListedPage, PageSpec};
use crate::domain::money::{Amount, Currency};
use crate::domain::time::Timestamp;
use crate::domain::validate::{self, TEXT_LEN_MAX};
use crate::domain::{Commit, Ctx, counterparty, enums, event, external_account, internal_account, retry_on_conflict, returns};
use crate::error::{Error, Result};
use crate::store::{Filter, ObjectRecord, StoredObject, Write, WriteBatch};

/// Longest remittance information by payment type (ACH addenda records hold 80).
fn remittance_len_max(payment_type: PaymentType) -> usize {
    if payment_type == PaymentType::Ach { 80 } else { 140 }
}

/// Longest statement descriptor by payment type (ACH: 10, EFT: 15, others: 140).
fn descriptor_len_max(payment_type: PaymentType) -> usize {
    match payment_type {
        PaymentType::Ach => 10,
        PaymentType::Eft => 15,
        _ => 140,
    }
}

/// An amount in minor units: 1 to [`super::AMOUNT_MAX`] (SPEC E2); a 422 naming `param`
/// otherwise. The check [`Amount::parse`] makes, as a number (the property tests drive it).
pub fn amount(param: &str, value: i64) -> Result<i64> {
    Amount::parse(param, value).map(Amount::minor_units)
}

/// A calendar date, `YYYY-MM-DD`.
pub fn date(param: &str, text: &str) -> Result<String> {
    Date::parse(text, format_description!("[year]-[month]-[day]"))
        .map(|_| text.to_owned())
        .map_err(|_| Error::invalid(param, format!("{param} must be a date written YYYY-MM-DD")))
}

/// UTC's day at `now`: the default `effective_date` where no rail gives the bank's day
/// ([`super::rails::RailRules::check`]): a type no file carries, or no rails wired in.
fn today(now: Timestamp) -> String {
    now.to_string()[..10].to_owned()
}

fn instant(param: &str, text: Option<&str>) -> Result<Option<Timestamp>> {
    text.map(|t| Timestamp::parse_rfc3339_or_utc(t).ok_or_else(|| Error::invalid(param, format!("{param} must be an RFC 3339 date-time"))))
        .transpose()
}

fn opt_enum(param: &str, value: Option<&str>, allowed: &[&str]) -> Result<Option<String>> {
    value.map(|v| validate::one_of(param, v, allowed)).transpose()
}

fn unsupported(present: bool, param: &str, what: &str) -> Result<()> {
    if present { Err(Error::invalid(param, format!("{what} are not supported by Payrail"))) } else { Ok(()) }
}

fn party_address(input: Option<&crate::domain::common::AddressInput>, stamp: Stamp) -> Result<Option<PartyAddress>> {
    let Some(input) = input else { return Ok(None) };
    let built = input.build("originating_party_address", stamp)?;
    Ok(Some(PartyAddress {
        line1: built.line1,
        line2: built.line2,
        locality: built.locality,
        region: built.region,
        postal_code: built.postal_code,
        country: built.country,
    }))
}

fn check_line_items(input: &PaymentOrderInput, total: Amount) -> Result<()> {
    if input.line_items.is_empty() {
        return Ok(());
    }
    let total = total.minor_units();
    let mut sum: i64 = 0;
    for (i, item) in input.line_items.iter().enumerate() {
        sum = sum.saturating_add(Amount::parse(&format!("line_items[{i}].amount"), item.amount)?.minor_units());
        validate::opt_text(&format!("line_items[{i}].description"), item.description.as_deref(), TEXT_LEN_MAX)?;
        validate::metadata(&format!("line_items[{i}].metadata"), item.metadata.as_ref())?;
    }
    if sum != total {
        return Err(Error::invalid("line_items", format!("line item amounts add up to {sum}, not the order's amount {total}")));
    }
    Ok(())
}

/// Where the money goes: the receiving account's id, type and counterparty.
struct Receiving {
    id: Id,
    account_type: &'static str,
    counterparty_id: Option<Id>,
    /// The external account as its rail sees it (SPEC B3); none for a book transfer.
    party: Option<ReceivingParty>,
    /// A book transfer's receiving internal account's currency.
    book_currency: Option<Currency>,
}

/// An external account as the rails' creation-time rules see it.
pub(super) fn party_of(account: &external_account::ExternalAccount, field: &'static str) -> ReceivingParty {
    ReceivingParty {
        field,
        account_type: Some(account.account_type.clone()),
        party_name: Some(account.party_name.clone()).filter(|n| !n.is_empty()),
        party_type: account.party_type.clone(),
        party_address: account.party_address.clone(),
        account_details: account
            .account_details
            .iter()
            .filter_map(|d| Some((d.account_number_type.clone(), d.account_number.clone()?)))
            .collect(),
        routing_details: account.routing_details.iter().map(|d| (d.routing_number_type.clone(), d.routing_number.clone())).collect(),
    }
}

/// Where the money goes, and the counterparty the order is linked to (SPEC E2). A
/// `counterparty_id` in the body must name a counterparty the caller can see, and the one that
/// owns the receiving account: naming another is refused rather than recorded beside an account
/// it does not own. An inline account is created under it (or under its own `counterparty_id`).
async fn receiving(ctx: &Ctx<'_>, batch: &mut WriteBatch, input: &PaymentOrderInput, payment_type: PaymentType) -> Result<Receiving> {
    let named = match &input.counterparty_id {
        Some(id) => Some(counterparty::require(ctx, batch, id, "counterparty_id").await?),
        None => None,
    };
    let receiving = match (&input.receiving_account_id, &input.receiving_account) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid("receiving_account_id", "give exactly one of receiving_account_id or receiving_account"));
        }
        (None, None) => return Err(Error::missing("receiving_account_id")),
        (None, Some(inline)) => receiving_inline(ctx, batch, inline, named.as_ref()).await?,
        (Some(id), None) => receiving_by_id(ctx, batch, id, payment_type).await?,
    };
    if let Some(named) = &named
        && receiving.counterparty_id.as_ref().map(Id::as_str) != Some(named.id.as_str())
    {
        return Err(Error::invalid("counterparty_id", "counterparty_id must name the counterparty that owns the receiving account"));
    }
    Ok(receiving)
}

/// An account created with the order, under the counterparty it names or the order names.
async fn receiving_inline(
    ctx: &Ctx<'_>,
    batch: &mut WriteBatch,
    inline: &external_account::ExternalAccountInput,
    named: Option<&counterparty::Counterparty>,
) -> Result<Receiving> {
    let owner = match inline.counterparty_id.clone().flatten() {
        Some(id) => Some(counterparty::require(ctx, batch, &id, "receiving_account.counterparty_id").await?),
        None => named.cloned(),
    };
    let stamp = Stamp { live_mode: ctx.scope.live_mode, now: ctx.now };
    let owner_id = owner.as_ref().map(|o| o.id.clone());
    let account = inline.build("receiving_account", owner_id.clone(), owner.as_ref().and_then(|o| o.name.as_deref()), stamp)?;
    external_account::stage_create(batch, ctx, &account)?;
    let party = Some(party_of(&account, "receiving_account"));
    let counterparty_id = owner_id.map(Id::stored);
    Ok(Receiving { id: Id::stored(account.id), account_type: external_account::KIND, counterparty_id, party, book_currency: None })
}

/// An existing account: one of the caller's external accounts, or for a book transfer one of its
/// internal accounts; anything else is a 422 naming `receiving_account_id`.
///
/// The id is looked up as given (no shape check first), so whatever names no account reads
/// "does not name an existing account"; once the store found it, it is an [`Id`], kept as given.
async fn receiving_by_id(ctx: &Ctx<'_>, batch: &mut WriteBatch, id: &str, payment_type: PaymentType) -> Result<Receiving> {
    if let Some(found) = ctx.store.get(external_account::KIND, ctx.scope, id).await? {
        let account = parse_external(&found)?;
        let counterparty_id = account.counterparty_id.clone().map(Id::stored);
        require(batch, ctx, external_account::KIND, id, "receiving_account_id");
        let party = Some(party_of(&account, "receiving_account_id"));
        return Ok(Receiving { id: Id::stored(id), account_type: external_account::KIND, counterparty_id, party, book_currency: None });
    }
    // Book transfers move money between the organization's own accounts.
    let Some(found) = ctx.store.get(internal_account::KIND, ctx.scope, id).await? else {
        return Err(Error::invalid("receiving_account_id", "receiving_account_id does not name an existing account"));
    };
    if payment_type != PaymentType::Book {
        return Err(Error::invalid(
            "receiving_account_id",
            format!(
                "receiving_account_id names one of your internal accounts: only a book order pays an internal account; {} order pays an external account",
                with_article(payment_type.as_str())
            ),
        ));
    }
    require(batch, ctx, internal_account::KIND, id, "receiving_account_id");
    let book_currency = Some(internal_account::parse(&found)?.currency);
    Ok(Receiving { id: Id::stored(id), account_type: internal_account::KIND, counterparty_id: None, party: None, book_currency })
}

fn parse_external(found: &StoredObject) -> Result<external_account::ExternalAccount> {
    serde_json::from_str(&found.doc).map_err(|e| Error::internal(format!("stored external account: {e}")))
}

fn require(batch: &mut WriteBatch, ctx: &Ctx<'_>, kind: &'static str, id: &str, parameter: &str) {
    batch.push(Write::Require { kind, scope: ctx.scope.clone(), id: id.to_owned(), parameter: parameter.to_owned() });
}

fn required<'a, T>(value: &'a Option<T>, param: &str) -> Result<&'a T> {
    value.as_ref().ok_or_else(|| Error::missing(param))
}

fn check_unsupported(input: &PaymentOrderInput) -> Result<()> {
    if input.ledger_transaction_id.is_some() {
        // MT links an existing ledger transaction; Payrail makes one with the order instead.
        return Err(Error::invalid(
            "ledger_transaction_id",
            "Payrail does not link an existing ledger transaction to a payment order yet; give the order an inline ledger_transaction",
        ));
    }
    unsupported(input.ultimate_originating_account_id.is_some(), "ultimate_originating_account_id", "virtual accounts")?;
    unsupported(input.documents.is_some(), "documents", "documents")
}

/// `word` after its indefinite article, as a payment type reads aloud ("an ach", "a wire").
fn with_article(word: &str) -> String {
    let article = if word.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
    format!("{article} {word}")
}

/// A book transfer moves money between two different internal accounts of one currency: it
/// has no rail to convert it, and a transfer to the paying account itself moves nothing.
fn check_book(receiving: &Receiving, originating_id: &Id, currency: Currency) -> Result<()> {
    let Some(theirs) = receiving.book_currency else { return Ok(()) };
    if receiving.id.as_str() == originating_id.as_str() {
        return Err(Error::invalid(
            "receiving_account_id",
            "a book transfer needs two different accounts: receiving_account_id is the originating account",
        ));
    }
    if theirs != currency {
        return Err(Error::invalid(
            "receiving_account_id",
            format!("the receiving account holds {theirs}, the order is in {currency}: cross-currency payments are not supported"),
        ));
    }
    Ok(())
}

pub async fn create(ctx: &Ctx<'_>, commit: &dyn Commit, input: &PaymentOrderInput) -> Result<String> {
    check_unsupported(input)?;
    let payment_type = PaymentType::parse("type", required(&input.payment_type, "type")?)?;
    if ctx.scope.live_mode && !super::bank::type_carried_by_files(payment_type) {
        return Err(Error::invalid(
            "type",
            format!(
                "a live {} order cannot reach a bank: Payrail writes bank files for ach, wire, rtp and sepa orders only",
                payment_type.as_str()
            ),
        ));
    }
    let total = Amount::parse("amount", *required(&input.amount, "amount")?)?;
    let direction = Direction::parse("direction", required(&input.direction, "direction")?)?;
    let originating_id = Id::parse("originating_account_id", required(&input.originating_account_id, "originating_account_id")?)?;
    check_line_items(input, total)?;
    let mut batch = WriteBatch::new();
    // Both accounts are read at once (on PostgreSQL, in one round trip); the originating
    // account's refusal still comes first.
    let (originating, receiving) = tokio::join!(
        ctx.store.get(internal_account::KIND, ctx.scope, originating_id.as_str()),
        receiving(ctx, &mut batch, input, payment_type)
    );
    let originating = originating?
        .ok_or_else(|| Error::invalid("originating_account_id", "originating_account_id does not name an existing internal account"))?;
    let originating = internal_account::parse(&originating)?;
    if let Some(status) = originating.status.as_deref().filter(|s| *s != "active") {
        // An account being closed (or not yet open) moves no new money.
        return Err(Error::invalid(
            "originating_account_id",
            format!("the originating account is {status}: only an active account sends payment orders"),
        ));
    }
    require(&mut batch, ctx, internal_account::KIND, originating_id.as_str(), "originating_account_id");
    let currency = validate::account_currency(
        input.currency.as_deref(),
        originating.currency,
        "the originating account's",
        "cross-currency payments are not supported",
    )?;
    let receiving = receiving?;
    check_book(&receiving, &originating_id, currency)?;
    let party = receiving.party.clone();
    let mut order = build(ctx, input, Built { payment_type, total, direction, originating_id, currency, receiving })?;
    if let (Some(rails), Some(party)) = (ctx.rails, &party) {
        let bank_day = rails.check(ctx.store, ctx.scope, &order, party, &originating).await?;
        if let (None, Some(day)) = (&input.effective_date, bank_day) {
            order.effective_date = day;
        }
    }
    if let Some(given) = &input.ledger_transaction {
        order.ledger_transaction_id = Some(ledger_transactions::stage_for_order(ctx, &mut batch, given, order.id.as_str()).await?);
    }
    let json = to_json(&order)?;
    batch.push(Write::Insert(record(ctx, &order, json.clone())));
    batch.push(Write::Insert(event::record(ctx.scope, KIND, "created", order.id.as_str(), &json, ctx.now)?));
    commit.commit(batch, &json).await?;
    Ok(json)
}

/// The checked essentials of a create request.
struct Built {
    payment_type: PaymentType,
    total: Amount,
    direction: Direction,
    originating_id: Id,
    currency: Currency,
    receiving: Receiving,
}

fn build(ctx: &Ctx<'_>, input: &PaymentOrderInput, b: Built) -> Result<PaymentOrder> {
    let stamp = Stamp { live_mode: ctx.scope.live_mode, now: ctx.now };
    let text = |param: &str, value: &Option<String>, len: usize| validate::opt_text(param, value.as_deref(), len);
    Ok(PaymentOrder {
        id: Id::generate(),
        object: KIND.into(),
        live_mode: ctx.scope.live_mode,
        subtype: opt_enum("subtype", input.subtype.as_deref(), enums::PAYMENT_SUBTYPES)?,
        amount: b.total,
        currency: b.currency,
        direction: b.direction,
        status: Status::Approved,
        priority: input.priority.as_deref().map(|p| Priority::parse("priority", p)).transpose()?.unwrap_or(Priority::Normal),
        originating_account_id: b.originating_id,
        originating_account_type: internal_account::KIND.into(),
        receiving_account_id: b.receiving.id,
        receiving_account_type: b.receiving.account_type.into(),
        counterparty_id: b.receiving.counterparty_id,
        effective_date: match &input.effective_date {
            Some(d) => date("effective_date", d)?,
            None => today(ctx.now),
        },
        description: text("description", &input.description, TEXT_LEN_MAX)?,
        statement_descriptor: text("statement_descriptor", &input.statement_descriptor, descriptor_len_max(b.payment_type))?,
        remittance_information: text("remittance_information", &input.remittance_information, remittance_len_max(b.payment_type))?,
        purpose: text("purpose", &input.purpose, TEXT_LEN_MAX)?,
        metadata: validate::metadata("metadata", input.metadata.as_ref())?,
        external_id: text("external_id", &input.external_id, TEXT_LEN_MAX)?,
        process_after: instant("process_after", input.process_after.as_deref())?,
        expires_at: instant("expires_at", input.expires_at.as_deref())?,
        send_remittance_advice: input.send_remittance_advice,
        nsf_protected: input.nsf_protected.unwrap_or(false),
        charge_bearer: opt_enum("charge_bearer", input.charge_bearer.as_deref(), CHARGE_BEARERS)?,
        accounting: input.accounting.clone().unwrap_or_default(),
        accounting_category_id: None,
        accounting_ledger_class_id: None,
        batch_id: None,
        current_hold: None,
        current_return: None,
        foreign_exchange_contract: text("foreign_exchange_contract", &input.foreign_exchange_contract, TEXT_LEN_MAX)?,
        foreign_exchange_indicator: opt_enum("foreign_exchange_indicator", input.foreign_exchange_indicator.as_deref(), FX_INDICATORS)?,
        foreign_exchange_rate: None,
        ledger_transaction_id: None,
        originating_party_name: text("originating_party_name", &input.originating_party_name, TEXT_LEN_MAX)?,
        originating_party_address: party_address(input.originating_party_address.as_ref(), stamp)?,
        reconciliation_status: opt_enum("reconciliation_status", input.reconciliation_status.as_deref(), RECONCILIATION_STATUSES)?
            .unwrap_or_else(|| "unreconciled".into()),
        reference_numbers: Vec::new(),
        transaction_ids: Vec::new(),
        ultimate_originating_account: None,
        ultimate_originating_account_id: None,
        ultimate_originating_account_type: None,
        ultimate_originating_party_identifier: text(
            "ultimate_originating_party_identifier",
            &input.ultimate_originating_party_identifier,
            TEXT_LEN_MAX,
        )?,
        ultimate_originating_party_name: text("ultimate_originating_party_name", &input.ultimate_originating_party_name, TEXT_LEN_MAX)?,
        ultimate_receiving_party_identifier: text(
            "ultimate_receiving_party_identifier",
            &input.ultimate_receiving_party_identifier,
            TEXT_LEN_MAX,
        )?,
        ultimate_receiving_party_name: text("ultimate_receiving_party_name", &input.ultimate_receiving_party_name, TEXT_LEN_MAX)?,
        vendor_attributes: None,
        vendor_failure_reason: None,
        payment_type: b.payment_type,
        created_at: ctx.now,
        updated_at: ctx.now,
    })
}

pub(super) fn to_json(order: &PaymentOrder) -> Result<String> {
    serde_json::to_string(order).map_err(|e| Error::internal(format!("payment order: {e}")))
}

pub(super) fn parse(stored: &StoredObject) -> Result<PaymentOrder> {
    serde_json::from_str(&stored.doc).map_err(|e| Error::internal(format!("stored payment order {}: {e}", stored.id)))
}

pub(super) fn record(ctx: &Ctx<'_>, order: &PaymentOrder, json: String) -> ObjectRecord {
    ObjectRecord {
        id: order.id.to_string(),
        kind: KIND,
        scope: ctx.scope.clone(),
        parent_id: None,
        created_at: order.created_at,
        doc: json,
        terms: order.terms(),
    }
}

pub async fn get(ctx: &Ctx<'_>, id: &str) -> Result<String> {
    listing::stored_doc(ctx, KIND, id, "payment order").await
}

/// A list's filters. The enumerations arrive parsed (where the query is read); ids and other
/// text are matched as given, so a value that names nothing finds nothing.
#[derive(Debug, Default)]
pub struct PaymentOrderFilter {
    pub payment_type: Option<PaymentType>,
    pub priority: Option<Priority>,
    pub counterparty_id: Option<String>,
    pub originating_account_id: Option<String>,
    pub external_id: Option<String>,
    pub status: Option<Status>,
    pub direction: Option<Direction>,
    pub reference_number: Option<String>,
    pub transaction_id: Option<String>,
    pub effective_date_start: Option<String>,
    pub effective_date_end: Option<String>,
    pub created_from: Option<Timestamp>,
    pub created_to: Option<Timestamp>,
    pub process_after_start: Option<Timestamp>,
    pub process_after_end: Option<Timestamp>,
    pub metadata: Vec<(String, String)>,
}

fn filters(filter: &PaymentOrderFilter) -> Result<Vec<Filter>> {
    let mut out: Vec<Filter> = [
        listing::eq("type", filter.payment_type.map(PaymentType::as_str)),
        listing::eq("priority", filter.priority.map(Priority::as_str)),
        listing::eq("counterparty_id", filter.counterparty_id.as_deref()),
        listing::eq("originating_account_id", filter.originating_account_id.as_deref()),
        listing::eq("external_id", filter.external_id.as_deref()),
        listing::eq("status", filter.status.map(Status::as_str)),
        listing::eq("direction", filter.direction.map(Direction::as_str)),
        // Reference numbers are the bank's (an ACH trace number, SPEC B4); transaction ids are
        // the booked entries that settled the order (SPEC B5).
        listing::eq("reference_number", filter.reference_number.as_deref()),
        listing::eq("transaction_id", filter.transaction_id.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    if let Some(start) = &filter.effective_date_start {
        out.push(Filter::AtLeast { name: "effective_date".into(), value: date("effective_date_start", start)? });
    }
    if let Some(end) = &filter.effective_date_end {
        out.push(Filter::AtMost { name: "effective_date".into(), value: date("effective_date_end", end)? });
    }
    out.extend(filter.created_from.map(Filter::CreatedFrom));
    out.extend(filter.created_to.map(Filter::CreatedTo));
    out.extend(filter.process_after_start.map(|t| Filter::AtLeast { name: "process_after".into(), value: t.to_string() }));
    out.extend(filter.process_after_end.map(|t| Filter::AtMost { name: "process_after".into(), value: t.to_string() }));
    out.extend(listing::metadata_filters(&filter.metadata));
    Ok(out)
}

pub async fn list(ctx: &Ctx<'_>, filter: &PaymentOrderFilter, page: PageSpec) -> Result<ListedPage> {
    listing::stored_page(ctx, KIND, filters(filter)?, page).await
}

/// The first field of `patch` that can never change after creation, if any.
fn immutable_field(patch: &PaymentOrderPatch) -> Option<&'static str> {
    [
        ("type", patch.payment_type.is_some()),
        ("direction", patch.direction.is_some()),
        ("currency", patch.currency.is_some()),
        ("originating_account_id", patch.originating_account_id.is_some()),
        ("receiving_account_id", patch.receiving_account_id.is_some()),
        ("receiving_account", patch.receiving_account.is_some()),
        ("counterparty_id", patch.counterparty_id.is_some()),
        ("line_items", patch.line_items.is_some()),
    ]
    .into_iter()
    .find_map(|(name, present)| present.then_some(name))
}

/// The first editable field `patch` sets, if any.
fn first_edit(patch: &PaymentOrderPatch) -> Option<&'static str> {
    [
        ("amount", patch.amount.is_some()),
        ("effective_date", patch.effective_date.is_some()),
        ("priority", patch.priority.is_some()),
        ("description", patch.description.is_some()),
        ("statement_descriptor", patch.statement_descriptor.is_some()),
        ("remittance_information", patch.remittance_information.is_some()),
        ("purpose", patch.purpose.is_some()),
        ("metadata", patch.metadata.is_some()),
        ("external_id", patch.external_id.is_some()),
        ("process_after", patch.process_after.is_some()),
        ("expires_at", patch.expires_at.is_some()),
        ("send_remittance_advice", patch.send_remittance_advice.is_some()),
        ("nsf_protected", patch.nsf_protected.is_some()),
        ("subtype", patch.subtype.is_some()),
        ("originating_party_name", patch.originating_party_name.is_some()),
        ("originating_party_address", patch.originating_party_address.is_some()),
        ("ultimate_originating_party_name", patch.ultimate_originating_party_name.is_some()),
        ("ultimate_originating_party_identifier", patch.ultimate_originating_party_identifier.is_some()),
        ("ultimate_receiving_party_name", patch.ultimate_receiving_party_name.is_some()),
        ("ultimate_receiving_party_identifier", patch.ultimate_receiving_party_identifier.is_some()),
        ("charge_bearer", patch.charge_bearer.is_some()),
        ("foreign_exchange_indicator", patch.foreign_exchange_indicator.is_some()),
        ("foreign_exchange_contract", patch.foreign_exchange_contract.is_some()),
    ]
    .into_iter()
    .find_map(|(name, present)| present.then_some(name))
}

fn apply_edits(order: &mut PaymentOrder, patch: &PaymentOrderPatch) -> Result<()> {
    let text = |param: &str, value: &Option<String>, len: usize| validate::opt_text(param, value.as_deref(), len);
    if let Some(value) = patch.amount {
        order.amount = Amount::parse("amount", value)?;
    }
    if let Some(value) = &patch.effective_date {
        order.effective_date = date("effective_date", value)?;
    }
    if let Some(value) = &patch.priority {
        order.priority = Priority::parse("priority", value)?;
    }
    if let Some(value) = &patch.description {
        order.description = text("description", value, TEXT_LEN_MAX)?;
    }
    if let Some(value) = &patch.statement_descriptor {
        order.statement_descriptor = text("statement_descriptor", value, descriptor_len_max(order.payment_type))?;
    }
    if let Some(value) = &patch.remittance_information {
        order.remittance_information = text("remittance_information", value, remittance_len_max(order.payment_type))?;
    }
    if let Some(value) = &patch.purpose {
        order.purpose = text("purpose", value, TEXT_LEN_MAX)?;
    }
    if let Some(value) = &patch.metadata {
        order.metadata = validate::merge_metadata("metadata", &order.metadata, value)?;
    }
    if let Some(value) = &patch.external_id {
        order.external_id = text("external_id", value, TEXT_LEN_MAX)?;
    }
    if let Some(value) = &patch.process_after {
        order.process_after = instant("process_after", value.as_deref())?;
    }
    if let Some(value) = &patch.expires_at {
        order.expires_at = instant("expires_at", value.as_deref())?;
    }
    if let Some(value) = patch.send_remittance_advice {
        order.send_remittance_advice = value;
    }
    if let Some(value) = patch.nsf_protected {
        order.nsf_protected = value;
    }
    if let Some(value) = &patch.subtype {
        order.subtype = opt_enum("subtype", value.as_deref(), enums::PAYMENT_SUBTYPES)?;
    }
    if let Some(value) = &patch.originating_party_name {
        order.originating_party_name = text("originating_party_name", value, TEXT_LEN_MAX)?;
    }
    if let Some(value) = &patch.originating_party_address {
        order.originating_party_address = party_address(value.as_ref(), Stamp { live_mode: order.live_mode, now: order.updated_at })?;
    }
    apply_party_edits(order, patch)?;
    if let Some(value) = &patch.charge_bearer {
        order.charge_bearer = opt_enum("charge_bearer", value.as_deref(), CHARGE_BEARERS)?;
    }
    if let Some(value) = &patch.foreign_exchange_indicator {
        order.foreign_exchange_indicator = opt_enum("foreign_exchange_indicator", value.as_deref(), FX_INDICATORS)?;
    }
    if let Some(value) = &patch.foreign_exchange_contract {
        order.foreign_exchange_contract = text("foreign_exchange_contract", value, TEXT_LEN_MAX)?;
    }
    Ok(())
}

/// Sets the `reconciliation_status` a PATCH asks for, whatever the order's status (it is the
/// client's bookkeeping, not the bank's); whether it changed.
fn edit_reconciliation(order: &mut PaymentOrder, patch: &PaymentOrderPatch) -> Result<bool> {
    let Some(wanted) = &patch.reconciliation_status else { return Ok(false) };
    let wanted = validate::one_of("reconciliation_status", wanted, RECONCILIATION_STATUSES)?;
    let changed = wanted != order.reconciliation_status;
    order.reconciliation_status = wanted;
    Ok(changed)
}

/// The ultimate parties' names and identifiers a PATCH sets.
fn apply_party_edits(order: &mut PaymentOrder, patch: &PaymentOrderPatch) -> Result<()> {
    let fields = [
        ("ultimate_originating_party_name", &patch.ultimate_originating_party_name, &mut order.ultimate_originating_party_name),
        (
            "ultimate_originating_party_identifier",
            &patch.ultimate_originating_party_identifier,
            &mut order.ultimate_originating_party_identifier,
        ),
        ("ultimate_receiving_party_name", &patch.ultimate_receiving_party_name, &mut order.ultimate_receiving_party_name),
        ("ultimate_receiving_party_identifier", &patch.ultimate_receiving_party_identifier, &mut order.ultimate_receiving_party_identifier),
    ];
    for (param, given, field) in fields {
        if let Some(value) = given {
            *field = validate::opt_text(param, value.as_deref(), TEXT_LEN_MAX)?;
        }
    }
    Ok(())
}

/// Applies a client's PATCH: field edits while the order is editable, and a status move the
/// state machine allows. Asking for the status the order already has changes nothing and
/// succeeds, so a blindly retried cancel does not fail.
pub async fn update(ctx: &Ctx<'_>, commit: &dyn Commit, id: &str, patch: &PaymentOrderPatch) -> Result<String> {
    if let Some(field) = immutable_field(patch) {
        return Err(Error::invalid(field, format!("{field} cannot change after creation: cancel this payment order and create another")));
    }
    let target = patch.status.as_deref().map(Status::parse_requested).transpose()?;
    retry_on_conflict(|| async {
        let stored = ctx.store.get(KIND, ctx.scope, id).await?.ok_or_else(|| Error::not_found("payment order"))?;
        let mut order = parse(&stored)?;
        let current = order.status();
        let mut edit = first_edit(patch);
        if let Some(field) = edit {
            if !current.is_editable() {
                return Err(Error::invalid(field, format!("this payment order can no longer be edited: its status is {current}")));
            }
            let before = order.clone();
            apply_edits(&mut order, patch)?;
            if crate::domain::unchanged(&before, &order, |o| &mut o.updated_at) {
                edit = None; // the edit changes nothing: no `updated` event (SPEC E4)
            } else if rail_fields(&before) != rail_fields(&order) {
                recheck_rails(ctx, &order).await?;
            }
        }
        let reconciled = edit_reconciliation(&mut order, patch)?;
        let moved = match target {
            Some(to) if to != current => Some(current.transition(to, Actor::Client)?),
            _ => None,
        };
        if edit.is_none() && !reconciled && moved.is_none() {
            return Ok(stored.doc);
        }
        if let Some(to) = moved {
            order.status = to;
        }
        order.updated_at = ctx.now;
        let json = to_json(&order)?;
        let mut batch = WriteBatch::new();
        batch.push(Write::Replace { record: record(ctx, &order, json.clone()), expected_version: stored.version });
        if edit.is_some() || reconciled {
            batch.push(Write::Insert(event::record(ctx.scope, KIND, "updated", id, &json, ctx.now)?));
        }
        if let Some(to) = moved {
            batch.push(Write::Insert(event::record(ctx.scope, KIND, to.event_name(), id, &json, ctx.now)?));
            follow_ledger(ctx, &mut batch, &order, to).await?;
        }
        commit.commit(batch, &json).await?;
        Ok(json)
    })
    .await
}

/// What of an order its rail checks and a PATCH may change: an edit of anything else (a
/// description, metadata) is not held to the rail, so it never fails for a reason it did not
/// cause (a receiving account changed since, which the cut-off finds).
fn rail_fields(order: &PaymentOrder) -> (i64, Option<&str>, Priority, Option<&str>, Option<&str>) {
    let (remittance, bearer) = (order.remittance_information.as_deref(), order.charge_bearer.as_deref());
    (order.amount.minor_units(), order.subtype.as_deref(), order.priority, remittance, bearer)
}

/// Asks the rails again whether they can carry `order` as a PATCH left it (SPEC B3): an edit
/// (amount, subtype, priority, texts) the rail cannot carry is refused as the same order would
/// have been at creation, and the order stays as it was.
async fn recheck_rails(ctx: &Ctx<'_>, order: &PaymentOrder) -> Result<()> {
    let Some(rails) = ctx.rails else { return Ok(()) };
    if order.receiving_account_type != external_account::KIND {
        return Ok(()); // a book transfer: no file
    }
    let (receiving, originating) = tokio::join!(
        ctx.store.get(external_account::KIND, ctx.scope, order.receiving_account_id.as_str()),
        ctx.store.get(internal_account::KIND, ctx.scope, order.originating_account_id.as_str())
    );
    let receiving = receiving?.ok_or_else(|| {
        Error::invalid("receiving_account_id", "the receiving account was deleted: cancel this payment order and create another")
    })?;
    let originating = originating?.ok_or_else(|| Error::internal("a payment order's originating account is gone"))?;
    let party = party_of(&parse_external(&receiving)?, "receiving_account_id");
    rails.check(ctx.store, ctx.scope, order, &party, &internal_account::parse(&originating)?).await.map(|_| ())
}

/// Stages what the order's move to `to` does to its ledger transaction, if it has one (SPEC G7).
pub(super) async fn follow_ledger(ctx: &Ctx<'_>, batch: &mut WriteBatch, order: &PaymentOrder, to: Status) -> Result<()> {
    let (Some(txn_id), Some(follow)) = (&order.ledger_transaction_id, to.ledger_follow()) else { return Ok(()) };
    let return_id = order.current_return.as_ref().map(|r| r.id.clone());
    let link = return_id.as_deref().map(|id| ("return", id));
    ledger_transactions::follow_order(ctx, batch, txn_id, follow, link).await
}

/// The bank's next move on a stored order, as one batch (None when it has nothing to do).
pub async fn bank_move(ctx: &Ctx<'_>, stored: &StoredObject) -> Result<Option<WriteBatch>> {
    let mut order = parse(stored)?;
    let Some(to) = bank::next_move(&order) else { return Ok(None) };
    order.status = order.status.transition(to, Actor::Bank)?;
    order.updated_at = ctx.now;
    match to {
        Status::Failed => order.vendor_failure_reason = Some(bank::FAILURE_REASON.into()),
        Status::Returned => {
            order.current_return = Some(return_object(&order, Some(bank::RETURN_CODE.into()), bank::RETURN_REASON.into(), ctx.now))
        }
        _ => {}
    }
    let json = to_json(&order)?;
    let mut batch = WriteBatch::new();
    batch.push(Write::Replace { record: record(ctx, &order, json.clone()), expected_version: stored.version });
    batch.push(Write::Insert(event::record(ctx.scope, KIND, to.event_name(), order.id.as_str(), &json, ctx.now)?));
    if let Some(ret) = order.current_return.as_ref().filter(|_| to == Status::Returned) {
        // The return is a document of its own too (`GET /api/returns/{id}`), with its event.
        returns::stage_record(ctx, &mut batch, ret, order.counterparty_id.as_ref().map(|id| id.as_str()))?;
    }
    follow_ledger(ctx, &mut batch, &order, to).await?;
    Ok(Some(batch))
}

/// The return `order` gets when its bank sends it back with `code` (`R01`; none for a wire)
/// and `reason` (nothing staged: `returns::stage_record` stores it as a document of its own).
fn return_object(order: &PaymentOrder, code: Option<String>, reason: String, now: Timestamp) -> ReturnObject {
    returns::build(order, returns::NewReturn { code, reason: Some(reason), ..Default::default() }, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e2_amount_bounds() {
        assert!(amount("amount", 0).is_err());
        assert!(amount("amount", -5).is_err());
        assert!(amount("amount", 1).is_ok());
        assert!(amount("amount", super::super::AMOUNT_MAX).is_ok());
        assert!(amount("amount", super::super::AMOUNT_MAX + 1).is_err());
    }

    #[test]
    fn dates_are_calendar_dates() {
        assert!(date("d", "2026-02-28").is_ok());
        assert!(date("d", "2026-02-30").is_err());
        assert!(date("d", "2026-2-3").is_err());
        assert_eq!(today(Timestamp::from_micros(1_700_000_000_000_000)), "2023-11-14");
    }

    #[test]
    fn descriptor_limits_follow_the_payment_type() {
        assert_eq!(descriptor_len_max(PaymentType::Ach), 10);
        assert_eq!(descriptor_len_max(PaymentType::Eft), 15);
        assert_eq!(descriptor_len_max(PaymentType::Wire), 140);
    }
}
