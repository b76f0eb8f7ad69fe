//! The bank layer (SPEC B): how live payment orders become files for a bank and how its
//! answers come back. So far it holds the pure parts, with no store, clock or network:
//!
//! - `calendar`: Federal Reserve banking days and the ACH effective entry date (B3).
//! - `formats`: the file formats; `formats::nacha` writes and reads NACHA ACH files, and
//!   `formats::iso20022` writes `pain.001.001.09` for wire, RTP and SEPA (B3).
//! - `ach`: what an ACH payment order must carry, checked at creation ([`ach::validate_order_for_ach`])
//!   and turned into an entry at cut-off.
//!
//! - `rails`: the rails' rules at order creation, as the domain asks for them (B3).
//! - `connection`: registering a bank connection from its TOML config (B1).
//!
//! Cut-offs (B2), transports and the file records (B6) come next and sit on these.

pub mod ach;
pub mod calendar;
pub mod connection;
pub mod formats;
pub mod rails;
