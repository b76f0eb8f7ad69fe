//! NACHA's codes: transaction codes, standard entry class (SEC) codes, service class codes, the
//! file id modifier and trace numbers.

use std::fmt;

/// Checking or savings: the receiving account's type, which picks the transaction code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccountType {
    Checking,
    Savings,
}

/// Which way money moves, from the receiver's side: a credit pays the receiver, a debit
/// collects from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryDirection {
    Credit,
    Debit,
}

/// A transaction code: account type, direction, and whether the entry is live, a prenote
/// (zero-amount account check) or a return / notification of change (21, 26, 31, 36: only read,
/// never originated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TransactionCode(u8);

impl TransactionCode {
    /// The live entry for `account` and `direction`: 22/27 checking, 32/37 savings.
    pub fn live(account: AccountType, direction: EntryDirection) -> Self {
        let base = match account {
            AccountType::Checking => 20,
            AccountType::Savings => 30,
        };
        TransactionCode(base + if direction == EntryDirection::Credit { 2 } else { 7 })
    }

    /// The prenote for `account` and `direction`: 23/28 checking, 33/38 savings.
    pub fn prenote(account: AccountType, direction: EntryDirection) -> Self {
        TransactionCode(Self::live(account, direction).0 + 1)
    }

    /// The code as read from a file, if NACHA defines it for demand accounts.
    pub fn from_code(code: u8) -> Option<Self> {
        matches!(code, 21..=23 | 26..=28 | 31..=33 | 36..=38).then_some(TransactionCode(code))
    }

    pub fn code(self) -> u8 {
        self.0
    }

    pub fn account_type(self) -> AccountType {
        if self.0 < 30 { AccountType::Checking } else { AccountType::Savings }
    }

    pub fn direction(self) -> EntryDirection {
        if self.0 % 10 < 5 { EntryDirection::Credit } else { EntryDirection::Debit }
    }

    pub fn is_prenote(self) -> bool {
        matches!(self.0 % 10, 3 | 8)
    }

    /// The code a return or notification of change of an entry of this code carries: 21 for
    /// 22/23 (checking credits), 26 for 27/28, 31 for 32/33, 36 for 37/38.
    pub fn answer_of(self) -> Self {
        let base = self.0 / 10 * 10;
        TransactionCode(base + if self.direction() == EntryDirection::Credit { 1 } else { 6 })
    }

    /// Returns and notifications of change (21, 26, 31, 36): a bank sends them, we never do.
    pub fn is_return_or_noc(self) -> bool {
        matches!(self.0 % 10, 1 | 6)
    }
}

/// Standard entry class codes. Payrail originates PPD, CCD, WEB and CTX; COR (notifications of
/// change) is only read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SecCode {
    Ppd,
    Ccd,
    Web,
    Ctx,
    Cor,
}

impl SecCode {
    pub fn parse(code: &str) -> Option<Self> {
        Some(match code {
            "PPD" => SecCode::Ppd,
            "CCD" => SecCode::Ccd,
            "WEB" => SecCode::Web,
            "CTX" => SecCode::Ctx,
            "COR" => SecCode::Cor,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SecCode::Ppd => "PPD",
            SecCode::Ccd => "CCD",
            SecCode::Web => "WEB",
            SecCode::Ctx => "CTX",
            SecCode::Cor => "COR",
        }
    }

    /// Most addenda records one entry may carry: 9,999 for CTX, one for the others.
    pub fn max_addenda(self) -> usize {
        match self {
            SecCode::Ctx => 9999,
            _ => 1,
        }
    }
}

impl fmt::Display for SecCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The batch's service class: mixed (200), credits only (220) or debits only (225).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServiceClass {
    Mixed,
    CreditsOnly,
    DebitsOnly,
}

impl ServiceClass {
    pub fn code(self) -> u64 {
        match self {
            ServiceClass::Mixed => 200,
            ServiceClass::CreditsOnly => 220,
            ServiceClass::DebitsOnly => 225,
        }
    }

    pub fn from_code(code: u64) -> Option<Self> {
        Some(match code {
            200 => ServiceClass::Mixed,
            220 => ServiceClass::CreditsOnly,
            225 => ServiceClass::DebitsOnly,
            _ => return None,
        })
    }

    /// Does a batch of this class admit an entry moving money `direction`?
    pub fn admits(self, direction: EntryDirection) -> bool {
        match self {
            ServiceClass::Mixed => true,
            ServiceClass::CreditsOnly => direction == EntryDirection::Credit,
            ServiceClass::DebitsOnly => direction == EntryDirection::Debit,
        }
    }

    /// The narrowest class for a batch with these directions present.
    pub fn narrowest(credits: bool, debits: bool) -> Self {
        match (credits, debits) {
            (true, false) => ServiceClass::CreditsOnly,
            (false, true) => ServiceClass::DebitsOnly,
            _ => ServiceClass::Mixed,
        }
    }
}

/// The file id modifier: tells apart files sent the same day to the same destination, `A` to
/// `Z` and then `0` to `9` (36 files a day).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileIdModifier(char);

impl FileIdModifier {
    pub const ALPHABET: &'static str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

    /// The modifier of the `n`th file of the day (0-based), or None past the 36th.
    pub fn nth(n: usize) -> Option<Self> {
        Self::ALPHABET.chars().nth(n).map(FileIdModifier)
    }

    pub fn from_char(c: char) -> Option<Self> {
        Self::ALPHABET.contains(c).then_some(FileIdModifier(c))
    }

    pub fn as_char(self) -> char {
        self.0
    }

    /// The one after this, for the next file of the day.
    pub fn next(self) -> Option<Self> {
        Self::ALPHABET.find(self.0).and_then(|i| Self::nth(i + 1))
    }
}

/// A trace number: the ODFI's 8-digit identification, then a 7-digit sequence unique within
/// the file. It is how the bank's returns and statements name the entry later (SPEC B5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceNumber {
    odfi: u32,
    sequence: u32,
}

impl TraceNumber {
    pub const SEQUENCE_MAX: u32 = 9_999_999;

    /// None unless `odfi` is 8 digits and `sequence` 1 to 9,999,999.
    pub fn new(odfi: &str, sequence: u32) -> Option<Self> {
        let odfi = (odfi.len() == 8 && odfi.bytes().all(|b| b.is_ascii_digit())).then(|| odfi.parse().ok())??;
        (1..=Self::SEQUENCE_MAX).contains(&sequence).then_some(TraceNumber { odfi, sequence })
    }

    pub fn parse(text: &str) -> Option<Self> {
        if text.len() != 15 || !text.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Self::new(&text[..8], text[8..].parse().ok()?)
    }

    pub fn odfi(self) -> String {
        format!("{:08}", self.odfi)
    }

    pub fn sequence(self) -> u32 {
        self.sequence
    }
}

impl fmt::Display for TraceNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:08}{:07}", self.odfi, self.sequence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_codes_follow_account_type_and_direction() {
        use AccountType::*;
        use EntryDirection::*;
        let codes = [(Checking, Credit), (Checking, Debit), (Savings, Credit), (Savings, Debit)]
            .map(|(a, d)| (TransactionCode::live(a, d).code(), TransactionCode::prenote(a, d).code()));
        assert_eq!(codes, [(22, 23), (27, 28), (32, 33), (37, 38)]);
        let returned = TransactionCode::from_code(26).unwrap();
        assert!(returned.is_return_or_noc() && returned.direction() == Debit && !returned.is_prenote());
        assert!(TransactionCode::from_code(24).is_none() && TransactionCode::from_code(42).is_none());
        assert_eq!(TransactionCode::from_code(38).unwrap().account_type(), Savings);
        let answers = [22, 23, 27, 28, 32, 33, 37, 38].map(|c| TransactionCode::from_code(c).unwrap().answer_of().code());
        assert_eq!(answers, [21, 21, 26, 26, 31, 31, 36, 36], "b7: the return codes NACHA gives each original code");
    }

    #[test]
    fn file_id_modifiers_run_a_to_z_then_0_to_9() {
        assert_eq!(FileIdModifier::nth(0).unwrap().as_char(), 'A');
        assert_eq!(FileIdModifier::nth(26).unwrap().as_char(), '0');
        assert_eq!(FileIdModifier::from_char('Z').unwrap().next().unwrap().as_char(), '0');
        assert!(FileIdModifier::nth(36).is_none() && FileIdModifier::from_char('9').unwrap().next().is_none());
        assert!(FileIdModifier::from_char('a').is_none());
    }

    #[test]
    fn trace_numbers_are_odfi_then_seven_digit_sequence() {
        let trace = TraceNumber::new("02100002", 42).unwrap();
        assert_eq!(trace.to_string(), "021000020000042");
        assert_eq!(TraceNumber::parse("021000020000042"), Some(trace));
        assert!(TraceNumber::new("2100002", 1).is_none() && TraceNumber::new("02100002", 0).is_none());
        assert!(TraceNumber::new("02100002", 10_000_000).is_none());
    }
}
