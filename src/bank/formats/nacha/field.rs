//! NACHA fields: how one field of a 94-character record is written and read, and the errors
//! that name it.
//!
//! NACHA has two kinds of field. Alphanumeric fields are left-justified and space-filled; their
//! characters must be printable ASCII (NACHA allows every character above hex 1F; we also refuse
//! DEL and anything outside ASCII), and Payrail writes letters upper case. Numeric fields are
//! right-justified and zero-filled digits. A value that does not fit its field is refused, never
//! cut: the caller decides whether to shorten (see `bank::ach` for names).

use std::fmt;

/// Characters in one record, without the line ending.
pub const RECORD_LEN: usize = 94;

/// One field of one record refused, with why. `field` is the NACHA field's snake_case name
/// (`receiver_name`, `dfi_account_number`, ...), which `bank::ach` maps to the order field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{record} {field}: {reason}")]
pub struct FieldError {
    pub record: &'static str,
    pub field: &'static str,
    pub reason: String,
}

impl FieldError {
    pub fn new(record: &'static str, field: &'static str, reason: impl Into<String>) -> Self {
        FieldError { record, field, reason: reason.into() }
    }
}

/// Anything that stops a file from being written or read.
#[derive(Debug, thiserror::Error)]
pub enum NachaError {
    /// A field of a record (writing or reading) is not what NACHA allows.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// A file being read is malformed at `line` (1-based).
    #[error("line {line}: {source}")]
    Line { line: usize, source: Box<NachaError> },
    /// Records out of order, totals that do not add up, or a writer used out of order.
    #[error("{0}")]
    Structure(String),
    #[error("writing the file: {0}")]
    Io(#[from] std::io::Error),
}

impl NachaError {
    pub fn structure(message: impl fmt::Display) -> Self {
        NachaError::Structure(message.to_string())
    }

    pub fn at_line(self, line: usize) -> Self {
        NachaError::Line { line, source: Box::new(self) }
    }

    /// The field error underneath, if the failure is one field's.
    pub fn field(&self) -> Option<&FieldError> {
        match self {
            NachaError::Field(err) => Some(err),
            NachaError::Line { source, .. } => source.field(),
            _ => None,
        }
    }
}

/// Is `c` a character NACHA accepts in an alphanumeric field (printable ASCII)?
pub fn is_nacha_char(c: char) -> bool {
    (' '..='~').contains(&c)
}

/// `value` as NACHA alphanumeric text: upper case, only allowed characters, at most `width`.
pub fn alpha_text(record: &'static str, field: &'static str, value: &str, width: usize) -> Result<String, FieldError> {
    if let Some(bad) = value.chars().find(|c| !is_nacha_char(*c)) {
        return Err(FieldError::new(record, field, format!("character {bad:?} is not allowed in a NACHA file (printable ASCII only)")));
    }
    if value.len() > width {
        return Err(FieldError::new(record, field, format!("at most {width} characters (got {})", value.len())));
    }
    Ok(value.to_ascii_uppercase())
}

/// Writes a record field by field, checking each, and ends at exactly [`RECORD_LEN`].
#[derive(Debug)]
pub struct LineWriter {
    record: &'static str,
    line: String,
}

impl LineWriter {
    pub fn new(record: &'static str, type_code: char) -> Self {
        let mut line = String::with_capacity(RECORD_LEN);
        line.push(type_code);
        LineWriter { record, line }
    }

    /// A left-justified, space-filled alphanumeric field.
    pub fn alpha(&mut self, field: &'static str, value: &str, width: usize) -> Result<&mut Self, FieldError> {
        let text = alpha_text(self.record, field, value, width)?;
        self.line.push_str(&format!("{text:<width$}"));
        Ok(self)
    }

    /// A right-justified, zero-filled numeric field.
    pub fn numeric(&mut self, field: &'static str, value: u64, width: usize) -> Result<&mut Self, FieldError> {
        let text = format!("{value:0>width$}");
        if text.len() > width {
            return Err(FieldError::new(self.record, field, format!("{value} does not fit in {width} digits")));
        }
        self.line.push_str(&text);
        Ok(self)
    }

    /// Text already known to be valid and exactly `width` long (codes, routing digits, dates).
    pub fn exact(&mut self, field: &'static str, value: &str, width: usize) -> Result<&mut Self, FieldError> {
        if value.len() != width || !value.chars().all(is_nacha_char) {
            return Err(FieldError::new(self.record, field, format!("must be exactly {width} characters (got {value:?})")));
        }
        self.line.push_str(value);
        Ok(self)
    }

    pub fn blank(&mut self, width: usize) -> &mut Self {
        self.line.push_str(&" ".repeat(width));
        self
    }

    pub fn finish(&mut self) -> Result<String, FieldError> {
        if self.line.len() != RECORD_LEN {
            let reason = format!("record is {} characters, not {RECORD_LEN}", self.line.len());
            return Err(FieldError::new(self.record, "record", reason));
        }
        Ok(std::mem::take(&mut self.line))
    }
}

/// Reads a record field by field, in order, from a line already checked to be 94 ASCII chars.
#[derive(Debug)]
pub struct LineReader<'a> {
    record: &'static str,
    line: &'a str,
    at: usize,
}

impl<'a> LineReader<'a> {
    /// `line` as a record of `type_code`, or an error if its length or type is wrong.
    pub fn new(record: &'static str, type_code: char, line: &'a str) -> Result<Self, FieldError> {
        if line.len() != RECORD_LEN || !line.chars().all(is_nacha_char) {
            let reason = format!("a record is {RECORD_LEN} printable ASCII characters (got {} bytes)", line.len());
            return Err(FieldError::new(record, "record", reason));
        }
        if !line.starts_with(type_code) {
            return Err(FieldError::new(record, "record_type_code", format!("expected {type_code}")));
        }
        Ok(LineReader { record, line, at: 1 })
    }

    /// The next `width` characters as they are.
    pub fn raw(&mut self, width: usize) -> &'a str {
        let text = &self.line[self.at..self.at + width];
        self.at += width;
        text
    }

    /// An alphanumeric field, trailing spaces removed.
    pub fn alpha(&mut self, width: usize) -> String {
        self.raw(width).trim_end().to_owned()
    }

    /// A numeric field: digits only (NACHA zero-fills, so spaces are refused).
    pub fn numeric(&mut self, field: &'static str, width: usize) -> Result<u64, FieldError> {
        let text = self.raw(width);
        if !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.error(field, format!("must be {width} digits (got {text:?})")));
        }
        text.parse().map_err(|_| self.error(field, format!("must be {width} digits (got {text:?})")))
    }

    pub fn error(&self, field: &'static str, reason: impl Into<String>) -> FieldError {
        FieldError::new(self.record, field, reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpha_fields_are_upper_case_left_justified_and_refuse_what_nacha_forbids() {
        let mut w = LineWriter::new("test", '1');
        w.alpha("name", "Acme corp", 12).unwrap();
        assert_eq!(w.line, "1ACME CORP   ");
        let err = w.alpha("name", "Zoë", 5).unwrap_err();
        assert_eq!((err.field, err.reason.contains("'ë'")), ("name", true));
        assert!(w.alpha("name", "tab\there", 10).is_err(), "control characters are refused");
        assert_eq!(w.alpha("name", "toolong", 6).unwrap_err().reason, "at most 6 characters (got 7)");
    }

    #[test]
    fn numeric_fields_are_zero_filled_and_refuse_overflow() {
        let mut w = LineWriter::new("test", '6');
        w.numeric("amount", 12_500, 10).unwrap();
        assert_eq!(w.line, "60000012500");
        assert!(w.numeric("amount", 10_000_000_000, 10).is_err());
        assert!(w.finish().is_err(), "a short record is refused");
    }

    #[test]
    fn readers_refuse_short_lines_wrong_types_and_spaces_in_numbers() {
        assert!(LineReader::new("file_header", '1', "1 short").is_err());
        let line = format!("5{}", " ".repeat(93));
        assert_eq!(LineReader::new("entry_detail", '6', &line).err().unwrap().field, "record_type_code");
        let mut r = LineReader::new("batch_header", '5', &line).unwrap();
        assert_eq!(r.numeric("service_class_code", 3).unwrap_err().field, "service_class_code");
    }
}
