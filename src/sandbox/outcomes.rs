//! What the sandbox bank does with each payment it receives in a file (SPEC B7), following
//! Modern Treasury's sandbox conventions on the receiving account number, plus Payrail's older
//! magic amounts (kept as documented aliases):
//!
//! | receiving account number | amount | outcome |
//! |---|---|---|
//! | `100XX` (five digits)     | any    | settles, then is returned: ACH with code `RXX`, other rails without a code |
//! | `11111111` then more      | any    | fails (a `pain.002` rejection) |
//! | anything else (`123456789`) | `1313` | fails |
//! | anything else             | `4040` | settles, then is returned with `R01` (ACH) |
//! | anything else             | other  | settles |

/// What the sandbox bank does with one payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    Settles,
    /// Settles, then comes back; `code` is the NACHA return code (none for other rails).
    Returned {
        code: Option<String>,
    },
    /// Refused: a `pain.002` rejection with this ISO 20022 reason code.
    Fails {
        reason_code: &'static str,
        reason: &'static str,
    },
}

/// The amount (minor units) that fails, whatever the account.
pub const FAIL_AMOUNT: i64 = 1313;
/// The amount that is returned after settling, whatever the account.
pub const RETURN_AMOUNT: i64 = 4040;

/// The fate of a payment of `amount` to `account_number`; `ach` says whether it travelled by
/// ACH (returns carry a NACHA code only then).
pub fn fate(account_number: &str, amount: i64, ach: bool) -> Fate {
    let account = account_number.trim();
    let code_of = |xx: &str| ach.then(|| format!("R{xx}"));
    if account.len() == 5 && account.starts_with("100") && account.bytes().all(|b| b.is_ascii_digit()) {
        return Fate::Returned { code: code_of(&account[3..]) };
    }
    if account.len() > 8 && account.starts_with("11111111") {
        return Fate::Fails { reason_code: "AC06", reason: "Blocked account (sandbox account number 11111111...)" };
    }
    match amount {
        FAIL_AMOUNT => Fate::Fails { reason_code: "AM04", reason: "Insufficient funds (sandbox magic amount 1313)" },
        RETURN_AMOUNT => Fate::Returned { code: code_of("01") },
        _ => Fate::Settles,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b7_account_numbers_follow_modern_treasury_sandbox_conventions() {
        assert_eq!(fate("123456789", 5_000, true), Fate::Settles);
        assert_eq!(fate("10003", 5_000, true), Fate::Returned { code: Some("R03".into()) });
        assert_eq!(fate("10029", 5_000, true), Fate::Returned { code: Some("R29".into()) });
        assert_eq!(fate("10003", 5_000, false), Fate::Returned { code: None }, "wires come back without a code");
        assert!(matches!(fate("111111119999", 5_000, true), Fate::Fails { .. }));
        assert!(matches!(fate("11111111", 5_000, true), Fate::Settles), "eight ones alone is an ordinary account");
        assert_eq!(fate("1000", 5_000, true), Fate::Settles);
        assert_eq!(fate("100ab", 5_000, true), Fate::Settles);
    }

    #[test]
    fn b7_the_magic_amounts_keep_working() {
        assert!(matches!(fate("123456789", FAIL_AMOUNT, true), Fate::Fails { .. }));
        assert_eq!(fate("123456789", RETURN_AMOUNT, true), Fate::Returned { code: Some("R01".into()) });
        assert_eq!(fate("123456789", RETURN_AMOUNT, false), Fate::Returned { code: None });
    }
}
