//! What a bank's answer file says, free of its format (SPEC B5): the parsers in
//! `bank::formats` turn NACHA return and notification-of-change files, `pain.002` status reports
//! and `camt.053` / `camt.054` statements into these, and the inbound half of the domain applies
//! them (returns, failed and completed orders, transactions, balance reports). Amounts are in
//! the currency's minor units, already scaled by its exponent; dates are `YYYY-MM-DD`.

use crate::domain::money::Currency;

/// Which kind of file the answers came from (named in the inbound file's record and events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerFormat {
    /// A NACHA file of returns (addenda 99) and notifications of change (addenda 98).
    NachaReturns,
    /// An ISO 20022 `pain.002` payment status report.
    Pain002,
    /// An ISO 20022 `camt.053` end-of-day statement.
    Camt053,
    /// An ISO 20022 `camt.054` debit/credit notification.
    Camt054,
}

impl AnswerFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerFormat::NachaReturns => "nacha_returns",
            AnswerFormat::Pain002 => "pain.002",
            AnswerFormat::Camt053 => "camt.053",
            AnswerFormat::Camt054 => "camt.054",
        }
    }
}

/// A parsed answer file: what it is and everything it says, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerFile {
    pub format: AnswerFormat,
    pub answers: Vec<Answer>,
}

/// One thing a bank's file says.
// Statement entries are the largest variant and also the bulk of the big files (a camt.053 of
// 50,000 entries): boxing them would cost an allocation each and save nothing there.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Return(AchReturn),
    Correction(AchCorrection),
    Status(PaymentStatus),
    Entry(StatementEntry),
    Balance(StatementBalance),
}

/// A NACHA return entry: the original entry came back (addenda 99).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AchReturn {
    /// The 15-digit trace number of the entry being returned (the addenda's original trace).
    pub original_trace_number: String,
    /// The return reason code, `R01` to `R85`.
    pub code: String,
    /// The returned amount in cents.
    pub amount: i64,
    /// The addenda's free text, when the bank wrote any.
    pub addenda_information: Option<String>,
    /// Date of death (`YYYY-MM-DD`) for R14/R15, when given.
    pub date_of_death: Option<String>,
}

/// A NACHA notification of change (addenda 98): the receiving bank says an account detail must
/// change; the entry itself was posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AchCorrection {
    pub original_trace_number: String,
    /// The change code, `C01` to `C13`.
    pub code: String,
    /// The corrected data exactly as the bank wrote it (trimmed).
    pub corrected_data: String,
}

/// What a `pain.002` says of one transaction of a file Payrail sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentStatus {
    /// `OrgnlEndToEndId`: `bank::formats::iso20022::end_to_end_id` of the order.
    pub end_to_end_id: String,
    pub outcome: StatusOutcome,
    /// `StsRsnInf/Rsn/Cd` (such as `AC04`), when given.
    pub reason_code: Option<String>,
    /// `StsRsnInf/AddtlInf`, when given.
    pub reason: Option<String>,
}

/// A transaction status of ISO 20022, folded to what moves an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusOutcome {
    /// `RJCT`: the order fails.
    Rejected,
    /// `ACCP`, `ACSP`, `ACTC`, `ACWC`, `PDNG`, ...: accepted or under way; nothing moves.
    Accepted,
    /// `ACSC`: settled.
    Settled,
}

/// Whose account a statement line is about: the `Acct/Id` of the statement.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccountRef {
    pub iban: Option<String>,
    /// `Othr/Id`: a domestic account number.
    pub account_number: Option<String>,
}

/// Money in or out of an account, as ISO 20022's `CdtDbtInd` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryDirection {
    Credit,
    Debit,
}

/// One booked entry of a `camt.053` or `camt.054` (`Ntry` with `Sts` booked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatementEntry {
    pub account: AccountRef,
    /// Positive, in minor units of `currency`.
    pub amount: i64,
    pub currency: Currency,
    pub direction: EntryDirection,
    /// `BookgDt`: the transaction's `as_of_date`.
    pub booking_date: String,
    /// The clock time of `BookgDt/DtTm` as written (`HH:MM:SS`), when the bank gave one: the
    /// transaction's `as_of_time`.
    pub booking_time: Option<String>,
    /// `ValDt`, when given.
    pub value_date: Option<String>,
    /// `NtryDtls/TxDtls/Refs/EndToEndId`, when given (and not `NOTPROVIDED`).
    pub end_to_end_id: Option<String>,
    /// `NtryDtls/TxDtls/Refs/ClrSysRef`: the ACH trace number, when given.
    pub ach_trace_number: Option<String>,
    /// `NtryRef` or `AcctSvcrRef`: the bank's own reference for the entry, when given.
    pub bank_reference: Option<String>,
    /// `AddtlNtryInf` (or the remittance text): the transaction's `vendor_description`.
    pub description: String,
    /// The rail when the bank transaction code says it (`ach`, `wire`, `rtp`, `sepa`, `book`).
    pub rail: Option<String>,
    /// `RvslInd`: the entry reverses an earlier one (a payment that came back). A reversal
    /// that matches a sent or completed order returns it, with `return_code` when given.
    pub reversal: bool,
    /// `TxDtls/RtrInf/Rsn/Cd` (or `Prtry`): why the payment came back, an ISO code such as
    /// `AC04` or a NACHA one such as `R01`.
    pub return_code: Option<String>,
    /// The other side of the entry as the bank names it (`TxDtls/RltdPties`): the debtor of a
    /// credit, the creditor of a debit. Expected payments that name a counterparty check it.
    pub counterparty: Option<Party>,
}

/// A party to a payment as a statement names it: its name and account, either when given.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Party {
    pub name: Option<String>,
    pub account: AccountRef,
}

impl Party {
    /// `None` when the statement named neither a name nor an account.
    pub fn named(self) -> Option<Party> {
        let empty = self.name.is_none() && self.account.iban.is_none() && self.account.account_number.is_none();
        (!empty).then_some(self)
    }
}

/// One balance of a `camt.053` statement (`Bal`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatementBalance {
    pub account: AccountRef,
    /// MT's `balance_type`: `OPBD` is `opening_ledger`, `CLBD` `closing_ledger`, `OPAV`
    /// `opening_available`, `CLAV` `closing_available`, `ITBD` `current_ledger`, `ITAV`
    /// `current_available`, anything else `other`.
    pub balance_type: String,
    /// Signed: negative when `CdtDbtInd` is `DBIT`. Minor units of `currency`.
    pub amount: i64,
    pub currency: Currency,
    /// `Dt/Dt` (or the date of `Dt/DtTm`): the report's `as_of_date`.
    pub as_of_date: String,
    /// `HH:MM:SS`, the clock time as the bank wrote it: of `Dt/DtTm`, else of the statement's
    /// `CreDtTm`, else of the message's (`GrpHdr/CreDtTm`).
    pub as_of_time: Option<String>,
}
