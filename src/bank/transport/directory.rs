//! The `directory` transport (SPEC B1 `kind = "directory"`): a local folder pair standing in for
//! a bank's SFTP server, for development and for the sandbox bank.
//!
//! An upload writes `NAME.part`, fsyncs it, links it to `NAME` and removes `NAME.part`, then
//! fsyncs the folder. A hard link (not `rename`) is what makes the last step refuse an existing
//! `NAME` atomically, as OpenSSH's SFTP rename does; so the folder must be on a file system with
//! hard links (any Linux local file system). Both folders must exist: a missing one is
//! [`TransportError::NotFound`], never created silently in the wrong place.

use std::io;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{
    Digest, MAX_ASIDE_SUFFIX, OutboundFolder, Published, RemoteFile, Result, Transport, TransportError, Uploaded, aside_name, check_name,
    copy_hashing, hash_reader, is_listed, local_error, upload_via,
};
use crate::base::private_fs;

/// A local outbound/inbound folder pair.
#[derive(Debug, Clone)]
pub struct DirectoryTransport {
    outbound: PathBuf,
    inbound: PathBuf,
}

impl DirectoryTransport {
    /// A transport over these two folders (not touched until used).
    pub fn new(outbound_dir: impl Into<PathBuf>, inbound_dir: impl Into<PathBuf>) -> Self {
        DirectoryTransport { outbound: outbound_dir.into(), inbound: inbound_dir.into() }
    }
}

/// An error on the bank's side of the pair (the folders), classified like SFTP's.
fn folder_error(path: &Path, e: io::Error) -> TransportError {
    let path = path.display().to_string();
    match e.kind() {
        io::ErrorKind::NotFound => TransportError::NotFound { path },
        io::ErrorKind::PermissionDenied => TransportError::PermissionDenied { path },
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => TransportError::RemoteFull { path },
        _ => TransportError::Other(format!("{path}: {e}")),
    }
}

/// Makes a folder's entries (a new name, a removed one) durable.
async fn sync_dir(dir: &Path) -> Result<()> {
    let owned = dir.to_path_buf();
    let synced = tokio::task::spawn_blocking(move || std::fs::File::open(&owned)?.sync_all()).await;
    synced.map_err(|e| TransportError::Other(e.to_string()))?.map_err(|e| folder_error(dir, e))
}

/// Removes a file; one that is already gone is fine.
async fn remove_if_there(path: &Path) -> Result<()> {
    match tokio::fs::remove_file(path).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(folder_error(path, e)),
    }
}

/// Links `from` to `to` unless `to` exists (then false), then removes `from`.
async fn move_no_replace(from: &Path, to: &Path) -> Result<bool> {
    match tokio::fs::hard_link(from, to).await {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => return Err(folder_error(from, e)),
    }
    tokio::fs::remove_file(from).await.map_err(|e| folder_error(from, e))?;
    Ok(true)
}

#[async_trait]
impl OutboundFolder for DirectoryTransport {
    async fn size_of(&self, name: &str) -> Result<Option<u64>> {
        let path = self.outbound.join(name);
        match tokio::fs::symlink_metadata(&path).await {
            Ok(meta) if meta.is_file() => Ok(Some(meta.len())),
            Ok(_) => Err(TransportError::Other(format!("{} exists and is not a regular file", path.display()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(folder_error(&path, e)),
        }
    }

    async fn digest_of(&self, name: &str) -> Result<Digest> {
        let path = self.outbound.join(name);
        let mut file = tokio::fs::File::open(&path).await.map_err(|e| folder_error(&path, e))?;
        hash_reader(&mut file, None).await.map_err(|e| e.classify(|e| folder_error(&path, e), |e| folder_error(&path, e), no_stall()))
    }

    async fn write_part(&self, part: &str, local: &Path) -> Result<Digest> {
        let path = self.outbound.join(part);
        let mut from = tokio::fs::File::open(local).await.map_err(|e| local_error(local, e))?;
        let mut to = tokio::fs::OpenOptions::from(private_fs::create_options()).open(&path).await.map_err(|e| folder_error(&path, e))?;
        let copied = copy_hashing(&mut from, &mut to, None).await;
        let digest = copied.map_err(|e| e.classify(|e| local_error(local, e), |e| folder_error(&path, e), no_stall()))?;
        to.sync_all().await.map_err(|e| folder_error(&path, e))?;
        Ok(digest)
    }

    async fn publish(&self, part: &str, name: &str) -> Result<Published> {
        if !move_no_replace(&self.outbound.join(part), &self.outbound.join(name)).await? {
            return Ok(Published::NameTaken);
        }
        sync_dir(&self.outbound).await?;
        Ok(Published::Done)
    }

    async fn remove(&self, name: &str) -> Result<()> {
        remove_if_there(&self.outbound.join(name)).await
    }
}

/// A copy that had no time bound cannot stall; kept total for the type's sake.
fn no_stall() -> TransportError {
    TransportError::Other("a local file operation stalled".into())
}

#[async_trait]
impl Transport for DirectoryTransport {
    async fn upload(&self, name: &str, local: &Path) -> Result<Uploaded> {
        upload_via(self, name, local).await
    }

    async fn list_inbound(&self) -> Result<Vec<RemoteFile>> {
        let dir = &self.inbound;
        let mut entries = tokio::fs::read_dir(dir).await.map_err(|e| folder_error(dir, e))?;
        let mut files = Vec::new();
        while let Some(entry) = entries.next_entry().await.map_err(|e| folder_error(dir, e))? {
            let meta = entry.metadata().await.map_err(|e| folder_error(&entry.path(), e))?;
            if let Ok(name) = entry.file_name().into_string()
                && is_listed(&name, meta.is_file())
            {
                files.push(RemoteFile { name, size: meta.len() });
            }
        }
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(files)
    }

    async fn fetch(&self, name: &str, local: &Path) -> Result<Digest> {
        check_name(name)?;
        let path = self.inbound.join(name);
        let mut from = tokio::fs::File::open(&path).await.map_err(|e| folder_error(&path, e))?;
        let mut to = tokio::fs::OpenOptions::from(private_fs::create_options()).open(local).await.map_err(|e| local_error(local, e))?;
        copy_hashing(&mut from, &mut to, None)
            .await
            .map_err(|e| e.classify(|e| folder_error(&path, e), |e| local_error(local, e), no_stall()))
    }

    async fn move_aside(&self, name: &str, folder: &str) -> Result<String> {
        check_name(name)?;
        check_name(folder)?;
        let from = self.inbound.join(name);
        let aside = self.inbound.join(folder);
        match tokio::fs::create_dir(&aside).await {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(folder_error(&aside, e)),
        }
        for n in 0..=MAX_ASIDE_SUFFIX {
            let target = aside_name(name, n);
            if move_no_replace(&from, &aside.join(&target)).await? {
                sync_dir(&aside).await?;
                sync_dir(&self.inbound).await?;
                return Ok(target);
            }
        }
        Err(TransportError::Other(format!("{}: no free name for {name} (up to .{MAX_ASIDE_SUFFIX})", aside.display())))
    }

    async fn remove(&self, name: &str) -> Result<()> {
        check_name(name)?;
        remove_if_there(&self.inbound.join(name)).await?;
        sync_dir(&self.inbound).await
    }
}
