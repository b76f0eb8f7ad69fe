//! Bank identifiers as types, parsed once at the edge: ABA routing numbers (with their check
//! digit), IBANs (country format and mod-97 checksum, by the `iban_validate` crate) and BICs
//! (ISO 9362 shape). Bank files take these types, so an order that reaches a cut-off already
//! carries identifiers its rail accepts (SPEC B3).

use std::fmt;

use iban::IbanLike;

use crate::error::{Error, Result};

/// A nine-digit ABA routing transit number whose check digit holds:
/// 3·(d1+d4+d7) + 7·(d2+d5+d8) + (d3+d6+d9) is a multiple of 10.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbaRoutingNumber([u8; 9]);

impl AbaRoutingNumber {
    pub fn parse(param: &str, text: &str) -> Result<Self> {
        let refused = || Error::invalid(param, format!("{param} must be 9 digits with a valid ABA checksum"));
        let digits: [u8; 9] = text.as_bytes().try_into().map_err(|_| refused())?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return Err(refused());
        }
        let d = digits.map(|b| u32::from(b - b'0'));
        let weighted = 3 * (d[0] + d[3] + d[6]) + 7 * (d[1] + d[4] + d[7]) + (d[2] + d[5] + d[8]);
        if weighted.is_multiple_of(10) { Ok(AbaRoutingNumber(digits)) } else { Err(refused()) }
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII digits are ever stored.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// The first eight digits: the institution, as NACHA's ODFI and RDFI fields take it.
    pub fn institution(&self) -> &str {
        &self.as_str()[..8]
    }

    /// The ninth digit.
    pub fn check_digit(&self) -> u8 {
        self.0[8] - b'0'
    }
}

impl fmt::Display for AbaRoutingNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An International Bank Account Number in electronic form (no spaces, upper case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Iban(iban::Iban);

impl Iban {
    /// The German IBAN of account `account` (10 digits) at bank code `bank_code` (8 digits),
    /// with its mod-97 check digits (ISO 13616).
    pub fn german(bank_code: &str, account: &str) -> Iban {
        let bban = format!("{bank_code:0>8}{account:0>10}");
        // "DE00" moved to the end, letters as numbers (D = 13, E = 14).
        let remainder = format!("{bban}131400").bytes().fold(0u32, |acc, b| (acc * 10 + u32::from(b - b'0')) % 97);
        let text = format!("DE{:02}{bban}", 98 - remainder);
        Iban(text.parse().expect("a German IBAN built with its check digits"))
    }

    pub fn parse(param: &str, text: &str) -> Result<Self> {
        text.parse::<iban::Iban>().map(Iban).map_err(|err| Error::invalid(param, format!("{param} is not a valid IBAN ({err})")))
    }

    pub fn as_str(&self) -> &str {
        self.0.electronic_str()
    }

    /// The two-letter country code the IBAN starts with.
    pub fn country(&self) -> &str {
        self.0.country_code()
    }
}

impl fmt::Display for Iban {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Business Identifier Code (ISO 9362): 4 letters of institution, 2 of country, 2 letters or
/// digits of location, and an optional 3-character branch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bic(String);

impl Bic {
    pub fn parse(param: &str, text: &str) -> Result<Self> {
        let b = text.as_bytes();
        let ok = (b.len() == 8 || b.len() == 11)
            && b[..6].iter().all(u8::is_ascii_uppercase)
            && b[6..].iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        if ok {
            Ok(Bic(text.to_owned()))
        } else {
            Err(Error::invalid(param, format!("{param} must be a SWIFT/BIC code of 8 or 11 characters")))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The country the institution is in (characters 5 and 6).
    pub fn country(&self) -> &str {
        &self.0[4..6]
    }
}

impl fmt::Display for Bic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b3_built_german_ibans_pass_mod_97() {
        assert_eq!(Iban::german("37040044", "0532013000").as_str(), "DE89370400440532013000");
        assert!(Iban::parse("iban", Iban::german("11000000", "1234567890").as_str()).is_ok());
    }

    #[test]
    fn aba_check_digit() {
        let aba = AbaRoutingNumber::parse("routing_number", "121141822").unwrap();
        assert_eq!((aba.institution(), aba.check_digit()), ("12114182", 2));
        assert!(AbaRoutingNumber::parse("routing_number", "021000021").is_ok());
        assert!(AbaRoutingNumber::parse("routing_number", "121141823").is_err(), "wrong check digit");
        assert!(AbaRoutingNumber::parse("routing_number", "12114182").is_err());
        assert!(AbaRoutingNumber::parse("routing_number", "12114182x").is_err());
    }

    #[test]
    fn iban_country_format_and_checksum() {
        let iban = Iban::parse("account_number", "DE89370400440532013000").unwrap();
        assert_eq!((iban.as_str(), iban.country()), ("DE89370400440532013000", "DE"));
        assert!(Iban::parse("account_number", "DE89370400440532013001").is_err(), "checksum");
        assert!(Iban::parse("account_number", "DE8937040044053201300").is_err(), "German IBANs have 22 characters");
    }

    #[test]
    fn bic_shape() {
        assert_eq!(Bic::parse("bic", "DEUTDEFF").unwrap().country(), "DE");
        assert!(Bic::parse("bic", "DEUTDEFF500").is_ok());
        assert!(Bic::parse("bic", "deutdeff").is_err());
        assert!(Bic::parse("bic", "DEUTDEF").is_err());
    }
}
