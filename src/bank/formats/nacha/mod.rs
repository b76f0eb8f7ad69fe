//! NACHA ACH files (SPEC B3): records, the streaming writer, an in-memory file and the parser.
//!
//! - `field`: how a field is written and read (alphanumeric upper case and space-filled,
//!   numeric zero-filled, printable ASCII only) and the errors that name the field.
//! - `codes`: transaction codes (22/27, 32/37, prenotes 23/28/33/38; 21/26/31/36 read only),
//!   SEC codes (PPD, CCD, WEB, CTX; COR read only), service classes, file id modifiers
//!   (A-Z then 0-9) and trace numbers (ODFI + 7-digit sequence).
//! - `records`: one type per record (1, 5, 6, 7 with 05/98/99, 8, 9), 94 characters each.
//! - `writer`: [`NachaWriter`], which streams a file to any `io::Write`, keeping the control
//!   totals as it goes; entries must arrive grouped by batch.
//! - `file`: [`NachaFile`], batches grouped in memory, written through the writer.
//! - `parse`: [`parse()`], which reads a file back and checks every count, hash and total.
//! - `answers`: return and notification-of-change files (SPEC B5, B7): [`answers::read`] into
//!   `domain::bank_answer` values, and [`answers::AnswerWriter`] for the sandbox bank.
//!
//! This module imports only `domain` (routing numbers) and `base`; the mapping from a payment
//! order to an entry, and its 422s, is `bank::ach`.

pub mod answers;
pub mod codes;
pub mod field;
pub mod file;
pub mod parse;
pub mod records;
pub mod return_reasons;
pub mod writer;

pub use codes::{AccountType, EntryDirection, FileIdModifier, SecCode, ServiceClass, TraceNumber, TransactionCode};
pub use field::{FieldError, NachaError};
pub use file::{Batch, NachaFile};
pub use parse::{ParsedBatch, ParsedEntry, ParsedFile, parse};
pub use records::{
    Addenda, BatchControl, BatchHeader, EntryDetail, FileControl, FileHeader, NotificationAddenda, PaymentAddenda, ReturnAddenda, Totals,
};
pub use writer::{BLOCKING_FACTOR, BatchSpec, EntryInput, FileSummary, NachaWriter};

#[cfg(test)]
mod testing;
