//! Bank file formats, each pure (no store, no clock, no I/O beyond an `io::Write` given to it):
//! `nacha` for ACH (SPEC B3). ISO 20022 `pain.001` for wire, RTP and SEPA comes beside it.

pub mod nacha;
