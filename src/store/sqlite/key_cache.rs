//! Verified API keys kept in memory, so that authenticating a request costs no SQLite read.
//!
//! SPEC A5 wants a revoked key refused at once, and keys change in another process (the CLI).
//! Every commit that changes a key writes a fresh random value to `<db>.keys-epoch` after it
//! commits and before it returns; every lookup first reads that value (one 8-byte `pread`, no
//! lock) and trusts only entries cached under it. A request that starts after `keys revoke`
//! returned therefore reads the new epoch and goes to the database. Without the epoch file (it
//! cannot be created or read) nothing is cached. Unknown keys are never cached, so guessing
//! cannot fill the cache; it is bounded anyway.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::RwLock;

use rand::RngCore;

use crate::domain::api_key::{ApiKey, KeyHash};

/// Entries kept at most; past it the cache starts again empty (real deployments have dozens).
const ENTRIES_MAX: usize = 10_000;

#[derive(Debug)]
pub struct KeyCache {
    epoch_file: Option<File>,
    entries: RwLock<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    epoch: u64,
    by_hash: HashMap<[u8; 32], (ApiKey, KeyHash)>,
}

impl KeyCache {
    pub fn open(db_path: &Path) -> Self {
        let path = format!("{}.keys-epoch", db_path.display());
        let file = File::options().read(true).write(true).create(true).truncate(false).open(&path);
        let epoch_file = match file {
            Ok(file) => Some(file),
            Err(err) => {
                tracing::warn!(%err, path, "API keys will be read from the database on every request");
                None
            }
        };
        let cache = KeyCache { epoch_file, entries: RwLock::default() };
        if cache.epoch().is_none() {
            cache.bump();
        }
        cache
    }

    /// The current epoch, or None if it cannot be read (then nothing is trusted).
    pub fn epoch(&self) -> Option<u64> {
        let mut bytes = [0u8; 8];
        self.epoch_file.as_ref()?.read_exact_at(&mut bytes, 0).ok()?;
        Some(u64::from_le_bytes(bytes))
    }

    /// Announces a change of keys to every process using this database.
    pub fn bump(&self) {
        let Some(file) = &self.epoch_file else { return };
        let fresh = rand::rng().next_u64().to_le_bytes();
        if let Err(err) = file.write_all_at(&fresh, 0) {
            tracing::error!(%err, "could not announce an API key change; servers may serve a stale key until restarted");
        }
    }

    pub fn get(&self, epoch: u64, hash: &KeyHash) -> Option<(ApiKey, KeyHash)> {
        let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
        if entries.epoch != epoch {
            return None;
        }
        entries.by_hash.get(&hash.0).cloned()
    }

    /// Remembers a key read from the database after `epoch` was read.
    pub fn insert(&self, epoch: u64, found: &(ApiKey, KeyHash)) {
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        if entries.epoch != epoch || entries.by_hash.len() >= ENTRIES_MAX {
            entries.by_hash.clear();
            entries.epoch = epoch;
        }
        entries.by_hash.insert(found.1.0, found.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::time::Timestamp;

    fn key(id: &str) -> (ApiKey, KeyHash) {
        let at = Timestamp::from_micros(0);
        let key = ApiKey {
            id: id.into(),
            object: "api_key",
            name: "k".into(),
            organization_id: "org".into(),
            live_mode: false,
            created_at: at,
            updated_at: at,
            expires_at: None,
            decommissioned: false,
            decommissioned_at: None,
        };
        (key, KeyHash([7; 32]))
    }

    #[test]
    fn a5_a_bump_from_another_handle_invalidates_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("payrail.db");
        let server = KeyCache::open(&db);
        let cli = KeyCache::open(&db);
        let epoch = server.epoch().unwrap();
        server.insert(epoch, &key("k1"));
        assert!(server.get(server.epoch().unwrap(), &KeyHash([7; 32])).is_some());
        cli.bump();
        let now = server.epoch().unwrap();
        assert_ne!(now, epoch);
        assert!(server.get(now, &KeyHash([7; 32])).is_none(), "an entry from before the bump is not trusted");
    }
}
