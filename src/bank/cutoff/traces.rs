//! A connection's ACH trace numbers, unique across its files (SPEC B3, B5).
//!
//! NACHA asks a trace number to be unique within its file; a return names its entry by the
//! trace number alone, weeks later, so Payrail keeps them unique across all of a connection's
//! files: each ACH file takes the next range of 7-digit sequences from a counter of the
//! connection when it is written, in the commit that records it written. A file whose range
//! would pass 9,999,999 starts again at 1, and an answer's trace number then names the newest
//! order that carried it (`domain::payment_order::answers::Orders`).

use serde::{Deserialize, Serialize};

use crate::bank::formats::nacha::TraceNumber;
use crate::base::api_key::Scope;
use crate::base::time::Timestamp;
use crate::domain::kinds;
use crate::error::{Error, Result};
use crate::store::{ObjectRecord, Store, Write};

pub const KIND: &str = kinds::BANK_TRACE_COUNTER;

#[derive(Debug, Serialize, Deserialize)]
struct Counter {
    /// The sequence the connection's next ACH entry takes.
    next: u32,
    updated_at: Timestamp,
}

/// Where a file of `count` entries starts if the counter stands at `next`, and where the
/// counter stands after it.
pub fn range(next: u32, count: u64) -> Result<(u32, u32)> {
    let max = TraceNumber::SEQUENCE_MAX;
    let count = u32::try_from(count).ok().filter(|c| *c <= max).ok_or_else(|| {
        Error::internal(format!("an ACH file of {count} entries: trace numbers have 7 digits, at most {max} entries a file"))
    })?;
    let next = if (1..=max).contains(&next) { next } else { 1 };
    let start = if u64::from(next) + u64::from(count) - 1 > u64::from(max) { 1 } else { next };
    let after = start + count;
    Ok((start, if after > max { 1 } else { after }))
}

/// Takes the next `count` trace sequences of the connection: the first of them, and the write
/// that moves the counter past them (to commit with the file that uses them; a racing commit
/// fails on the counter's version).
pub async fn reserve(store: &dyn Store, scope: &Scope, connection_id: &str, count: u64, now: Timestamp) -> Result<(u32, Write)> {
    let id = format!("{connection_id}.traces");
    let stored = store.get(KIND, scope, &id).await?;
    let (next, version) = match &stored {
        Some(s) => {
            let counter: Counter =
                serde_json::from_str(&s.doc).map_err(|e| Error::internal(format!("trace counter of {connection_id}: {e}")))?;
            (counter.next, Some(s.version))
        }
        None => (1, None),
    };
    let (start, after) = range(next, count)?;
    let doc =
        serde_json::to_string(&Counter { next: after, updated_at: now }).map_err(|e| Error::internal(format!("trace counter: {e}")))?;
    let record = ObjectRecord {
        id,
        kind: KIND,
        scope: scope.clone(),
        parent_id: Some(connection_id.to_owned()),
        created_at: now,
        doc,
        terms: Vec::new(),
    };
    let write = match version {
        Some(expected_version) => Write::Replace { record, expected_version },
        None => Write::Insert(record),
    };
    Ok((start, write))
}

#[cfg(test)]
mod tests {
    use super::range;

    #[test]
    fn b3_files_take_consecutive_ranges_and_wrap_before_passing_seven_digits() {
        assert_eq!(range(1, 3).unwrap(), (1, 4));
        assert_eq!(range(4, 2).unwrap(), (4, 6));
        assert_eq!(range(9_999_998, 2).unwrap(), (9_999_998, 1), "the last two sequences, then back to 1");
        assert_eq!(range(9_999_998, 3).unwrap(), (1, 4), "a range never wraps within a file");
        assert_eq!(range(0, 1).unwrap(), (1, 2), "a counter out of range starts at 1");
        assert_eq!(range(5, 0).unwrap(), (5, 5));
        assert!(range(1, 10_000_000).is_err());
    }
}
