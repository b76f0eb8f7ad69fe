//! What the sandbox bank reads in a file Payrail sent it: each payment's references, amount,
//! receiving account and, for ACH, the entry as sent (its return needs it). NACHA files are read
//! (and checked whole) by `bank::formats::nacha::parse`; `pain.001` files by the streaming
//! reader of `bank::formats::iso20022::read`, taking only what an answer needs.

use crate::bank::formats::iso20022::read::{Visitor, minor_units, walk};
use crate::bank::formats::nacha::answers::OriginalEntry;
use crate::bank::formats::nacha::{self, EntryDirection as AchDirection, ParsedFile};
use crate::domain::bank_answer::{AccountRef, EntryDirection};
use crate::domain::money::Currency;

/// One payment of a sent file.
#[derive(Debug, Clone)]
pub struct Payment {
    /// `EndToEndId` (ISO files).
    pub end_to_end_id: Option<String>,
    /// `PmtInfId` (ISO) or the batch number (ACH): what a status report names as the group.
    pub group_id: String,
    pub amount: i64,
    pub currency: Currency,
    /// The receiving account's number (or IBAN): what decides the payment's fate.
    pub receiving_account: String,
    /// The paying account as the file names it (ISO `DbtrAcct`; ACH: the company id).
    pub paying_account: AccountRef,
    /// From the paying account's side: a credit order takes money out (`Debit`).
    pub direction: EntryDirection,
    /// ACH only: the entry as sent.
    pub ach: Option<OriginalEntry>,
    /// The rail that carried it (`ach`, `wire`, `rtp` or `sepa`), as the bank's statement
    /// names it.
    pub rail: &'static str,
}

impl Payment {
    /// The reference a status report or statement names the payment by.
    pub fn reference(&self) -> String {
        match (&self.end_to_end_id, &self.ach) {
            (Some(e2e), _) => e2e.clone(),
            (None, Some(entry)) => entry.trace.to_string(),
            (None, None) => String::new(),
        }
    }
}

/// The payments of a sent file (NACHA or `pain.001`).
pub fn read(bytes: &[u8]) -> Result<Vec<Payment>, String> {
    if bytes.starts_with(b"101") {
        let text = std::str::from_utf8(bytes).map_err(|_| "a NACHA file that is not ASCII".to_owned())?;
        let parsed = nacha::parse(text).map_err(|e| e.to_string())?;
        return Ok(ach_payments(&parsed));
    }
    let mut reader = Pain001::default();
    walk(bytes, &mut reader).map_err(|e| format!("{} (line {}): {}", e.path, e.line, e.message))?;
    Ok(reader.payments)
}

fn ach_payments(parsed: &ParsedFile) -> Vec<Payment> {
    let mut out = Vec::new();
    for batch in &parsed.batches {
        let h = &batch.header;
        for entry in &batch.entries {
            let d = &entry.detail;
            let original = OriginalEntry {
                sec: h.sec,
                company_name: h.company_name.clone(),
                company_id: h.company_id.clone(),
                entry_description: h.entry_description.clone(),
                transaction_code: d.transaction_code,
                rdfi: d.rdfi,
                account_number: d.account_number.clone(),
                amount_cents: d.amount_cents,
                identification: d.identification.clone(),
                receiver_name: d.receiver_name.clone(),
                trace: d.trace,
            };
            let direction = match d.transaction_code.direction() {
                AchDirection::Credit => EntryDirection::Debit,
                AchDirection::Debit => EntryDirection::Credit,
            };
            out.push(Payment {
                end_to_end_id: None,
                group_id: h.batch_number.to_string(),
                amount: d.amount_cents as i64,
                currency: Currency::USD,
                receiving_account: d.account_number.trim().to_owned(),
                paying_account: AccountRef { iban: None, account_number: Some(h.company_id.trim().to_owned()) },
                direction,
                ach: Some(original),
                rail: "ach",
            });
        }
    }
    out
}

/// The pull reader of a `pain.001`: a payment per `CdtTrfTxInf`, with its group's paying account.
#[derive(Default)]
struct Pain001 {
    payments: Vec<Payment>,
    group_id: String,
    paying: AccountRef,
    e2e: Option<String>,
    amount: Option<(i64, Currency)>,
    receiving: Option<String>,
    /// The group's rail, from its `PmtTpInf`: SEPA's service level, RTP's local instrument,
    /// else a wire.
    rail: &'static str,
}

const PMT_INF: &str = "Document/CstmrCdtTrfInitn/PmtInf";

impl Visitor for Pain001 {
    fn open(&mut self, path: &str) -> Result<(), String> {
        if path == PMT_INF {
            self.paying = AccountRef::default();
            self.rail = "wire";
        }
        Ok(())
    }

    fn close(&mut self, path: &str, text: &str, currency: Option<&str>) -> Result<(), String> {
        let Some(rel) = path.strip_prefix(PMT_INF) else { return Ok(()) };
        match rel {
            "/PmtInfId" => self.group_id = text.to_owned(),
            "/PmtTpInf/SvcLvl/Cd" if text == "SEPA" => self.rail = "sepa",
            "/PmtTpInf/LclInstrm/Prtry" if text == "RTP" => self.rail = "rtp",
            "/DbtrAcct/Id/IBAN" => self.paying.iban = Some(text.to_owned()),
            "/DbtrAcct/Id/Othr/Id" => self.paying.account_number = Some(text.to_owned()),
            "/CdtTrfTxInf/PmtId/EndToEndId" => self.e2e = Some(text.to_owned()),
            "/CdtTrfTxInf/Amt/InstdAmt" => self.amount = Some(minor_units(text, currency.ok_or("InstdAmt without Ccy")?)?),
            "/CdtTrfTxInf/CdtrAcct/Id/IBAN" | "/CdtTrfTxInf/CdtrAcct/Id/Othr/Id" => self.receiving = Some(text.to_owned()),
            "/CdtTrfTxInf" => {
                let (amount, currency) = self.amount.take().ok_or("a transfer without InstdAmt")?;
                self.payments.push(Payment {
                    end_to_end_id: Some(self.e2e.take().ok_or("a transfer without EndToEndId")?),
                    group_id: self.group_id.clone(),
                    amount,
                    currency,
                    receiving_account: self.receiving.take().ok_or("a transfer without CdtrAcct")?,
                    paying_account: self.paying.clone(),
                    direction: EntryDirection::Debit,
                    ach: None,
                    rail: self.rail,
                });
            }
            _ => {}
        }
        Ok(())
    }
}
