//! In-process idempotency claims for the SQLite store.
//!
//! One server owns a SQLite file (it holds the lock file), so the set of requests in flight lives
//! in that server's memory: a crash forgets it with the process, and no key stays stuck (SPEC I8).
//! The lease still bounds a claim whose owner task was lost without releasing it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::base::time::Timestamp;
use crate::store::ClaimToken;

/// Stripes of the reply generation (a power of two).
const STRIPES: usize = 1024;

#[derive(Debug)]
pub struct Claims {
    held: Mutex<HashMap<(String, String), Held>>,
    next_nonce: AtomicU64,
    /// Bumped, per stripe of keys, whenever an owner commits a reply, before it lets go of its
    /// claim. A claimant that sees its stripe unchanged since before its first reply lookup
    /// knows no reply for its key can have landed since, and skips the second lookup.
    replies: Box<[AtomicU64]>,
}

impl Default for Claims {
    fn default() -> Self {
        Claims { held: Mutex::default(), next_nonce: AtomicU64::new(0), replies: (0..STRIPES).map(|_| AtomicU64::new(0)).collect() }
    }
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

    fn stripe(&self, api_key_id: &str, key: &str) -> &AtomicU64 {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one((api_key_id, key));
        &self.replies[(hash as usize) & (STRIPES - 1)]
    }

    /// The key's reply generation: read it before looking for a stored reply.
    pub fn reply_generation(&self, api_key_id: &str, key: &str) -> u64 {
        self.stripe(api_key_id, key).load(Ordering::SeqCst)
    }

    /// Records that the holder of `token` committed its reply (call before releasing).
    pub fn note_reply(&self, token: &ClaimToken) {
        self.stripe(&token.api_key_id, &token.key).fetch_add(1, Ordering::SeqCst);
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

    #[test]
    fn i4_a_committed_reply_changes_its_keys_generation() {
        let claims = Claims::default();
        let t0 = Timestamp::from_micros(0);
        let before = claims.reply_generation("k1", "idem");
        let token = claims.try_take("k1", "idem", t0, 1000).unwrap();
        assert_eq!(claims.reply_generation("k1", "idem"), before, "claiming alone changes nothing");
        claims.note_reply(&token);
        assert_ne!(claims.reply_generation("k1", "idem"), before);
    }
}
