//! Value types below both the domain and the store: instants and clocks, tenancy (organization
//! and mode), and API key records with their keyed hash. The domain gives them rules and the
//! store keeps them; neither owns them, so neither has to import the other to name them.

pub mod api_key;
pub mod time;
