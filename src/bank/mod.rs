//! The bank layer (SPEC B): how live payment orders become files for a bank and how its
//! answers come back. So far it holds the pure parts, with no store, clock or network:
//!
//! - `calendar`: Federal Reserve banking days and the ACH effective entry date (B3).
//! - `formats`: the file formats; `formats::nacha` writes and reads NACHA ACH files, and
//!   `formats::iso20022` writes `pain.001.001.09` for wire, RTP and SEPA (B3).
//! - `ach`: what an ACH payment order must carry, checked at creation ([`ach::validate_order_for_ach`])
//!   and turned into an entry at cut-off.
//!
//! - `connection`: registering a bank connection from its TOML config (B1).
//! - `cutoff`: cut-offs (B2, B4): approved live orders claimed into files exactly once, the
//!   files written, uploaded and recorded (B6); the scheduled worker of `payrail serve`.

pub mod ach;
pub mod calendar;
pub mod connection;
pub mod cutoff;
pub mod formats;
