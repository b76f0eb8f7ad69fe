//! Money: amounts in minor units and currencies that know their exponent.
//!
//! An [`Amount`] is a whole number of the currency's smallest unit (cents for USD, yen for JPY),
//! from 1 to 2^53 - 1, the largest integer every JSON client reads exactly (SPEC E2). A
//! [`Currency`] is one of the codes Modern Treasury accepts; its exponent (digits after the
//! decimal point) comes from the ISO 4217 table of the `iso_currency` crate, and for the few
//! codes MT accepts that ISO does not list (crypto assets, stablecoins, withdrawn and offshore
//! codes) from [`NON_ISO_EXPONENTS`] below, each with its source. Bank files write amounts with
//! the exponent (`12500` USD is `125.00`), and ledgers check it against their accounts.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::enums::CURRENCIES;
use crate::error::{Error, Result};

/// Largest amount accepted: 2^53 - 1.
pub const AMOUNT_MAX: i64 = (1 << 53) - 1;

/// Exponents of the codes in Modern Treasury's currency list that ISO 4217 does not (or no
/// longer) list. Withdrawn ISO codes keep the minor unit ISO last published for them; tokens
/// use their issuers' on-chain decimals.
pub const NON_ISO_EXPONENTS: &[(&str, u8)] = &[
    // Withdrawn ISO 4217 codes: the minor unit of their last ISO table.
    ("ANG", 2),
    ("BYR", 0),
    ("EEK", 2),
    ("LTL", 2),
    ("LVL", 2),
    ("MRO", 2),
    ("MTL", 2),
    ("SKK", 2),
    ("STD", 2),
    ("TMM", 2),
    ("VEF", 2),
    ("XFU", 0),
    ("ZMK", 2),
    ("ZWD", 2),
    ("ZWN", 2),
    ("ZWR", 2),
    // Offshore yuan, Crown-dependency pounds and pence sterling: quoted like their parents,
    // except GBX, which is already a count of pence.
    ("CNH", 2),
    ("GGP", 2),
    ("IMP", 2),
    ("JEP", 2),
    ("GBX", 0),
    // Crypto assets and stablecoins: their ledgers' decimals.
    ("BTC", 8),
    ("BCH", 8),
    ("ETH", 18),
    ("OP", 18),
    ("EURC", 6),
    ("USDC", 6),
    ("USDG", 6),
    ("USDT", 6),
    ("PYUSD", 6),
];

/// A currency Payrail accepts: a code from Modern Treasury's list, with its exponent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Currency {
    code: &'static str,
    exponent: u8,
}

impl Currency {
    /// US dollars: what ACH moves.
    pub const USD: Currency = Currency { code: "USD", exponent: 2 };

    /// The currency `code` names, or a 422 naming `param`.
    pub fn parse(param: &str, code: &str) -> Result<Self> {
        let refused = || Error::invalid(param, format!("{param} must be an ISO 4217 currency code such as USD (got {code:?})"));
        let code = CURRENCIES.iter().copied().find(|c| *c == code).ok_or_else(refused)?;
        let exponent = exponent_of(code).ok_or_else(refused)?;
        Ok(Currency { code, exponent })
    }

    pub fn code(self) -> &'static str {
        self.code
    }

    /// Digits after the decimal point: 2 for USD, 0 for JPY, 3 for BHD.
    pub fn exponent(self) -> u8 {
        self.exponent
    }
}

fn exponent_of(code: &str) -> Option<u8> {
    if let Some(iso) = iso_currency::Currency::from_code(code) {
        // ISO lists "N.A." for a few funds and metals (XAU, XDR...): no minor unit, so 0.
        return Some(iso.exponent().map_or(0, |e| u8::try_from(e).unwrap_or(u8::MAX)));
    }
    NON_ISO_EXPONENTS.iter().find(|(c, _)| *c == code).map(|(_, e)| *e)
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code)
    }
}

impl Serialize for Currency {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.code)
    }
}

impl<'de> Deserialize<'de> for Currency {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let code = String::deserialize(deserializer)?;
        Currency::parse("currency", &code).map_err(serde::de::Error::custom)
    }
}

/// An amount in a currency's minor units, 1 to [`AMOUNT_MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Amount(i64);

impl Amount {
    /// `value` as an amount, or a 422 naming `param` (zero, negative or past 2^53 - 1).
    pub fn parse(param: &str, value: i64) -> Result<Self> {
        if (1..=AMOUNT_MAX).contains(&value) {
            Ok(Amount(value))
        } else {
            Err(Error::invalid(param, format!("{param} must be a whole number of minor units from 1 to {AMOUNT_MAX}")))
        }
    }

    pub fn minor_units(self) -> i64 {
        self.0
    }

    /// The amount as a decimal in `currency`'s major units, as bank files write it:
    /// `12500` USD is `125.00`, `500` JPY is `500`.
    pub fn to_decimal(self, currency: Currency) -> String {
        let exponent = usize::from(currency.exponent());
        let digits = format!("{:0>width$}", self.0, width = exponent + 1);
        if exponent == 0 {
            return digits;
        }
        let (whole, fraction) = digits.split_at(digits.len() - exponent);
        format!("{whole}.{fraction}")
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        Amount::parse("amount", i64::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_currency_modern_treasury_accepts_has_an_exponent() {
        for code in CURRENCIES {
            assert!(Currency::parse("currency", code).is_ok(), "{code} has no exponent");
        }
        for (code, _) in NON_ISO_EXPONENTS {
            assert!(iso_currency::Currency::from_code(code).is_none(), "{code} is in ISO 4217: take its exponent from there");
            assert!(CURRENCIES.contains(code), "{code} is not a currency Modern Treasury accepts");
        }
    }

    #[test]
    fn exponents_come_from_iso_4217() {
        let exponent = |code| Currency::parse("currency", code).unwrap().exponent();
        assert_eq!((exponent("USD"), exponent("JPY"), exponent("BHD"), exponent("CLF")), (2, 0, 3, 4));
        assert_eq!((exponent("BTC"), exponent("USDC")), (8, 6));
        assert!(Currency::parse("currency", "usd").is_err(), "codes are upper case");
        assert!(Currency::parse("currency", "XYZ").is_err());
    }

    #[test]
    fn amounts_are_positive_minor_units_within_json_exact_integers() {
        assert!(Amount::parse("amount", 0).is_err());
        assert!(Amount::parse("amount", -1).is_err());
        assert!(Amount::parse("amount", AMOUNT_MAX).is_ok());
        assert!(Amount::parse("amount", AMOUNT_MAX + 1).is_err());
    }

    #[test]
    fn decimals_follow_the_exponent() {
        let c = |code| Currency::parse("currency", code).unwrap();
        let a = |n| Amount::parse("amount", n).unwrap();
        assert_eq!(a(12500).to_decimal(c("USD")), "125.00");
        assert_eq!(a(5).to_decimal(c("USD")), "0.05");
        assert_eq!(a(500).to_decimal(c("JPY")), "500");
        assert_eq!(a(1).to_decimal(c("BHD")), "0.001");
        assert_eq!(a(123_456_789).to_decimal(c("BTC")), "1.23456789");
    }
}
