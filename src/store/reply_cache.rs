//! Replies this process committed, kept in memory for the retries that follow them (SPEC I4).
//!
//! A stored reply never changes: it is only purged once expired, or replaced by a new one after
//! it expired. So a reply can be answered from memory while it is comfortably unexpired; near
//! its expiry ([`EXPIRY_MARGIN`], more than any sane clock skew between instances) the database
//! decides. Entries are added when this process commits a reply (write-through), never from
//! reads: the cache holds what clients of this process are likely to retry, and lookups of
//! anything else measure the database. Bounded by count and by bytes, oldest out first.
//!
//! A sealed reply (one carrying a secret, S4) is the exception to "never changes": a master key
//! rewrap re-seals it, and the key it was sealed under may then be retired. So sealed replies
//! are never cached; they are rare (a webhook endpoint's creation), and the database always holds
//! them under a key the ring still has.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::StoredReply;
use crate::base::time::Timestamp;

const ENTRIES_MAX: usize = 16_384;
const BYTES_MAX: usize = 32 * 1024 * 1024;
/// Replies this close to expiry are looked up in the database.
const EXPIRY_MARGIN_S: i64 = 300;

#[derive(Debug, Default)]
pub struct ReplyCache(Mutex<Inner>);

#[derive(Debug, Default)]
struct Inner {
    by_key: HashMap<(String, String), StoredReply>,
    order: VecDeque<(String, String)>,
    bytes: usize,
}

impl ReplyCache {
    pub fn get(&self, api_key_id: &str, key: &str, now: Timestamp) -> Option<StoredReply> {
        let inner = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // A borrowed lookup would need a custom key type; two small strings are cheap next to
        // the SQL lookup this replaces.
        let reply = inner.by_key.get(&(api_key_id.to_owned(), key.to_owned()))?;
        (reply.expires_at.plus_secs(-EXPIRY_MARGIN_S) > now).then(|| reply.clone())
    }

    /// Remembers replies that have just been committed.
    pub fn insert_committed<'a>(&self, replies: impl IntoIterator<Item = &'a StoredReply>) {
        let mut inner = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for reply in replies.into_iter().filter(|r| !crate::base::secret_box::is_sealed(&r.body)) {
            let slot = (reply.api_key_id.clone(), reply.key.clone());
            inner.bytes += reply.body.len();
            if let Some(old) = inner.by_key.insert(slot.clone(), reply.clone()) {
                inner.bytes -= old.body.len();
            } else {
                inner.order.push_back(slot);
            }
            while inner.by_key.len() > ENTRIES_MAX || inner.bytes > BYTES_MAX {
                let Some(oldest) = inner.order.pop_front() else { break };
                if let Some(evicted) = inner.by_key.remove(&oldest) {
                    inner.bytes -= evicted.body.len();
                }
            }
        }
    }
}

/// The replies a batch saves.
pub fn saved(writes: &[super::Write]) -> impl Iterator<Item = &StoredReply> {
    writes.iter().filter_map(|w| match w {
        super::Write::SaveReply(reply) => Some(reply),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(key: &str, expires_s: i64, body: usize) -> StoredReply {
        StoredReply {
            api_key_id: "k".into(),
            key: key.into(),
            status: 201,
            content_type: "application/json".into(),
            body: bytes::Bytes::from(vec![b'x'; body]),
            fingerprint: [0; 32],
            created_at: Timestamp::from_micros(0),
            expires_at: Timestamp::from_micros(0).plus_secs(expires_s),
        }
    }

    #[test]
    fn i4_serves_committed_replies_until_near_expiry() {
        let cache = ReplyCache::default();
        let t0 = Timestamp::from_micros(0);
        cache.insert_committed([&reply("a", 86_400, 10)]);
        assert!(cache.get("k", "a", t0).is_some());
        assert!(cache.get("other", "a", t0).is_none(), "scoped by API key (I2)");
        assert!(cache.get("k", "a", t0.plus_secs(86_400 - EXPIRY_MARGIN_S)).is_none(), "near expiry the database decides");
    }

    #[test]
    fn bounded_by_bytes_oldest_out_first() {
        let cache = ReplyCache::default();
        let big = BYTES_MAX / 3 + 1;
        let t0 = Timestamp::from_micros(0);
        for key in ["a", "b", "c"] {
            cache.insert_committed([&reply(key, 86_400, big)]);
        }
        assert!(cache.get("k", "a", t0).is_none());
        assert!(cache.get("k", "b", t0).is_some() && cache.get("k", "c", t0).is_some());
    }
}
