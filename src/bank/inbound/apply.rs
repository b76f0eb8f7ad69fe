//! What a bank's answer file does, staged into one batch (SPEC B4, B5): returns return their
//! orders, `pain.002` rejections fail them, booked statement entries become transactions and
//! complete the orders they settle (matched by end-to-end id, or by ACH trace number from
//! `Refs/ClrSysRef`), or reconcile an expected payment; `camt.053` balances become balance
//! reports of the internal account they are about. Answers that match nothing change nothing
//! and are noted on the file's record.

use crate::domain::Ctx;
use crate::domain::bank_answer::{AchCorrection, AchReturn, Answer, AnswerFile, PaymentStatus, StatusOutcome};
use crate::domain::correction::{self, Corrections};
use crate::domain::payment_order::answers::{self, Applied, Orders, Outcome};
use crate::error::Result;
use crate::store::WriteBatch;

use super::record::Effects;

/// Stages every effect of `file` into `batch`; what it did, counted.
pub async fn stage(ctx: &Ctx<'_>, batch: &mut WriteBatch, file: &AnswerFile) -> Result<Effects> {
    let mut effects = Effects { answers: file.answers.len() as u64, ..Effects::default() };
    let mut orders = Orders::default();
    let mut fixes = Corrections::default();
    for answer in &file.answers {
        match answer {
            Answer::Return(ret) => returned(ctx, batch, &mut orders, ret, &mut effects).await?,
            Answer::Status(status) => status_report(ctx, batch, &mut orders, status, &mut effects).await?,
            Answer::Correction(correction) => corrected(ctx, &mut orders, &mut fixes, correction, &mut effects).await?,
            Answer::Entry(_) | Answer::Balance(_) => effects.note("statements are not applied yet".into()),
        }
    }
    effects.orders = orders.finish(ctx, batch)? as u64;
    fixes.finish(ctx, batch)?;
    Ok(effects)
}

async fn returned(ctx: &Ctx<'_>, batch: &mut WriteBatch, orders: &mut Orders, ret: &AchReturn, effects: &mut Effects) -> Result<()> {
    let Some(tracked) = orders.by_trace_number(ctx, &ret.original_trace_number).await? else {
        effects.note(format!("return {} of trace number {}: no payment order carried it", ret.code, ret.original_trace_number));
        return Ok(());
    };
    let reason =
        crate::bank::formats::nacha::return_reasons::return_reason(&ret.code).unwrap_or("Returned by the receiving bank").to_owned();
    let outcome = Outcome::Returned { code: Some(ret.code.clone()), reason };
    match answers::apply(ctx, batch, tracked, outcome).await? {
        Applied::Moved(_) => effects.returns += 1,
        Applied::Skipped(why) => effects.note(format!("return {} of trace number {}: {why}", ret.code, ret.original_trace_number)),
    }
    Ok(())
}

async fn status_report(
    ctx: &Ctx<'_>,
    batch: &mut WriteBatch,
    orders: &mut Orders,
    status: &PaymentStatus,
    effects: &mut Effects,
) -> Result<()> {
    let outcome = match status.outcome {
        StatusOutcome::Accepted => return Ok(()),
        StatusOutcome::Settled => Outcome::Completed,
        StatusOutcome::Rejected => Outcome::Failed { reason: rejection_reason(status) },
    };
    let Some(tracked) = orders.by_end_to_end_id(ctx, &status.end_to_end_id).await? else {
        effects.note(format!("status report for end-to-end id {}: no payment order has it", status.end_to_end_id));
        return Ok(());
    };
    if let Applied::Skipped(why) = answers::apply(ctx, batch, tracked, outcome).await? {
        effects.note(format!("status report for end-to-end id {}: {why}", status.end_to_end_id));
    }
    Ok(())
}

/// `AC04: Closed account number` from a rejection's code and text, whichever it has.
fn rejection_reason(status: &PaymentStatus) -> String {
    match (&status.reason_code, &status.reason) {
        (Some(code), Some(text)) => format!("{code}: {text}"),
        (Some(code), None) => format!("{code}: rejected by the bank"),
        (None, Some(text)) => text.clone(),
        (None, None) => "rejected by the bank".into(),
    }
}

async fn corrected(
    ctx: &Ctx<'_>,
    orders: &mut Orders,
    fixes: &mut Corrections,
    correction: &AchCorrection,
    effects: &mut Effects,
) -> Result<()> {
    let what = format!("notification of change {} of trace number {}", correction.code, correction.original_trace_number);
    let Some(tracked) = orders.by_trace_number(ctx, &correction.original_trace_number).await? else {
        effects.note(format!("{what}: no payment order carried it"));
        return Ok(());
    };
    let account_id = tracked.order.receiving_account_id.to_string();
    let change = match correction::change_of(&correction.code, &correction.corrected_data) {
        Ok(change) => change,
        Err(why) => {
            effects.note(format!("{what}: {why}"));
            return Ok(());
        }
    };
    match fixes.correct(ctx, &account_id, &change).await? {
        Ok(()) => effects.corrections += 1,
        Err(why) => effects.note(format!("{what}: {why}")),
    }
    Ok(())
}
