//! What text a pain.001 file may carry, checked field by field before anything is written.
//!
//! - SEPA ([`Charset::SepaLatin`]): the EPC's basic Latin set that every SEPA bank must accept
//!   (EPC Customer-to-PSP Implementation Guidelines, "Character set"): `a-z A-Z 0-9` and
//!   `/ - ? : ( ) . , ' +` and space. Identifiers also may not start or end with `/` nor
//!   contain `//`.
//! - Wire and RTP ([`Charset::Xml`]): any character XML 1.0 carries, except control characters
//!   (tabs and line breaks included: they mean nothing in a name and banks strip them).
//!
//! A character outside the set is refused with an error naming the field; nothing is
//! transliterated, replaced or cut (a bank file must say exactly what the order said). Lengths
//! are counted in characters, as the XSD's `maxLength` counts them, and an empty or blank value
//! is refused (the XSD's text types have `minLength` 1).

use crate::error::{Error, Result};

/// The characters a rail's files may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charset {
    SepaLatin,
    Xml,
}

impl Charset {
    pub fn allows(self, c: char) -> bool {
        match self {
            Charset::SepaLatin => c.is_ascii_alphanumeric() || "/-?:().,'+ ".contains(c),
            Charset::Xml => !c.is_control() && !matches!(c, '\u{FFFE}' | '\u{FFFF}'),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Charset::SepaLatin => "the SEPA character set (a-z A-Z 0-9 / - ? : ( ) . , ' + space)",
            Charset::Xml => "a bank file (control characters are not allowed)",
        }
    }
}

/// `value` as a text field of at most `max` characters in `charset`, or a 422 naming `field`.
pub fn check(field: &str, value: &str, max: usize, charset: Charset) -> Result<()> {
    if value.trim().is_empty() {
        return Err(Error::invalid(field, format!("{field} must not be blank")));
    }
    if let Some(c) = value.chars().find(|c| !charset.allows(*c)) {
        return Err(Error::invalid(field, format!("{field} contains {c:?}, which {} cannot carry", charset.name())));
    }
    let length = value.chars().count();
    if length > max {
        return Err(Error::invalid(field, format!("{field} is {length} characters long; at most {max} fit")));
    }
    Ok(())
}

/// An identifier (message, payment information, end-to-end id): up to 35 characters, and in
/// SEPA files without a leading, trailing or doubled `/`.
pub fn check_id(field: &str, value: &str, charset: Charset) -> Result<()> {
    check(field, value, 35, charset)?;
    if charset == Charset::SepaLatin && (value.starts_with('/') || value.ends_with('/') || value.contains("//")) {
        return Err(Error::invalid(field, format!("{field} may not start or end with '/' nor contain '//' in a SEPA file")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused_field(result: Result<()>) -> String {
        match result {
            Err(Error::Invalid { parameter, .. }) => parameter,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn sepa_refuses_characters_outside_the_basic_latin_set_naming_the_field() {
        assert!(check("creditor.name", "ACME Corp. (EU) 1/2 + x?", 70, Charset::SepaLatin).is_ok());
        for bad in ["Müller", "A & B", "a_b", "x\ny", "€"] {
            assert_eq!(refused_field(check("creditor.name", bad, 70, Charset::SepaLatin)), "creditor.name", "{bad:?}");
        }
    }

    #[test]
    fn wire_carries_any_printable_character_but_no_control_character() {
        assert!(check("creditor.name", "Müller & Söhne <GmbH> \"€\"", 140, Charset::Xml).is_ok());
        for bad in ["a\tb", "a\nb", "a\u{0}b", "a\u{85}b", "a\u{FFFE}"] {
            assert!(check("creditor.name", bad, 140, Charset::Xml).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn lengths_count_characters_and_blank_is_refused() {
        assert!(check("f", &"é".repeat(140), 140, Charset::Xml).is_ok(), "140 characters, 280 bytes");
        assert!(check("f", &"é".repeat(141), 140, Charset::Xml).is_err());
        assert!(check("f", " ", 140, Charset::Xml).is_err());
        assert!(check("f", "", 140, Charset::Xml).is_err());
    }

    #[test]
    fn sepa_identifiers_have_no_stray_slashes() {
        assert!(check_id("id", "A/B", Charset::SepaLatin).is_ok());
        for bad in ["/AB", "AB/", "A//B"] {
            assert!(check_id("id", bad, Charset::SepaLatin).is_err(), "{bad}");
        }
        assert!(check_id("id", &"x".repeat(36), Charset::Xml).is_err());
    }
}
