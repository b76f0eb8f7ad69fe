//! A live payment order carried to its bank in a file (SPEC B2, B4): claimed into the file
//! (`approved` -> `processing`, event `begin_processing`), then `sent` once the file is uploaded
//! (event `sent`). The order records the file that carried it in
//! `vendor_attributes.bank_file_id` (and the `bank_file_id` term, so a file's orders can be
//! listed), and an ACH order its trace number in `reference_numbers`, in Modern Treasury's
//! `payment_reference` shape (the `reference_number` term finds it).
//!
//! Each move is a replace guarded by the version the caller read: if anyone changed the order
//! since (a client's cancel won the race), the batch fails with a conflict and the order is
//! left as that other writer left it.

use serde_json::{Map, Value, json};

use super::ops::{parse, to_json};
use super::status::{Actor, Status};
use super::{KIND, PaymentOrder};
use crate::domain::api_key::Scope;
use crate::domain::common::new_id;
use crate::domain::event;
use crate::domain::time::Timestamp;
use crate::error::Result;
use crate::store::{ObjectRecord, StoredObject, Write};

/// The key of `vendor_attributes` (and the term) naming the bank file that carried the order.
pub const BANK_FILE_TERM: &str = "bank_file_id";
/// MT's reference number type of an ACH entry's trace number.
pub const ACH_TRACE_NUMBER: &str = "ach_trace_number";

/// The bank file that carried `order`, if one did.
pub fn bank_file_id(order: &PaymentOrder) -> Option<&str> {
    order.vendor_attributes.as_ref()?.get(BANK_FILE_TERM)?.as_str()
}

/// When the order's ACH entry was sent: when its file gave it its trace number.
pub fn sent_at(order: &PaymentOrder) -> Option<Timestamp> {
    let trace = order.reference_numbers.iter().find(|r| r["reference_number_type"] == ACH_TRACE_NUMBER)?;
    Timestamp::parse_rfc3339(trace["created_at"].as_str()?)
}

/// The stored order, typed.
pub fn read(stored: &StoredObject) -> Result<PaymentOrder> {
    parse(stored)
}

/// The order's claim into the file `file_id`: its replace (guarded by `version`, the version it
/// was read at) and its `begin_processing` event. Refused unless the order is approved.
pub fn claim(scope: &Scope, mut order: PaymentOrder, version: i64, file_id: &str, now: Timestamp) -> Result<[Write; 2]> {
    order.status = order.status.transition(Status::Processing, Actor::Bank)?;
    let mut attributes = match order.vendor_attributes.take() {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    attributes.insert(BANK_FILE_TERM.into(), Value::String(file_id.to_owned()));
    order.vendor_attributes = Some(Value::Object(attributes));
    order.updated_at = now;
    moved(scope, &order, version, Status::Processing, now)
}

/// A reference number the bank file gave the order (an ACH trace number).
#[derive(Debug, Clone, Copy)]
pub struct Reference<'a> {
    pub number: &'a str,
    pub kind: &'static str,
}

/// The order's move to `sent` once the file `file_id` that carries it is uploaded, with the
/// reference the file gave it; `None` when the order is no longer `processing` in that file
/// (already marked by an earlier attempt).
pub fn sent(
    scope: &Scope,
    stored: &StoredObject,
    file_id: &str,
    reference: Option<Reference<'_>>,
    now: Timestamp,
) -> Result<Option<[Write; 2]>> {
    let mut order = parse(stored)?;
    if order.status != Status::Processing || bank_file_id(&order) != Some(file_id) {
        return Ok(None);
    }
    order.status = order.status.transition(Status::Sent, Actor::Bank)?;
    if let Some(reference) = reference {
        order.reference_numbers.push(json!({
            "id": new_id(),
            "object": "payment_reference",
            "live_mode": scope.live_mode,
            "reference_number": reference.number,
            "reference_number_type": reference.kind,
            "created_at": now,
            "updated_at": now,
        }));
    }
    order.updated_at = now;
    moved(scope, &order, stored.version, Status::Sent, now).map(Some)
}

fn moved(scope: &Scope, order: &PaymentOrder, version: i64, to: Status, now: Timestamp) -> Result<[Write; 2]> {
    let json = to_json(order)?;
    let record = ObjectRecord {
        id: order.id.to_string(),
        kind: KIND,
        scope: scope.clone(),
        parent_id: None,
        created_at: order.created_at,
        doc: json.clone(),
        terms: order.terms(),
    };
    let event = event::record(scope, KIND, to.event_name(), order.id.as_str(), &json, now)?;
    Ok([Write::Replace { record, expected_version: version }, Write::Insert(event)])
}
