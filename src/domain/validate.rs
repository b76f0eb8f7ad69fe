//! Field checks shared by every resource. Each failure is a 422 naming the field (SPEC L3).
//!
//! Limits (documented in the README): text fields 1 to 255 characters unless stated; metadata
//! at most 50 pairs, keys 1 to 100 characters, values up to 500; account numbers 1 to 34 letters
//! and digits (blockchain addresses by their own shape); routing numbers checked by type (ABA
//! checksum, SWIFT/BIC shape, sort codes...).

use std::collections::BTreeMap;

use super::bank_id::{AbaRoutingNumber, Bic, Iban};
use super::enums;
use super::id::Id;
use super::money::Currency;
use crate::error::{Error, Result};

pub const TEXT_LEN_MAX: usize = 255;
pub const METADATA_PAIRS_MAX: usize = 50;
pub const METADATA_KEY_LEN_MAX: usize = 100;
pub const METADATA_VALUE_LEN_MAX: usize = 500;
pub const ACCOUNT_NUMBER_LEN_MAX: usize = 34;

pub type Metadata = BTreeMap<String, String>;
/// Metadata as a PATCH sends it: pairs to set, and pairs to remove (`null` or `""`).
pub type MetadataPatch = BTreeMap<String, Option<String>>;

/// A free-text field: 1 to `len_max` characters, no control characters.
pub fn text(param: &str, value: &str, len_max: usize) -> Result<String> {
    let chars = value.chars().count();
    if chars == 0 || value.trim().is_empty() {
        return Err(Error::invalid(param, format!("{param} must not be empty")));
    }
    if chars > len_max {
        return Err(Error::invalid(param, format!("{param} must be at most {len_max} characters")));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::invalid(param, format!("{param} must not contain control characters")));
    }
    Ok(value.to_owned())
}

/// An optional free-text field; `None` stays `None`.
pub fn opt_text(param: &str, value: Option<&str>, len_max: usize) -> Result<Option<String>> {
    value.map(|v| text(param, v, len_max)).transpose()
}

/// A string from a fixed list that the domain keeps as a string (the lists the domain acts on
/// are enums with their own `parse`, see `enums`).
pub fn one_of(param: &str, value: &str, allowed: &[&str]) -> Result<String> {
    if enums::is_one_of(value, allowed) { Ok(value.to_owned()) } else { Err(enums::not_one_of(param, allowed)) }
}

pub fn metadata(param: &str, value: Option<&Metadata>) -> Result<Metadata> {
    let Some(map) = value else { return Ok(Metadata::new()) };
    if map.len() > METADATA_PAIRS_MAX {
        return Err(Error::invalid(param, format!("{param} holds at most {METADATA_PAIRS_MAX} pairs")));
    }
    for (key, val) in map {
        let key_len = key.chars().count();
        if key_len == 0 || key_len > METADATA_KEY_LEN_MAX {
            return Err(Error::invalid(param, format!("{param} keys are 1 to {METADATA_KEY_LEN_MAX} characters")));
        }
        // No store keeps NUL in text alike (PostgreSQL refuses it): refused on every store.
        if key.contains('\0') || val.contains('\0') {
            return Err(Error::invalid(param, format!("{param} keys and values must not contain NUL characters")));
        }
        if val.chars().count() > METADATA_VALUE_LEN_MAX {
            return Err(Error::invalid(
                format!("{param}.{key}"),
                format!("{param} values are at most {METADATA_VALUE_LEN_MAX} characters"),
            ));
        }
    }
    Ok(map.clone())
}

/// Merges a PATCH's metadata into `current` as Modern Treasury does: keys given are set, keys
/// given `null` or `""` are removed, keys not given are kept. The result is checked as a whole.
pub fn merge_metadata(param: &str, current: &Metadata, patch: &MetadataPatch) -> Result<Metadata> {
    let mut merged = current.clone();
    for (key, value) in patch {
        match value.as_deref() {
            None | Some("") => {
                merged.remove(key);
            }
            Some(value) => {
                merged.insert(key.clone(), value.to_owned());
            }
        }
    }
    metadata(param, Some(&merged))
}

pub fn email(param: &str, value: &str) -> Result<String> {
    let valid = value.len() <= 254
        && !value.chars().any(|c| c.is_whitespace() || c.is_control())
        && value.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty() && domain.contains('.') && !domain.starts_with('.') && !domain.ends_with('.') && !domain.contains('@')
        });
    if valid { Ok(value.to_owned()) } else { Err(Error::invalid(param, format!("{param} is not an email address"))) }
}

/// An account number: letters and digits only (spaces are a common paste error: refused, not
/// stripped, so what is stored is what the bank will see); an IBAN also passes its checksum.
/// Blockchain addresses are longer than any bank's numbers and are held to their own shape.
pub fn account_number(param: &str, value: &str, number_type: &str) -> Result<String> {
    if let Some(rule) = crypto_address_rule(number_type) {
        return match rule.0(value) {
            true => Ok(value.to_owned()),
            false => Err(Error::invalid(param, format!("{param} must be {} for {number_type}", rule.1))),
        };
    }
    let ok = !value.is_empty() && value.len() <= ACCOUNT_NUMBER_LEN_MAX && value.bytes().all(|b| b.is_ascii_alphanumeric());
    if !ok {
        return Err(Error::invalid(param, format!("{param} must be 1 to {ACCOUNT_NUMBER_LEN_MAX} letters and digits")));
    }
    if number_type == "iban" {
        Iban::parse(param, value)?;
    }
    Ok(value.to_owned())
}

/// A check of an address's shape, and how a refusal describes the shape.
type AddressRule = (fn(&str) -> bool, &'static str);

/// The rule of a blockchain address type.
fn crypto_address_rule(number_type: &str) -> Option<AddressRule> {
    fn evm(value: &str) -> bool {
        value.len() == 42 && value.starts_with("0x") && value[2..].bytes().all(|b| b.is_ascii_hexdigit())
    }
    fn solana(value: &str) -> bool {
        let base58 = |b: u8| b.is_ascii_alphanumeric() && !matches!(b, b'0' | b'O' | b'I' | b'l');
        (32..=44).contains(&value.len()) && value.bytes().all(base58)
    }
    fn wallet(value: &str) -> bool {
        (1..=100).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_alphanumeric())
    }
    match number_type {
        "ethereum_address" | "base_address" | "polygon_address" => Some((evm, "0x and 40 hexadecimal digits")),
        "solana_address" => Some((solana, "32 to 44 base58 characters")),
        "wallet_address" => Some((wallet, "1 to 100 letters and digits")),
        _ => None,
    }
}

/// A routing number, checked as its type requires.
pub fn routing_number(param: &str, value: &str, routing_type: &str) -> Result<String> {
    let digits = |n: usize| value.len() == n && value.bytes().all(|b| b.is_ascii_digit());
    let (ok, rule) = match routing_type {
        "aba" => return AbaRoutingNumber::parse(param, value).map(|aba| aba.to_string()),
        "swift" => return Bic::parse(param, value).map(|bic| bic.to_string()),
        "gb_sort_code" | "au_bsb" => (digits(6), "6 digits"),
        "ca_cpa" => (digits(9), "9 digits"),
        "in_ifsc" => (value.len() == 11 && value.bytes().all(|b| b.is_ascii_alphanumeric()), "11 letters and digits"),
        _ => (!value.is_empty() && value.len() <= 35 && value.bytes().all(|b| b.is_ascii_alphanumeric()), "1 to 35 letters and digits"),
    };
    if ok { Ok(value.to_owned()) } else { Err(Error::invalid(param, format!("{param} must be {rule} for {routing_type}"))) }
}

/// A resource id given in a body, for the resources that keep ids as strings: its shape is
/// checked by [`Id::parse`], its existence by the store.
pub fn id(param: &str, value: &str) -> Result<String> {
    Id::parse(param, value).map(String::from)
}

/// The currency of something held to one account: the account's, `account`. Naming another is
/// refused: an unknown code as unknown, a known one saying it must be `whose` currency and `why`.
pub fn account_currency(given: Option<&str>, account: Currency, whose: &str, why: &str) -> Result<Currency> {
    match given {
        Some(code) if code != account.code() => {
            Currency::parse("currency", code)?;
            Err(Error::invalid("currency", format!("currency must be {whose} ({account}): {why}")))
        }
        _ => Ok(account),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blockchain_addresses_have_their_own_shapes() {
        let evm = "0x52908400098527886E0F7030069857D2E4169EE7";
        for kind in ["ethereum_address", "base_address", "polygon_address"] {
            assert_eq!(account_number("a", evm, kind).unwrap(), evm, "{kind}");
            assert!(account_number("a", &evm[..41], kind).is_err(), "{kind}: one digit short");
            assert!(account_number("a", &evm.replace("0x", "0y"), kind).is_err(), "{kind}: no 0x");
        }
        let solana = "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T";
        assert!(account_number("a", solana, "solana_address").is_ok());
        assert!(account_number("a", &solana.replace('4', "0"), "solana_address").is_err(), "0 is not base58");
        assert!(account_number("a", &"w".repeat(100), "wallet_address").is_ok());
        assert!(account_number("a", &"w".repeat(101), "wallet_address").is_err());
        assert!(account_number("a", evm, "other").is_err(), "a bank's number stays at most 34");
    }

    #[test]
    fn aba_checksum() {
        assert!(routing_number("r", "121141822", "aba").is_ok());
        assert!(routing_number("r", "021000021", "aba").is_ok());
        assert!(routing_number("r", "121141823", "aba").is_err());
        assert!(routing_number("r", "12114182", "aba").is_err());
        assert!(routing_number("r", "12114182a", "aba").is_err());
    }

    #[test]
    fn swift_sort_code_and_others() {
        assert!(routing_number("r", "DEUTDEFF", "swift").is_ok());
        assert!(routing_number("r", "DEUTDEFF500", "swift").is_ok());
        assert!(routing_number("r", "deutdeff", "swift").is_err());
        assert!(routing_number("r", "401276", "gb_sort_code").is_ok());
        assert!(routing_number("r", "40-12-76", "gb_sort_code").is_err());
    }

    #[test]
    fn account_numbers_and_iban() {
        assert!(account_number("a", "123456789", "other").is_ok());
        assert!(account_number("a", "1234 5678", "other").is_err());
        assert!(account_number("a", "", "other").is_err());
        assert!(account_number("a", "GB82WEST12345698765432", "iban").is_ok());
        assert!(account_number("a", "GB82WEST12345698765433", "iban").is_err());
    }

    #[test]
    fn metadata_limits() {
        let mut m = Metadata::new();
        m.insert("k".into(), "v".repeat(METADATA_VALUE_LEN_MAX));
        assert!(metadata("metadata", Some(&m)).is_ok());
        m.insert("k".into(), "v".repeat(METADATA_VALUE_LEN_MAX + 1));
        assert!(matches!(metadata("metadata", Some(&m)), Err(Error::Invalid { parameter, .. }) if parameter == "metadata.k"));
        let many: Metadata = (0..=METADATA_PAIRS_MAX).map(|i| (i.to_string(), String::new())).collect();
        assert!(metadata("metadata", Some(&many)).is_err());
    }

    #[test]
    fn metadata_patch_merges_and_removes() {
        let current: Metadata = [("a", "1"), ("b", "2"), ("c", "3")].into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        let patch: MetadataPatch =
            [("b", Some("")), ("c", None), ("d", Some("4"))].into_iter().map(|(k, v)| (k.into(), v.map(str::to_owned))).collect();
        let merged = merge_metadata("metadata", &current, &patch).unwrap();
        assert_eq!(merged.into_iter().collect::<Vec<_>>(), vec![("a".into(), "1".into()), ("d".into(), "4".into())]);
    }

    #[test]
    fn emails_and_text() {
        assert!(email("e", "ap@example.com").is_ok());
        for bad in ["ap", "ap@", "@x.com", "a b@x.com", "a@x", "a@x."] {
            assert!(email("e", bad).is_err(), "{bad}");
        }
        assert!(text("name", "", 10).is_err());
        assert!(text("name", "   ", 10).is_err());
        assert!(text("name", "a\u{0}b", 10).is_err());
        assert!(text("name", &"x".repeat(11), 10).is_err());
    }
}
