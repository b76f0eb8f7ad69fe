//! The domain: pure types and rules. It knows the store trait, never HTTP or SQL.

pub mod api_key;
pub mod keys;
pub mod time;
