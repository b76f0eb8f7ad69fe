//! Which idempotency keys may have a stored reply, counted in memory, so that a key never seen
//! before (nearly every create) is claimed without a database read.
//!
//! The benchmark measured that read at a quarter of a create's server CPU (a reader transaction
//! after every commit resets its page cache and reads the index back from the WAL). It can be
//! skipped safely only because one server owns a SQLite file (it holds the lock), so every reply
//! row comes either from before this process started, counted by one scan when the index loads,
//! or from this process, counted before the commit that writes it.
//!
//! The server loads it before it starts serving ([`crate::store::Store::prepare_to_serve`]); the
//! command line never does.
//!
//! The count per key hash may only ever be too high, never too low: too high costs a read (the
//! read decides, as it did before), too low would run a retried request again. Hence:
//! - [`ReplyKeys::add`] runs before a reply's commit and is never undone, even if it fails;
//! - until the scan has finished (or if it failed), every key "may exist" (the database is read,
//!   as before);
//! - a purge takes its count back only if the index was loaded before the purge deleted the rows
//!   (then every row it deleted had been counted), and only after the delete committed.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::Connection;

#[derive(Debug, Default)]
pub struct ReplyKeys {
    /// Keyed per process, so nobody outside can aim keys at one bucket.
    hasher: RandomState,
    /// Reply rows counted per hash of (API key id, idempotency key); several keys may share one.
    counts: Mutex<HashMap<u64, u32>>,
    loaded: AtomicBool,
}

impl ReplyKeys {
    fn hash(&self, api_key_id: &str, key: &str) -> u64 {
        self.hasher.hash_one((api_key_id, key))
    }

    /// False only when no reply can be stored for this key: the database need not be read.
    pub fn may_exist(&self, api_key_id: &str, key: &str) -> bool {
        if !self.loaded.load(Ordering::Acquire) {
            return true;
        }
        let hash = self.hash(api_key_id, key);
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&hash)
    }

    /// Counts a reply about to be committed (before the commit, so no reader can see the row
    /// uncounted).
    pub fn add(&self, api_key_id: &str, key: &str) {
        let hash = self.hash(api_key_id, key);
        self.count(hash);
    }

    fn count(&self, hash: u64) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let count = counts.entry(hash).or_insert(0);
        *count = count.saturating_add(1);
    }

    /// Whether a purge starting now may later take back what it deletes (see [`Self::purged`]).
    pub fn loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// Takes back the rows of a committed purge, which started when [`Self::loaded`] was true.
    /// A key whose row was replaced rather than deleted is taken back too: its replacement was
    /// counted on its own, so the count still covers it.
    pub fn purged(&self, keys: &[(String, String)]) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        for (api_key_id, key) in keys {
            if let Entry::Occupied(mut entry) = counts.entry(self.hash(api_key_id, key)) {
                *entry.get_mut() -= 1;
                if *entry.get() == 0 {
                    entry.remove();
                }
            }
        }
    }

    /// Counts every stored reply (one read transaction: one snapshot), then trusts the counts.
    pub fn load(&self, conn: &Connection) -> rusqlite::Result<usize> {
        let mut st = conn.prepare("SELECT api_key_id, key FROM idempotency_replies")?;
        let mut rows = st.query([])?;
        let mut seen = 0;
        while let Some(row) = rows.next()? {
            let (api_key_id, key): (String, String) = (row.get(0)?, row.get(1)?);
            self.count(self.hash(&api_key_id, &key));
            seen += 1;
        }
        self.loaded.store(true, Ordering::Release);
        Ok(seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db_with_replies(keys: &[(&str, &str)]) -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("r.db")).unwrap();
        super::super::migrations::apply(&mut conn).unwrap();
        for (api_key_id, key) in keys {
            conn.execute(
                "INSERT INTO idempotency_replies (api_key_id, key, status, content_type, body, fingerprint, created_at, expires_at)
                 VALUES (?1, ?2, 201, 'application/json', x'7b7d', x'00', 0, 1)",
                [api_key_id, key],
            )
            .unwrap();
        }
        (dir, conn)
    }

    #[test]
    fn i4_every_key_may_exist_until_the_stored_replies_are_counted() {
        let (_dir, conn) = db_with_replies(&[("k1", "old")]);
        let keys = ReplyKeys::default();
        assert!(keys.may_exist("k1", "never-used"), "before loading the database decides");
        assert_eq!(keys.load(&conn).unwrap(), 1);
        assert!(keys.may_exist("k1", "old"), "a reply stored before the process started");
        assert!(!keys.may_exist("k1", "never-used"));
        assert!(!keys.may_exist("k2", "old"), "keys are scoped by API key");
    }

    #[test]
    fn i4_a_reply_added_while_loading_is_kept_and_purges_take_back_only_their_rows() {
        let (_dir, conn) = db_with_replies(&[("k1", "a")]);
        let keys = ReplyKeys::default();
        keys.add("k1", "b"); // committed by this process before the scan finished
        keys.load(&conn).unwrap();
        assert!(keys.may_exist("k1", "b"));
        keys.add("k1", "a"); // "a" expired and was stored again: counted twice now
        keys.purged(&[("k1".into(), "a".into())]);
        assert!(keys.may_exist("k1", "a"), "the replacement is still counted");
        keys.purged(&[("k1".into(), "a".into()), ("k1".into(), "b".into())]);
        assert!(!keys.may_exist("k1", "a"));
        assert!(!keys.may_exist("k1", "b"));
        keys.purged(&[("k1".into(), "zzz".into())]);
        assert!(!keys.may_exist("k1", "zzz"), "taking back an unknown key changes nothing");
    }
}
