//! OpenAPI schema pieces for domain fields whose wire contract utoipa cannot derive from the
//! Rust type: one of a fixed list of values, whether the field is a string checked against the
//! list or an enum (`enums::wire_enum!`) that serialises to it. Each list is the same constant
//! the parsing uses, so the published document cannot drift from what the server accepts.
//! The document itself is assembled in `api/openapi.rs`.

use serde_json::Value;
use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};

use super::enums;
use super::validate::{METADATA_KEY_LEN_MAX, METADATA_PAIRS_MAX, METADATA_VALUE_LEN_MAX};

/// `type: string` restricted to `values`.
pub fn string_enum(values: &[&str]) -> Object {
    ObjectBuilder::new().schema_type(Type::String).enum_values(Some(values.iter().map(|v| Value::from(*v)))).build()
}

/// `type: [string, null]` restricted to `values` or `null`.
pub fn nullable_string_enum(values: &[&str]) -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some(values.iter().map(|v| Value::from(*v)).chain(std::iter::once(Value::Null))))
        .build()
}

/// Declares, for each list, a function for the plain and one for the nullable schema (the
/// form `#[schema(schema_with = ...)]` takes).
macro_rules! enum_schemas {
    ($($plain:ident, $nullable:ident => $values:expr;)*) => {
        $(
            pub fn $plain() -> Object {
                string_enum($values)
            }

            pub fn $nullable() -> Object {
                nullable_string_enum($values)
            }
        )*
    };
}

enum_schemas! {
    currency, currency_or_null => enums::CURRENCIES;
    payment_type, payment_type_or_null => enums::PAYMENT_TYPES;
    payment_subtype, payment_subtype_or_null => enums::PAYMENT_SUBTYPES;
    account_type, account_type_or_null => enums::ACCOUNT_TYPES;
    account_number_type, account_number_type_or_null => enums::ACCOUNT_NUMBER_TYPES;
    routing_number_type, routing_number_type_or_null => enums::ROUTING_NUMBER_TYPES;
    payment_order_status, payment_order_status_or_null => enums::PAYMENT_ORDER_STATUSES;
    party_type, party_type_or_null => enums::PARTY_TYPES;
    contact_identifier_type, contact_identifier_type_or_null => enums::CONTACT_TYPES;
    direction, direction_or_null => enums::DIRECTIONS;
    priority, priority_or_null => enums::PRIORITIES;
    charge_bearer, charge_bearer_or_null => enums::CHARGE_BEARERS;
    reconciliation_status, reconciliation_status_or_null => enums::RECONCILIATION_STATUSES;
    foreign_exchange_indicator, foreign_exchange_indicator_or_null => enums::FX_INDICATORS;
    internal_account_status, internal_account_status_or_null => enums::INTERNAL_ACCOUNT_STATUSES;
    internal_account_client_status, internal_account_client_status_or_null => enums::INTERNAL_ACCOUNT_CLIENT_STATUSES;
    receiving_account_type, receiving_account_type_or_null => enums::RECEIVING_ACCOUNT_TYPES;
    originating_account_type, originating_account_type_or_null => enums::ORIGINATING_ACCOUNT_TYPES;
    delivery_status, delivery_status_or_null => enums::WEBHOOK_DELIVERY_STATUSES;
    transaction_type, transaction_type_or_null => enums::TRANSACTION_TYPES;
    transaction_line_item_type, transaction_line_item_type_or_null => enums::LINE_ITEM_TYPES;
    transactable_type, transactable_type_or_null => TRANSACTABLE_TYPES;
    expected_payment_status, expected_payment_status_or_null => enums::EXPECTED_PAYMENT_STATUSES;
    reconciliation_method, reconciliation_method_or_null => RECONCILIATION_METHODS;
    incoming_payment_detail_type, incoming_payment_detail_type_or_null => enums::INCOMING_PAYMENT_DETAIL_TYPES;
    incoming_payment_detail_status, incoming_payment_detail_status_or_null => enums::INCOMING_PAYMENT_DETAIL_STATUSES;
    balance_report_type, balance_report_type_or_null => enums::BALANCE_REPORT_TYPES;
    balance_type, balance_type_or_null => enums::BALANCE_TYPES;
    ledger_status, ledger_status_or_null => enums::LEDGER_STATUSES;
    ledger_transaction_ledgerable_type, ledger_transaction_ledgerable_type_or_null => enums::LEDGER_TRANSACTION_LEDGERABLE_TYPES;
    ledger_account_ledgerable_type, ledger_account_ledgerable_type_or_null => enums::LEDGER_ACCOUNT_LEDGERABLE_TYPES;
}

/// What a transaction line item settles, when it names it (`transaction::Settles`).
const TRANSACTABLE_TYPES: &[&str] = &[super::kinds::INCOMING_PAYMENT_DETAIL, super::kinds::PAYMENT_ORDER, super::kinds::RETURN];
/// How an expected payment was reconciled: Payrail reconciles automatically only.
const RECONCILIATION_METHODS: &[&str] = &["automatic"];

/// An object with any members, or `null` (a document Payrail keeps as given).
pub fn object_or_null() -> Object {
    ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::Object, Type::Null])).build()
}

/// An object with any members.
pub fn object() -> Object {
    ObjectBuilder::new().schema_type(Type::Object).build()
}

/// An object of string values (MT's `additionalProperties: {type: string}`), such as a
/// transaction's `details`.
pub fn string_map() -> Object {
    ObjectBuilder::new().schema_type(Type::Object).additional_properties(Some(ObjectBuilder::new().schema_type(Type::String))).build()
}

/// An array of any items, or `null`.
pub fn array_or_null() -> Object {
    ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::Array, Type::Null])).build()
}

const METADATA_DESCRIPTION: &str = "Additional data as string key-value pairs.";

fn metadata_value(nullable: bool) -> ObjectBuilder {
    let kind = if nullable { SchemaType::from_iter([Type::String, Type::Null]) } else { SchemaType::new(Type::String) };
    ObjectBuilder::new().schema_type(kind).max_length(Some(METADATA_VALUE_LEN_MAX))
}

fn metadata_object(kind: SchemaType, value: ObjectBuilder, description: &str) -> Object {
    ObjectBuilder::new()
        .schema_type(kind)
        .description(Some(description))
        .max_properties(Some(METADATA_PAIRS_MAX))
        .property_names(Some(ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).max_length(Some(METADATA_KEY_LEN_MAX))))
        .additional_properties(Some(value))
        .build()
}

/// Metadata (`validate::Metadata`): string values, with the limits `validate::metadata` checks.
pub fn metadata() -> Object {
    metadata_object(SchemaType::new(Type::Object), metadata_value(false), METADATA_DESCRIPTION)
}

/// Metadata, or `null` for none.
pub fn metadata_or_null() -> Object {
    metadata_object(SchemaType::from_iter([Type::Object, Type::Null]), metadata_value(false), METADATA_DESCRIPTION)
}

/// Metadata in a PATCH (`validate::MetadataPatch`): keys given `null` or `""` are removed.
pub fn metadata_patch_or_null() -> Object {
    metadata_object(
        SchemaType::from_iter([Type::Object, Type::Null]),
        metadata_value(true),
        "Pairs to set; a key given null or an empty string is removed, keys not given are kept.",
    )
}

/// Metadata in a PATCH that takes no `null` for the whole (`validate::MetadataPatch`).
pub fn metadata_patch() -> Object {
    metadata_object(
        SchemaType::new(Type::Object),
        metadata_value(true),
        "Pairs to set; a key given null or an empty string is removed, keys not given are kept.",
    )
}

/// A calendar date, `YYYY-MM-DD`.
pub fn date() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Date)))
        .build()
}

/// A clock time, `HH:MM:SS`.
pub fn time() -> Object {
    ObjectBuilder::new().schema_type(Type::String).format(Some(utoipa::openapi::SchemaFormat::Custom("time".into()))).build()
}

/// A calendar date or `null`.
pub fn date_or_null() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Date)))
        .build()
}

/// An RFC 3339 date-time given as text in a request (`process_after`, `expires_at`).
pub fn date_time_or_null() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::DateTime)))
        .build()
}

/// An amount of minor units a ledger entry moves (`money::Amount`): 1 to 2^53 - 1.
pub fn entry_amount() -> Object {
    ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).maximum(Some(super::money::AMOUNT_MAX)).build()
}

/// A balance condition of a ledger entry (`base::ledger::Comparison`): each of `gt`, `gte`, `lt`,
/// `lte`, `eq` compares the account's balance after the entry with a whole number; no other key.
pub fn balance_condition_or_null() -> Object {
    let bound = || ObjectBuilder::new().schema_type(Type::Integer);
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .property("gt", bound())
        .property("gte", bound())
        .property("lt", bound())
        .property("lte", bound())
        .property("eq", bound())
        .additional_properties(Some(utoipa::openapi::schema::AdditionalProperties::FreeForm(false)))
        .build()
}
