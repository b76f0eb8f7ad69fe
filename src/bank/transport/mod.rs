//! How bank files travel (SPEC B2, B5; issue 20 item 2): a [`Transport`] puts payment files in
//! the bank's outbound folder and takes the bank's answers from its inbound folder. It knows no
//! store and no HTTP; the cut-off and inbound workers drive it.
//!
//! Two transports: [`directory::DirectoryTransport`] (a local folder pair, for development) and
//! [`sftp::SftpTransport`] (SFTP with key authentication and a pinned host key). Both keep the
//! same rules, written once here in [`upload_via`]:
//!
//! - An upload writes `NAME.part`, makes it durable, then renames it to `NAME` without ever
//!   overwriting, so the bank never sees half a file under its final name.
//! - If `NAME` is already there with the same size and SHA-256, the upload counts as done (a
//!   retry after a crash between the rename and recording it), so a file is never sent twice
//!   and never under a second name. If `NAME` holds other content the upload is refused with
//!   [`TransportError::Conflict`] and nothing is overwritten.
//! - One upload of a given name runs at a time (the cut-off holds its connection's lease), so
//!   two writers never share a `NAME.part`.
//!
//! Inbound, a file the worker has applied (and kept, B6) is [`Transport::remove`]d: Payrail holds
//! its bytes, and a "done" folder on the bank's server would grow forever and may not be
//! creatable there. A file that cannot be parsed is moved aside instead
//! ([`Transport::move_aside`]), so an operator can look at it on the bank's side.
//!
//! Limits: names are single path components of at most [`MAX_NAME_LEN`] bytes; listings skip
//! `.part` files, dot files and anything that is not a regular file.

pub mod directory;
pub mod sftp;

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;

use crate::bank::connection::{TransportSettings, identity_purpose};
use crate::base::secret_box::SecretBox;
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Longest file name accepted, in bytes (the usual file system limit).
pub const MAX_NAME_LEN: usize = 255;
/// Suffix of a file being written; never listed, never the final name.
pub const PART_SUFFIX: &str = ".part";
/// Bytes read or written per step when streaming a file.
pub(crate) const CHUNK: usize = 256 * 1024;
/// Most `NAME.N` tried by [`Transport::move_aside`] when `NAME` is taken in the aside folder.
pub const MAX_ASIDE_SUFFIX: u32 = 99;

/// The transport a connection's settings describe; `connection_id` binds its sealed identity
/// key, unsealed here only to build the SFTP client. The error says why none can be built (a key
/// that does not open), naming the bank's address, never the key.
pub fn for_connection(transport: &TransportSettings, connection_id: &str, secrets: &SecretBox) -> Result<Box<dyn Transport>, String> {
    match transport {
        TransportSettings::Directory { outbound_dir, inbound_dir } => {
            Ok(Box::new(directory::DirectoryTransport::new(outbound_dir.clone(), inbound_dir.clone())))
        }
        TransportSettings::Sftp { host, port, user, host_key, identity_sealed, outbound_dir, inbound_dir } => {
            let settings = sftp::SftpSettings {
                host: host.clone(),
                port: *port,
                user: user.clone(),
                host_key: host_key.clone(),
                outbound_dir: outbound_dir.clone(),
                inbound_dir: inbound_dir.clone(),
                timeouts: sftp::Timeouts::default(),
            };
            let identity = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, identity_sealed)
                .map_err(|e| format!("the stored identity key is not base64: {e}"))
                .and_then(|sealed| {
                    secrets.open(&sealed, &identity_purpose(connection_id)).map_err(|e| format!("the identity key does not open: {e}"))
                });
            let transport = identity.and_then(|key| sftp::SftpTransport::new(settings, &key).map_err(|e| e.to_string()));
            transport.map(|t| Box::new(t) as Box<dyn Transport>).map_err(|reason| format!("sftp://{host}:{port}: {reason}"))
        }
    }
}

/// A file in the bank's inbound folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFile {
    pub name: String,
    pub size: u64,
}

/// A file's size and SHA-256 (lowercase hex), as uploaded or fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    pub size: u64,
    pub sha256: String,
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes, sha256 {}", self.size, self.sha256)
    }
}

/// What [`Transport::upload`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    pub name: String,
    pub digest: Digest,
    /// The file was already there with this content (a retried upload); nothing was written.
    pub already_present: bool,
}

/// Why a transport operation failed, classified so a worker can say what happened. No variant
/// ever carries key material.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// No connection: refused, no route, DNS, or no SSH session within the connect timeout.
    #[error("the bank at {address} is unreachable: {reason}")]
    Unreachable { address: String, reason: String },
    /// The server's host key is not the pinned one: the connection was refused.
    #[error("the host key of {address} did not match the pinned key: the server offered {offered}, the connection expects {expected}")]
    HostKeyMismatch { address: String, offered: String, expected: String },
    /// The server refused the identity key for this user.
    #[error("authentication refused: {address} did not accept the identity key for user {user:?}")]
    AuthRefused { user: String, address: String },
    /// The bank's side refused access to a path.
    #[error("permission denied on the bank's side: {path}")]
    PermissionDenied { path: String },
    /// The bank's side has no space left.
    #[error("the bank's side is full: no space left to write {path}")]
    RemoteFull { path: String },
    /// The final name already holds other content; nothing was overwritten.
    #[error("{name} already exists in the outbound folder with other content ({remote}; ours: {local}); it was not overwritten")]
    Conflict { name: String, remote: Digest, local: Digest },
    /// A file or folder the operation needs is not there.
    #[error("not found on the bank's side: {path}")]
    NotFound { path: String },
    /// The bank's side stopped answering an operation after the connection was made.
    #[error("timed out after {}s while {during}", after.as_secs_f32())]
    Timeout { during: String, after: Duration },
    /// A name that is not a plain file name (or a `.part` name).
    #[error("invalid file name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    /// The transport settings cannot be used (a key that cannot be read, a bad host key line).
    #[error("invalid transport settings: {0}")]
    InvalidConfig(String),
    /// A local file (the one uploaded or fetched into) failed.
    #[error("local file {path}: {source}")]
    Local { path: String, source: std::io::Error },
    /// Anything else, with the underlying message.
    #[error("transport error: {0}")]
    Other(String),
}

pub type Result<T, E = TransportError> = std::result::Result<T, E>;

/// A bank's folder pair, reached one way or another.
#[async_trait]
pub trait Transport: Send + Sync {
    /// Makes the local file at `local` appear in the outbound folder as `name`, atomically and at
    /// most once (see the module notes).
    async fn upload(&self, name: &str, local: &Path) -> Result<Uploaded>;
    /// The regular files of the inbound folder, by name (no `.part`, dot files or folders).
    async fn list_inbound(&self) -> Result<Vec<RemoteFile>>;
    /// Streams the inbound file `name` into the local file `local` (created or truncated; not
    /// fsynced: the caller stores its content) and returns what was written.
    async fn fetch(&self, name: &str, local: &Path) -> Result<Digest>;
    /// Moves the inbound file `name` into the subfolder `folder` of the inbound folder (one path
    /// component, created if missing), never over a file there: if `name` is taken, the first
    /// free `name.N` (N up to [`MAX_ASIDE_SUFFIX`]) is used. Returns the name it got.
    async fn move_aside(&self, name: &str, folder: &str) -> Result<String>;
    /// Removes the inbound file `name` once it has been applied and kept. Removing a file that
    /// is already gone succeeds, so a retry after a crash is harmless.
    async fn remove(&self, name: &str) -> Result<()>;
}

/// Refuses anything but a plain file name: no separators, no `.`/`..`, no control characters,
/// no `.part` suffix, at most [`MAX_NAME_LEN`] bytes.
pub fn check_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        Some("empty")
    } else if name.len() > MAX_NAME_LEN {
        Some("longer than 255 bytes")
    } else if name == "." || name == ".." || name.contains(['/', '\\']) {
        Some("not a plain file name")
    } else if name.chars().any(char::is_control) {
        Some("contains a control character")
    } else if name.ends_with(PART_SUFFIX) {
        Some("ends with .part, the suffix of unfinished uploads")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(TransportError::InvalidName { name: name.to_owned(), reason }),
        None => Ok(()),
    }
}

/// Whether an inbound directory entry is listed: a regular file, not a dot file, not `.part`.
pub(crate) fn is_listed(name: &str, is_regular_file: bool) -> bool {
    is_regular_file && !name.starts_with('.') && !name.ends_with(PART_SUFFIX) && check_name(name).is_ok()
}

/// The name `move_aside` tries on attempt `n` (0 is the name itself).
pub(crate) fn aside_name(name: &str, n: u32) -> String {
    if n == 0 { name.to_owned() } else { format!("{name}.{n}") }
}

/// Sha-256 while streaming, for [`copy_hashing`] and [`hash_reader`].
pub(crate) struct Hasher {
    sha: Sha256,
    size: u64,
}

impl Hasher {
    pub(crate) fn new() -> Self {
        Hasher { sha: Sha256::new(), size: 0 }
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.sha.update(bytes);
        self.size += bytes.len() as u64;
    }

    pub(crate) fn finish(self) -> Digest {
        Digest { size: self.size, sha256: format!("{:x}", self.sha.finalize()) }
    }
}

/// Where a step of a stream copy failed: reading its source or writing its sink.
#[derive(Debug)]
pub(crate) enum CopyError {
    Read(std::io::Error),
    Write(std::io::Error),
    /// A step took longer than its bound.
    Stalled,
}

impl CopyError {
    /// The transport error for this failure: the caller says what a read error, a write error
    /// and a stall each mean on its side.
    pub(crate) fn classify(
        self,
        on_read: impl FnOnce(std::io::Error) -> TransportError,
        on_write: impl FnOnce(std::io::Error) -> TransportError,
        stalled: TransportError,
    ) -> TransportError {
        match self {
            CopyError::Read(e) => on_read(e),
            CopyError::Write(e) => on_write(e),
            CopyError::Stalled => stalled,
        }
    }
}

/// Copies `from` into `to` chunk by chunk (memory stays at one chunk), hashing on the way, then
/// flushes `to`. Each read, write and the flush must finish within `step` (None: unbounded).
pub(crate) async fn copy_hashing<R, W>(from: &mut R, to: &mut W, step: Option<Duration>) -> Result<Digest, CopyError>
where
    R: AsyncRead + Unpin + ?Sized,
    W: AsyncWrite + Unpin + ?Sized,
{
    let mut hasher = Hasher::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = bounded(step, from.read(&mut buf)).await?.map_err(CopyError::Read)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        bounded(step, to.write_all(&buf[..n])).await?.map_err(CopyError::Write)?;
    }
    bounded(step, to.flush()).await?.map_err(CopyError::Write)?;
    Ok(hasher.finish())
}

/// Size and SHA-256 of everything `from` yields, one chunk in memory at a time.
pub(crate) async fn hash_reader<R>(from: &mut R, step: Option<Duration>) -> Result<Digest, CopyError>
where
    R: AsyncRead + Unpin + ?Sized,
{
    copy_hashing(from, &mut tokio::io::sink(), step).await
}

async fn bounded<T>(step: Option<Duration>, fut: impl Future<Output = T>) -> Result<T, CopyError> {
    match step {
        Some(limit) => tokio::time::timeout(limit, fut).await.map_err(|_| CopyError::Stalled),
        None => Ok(fut.await),
    }
}

/// A local file error, naming the file.
pub(crate) fn local_error(path: &Path, source: std::io::Error) -> TransportError {
    TransportError::Local { path: path.display().to_string(), source }
}

/// The outcome of renaming `NAME.part` to `NAME` without overwriting.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Published {
    Done,
    /// `NAME` was already there; `NAME.part` is left for the caller to remove.
    NameTaken,
}

/// The outbound folder as [`upload_via`] needs it; each transport implements these few steps.
#[async_trait]
pub(crate) trait OutboundFolder: Send + Sync {
    /// The size of `name` in the folder, or None if there is no such file.
    async fn size_of(&self, name: &str) -> Result<Option<u64>>;
    /// Size and SHA-256 of the file `name` in the folder, streamed.
    async fn digest_of(&self, name: &str) -> Result<Digest>;
    /// Writes the local file into `part` (created or truncated), durably, and returns its digest.
    async fn write_part(&self, part: &str, local: &Path) -> Result<Digest>;
    /// Renames `part` to `name` unless `name` exists.
    async fn publish(&self, part: &str, name: &str) -> Result<Published>;
    /// Removes `name`; a missing file is fine.
    async fn remove(&self, name: &str) -> Result<()>;
}

/// The upload rules of the module notes, over any [`OutboundFolder`].
pub(crate) async fn upload_via(folder: &dyn OutboundFolder, name: &str, local: &Path) -> Result<Uploaded> {
    check_name(name)?;
    let part = format!("{name}{PART_SUFFIX}");
    if folder.size_of(name).await?.is_some() {
        let local_digest = digest_of_local(local).await?;
        return already_there(folder, name, &part, local_digest).await;
    }
    let digest = match folder.write_part(&part, local).await {
        Ok(digest) => digest,
        Err(e) => {
            // Frees the space a partial file holds (a full disk); its own failure changes nothing.
            let _ = folder.remove(&part).await;
            return Err(e);
        }
    };
    match folder.publish(&part, name).await? {
        Published::Done => Ok(Uploaded { name: name.to_owned(), digest, already_present: false }),
        Published::NameTaken => already_there(folder, name, &part, digest).await,
    }
}

/// `name` exists: success if it holds exactly `local`, a conflict otherwise. A leftover
/// `NAME.part` (from a crash after the rename's link step) is removed either way.
async fn already_there(folder: &dyn OutboundFolder, name: &str, part: &str, local: Digest) -> Result<Uploaded> {
    let remote = folder.digest_of(name).await?;
    folder.remove(part).await?;
    if remote != local {
        return Err(TransportError::Conflict { name: name.to_owned(), remote, local });
    }
    Ok(Uploaded { name: name.to_owned(), digest: local, already_present: true })
}

/// Size and SHA-256 of a local file, streamed.
pub(crate) async fn digest_of_local(path: &Path) -> Result<Digest> {
    let mut file = tokio::fs::File::open(path).await.map_err(|e| local_error(path, e))?;
    let stalled = TransportError::Other(format!("reading {} stalled", path.display()));
    hash_reader(&mut file, None).await.map_err(|e| e.classify(|e| local_error(path, e), |e| local_error(path, e), stalled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b2_names_are_plain_file_names() {
        for good in ["PAYRAIL_20260105_1030_ach.txt", "a", ".hidden-is-allowed-to-upload", "x.part.txt"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", "a/b", "a\\b", "../x", "x.part", "a\nb", &"n".repeat(256)] {
            assert!(matches!(check_name(bad), Err(TransportError::InvalidName { .. })), "{bad:?}");
        }
    }

    #[test]
    fn b5_listing_skips_parts_dot_files_and_folders() {
        assert!(is_listed("returns.ach", true));
        assert!(!is_listed("returns.ach", false));
        assert!(!is_listed("returns.ach.part", true));
        assert!(!is_listed(".returns.ach", true));
        assert!(!is_listed("..", true));
    }

    #[test]
    fn b5_aside_names_count_up_from_the_name_itself() {
        assert_eq!(aside_name("r.xml", 0), "r.xml");
        assert_eq!(aside_name("r.xml", 3), "r.xml.3");
    }

    #[tokio::test]
    async fn digests_stream_and_match_sha256() {
        let mut bytes: &[u8] = b"abc";
        let digest = hash_reader(&mut bytes, None).await.unwrap();
        assert_eq!(digest.size, 3);
        assert_eq!(digest.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn errors_say_what_happened() {
        let e = TransportError::HostKeyMismatch {
            address: "127.0.0.1:22".into(),
            offered: "ssh-ed25519 SHA256:aaa".into(),
            expected: "ssh-ed25519 SHA256:bbb".into(),
        };
        let text = e.to_string();
        assert!(text.contains("host key") && text.contains("did not match") && text.contains("SHA256:aaa") && text.contains("SHA256:bbb"));
    }
}
