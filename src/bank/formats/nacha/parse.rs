//! Reading a NACHA file back: every record parsed with its type's rules, and the file checked
//! as a whole (record order, addenda counts and sequence numbers, each batch control and the
//! file control against the totals recomputed from the entries, batch and block counts, and
//! the 9-filled padding). Used for round-trip tests now and for return and notification-of-
//! change files later (SPEC B5), so 98 and 99 addenda are read as well as 05.

use super::codes::SecCode;
use super::field::{NachaError, RECORD_LEN};
use super::records::{Addenda, BatchControl, BatchHeader, EntryDetail, FileControl, FileHeader, Totals};
use super::writer::BLOCKING_FACTOR;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedFile {
    pub header: FileHeader,
    pub batches: Vec<ParsedBatch>,
    pub control: FileControl,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedBatch {
    pub header: BatchHeader,
    pub entries: Vec<ParsedEntry>,
    pub control: BatchControl,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedEntry {
    pub detail: EntryDetail,
    pub addenda: Vec<Addenda>,
}

/// Parses and checks a whole file. Lines end with `\n` or `\r\n`; errors name the line.
pub fn parse(text: &str) -> Result<ParsedFile, NachaError> {
    let lines: Vec<&str> = text.strip_suffix('\n').unwrap_or(text).split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let mut at = Cursor { lines: &lines, next: 0 };
    let header = at.record(FileHeader::parse)?;
    let mut batches = Vec::new();
    while at.peek_type() == Some('5') {
        batches.push(parse_batch(&mut at)?);
    }
    let control_line = at.next + 1;
    let control = at.record(FileControl::parse)?;
    check_padding(&mut at)?;
    let file = ParsedFile { header, batches, control };
    check_file_control(&file, lines.len()).map_err(|e| e.at_line(control_line))?;
    Ok(file)
}

struct Cursor<'a> {
    lines: &'a [&'a str],
    next: usize,
}

impl Cursor<'_> {
    fn peek_type(&self) -> Option<char> {
        self.lines.get(self.next).and_then(|l| l.chars().next())
    }

    /// The next line parsed with `parse`; errors carry the line number.
    fn record<T>(&mut self, parse: impl FnOnce(&str) -> Result<T, super::field::FieldError>) -> Result<T, NachaError> {
        let line_no = self.next + 1;
        let line = self.lines.get(self.next).ok_or_else(|| NachaError::structure("the file ends early").at_line(line_no))?;
        self.next += 1;
        parse(line).map_err(|e| NachaError::from(e).at_line(line_no))
    }
}

fn parse_batch(at: &mut Cursor<'_>) -> Result<ParsedBatch, NachaError> {
    let header = at.record(BatchHeader::parse)?;
    let mut entries = Vec::new();
    while at.peek_type() == Some('6') {
        let line_no = at.next + 1;
        let detail = at.record(|l| EntryDetail::parse(l, header.sec))?;
        let mut addenda = Vec::new();
        while at.peek_type() == Some('7') {
            addenda.push(at.record(Addenda::parse)?);
        }
        let entry = ParsedEntry { detail, addenda };
        check_addenda(&entry, header.sec).map_err(|e| e.at_line(line_no))?;
        entries.push(entry);
    }
    let control_line = at.next + 1;
    let control = at.record(BatchControl::parse)?;
    let batch = ParsedBatch { header, entries, control };
    check_batch_control(&batch).map_err(|e| e.at_line(control_line))?;
    Ok(batch)
}

/// The entry's addenda indicator (and CTX count) match the addenda that follow, and each 05
/// record's sequence numbers are 1, 2, ... and the entry's trace sequence.
fn check_addenda(entry: &ParsedEntry, sec: SecCode) -> Result<(), NachaError> {
    let count = entry.addenda.len();
    let declared = usize::from(entry.detail.addenda_count);
    let matches = if sec == SecCode::Ctx { declared == count } else { (declared == 1) == (count > 0) };
    if !matches || count > sec.max_addenda() {
        return Err(NachaError::structure(format!(
            "the entry declares {declared} addenda and {count} follow ({sec} allows {})",
            sec.max_addenda()
        )));
    }
    for (i, addenda) in entry.addenda.iter().enumerate() {
        if let Addenda::Payment(a) = addenda
            && (usize::from(a.sequence) != i + 1 || a.entry_sequence != entry.detail.trace.sequence())
        {
            return Err(NachaError::structure(format!("addenda {} has sequence {} for entry {}", i + 1, a.sequence, a.entry_sequence)));
        }
    }
    Ok(())
}

fn totals_of<'a>(entries: impl Iterator<Item = &'a ParsedEntry>) -> Totals {
    let mut totals = Totals::default();
    for entry in entries {
        totals.add_entry(&entry.detail, entry.addenda.len() as u64);
    }
    totals
}

fn check_batch_control(batch: &ParsedBatch) -> Result<(), NachaError> {
    let (h, c) = (&batch.header, &batch.control);
    let computed = totals_of(batch.entries.iter());
    if c.totals != computed {
        return Err(NachaError::structure(format!(
            "batch {} control says {:?}, its entries add up to {computed:?}",
            h.batch_number, c.totals
        )));
    }
    if (c.service_class, &c.company_id, &c.odfi, c.batch_number) != (h.service_class, &h.company_id, &h.odfi, h.batch_number) {
        return Err(NachaError::structure(format!(
            "batch {} control does not repeat its header's service class, company id, ODFI and batch number",
            h.batch_number
        )));
    }
    if let Some(e) = batch.entries.iter().find(|e| !h.service_class.admits(e.detail.transaction_code.direction())) {
        return Err(NachaError::structure(format!(
            "entry {} moves money against service class {}",
            e.detail.trace,
            h.service_class.code()
        )));
    }
    Ok(())
}

fn check_file_control(file: &ParsedFile, line_count: usize) -> Result<(), NachaError> {
    let computed = totals_of(file.batches.iter().flat_map(|b| b.entries.iter()));
    let c = &file.control;
    if c.totals != computed {
        return Err(NachaError::structure(format!("file control says {:?}, the entries add up to {computed:?}", c.totals)));
    }
    if c.batch_count != file.batches.len() as u64 {
        return Err(NachaError::structure(format!("file control counts {} batches, the file has {}", c.batch_count, file.batches.len())));
    }
    let lines = line_count as u64;
    if !lines.is_multiple_of(BLOCKING_FACTOR) || c.block_count != lines / BLOCKING_FACTOR {
        return Err(NachaError::structure(format!("{lines} lines are not the {} blocks of 10 the file control counts", c.block_count)));
    }
    Ok(())
}

/// After the file control only 94-nine padding records may follow.
fn check_padding(at: &mut Cursor<'_>) -> Result<(), NachaError> {
    while let Some(line) = at.lines.get(at.next) {
        at.next += 1;
        if line.len() != RECORD_LEN || !line.bytes().all(|b| b == b'9') {
            return Err(NachaError::structure("after the file control only padding records of 94 nines may follow").at_line(at.next));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use time::macros::date;

    use super::super::codes::EntryDirection::{Credit, Debit};
    use super::super::file::NachaFile;
    use super::super::testing::{entry, header, spec};
    use super::*;

    fn text() -> String {
        let ppd = spec(SecCode::Ppd, date!(2026 - 07 - 03));
        let ccd = spec(SecCode::Ccd, date!(2026 - 07 - 06));
        let entries = [
            (ppd.clone(), entry(Credit, "121141822", 12_500, &["INV 1"])),
            (ccd, entry(Debit, "021000021", 700, &[])),
            (ppd.clone(), entry(Debit, "011000015", 300, &[])),
            (ppd, entry(Credit, "011000015", 1, &[])),
        ];
        // 11 records: the file is two blocks, with 9 padding records.
        NachaFile::group(header(), entries).to_text().unwrap()
    }

    /// `text` with `line` (0-based) changed at `at` to `with`.
    fn tamper(text: &str, line: usize, at: usize, with: &str) -> String {
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines[line].replace_range(at..at + with.len(), with);
        lines.join("\n") + "\n"
    }

    #[test]
    fn a_written_file_reads_back_whole() {
        let file = parse(&text()).unwrap();
        assert_eq!(file.batches.len(), 2, "PPD entries grouped into one batch");
        assert_eq!(file.batches[0].entries.len(), 3);
        assert_eq!(file.batches[0].header.service_class, super::super::codes::ServiceClass::Mixed);
        assert_eq!(file.batches[1].header.service_class.code(), 225, "debits only");
        assert_eq!((file.control.totals.credit_cents, file.control.totals.debit_cents), (12_501, 1_000));
        assert!(parse(&text().replace('\n', "\r\n")).is_ok(), "CRLF line endings read too");
    }

    #[test]
    fn tampered_controls_and_structure_are_refused_naming_the_line() {
        let t = text();
        let refused = |bad: String| parse(&bad).unwrap_err().to_string();
        // Line 2 is the PPD credit entry: change its amount.
        assert!(refused(tamper(&t, 2, 29, "0000012501")).starts_with("line 7:"), "batch control no longer adds up");
        // The file control's entry hash (line 9, positions 22-31).
        assert!(refused(tamper(&t, 10, 21, "0000000001")).contains("file control says"));
        assert!(refused(tamper(&t, 10, 7, "000001")).contains("blocks of 10"));
        let mut short: Vec<&str> = t.lines().collect();
        short.pop();
        assert!(refused(short.join("\n")).contains("19 lines"), "padding removed");
        assert!(refused(tamper(&t, 3, 83, "0002")).contains("sequence"), "addenda sequence number");
        assert!(refused(tamper(&t, 2, 78, "0")).contains("declares 0 addenda"));
        assert!(refused(t.replacen("ACME BANK", "ACME BANK\u{e9}", 1)).starts_with("line 1:"));
        assert!(refused(tamper(&t, 12, 0, "8")).starts_with("line 13:"), "only nines after the file control");
    }
}
