//! Bank file formats, each pure (no store, no clock, no I/O beyond an `io::Write` given to it),
//! one type per record or message: `nacha` for ACH, `iso20022` (`pain.001.001.09`) for wire,
//! RTP and SEPA (SPEC B3), and the banks' answers (SPEC B5): NACHA returns and notifications of
//! change (`nacha::answers`), `pain.002` status reports (`iso20022::pain002`), `camt.053` and
//! `camt.054` statements (`iso20022::camt`), all read through [`answers::read`], which tells the
//! format from the bytes. Each answer format also has a writer, for the sandbox bank (B7).

pub mod answer_error;
pub mod answers;
pub mod iso20022;
pub mod nacha;

pub use answers::{AnswerError, read};
