//! The error of a bank's answer file that cannot be read (SPEC B5): its format, where, and
//! what is wrong. Its own module so that the format readers and `formats::answers` (which
//! dispatches to them) both use it without importing each other.

use super::iso20022::read::XmlError;
use crate::domain::bank_answer::AnswerFormat;

/// Why an answer file was refused: its format (None when it could not be told), where
/// (`line 7`, or `Document/BkToCstmrStmt/Stmt/Ntry/Amt (line 40)`), and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {at}: {message}", format.map_or("unknown format", AnswerFormat::as_str))]
pub struct AnswerError {
    pub format: Option<AnswerFormat>,
    pub at: String,
    pub message: String,
}

impl AnswerError {
    /// An error of a file of `format` (None: not told yet) at `at`.
    pub fn new(format: Option<AnswerFormat>, at: impl Into<String>, message: impl Into<String>) -> Self {
        AnswerError { format, at: at.into(), message: message.into() }
    }

    /// An XML reader's error, at its element and line.
    pub fn xml(format: AnswerFormat, err: XmlError) -> Self {
        let at = if err.path.is_empty() { format!("line {}", err.line) } else { format!("{} (line {})", err.path, err.line) };
        AnswerError::new(Some(format), at, err.message)
    }
}
