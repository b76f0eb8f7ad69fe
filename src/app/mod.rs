//! The application core: the state every handler and worker shares, and the commit machinery
//! (effects, events and the idempotent reply in one transaction). It knows no HTTP: `http/`
//! and `api/` sit above it, the background workers (`webhooks/`, `sandbox/`) beside them, and
//! the domain and the store below.

pub mod commit;
pub mod metrics;
pub mod rate_limit;

use std::sync::Arc;

use crate::base::api_key::{DerivedKey, LIST_CURSOR_KEY_LABEL};
use crate::base::secret_box::SecretBox;
use crate::config::Config;
use crate::domain::Ctx;
use crate::domain::api_key::Scope;
use crate::domain::payment_order::rails::RailRules;
use crate::domain::time::Clock;
use crate::store::Store;

pub use commit::{Committer, WriteContext};

/// What every handler and worker can reach. Cloned by every layer of every request, so one
/// pointer.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

pub struct Shared {
    pub store: Arc<dyn Store>,
    /// The master key ring: seals webhook secrets and the stored replies that carry one (S4).
    pub secrets: Arc<SecretBox>,
    pub clock: Arc<dyn Clock>,
    pub config: Arc<Config>,
    pub metrics: Arc<metrics::Metrics>,
    pub rate_limiter: Arc<rate_limit::RateLimiter>,
    /// Seals list cursors (SPEC L6): derived from the key pepper, so every instance on one
    /// database shares it with nothing new stored.
    pub list_cursor_key: DerivedKey,
    /// The rails' creation-time rules (SPEC B3), from the bank layer.
    pub rails: Option<Arc<dyn RailRules>>,
}

impl AppState {
    /// The state a server runs with: its clock and rate limits come from its configuration.
    pub fn serving(store: Arc<dyn Store>, secrets: Arc<SecretBox>, config: Arc<Config>, rails: Option<Arc<dyn RailRules>>) -> Self {
        AppState(Arc::new(Shared {
            rails,
            secrets,
            clock: config.clock.clone(),
            metrics: Arc::default(),
            rate_limiter: Arc::new(rate_limit::RateLimiter::new(config.rate_limit_per_sec, config.rate_limit_burst)),
            list_cursor_key: store.key_hasher().derive(LIST_CURSOR_KEY_LABEL),
            store,
            config,
        }))
    }

    /// The domain's view of a request: store, tenant, and the time it runs at.
    pub fn ctx<'a>(&'a self, scope: &'a Scope) -> Ctx<'a> {
        Ctx { store: self.store.as_ref(), rails: self.rails.as_deref(), secrets: &self.secrets, scope, now: self.clock.now() }
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}
