//! Verified API keys kept in memory, so that authenticating a request costs no database read.
//!
//! SPEC A5 wants a revoked key refused at once, on every instance, and keys change in another
//! process (the CLI). So entries are tagged with a key *epoch* that every key change moves before
//! the command that made it returns, and a lookup trusts only entries of the current epoch:
//! - SQLite ([`EpochFile`]): the change writes a fresh random value to `<db>.keys-epoch` after it
//!   commits; every lookup reads it first, from a shared mapping of the file (a memory load: the
//!   page cache is the file, so the write is seen the moment it returns; no system call, no lock).
//! - PostgreSQL (`postgres::key_watch`): the change bumps a counter in its transaction and waits
//!   until every live instance has acknowledged it; instances hold a short lease and stop
//!   trusting their cache when they cannot renew it.
//!
//! Unknown keys are never cached, so guessing cannot fill the cache; it is bounded anyway.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::MmapRaw;

use rand::RngCore;

use super::FoundKey;
use crate::base::api_key::KeyHash;

/// Entries kept at most; past it the cache starts again empty (real deployments have dozens).
const ENTRIES_MAX: usize = 10_000;

/// Keys by hash, all read under one epoch.
#[derive(Debug, Default)]
pub struct KeyEntries(RwLock<Entries>);

#[derive(Debug, Default)]
struct Entries {
    epoch: u64,
    by_hash: HashMap<[u8; 32], FoundKey>,
}

impl KeyEntries {
    pub fn get(&self, epoch: u64, hash: &KeyHash) -> Option<FoundKey> {
        let entries = self.0.read().unwrap_or_else(|p| p.into_inner());
        if entries.epoch != epoch {
            return None;
        }
        entries.by_hash.get(&hash.0).cloned()
    }

    /// Remembers a key read from the database after `epoch` was read.
    pub fn insert(&self, epoch: u64, found: &FoundKey) {
        let mut entries = self.0.write().unwrap_or_else(|p| p.into_inner());
        if entries.epoch != epoch || entries.by_hash.len() >= ENTRIES_MAX {
            entries.by_hash.clear();
            entries.epoch = epoch;
        }
        entries.by_hash.insert(found.1.0, found.clone());
    }
}

/// The SQLite store's epoch: a file beside the database, shared by every process using it.
#[derive(Debug)]
pub struct EpochFile {
    epoch_file: Option<File>,
    /// The file's first page mapped shared, read by every lookup instead of a `pread` (a third
    /// of a ping's system calls). None if it could not be mapped: then `pread` it is.
    mapped: Option<MmapRaw>,
}

/// Bytes of the file that hold the epoch (never shrunk: a mapping past the end would fault).
const EPOCH_LEN: usize = 8;

impl EpochFile {
    pub fn open(db_path: &Path) -> Self {
        let path = format!("{}.keys-epoch", db_path.display());
        let file = crate::base::private_fs::options().read(true).write(true).create(true).truncate(false).open(&path);
        let _ = crate::base::private_fs::tighten_file(std::path::Path::new(&path));
        let epoch_file = match file {
            Ok(file) => Some(file),
            Err(err) => {
                tracing::warn!(error = %crate::error::chain(&err), path, "API keys will be read from the database on every request");
                None
            }
        };
        let mut cache = EpochFile { epoch_file, mapped: None };
        if cache.epoch().is_none() {
            cache.bump();
        }
        cache.mapped = cache.map();
        cache
    }

    /// Maps the epoch once the file holds one (mapping an empty file would fault on read).
    fn map(&self) -> Option<MmapRaw> {
        let file = self.epoch_file.as_ref()?;
        if file.metadata().ok()?.len() < EPOCH_LEN as u64 {
            return None;
        }
        memmap2::MmapOptions::new().len(EPOCH_LEN).map_raw_read_only(file).ok()
    }

    /// The current epoch, or None if it cannot be read (then nothing is trusted).
    pub fn epoch(&self) -> Option<u64> {
        if let Some(mapped) = &self.mapped {
            // SAFETY: the mapping is page-aligned, at least EPOCH_LEN long and lives as long as
            // self; the file is only ever written in place, never truncated. Another process's
            // write may race this load: a torn value is merely one no entry was cached under.
            let epoch = unsafe { AtomicU64::from_ptr(mapped.as_mut_ptr().cast::<u64>()) };
            return Some(u64::from_le(epoch.load(Ordering::Acquire)));
        }
        let mut bytes = [0u8; EPOCH_LEN];
        self.epoch_file.as_ref()?.read_exact_at(&mut bytes, 0).ok()?;
        Some(u64::from_le_bytes(bytes))
    }

    /// Announces a change of keys to every process using this database.
    pub fn bump(&self) {
        let Some(file) = &self.epoch_file else { return };
        let fresh = rand::rng().next_u64().to_le_bytes();
        if let Err(err) = file.write_all_at(&fresh, 0) {
            tracing::error!(error = %crate::error::chain(&err), "could not announce an API key change; servers may serve a stale key until restarted");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::base::api_key::ApiKey;
    use crate::base::time::Timestamp;

    fn key(id: &str) -> FoundKey {
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
            idempotency_scope: id.into(),
        };
        (Arc::new(key), KeyHash([7; 32]))
    }

    #[test]
    fn a5_a_bump_from_another_handle_invalidates_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("payrail.db");
        let (server, cli, entries) = (EpochFile::open(&db), EpochFile::open(&db), KeyEntries::default());
        let epoch = server.epoch().unwrap();
        entries.insert(epoch, &key("k1"));
        assert!(entries.get(server.epoch().unwrap(), &KeyHash([7; 32])).is_some());
        cli.bump();
        let now = server.epoch().unwrap();
        assert_ne!(now, epoch);
        assert!(entries.get(now, &KeyHash([7; 32])).is_none(), "an entry from before the bump is not trusted");
    }
}
