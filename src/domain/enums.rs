//! Enumerations of the Modern Treasury wire format, as the official SDK (1.80) and its OpenAPI
//! document list them. Values are accepted and returned exactly as spelled here.
//!
//! The ones the domain acts on are also Rust enums ([`PaymentType`], [`Direction`],
//! [`Priority`]; the payment order status is `payment_order::status::Status`), parsed once where
//! a request is read and serialised back to the same strings. [`wire_enum!`] declares such an
//! enum and its list of wire strings in one place, so the two cannot drift; the other lists are
//! plain constants checked as strings.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Unexpected, Visitor};

use crate::error::Error;

/// Whether `value` is one of `allowed`.
pub fn is_one_of(value: &str, allowed: &[&str]) -> bool {
    allowed.contains(&value)
}

/// The 422 for a value outside `allowed`: names `param` and shows the first 12 values.
pub fn not_one_of(param: &str, allowed: &[&str]) -> Error {
    let shown: Vec<&str> = allowed.iter().copied().take(12).collect();
    let more = if allowed.len() > shown.len() { ", ..." } else { "" };
    Error::invalid(param, format!("{param} must be one of {}{more}", shown.join(", ")))
}

/// Reads a wire string into `T` without allocating; `expected` is what serde's error names.
pub struct WireVisitor<T> {
    pub expected: &'static str,
    pub parse: fn(&str) -> Option<T>,
    pub marker: PhantomData<T>,
}

impl<T> Visitor<'_> for WireVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expected)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<T, E> {
        (self.parse)(text).ok_or_else(|| E::invalid_value(Unexpected::Str(text), &self))
    }
}

/// `Display`, `Serialize` and `Deserialize` as the wire string, for a type with
/// `as_str(self) -> &'static str` and a `parse: fn(&str) -> Option<Self>`. Only stored documents
/// are read with this `Deserialize`: request bodies keep strings and parse them in the domain,
/// so a refusal reads as the domain words it (`type must be one of ...`).
macro_rules! wire_serde {
    ($name:ident, $expected:literal, $parse:expr) => {
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
                let visitor = $crate::domain::enums::WireVisitor { expected: $expected, parse: $parse, marker: std::marker::PhantomData };
                deserializer.deserialize_str(visitor)
            }
        }
    };
}
pub(crate) use wire_serde;

/// Declares a wire enumeration: the enum, the constant list of its wire strings (in the order
/// given, which is the order errors and the OpenAPI document show), `ALL`, `as_str`,
/// `from_wire`, `parse` (a 422 naming the parameter, as [`not_one_of`] words it) and serde.
macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident, $list:ident, $expected:literal { $($variant:ident => $wire:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($variant,)*
        }

        pub const $list: &[&str] = &[$($wire,)*];

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire,)*
                }
            }

            pub fn from_wire(text: &str) -> Option<Self> {
                match text {
                    $($wire => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// `text` as a value, or a 422 naming `param`.
            pub fn parse(param: &str, text: &str) -> crate::error::Result<Self> {
                Self::from_wire(text).ok_or_else(|| not_one_of(param, $list))
            }
        }

        wire_serde!($name, $expected, $name::from_wire);
    };
}

pub const CURRENCIES: &[&str] = &[
    "AED", "AFN", "ALL", "AMD", "ANG", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BCH", "BDT", "BGN", "BHD", "BIF", "BMD", "BND",
    "BOB", "BRL", "BSD", "BTC", "BTN", "BWP", "BYN", "BYR", "BZD", "CAD", "CDF", "CHF", "CLF", "CLP", "CNH", "CNY", "COP", "CRC", "CUC",
    "CUP", "CVE", "CZK", "DJF", "DKK", "DOP", "DZD", "EEK", "EGP", "ERN", "ETB", "ETH", "EUR", "EURC", "FJD", "FKP", "GBP", "GBX", "GEL",
    "GGP", "GHS", "GIP", "GMD", "GNF", "GTQ", "GYD", "HKD", "HNL", "HRK", "HTG", "HUF", "IDR", "ILS", "IMP", "INR", "IQD", "IRR", "ISK",
    "JEP", "JMD", "JOD", "JPY", "KES", "KGS", "KHR", "KMF", "KPW", "KRW", "KWD", "KYD", "KZT", "LAK", "LBP", "LKR", "LRD", "LSL", "LTL",
    "LVL", "LYD", "MAD", "MDL", "MGA", "MKD", "MMK", "MNT", "MOP", "MRO", "MRU", "MTL", "MUR", "MVR", "MWK", "MXN", "MYR", "MZN", "NAD",
    "NGN", "NIO", "NOK", "NPR", "NZD", "OMR", "OP", "PAB", "PEN", "PGK", "PHP", "PKR", "PLN", "PYG", "PYUSD", "QAR", "RON", "RSD", "RUB",
    "RWF", "SAR", "SBD", "SCR", "SDG", "SEK", "SGD", "SHP", "SKK", "SLE", "SLL", "SOS", "SRD", "SSP", "STD", "STN", "SVC", "SYP", "SZL",
    "THB", "TJS", "TMM", "TMT", "TND", "TOP", "TRY", "TTD", "TWD", "TZS", "UAH", "UGX", "USD", "USDC", "USDG", "USDT", "UYU", "UZS", "VEF",
    "VES", "VND", "VUV", "WST", "XAF", "XAG", "XAU", "XBA", "XBB", "XBC", "XBD", "XCD", "XCG", "XDR", "XFU", "XOF", "XPD", "XPF", "XPT",
    "XTS", "YER", "ZAR", "ZMK", "ZMW", "ZWD", "ZWG", "ZWL", "ZWN", "ZWR",
];

wire_enum! {
    /// A payment type (the SDK's `PaymentOrderType`): the rail an order moves on.
    PaymentType, PAYMENT_TYPES, "a payment type" {
        Ach => "ach",
        AuBecs => "au_becs",
        Bacs => "bacs",
        Book => "book",
        Card => "card",
        Chats => "chats",
        Check => "check",
        CrossBorder => "cross_border",
        DkNets => "dk_nets",
        Eft => "eft",
        GbFps => "gb_fps",
        Masav => "masav",
        MxCcen => "mx_ccen",
        Neft => "neft",
        Nics => "nics",
        NzBecs => "nz_becs",
        PlElixir => "pl_elixir",
        Rtp => "rtp",
        SeBankgirot => "se_bankgirot",
        Sepa => "sepa",
        SgGiro => "sg_giro",
        Sic => "sic",
        Stablecoin => "stablecoin",
        Wire => "wire",
        Zengin => "zengin",
    }
}

pub const PAYMENT_SUBTYPES: &[&str] = &[
    "0C",
    "0N",
    "0S",
    "CCD",
    "CIE",
    "CTX",
    "IAT",
    "PPD",
    "TEL",
    "WEB",
    "au_becs",
    "bacs",
    "base",
    "chats",
    "digital",
    "dk_nets",
    "eft",
    "ethereum",
    "masav",
    "mx_ccen",
    "neft",
    "nics",
    "nz_becs",
    "pl_elixir",
    "polygon",
    "print",
    "se_bankgirot",
    "sepa",
    "sg_giro",
    "sic",
    "solana",
    "zengin",
];

pub const ACCOUNT_TYPES: &[&str] = &[
    "base_wallet",
    "cash",
    "checking",
    "crypto_wallet",
    "ethereum_wallet",
    "general_ledger",
    "loan",
    "non_resident",
    "other",
    "overdraft",
    "polygon_wallet",
    "savings",
    "solana_wallet",
];

pub const ACCOUNT_NUMBER_TYPES: &[&str] = &[
    "au_number",
    "base_address",
    "card_token",
    "clabe",
    "ethereum_address",
    "hk_number",
    "iban",
    "id_number",
    "nz_number",
    "other",
    "pan",
    "polygon_address",
    "sg_number",
    "solana_address",
    "wallet_address",
];

pub const ROUTING_NUMBER_TYPES: &[&str] = &[
    "aba",
    "au_bsb",
    "br_codigo",
    "ca_cpa",
    "chips",
    "cnaps",
    "dk_interbank_clearing_code",
    "gb_sort_code",
    "hk_interbank_clearing_code",
    "il_bank_code",
    "in_ifsc",
    "jp_zengin_code",
    "mx_bank_identifier",
    "my_branch_code",
    "nz_national_clearing_code",
    "pl_national_clearing_code",
    "se_bankgiro_clearing_code",
    "sg_interbank_clearing_code",
    "swift",
    "za_national_clearing_code",
];

pub const PAYMENT_ORDER_STATUSES: &[&str] = &[
    "approved",
    "cancelled",
    "completed",
    "denied",
    "failed",
    "held",
    "needs_approval",
    "pending",
    "processing",
    "returned",
    "reversed",
    "sent",
    "stopped",
];

wire_enum! {
    /// Which way money moves, seen from the originating account: `credit` pays out, `debit` draws in.
    Direction, DIRECTIONS, "credit or debit" {
        Credit => "credit",
        Debit => "debit",
    }
}

wire_enum! {
    /// A payment order's priority (wires and ACH same-day use it).
    Priority, PRIORITIES, "high or normal" {
        High => "high",
        Normal => "normal",
    }
}

wire_enum! {
    /// A ledger transaction's (and its entries') status (SPEC G2).
    LedgerStatus, LEDGER_STATUSES, "pending, posted or archived" {
        Pending => "pending",
        Posted => "posted",
        Archived => "archived",
    }
}

/// What a ledger transaction may be reconciled to (`ledgerable_type`).
pub const LEDGER_TRANSACTION_LEDGERABLE_TYPES: &[&str] =
    &["expected_payment", "incoming_payment_detail", "payment_order", "return", "reversal"];
/// What a ledger account may link to (`ledgerable_type`).
pub const LEDGER_ACCOUNT_LEDGERABLE_TYPES: &[&str] = &["counterparty", "external_account", "internal_account", "virtual_account"];

pub const CHARGE_BEARERS: &[&str] = &["shared", "sender", "receiver"];
pub const RECONCILIATION_STATUSES: &[&str] = &["unreconciled", "tentatively_reconciled", "reconciled"];
pub const FX_INDICATORS: &[&str] = &["fixed_to_variable", "variable_to_fixed"];
/// The only status a client may ask for; the bank moves the account on from there.
pub const INTERNAL_ACCOUNT_CLIENT_STATUSES: &[&str] = &["pending_closure"];
pub const INTERNAL_ACCOUNT_STATUSES: &[&str] = &["active", "closed", "pending_activation", "pending_closure", "suspended"];
pub const CONTACT_TYPES: &[&str] = &["email", "phone_number", "website"];
pub const PARTY_TYPES: &[&str] = &["business", "individual"];
pub const WEBHOOK_DELIVERY_STATUSES: &[&str] = &["pending", "delivered", "failed"];
/// Kinds of account a payment order may send from and to (`originating_account_type`, `receiving_account_type`).
pub const ORIGINATING_ACCOUNT_TYPES: &[&str] = &["internal_account"];
pub const RECEIVING_ACCOUNT_TYPES: &[&str] = &["internal_account", "external_account"];

/// MT's transaction `type`: the payment types, and `other` for what the bank does not say.
pub const TRANSACTION_TYPES: &[&str] = &[
    "ach",
    "au_becs",
    "bacs",
    "book",
    "card",
    "chats",
    "check",
    "cross_border",
    "dk_nets",
    "eft",
    "gb_fps",
    "masav",
    "mx_ccen",
    "neft",
    "nics",
    "nz_becs",
    "pl_elixir",
    "rtp",
    "se_bankgirot",
    "sepa",
    "sg_giro",
    "sic",
    "stablecoin",
    "wire",
    "zengin",
    "other",
];

/// A transaction line item's `type`: `originating` for money Payrail sent (and its returns),
/// `receiving` for money that came in (`transaction::Settles`, and the list's `type` filter).
pub const LINE_ITEM_TYPES: &[&str] = &["originating", "receiving"];

/// MT's expected payment statuses.
pub const EXPECTED_PAYMENT_STATUSES: &[&str] = &["archived", "partially_reconciled", "reconciled", "unreconciled"];

/// MT's incoming payment detail types.
pub const INCOMING_PAYMENT_DETAIL_TYPES: &[&str] =
    &["ach", "au_becs", "bacs", "book", "check", "eft", "neft", "nz_becs", "rtp", "sepa", "stablecoin", "wire", "zengin"];

/// MT's incoming payment detail statuses.
pub const INCOMING_PAYMENT_DETAIL_STATUSES: &[&str] = &["completed", "pending", "returned"];

/// MT's `balance_report_type` values.
pub const BALANCE_REPORT_TYPES: &[&str] = &["intraday", "other", "previous_day", "real_time"];

/// MT's `balance_type` values.
pub const BALANCE_TYPES: &[&str] = &[
    "closing_available",
    "closing_ledger",
    "current_available",
    "current_ledger",
    "opening_available",
    "opening_available_next_business_day",
    "opening_ledger",
    "other",
    "previously_closed_book",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_enums_round_trip_their_lists() {
        for (i, wire) in PAYMENT_TYPES.iter().enumerate() {
            assert_eq!(PaymentType::from_wire(wire).map(PaymentType::as_str), Some(*wire));
            assert_eq!(PaymentType::ALL[i].as_str(), *wire);
        }
        assert_eq!(PaymentType::ALL.len(), PAYMENT_TYPES.len());
        let json = serde_json::to_string(&[Direction::Debit]).unwrap();
        assert_eq!(json, r#"["debit"]"#);
        assert_eq!(serde_json::from_str::<Priority>(r#""high""#).unwrap(), Priority::High);
        let refused = serde_json::from_str::<Priority>(r#""urgent""#).unwrap_err().to_string();
        assert!(refused.contains("high or normal"), "{refused}");
    }

    #[test]
    fn parse_names_the_parameter_and_shows_twelve_values() {
        let Err(Error::Invalid { parameter, message, .. }) = PaymentType::parse("type", "swift") else {
            panic!("swift is no payment type")
        };
        assert_eq!(parameter, "type");
        assert_eq!(
            message,
            "type must be one of ach, au_becs, bacs, book, card, chats, check, cross_border, dk_nets, eft, gb_fps, masav, ..."
        );
        assert!(Direction::parse("direction", "Credit").is_err(), "wire strings are exact");
    }
}
