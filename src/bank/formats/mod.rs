//! Bank file formats, each pure (no store, no clock, no I/O beyond an `io::Write` given to it),
//! one type per record or message: `nacha` for ACH, `iso20022` (`pain.001.001.09`) for wire,
//! RTP and SEPA (SPEC B3).

pub mod iso20022;
pub mod nacha;
