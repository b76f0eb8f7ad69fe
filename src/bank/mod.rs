//! The bank layer: the files Payrail exchanges with banks (NACHA, ISO 20022), and next their
//! transports and the cut-off and inbound workers.

pub mod formats;
