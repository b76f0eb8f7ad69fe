//! Enumerations of the Modern Treasury wire format, as the official SDK (1.80) and its OpenAPI
//! document list them. Values are accepted and returned exactly as spelled here.

/// Whether `value` is one of `allowed`.
pub fn is_one_of(value: &str, allowed: &[&str]) -> bool {
    allowed.contains(&value)
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

pub const PAYMENT_TYPES: &[&str] = &[
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
];

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

pub const DIRECTIONS: &[&str] = &["credit", "debit"];
pub const PRIORITIES: &[&str] = &["high", "normal"];
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
