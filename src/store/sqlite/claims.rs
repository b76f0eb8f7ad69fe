//! In-process idempotency claims for the SQLite store.
//!
//! One server owns a SQLite file (it holds the lock file), so the set of requests in flight lives
//! in that server's memory: a crash forgets it with the process, and no key stays stuck (SPEC I8).
//! The lease still bounds a claim whose owner task was lost without releasing it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::domain::time::Timestamp;
use crate::store::ClaimToken;

#[derive(Debug, Default)]
pub struct Claims {
    held: Mutex<HashMap<(String, String), Held>>,
    next_nonce: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
struct Held {
    nonce: u64,
    lease_until: Timestamp,
}

impl Claims {
    /// Takes the key unless a live claim holds it.
    pub fn try_take(&self, api_key_id: &str, key: &str, now: Timestamp, lease_ms: u64) -> Option<ClaimToken> {
        let nonce = self.next_nonce.fetch_add(1, Ordering::Relaxed);
        let lease_until = Timestamp::from_micros(now.as_micros().saturating_add((lease_ms as i64).saturating_mul(1000)));
        let mut held = self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let slot = (api_key_id.to_owned(), key.to_owned());
        if held.get(&slot).is_some_and(|h| h.lease_until > now) {
            return None;
        }
        held.insert(slot, Held { nonce, lease_until });
        Some(ClaimToken { api_key_id: api_key_id.to_owned(), key: key.to_owned(), nonce })
    }

    pub fn renew(&self, token: &ClaimToken, now: Timestamp, lease_ms: u64) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match held.get_mut(&(token.api_key_id.clone(), token.key.clone())) {
            Some(h) if h.nonce == token.nonce => {
                h.lease_until = Timestamp::from_micros(now.as_micros().saturating_add((lease_ms as i64).saturating_mul(1000)));
                true
            }
            _ => false,
        }
    }

    /// Whether `token` is still the key's current claim.
    pub fn holds(&self, token: &ClaimToken) -> bool {
        let held = self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        held.get(&(token.api_key_id.clone(), token.key.clone())).is_some_and(|h| h.nonce == token.nonce)
    }

    pub fn release(&self, token: &ClaimToken) {
        let mut held = self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let slot = (token.api_key_id.clone(), token.key.clone());
        if held.get(&slot).is_some_and(|h| h.nonce == token.nonce) {
            held.remove(&slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i6_second_claim_waits_and_i8_lease_expires() {
        let claims = Claims::default();
        let t0 = Timestamp::from_micros(0);
        let token = claims.try_take("k1", "idem", t0, 1000).unwrap();
        assert!(claims.try_take("k1", "idem", t0, 1000).is_none());
        assert!(claims.try_take("k2", "idem", t0, 1000).is_some(), "scoped by API key (I2)");
        let late = claims.try_take("k1", "idem", Timestamp::from_micros(1_000_000), 1000).unwrap();
        claims.release(&token); // stale token: must not free the new owner's claim
        assert!(claims.try_take("k1", "idem", Timestamp::from_micros(1_000_001), 1000).is_none());
        claims.release(&late);
        assert!(claims.try_take("k1", "idem", Timestamp::from_micros(1_000_001), 1000).is_some());
    }
}
