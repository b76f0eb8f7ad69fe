//! Notifications of change (NACHA addenda 98, SPEC B5): the receiving bank says an account's
//! number, routing number or type is wrong and gives the right one; Payrail corrects the order's
//! receiving external account, so the next payment goes right, and writes its `updated` event.
//!
//! The corrected data is laid out by change code (NACHA Operating Rules, Appendix Five):
//! `C01` account number (1-17), `C02` routing number (1-9), `C03` routing (1-9) and account
//! (13-29), `C05` transaction code (1-2), `C06` account (1-17) and transaction code (21-22),
//! `C07` routing (1-9), account (10-26) and transaction code (27-28). Other codes (IAT, individual
//! id, addenda format) name nothing an external account holds: they are noted, nothing changes.

use std::collections::HashMap;

use crate::domain::Ctx;
use crate::domain::Timestamp;
use crate::domain::common::{Stamp, account_detail};
use crate::domain::event;
use crate::domain::external_account::{self, ExternalAccount};
use crate::domain::validate;
use crate::error::Result;
use crate::store::{Write, WriteBatch};

/// What a notification of change says to correct.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    pub account_number: Option<String>,
    pub routing_number: Option<String>,
    /// `checking` or `savings`, from the corrected transaction code.
    pub account_type: Option<&'static str>,
}

/// Reads `corrected` for change code `code`; an error says why it cannot be applied.
pub fn change_of(code: &str, corrected: &str) -> std::result::Result<Change, String> {
    let field = |from: usize, to: usize| {
        corrected.get(from - 1..to.min(corrected.len())).map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned)
    };
    let account_type = |from: usize| -> std::result::Result<Option<&'static str>, String> {
        match field(from, from + 1).as_deref() {
            Some("22" | "23" | "27" | "28") => Ok(Some("checking")),
            Some("32" | "33" | "37" | "38") => Ok(Some("savings")),
            other => Err(format!("{other:?} is not a transaction code of a checking or savings account")),
        }
    };
    let change = match code {
        "C01" => Change { account_number: field(1, 17), ..Change::default() },
        "C02" => Change { routing_number: field(1, 9), ..Change::default() },
        "C03" => Change { routing_number: field(1, 9), account_number: field(13, 29), ..Change::default() },
        "C05" => Change { account_type: account_type(1)?, ..Change::default() },
        "C06" => Change { account_number: field(1, 17), account_type: account_type(21)?, ..Change::default() },
        "C07" => Change { routing_number: field(1, 9), account_number: field(10, 26), account_type: account_type(27)? },
        other => return Err(format!("change code {other} corrects nothing an external account holds")),
    };
    if change == Change::default() {
        return Err(format!("the corrected data {corrected:?} is empty for {code}"));
    }
    if let Some(routing) = &change.routing_number {
        validate::routing_number("routing_number", routing, "aba").map_err(|e| format!("corrected routing number {routing:?}: {e}"))?;
    }
    Ok(change)
}

/// The external accounts one file corrects, each read once and replaced once.
#[derive(Default)]
pub struct Corrections {
    accounts: HashMap<String, Corrected>,
}

/// One account a file's corrections read.
struct Corrected {
    /// As it will be written.
    account: ExternalAccount,
    /// Its stored version, which the replace is guarded by.
    version: i64,
    /// When it was last changed before this file.
    changed_before: Timestamp,
    /// Whether a correction of this file changed it (only those are written).
    touched: bool,
}

impl Corrections {
    /// Applies `change` to external account `id`, which the corrected entry was sent to at
    /// `sent_at`: `Ok(Err(why))` when it is gone, or when it changed after the entry was sent
    /// (a later correction, or the client's own edit, is newer than what the entry carried: a
    /// bank that sends the file again must not roll the account back).
    pub async fn correct(
        &mut self,
        ctx: &Ctx<'_>,
        id: &str,
        change: &Change,
        sent_at: Option<Timestamp>,
    ) -> Result<std::result::Result<(), String>> {
        if !self.accounts.contains_key(id) {
            let Some(stored) = ctx.store.get(external_account::KIND, ctx.scope, id).await? else {
                return Ok(Err(format!("external account {id} is gone")));
            };
            let account = external_account::parse(&stored)?;
            let changed_before = account.updated_at;
            self.accounts.insert(id.to_owned(), Corrected { account, version: stored.version, changed_before, touched: false });
        }
        let Corrected { account, changed_before: changed, touched, .. } = self.accounts.get_mut(id).expect("inserted above");
        if let Some(sent) = sent_at.filter(|sent| *changed > *sent) {
            return Ok(Err(format!(
                "external account {id} changed at {changed}, after the entry was sent at {sent}: the correction is not applied over newer data"
            )));
        }
        let stamp = Stamp { live_mode: ctx.scope.live_mode, now: ctx.now };
        if let Some(number) = &change.account_number {
            let kind = account.account_details.first().map(|d| d.account_number_type.clone()).unwrap_or_else(|| "other".into());
            account.account_details = vec![account_detail(number.clone(), kind, stamp)];
        }
        if let Some(routing) = &change.routing_number {
            for detail in account.routing_details.iter_mut().filter(|d| d.routing_number_type == "aba") {
                detail.routing_number = routing.clone();
                detail.updated_at = ctx.now;
            }
        }
        if let Some(kind) = change.account_type {
            account.account_type = kind.to_owned();
        }
        account.updated_at = ctx.now;
        *touched = true;
        Ok(Ok(()))
    }

    /// Stages the replace and `updated` event of every corrected account.
    pub fn finish(self, ctx: &Ctx<'_>, batch: &mut WriteBatch) -> Result<usize> {
        let touched: Vec<_> = self.accounts.into_iter().filter(|(_, c)| c.touched).collect();
        let count = touched.len();
        for (id, Corrected { account, version, .. }) in touched {
            let json = account.to_json()?;
            batch.push(Write::Replace { record: account.record(ctx.scope, json.clone()), expected_version: version });
            batch.push(Write::Insert(event::record(ctx.scope, external_account::KIND, "updated", &id, &json, ctx.now)?));
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b5_corrected_data_is_read_by_change_code() {
        assert_eq!(change_of("C01", "987654321        ").unwrap().account_number.as_deref(), Some("987654321"));
        assert_eq!(change_of("C02", "021000021").unwrap().routing_number.as_deref(), Some("021000021"));
        let c03 = change_of("C03", "021000021   5550001111").unwrap();
        assert_eq!((c03.routing_number.as_deref(), c03.account_number.as_deref()), (Some("021000021"), Some("5550001111")));
        assert_eq!(change_of("C05", "32").unwrap().account_type, Some("savings"));
        let c06 = change_of("C06", "12345678901234567   27").unwrap();
        assert_eq!((c06.account_number.as_deref(), c06.account_type), (Some("12345678901234567"), Some("checking")));
        let c07 = change_of("C07", "0210000211234567890123456737").unwrap();
        assert_eq!(c07.routing_number.as_deref(), Some("021000021"));
        assert_eq!(c07.account_number.as_deref(), Some("12345678901234567"));
        assert_eq!(c07.account_type, Some("savings"));
        assert!(change_of("C02", "123456789").is_err(), "a bad check digit is not applied");
        assert!(change_of("C05", "99").is_err());
        assert!(change_of("C09", "123").is_err());
        assert!(change_of("C01", "   ").is_err());
    }
}
