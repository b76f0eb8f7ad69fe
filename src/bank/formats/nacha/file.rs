//! A NACHA file held in memory: batches grouped from entries in any order, written through the
//! streaming writer. For small files (tests, the sandbox bank, a handful of orders); a cut-off
//! of many orders streams with [`super::writer::NachaWriter`] instead.

use std::io::Write;

use super::codes::ServiceClass;
use super::field::NachaError;
use super::records::FileHeader;
use super::writer::{BatchSpec, EntryInput, FileSummary, NachaWriter};

/// One batch: its spec and its entries, in the order they will be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub spec: BatchSpec,
    pub entries: Vec<EntryInput>,
}

/// A whole file before writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NachaFile {
    pub header: FileHeader,
    pub batches: Vec<Batch>,
}

impl NachaFile {
    /// Groups `entries` into one batch per spec (company, SEC code, effective date, same-day
    /// flag...), batches in the order their first entry came. The spec's service class is not
    /// part of the key: each batch gets the narrowest class its entries allow (220 credits only,
    /// 225 debits only, 200 mixed).
    pub fn group(header: FileHeader, entries: impl IntoIterator<Item = (BatchSpec, EntryInput)>) -> Self {
        let mut batches: Vec<Batch> = Vec::new();
        for (mut spec, entry) in entries {
            spec.service_class = ServiceClass::Mixed;
            match batches.iter_mut().find(|b| b.spec == spec) {
                Some(batch) => batch.entries.push(entry),
                None => batches.push(Batch { spec, entries: vec![entry] }),
            }
        }
        for batch in &mut batches {
            batch.spec.service_class = narrowest(&batch.entries);
        }
        NachaFile { header, batches }
    }

    /// Writes the file to `out` (controls, blocking and padding included).
    pub fn write_to<W: Write>(&self, out: W) -> Result<(W, FileSummary), NachaError> {
        let mut writer = NachaWriter::new(out, &self.header)?;
        for batch in &self.batches {
            for entry in &batch.entries {
                writer.push(&batch.spec, entry.clone())?;
            }
        }
        writer.finish()
    }

    /// The file as text.
    pub fn to_text(&self) -> Result<String, NachaError> {
        let (bytes, _) = self.write_to(Vec::new())?;
        String::from_utf8(bytes).map_err(|_| NachaError::structure("the writer produced non-ASCII text"))
    }
}

fn narrowest(entries: &[EntryInput]) -> ServiceClass {
    use super::codes::EntryDirection::{Credit, Debit};
    let has = |d| entries.iter().any(|e| e.transaction_code.direction() == d);
    ServiceClass::narrowest(has(Credit), has(Debit))
}
