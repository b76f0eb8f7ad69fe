//! Value types below both the domain and the store: instants and clocks, tenancy (organization
//! and mode), API key records with their keyed hash, the master key ring that seals secrets at
//! rest (`secret_box`), owner-only files (`private_fs`) and the workers' repeated log lines held
//! back (`log_limit`). The domain gives them rules and the
//! store keeps them; neither owns them, so neither has to import the other to name them.

pub mod api_key;
pub mod ledger;
pub mod log_limit;
pub mod private_fs;
pub mod secret_box;
pub mod time;
