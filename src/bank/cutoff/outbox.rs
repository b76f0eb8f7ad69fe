//! Where a cut-off's files go: the [`Outbox`] a connection's transport provides.
//!
//! An upload is complete or absent: the bytes go to `NAME.part`, are flushed to disk, then
//! renamed to `NAME` (SPEC B2). A `NAME` already there with the very same bytes counts as done,
//! so an upload retried after a crash (the rename happened, the record of it did not) never
//! makes a second file; a `NAME` with other bytes is refused, never overwritten.
//!
//! A connection's outbox is its transport (`bank::transport`): a local folder pair
//! (`kind = "directory"`) or the bank's SFTP server with its pinned host key, the identity key
//! unsealed from the connection's settings only for the upload. [`DirectoryOutbox`] stays for
//! the cut-off's own unit tests.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use async_trait::async_trait;
use sha2::{Digest, Sha256};

use crate::bank::connection::TransportSettings;
use crate::bank::transport::{Transport, for_connection};
use crate::base::secret_box::SecretBox;

/// Uploads finished files to the bank.
#[async_trait]
pub trait Outbox: Send + Sync {
    /// Puts the local file `local` at the bank under `name`, atomically; done already if the
    /// bank has `name` with the same bytes.
    async fn upload(&self, name: &str, local: &Path) -> anyhow::Result<()>;
}

/// The outbox of a connection's transport; `connection_id` binds its sealed identity key.
pub fn for_transport(transport: &TransportSettings, connection_id: &str, secrets: &SecretBox) -> Box<dyn Outbox> {
    match for_connection(transport, connection_id, secrets) {
        Ok(transport) => Box::new(TransportOutbox(transport)),
        Err(reason) => Box::new(Unavailable { reason }),
    }
}

/// A transport as an outbox.
struct TransportOutbox(Box<dyn Transport>);

#[async_trait]
impl Outbox for TransportOutbox {
    async fn upload(&self, name: &str, local: &Path) -> anyhow::Result<()> {
        self.0.upload(name, local).await.map(|_| ()).map_err(anyhow::Error::from)
    }
}

/// A local folder standing for the bank's inbox.
#[derive(Debug, Clone)]
pub struct DirectoryOutbox {
    pub dir: PathBuf,
}

#[async_trait]
impl Outbox for DirectoryOutbox {
    async fn upload(&self, name: &str, local: &Path) -> anyhow::Result<()> {
        let (dir, name, local) = (self.dir.clone(), name.to_owned(), local.to_owned());
        tokio::task::spawn_blocking(move || put(&dir, &name, &local)).await.context("the upload task failed")?
    }
}

fn put(dir: &Path, name: &str, local: &Path) -> anyhow::Result<()> {
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        bail!("{name:?} is not a plain file name");
    }
    let target = dir.join(name);
    if target.exists() {
        if digest(&target)? == digest(local)? {
            return Ok(());
        }
        bail!("{} already exists with other content; refusing to overwrite it", target.display());
    }
    let part = dir.join(format!("{name}.part"));
    std::fs::copy(local, &part).with_context(|| format!("writing {}", part.display()))?;
    std::fs::File::open(&part).and_then(|f| f.sync_all()).with_context(|| format!("flushing {}", part.display()))?;
    std::fs::rename(&part, &target).with_context(|| format!("renaming {} to {name}", part.display()))?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("flushing {}", dir.display()))?;
    Ok(())
}

/// The SHA-256 of a file's bytes, read in blocks.
pub fn digest(path: &Path) -> anyhow::Result<[u8; 32]> {
    let mut file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut block = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut block).with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            return Ok(hasher.finalize().into());
        }
        hasher.update(&block[..n]);
    }
}

/// A transport that cannot upload (yet): every attempt fails with `reason`.
struct Unavailable {
    reason: String,
}

#[async_trait]
impl Outbox for Unavailable {
    async fn upload(&self, _name: &str, _local: &Path) -> anyhow::Result<()> {
        bail!("{}", self.reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn b2_uploads_are_whole_and_a_retry_of_the_same_bytes_is_done() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = DirectoryOutbox { dir: dir.path().join("out") };
        std::fs::create_dir(&outbox.dir).unwrap();
        let local = dir.path().join("spool");
        std::fs::write(&local, b"file one").unwrap();
        outbox.upload("a.ach", &local).await.unwrap();
        outbox.upload("a.ach", &local).await.unwrap();
        let names: Vec<String> =
            std::fs::read_dir(&outbox.dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["a.ach"], "no .part left, one file");
        std::fs::write(&local, b"other bytes").unwrap();
        let err = outbox.upload("a.ach", &local).await.unwrap_err().to_string();
        assert!(err.contains("refusing to overwrite"), "{err}");
        assert_eq!(std::fs::read(outbox.dir.join("a.ach")).unwrap(), b"file one");
        assert!(outbox.upload("../x", &local).await.is_err());
    }
}
