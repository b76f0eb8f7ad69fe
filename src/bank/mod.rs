//! The bank layer (SPEC B): how live payment orders become files for a bank and how its
//! answers come back.
//!
//! - `calendar`: Federal Reserve banking days and the ACH effective entry date (B3).
//! - `formats`: the file formats; `formats::nacha` writes and reads NACHA ACH files, and
//!   `formats::iso20022` writes `pain.001.001.09` for wire, RTP and SEPA (B3). The banks'
//!   answers (B5) are read by [`formats::read`] (NACHA returns and notifications of change,
//!   `pain.002`, `camt.053`, `camt.054`) into `domain::bank_answer`, and each has a writer for
//!   the sandbox bank (B7).
//! - `ach`: what an ACH payment order must carry, checked at creation ([`ach::validate_order_for_ach`])
//!   and turned into an entry at cut-off.
//! - `rails`: the rails' rules at order creation, as the domain asks for them (B3).
//! - `connection`: registering a bank connection from its TOML config (B1).
//! - `transport`: how files reach the bank and come back (B2, B5): the [`transport::Transport`]
//!   trait with a local folder pair (`directory`) and SFTP with a pinned host key (`sftp`). No
//!   store and no HTTP; the cut-off and inbound workers drive it.
//! - `cutoff`: cut-offs (B2, B4): approved live orders claimed into files exactly once, the
//!   files written, uploaded and recorded (B6); the scheduled worker of `payrail serve`.

pub mod ach;
pub mod calendar;
pub mod connection;
pub mod cutoff;
pub mod formats;
pub mod inbound;
pub mod rails;
pub mod transport;
